"""Running many questions: results in input order whatever order workers finish in, a failing
question becomes one error record, and the LM call cache shared by threads. The method here is a
scripted stand-in (said so): the runner's ordering does not depend on what a method computes."""

from __future__ import annotations

import threading
import time

from mhindex.lm.base import Completion, LanguageModel
from mhindex.lm.cache import CachedModel, CallCache
from mhindex.methods.base import Answer, Method, Query
from mhindex.methods.run import run_questions


class SleepyMethod(Method):
    """Answers question n after sleeping (5 - n) * 50 ms, so later questions finish first."""

    name = "sleepy"

    def __init__(self) -> None:
        pass

    def answer(self, query: Query) -> Answer:
        n = int(query.id)
        if n == 3:
            raise RuntimeError("the engine fell over")
        time.sleep((5 - n) * 0.05)
        return Answer(query.id, query.question, f"answer {n}", [], [], 0, 0, 0, 0.0)


def test_results_come_in_input_order_and_a_failure_is_one_record():
    items = [(n, Query(str(n), f"question {n}")) for n in range(1, 6)] + [(6, "field 'question' is missing")]
    for workers in (1, 3):
        out: list[dict] = []
        stats = run_questions(SleepyMethod(), iter(items), out.append, workers=workers)
        assert [r.get("id", r.get("line")) for r in out] == ["1", "2", "3", "4", "5", 6]
        assert out[2] == {"line": 3, "id": "3", "error": "RuntimeError: the engine fell over"}
        assert stats.answered == 4 and stats.failed == 2 and not stats.interrupted


class Echo(LanguageModel):
    name = "echo"
    context_length = 1000

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, prompt, max_tokens=256, stop=(), temperature=0.0, logprobs=False, stop_when=None, keep=0):
        with self._lock:
            self.calls += 1
        time.sleep(0.01)
        return Completion(prompt[::-1], 1, 1, 0.01)

    def count_tokens(self, text):
        return len(text)


def test_the_call_cache_is_safe_to_share_between_threads(tmp_path):
    inner = Echo()
    cached = CachedModel(inner, CallCache(tmp_path / "lm.sqlite"))
    prompts = [f"prompt {i % 20}" for i in range(200)]
    results: dict[int, str] = {}

    def worker(start: int) -> None:
        for i in range(start, len(prompts), 8):
            results[i] = cached.complete(prompts[i]).text

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(results[i] == prompts[i][::-1] for i in range(len(prompts)))
    assert len(cached.cache) == 20 and 20 <= inner.calls < 200  # stored once each; most calls were answered from it
