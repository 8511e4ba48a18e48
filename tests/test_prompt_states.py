"""Prompt openings kept evaluated on disk across processes (lm/state.py, lm/llamacpp.py) with the
packaged SmolLM2 and llama.cpp's own slot save and restore: a new process reads only what follows
the kept opening, answers exactly as from scratch, rebuilds a damaged state with one warning, keeps
within its size limit, and `--no-cache` leaves it alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLES

pytestmark = pytest.mark.slow  # the packaged model reads long prompts each test: `-m "not slow"` leaves them out

# Long enough to be kept: some 1,250 tokens, of which the kept state holds whole micro-batches (two of 512 tokens);
# each test reads it from scratch at least once, so it is no longer than that.
DEMOS = "".join(
    f"Q: What is {i} plus {i}?\nA: {i} plus {i} is {2 * i}. So the answer is: {2 * i}.\n\n" for i in range(34)
)


def lm(home: Path, question: str, *args: str, env: dict | None = None) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "mhindex", "--home", str(home), "lm", f"{DEMOS}Q: {question}\\nA:", "--stop", "\\n",
         "--max-tokens", "24", "--keep", str(len(DEMOS)), "--lm", "local:smollm2-135m", "--lm-threads", "1",
         "--json", *args],
        capture_output=True, text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return {**json.loads(result.stdout), "stderr": result.stderr}


def restored(record: dict) -> bool:
    """Whether the call read only what follows a kept state of whole micro-batches."""
    kept = record["prompt_tokens"] - record["prompt_tokens_evaluated"]
    return kept >= 1024 and kept % 512 == 0 and record["prompt_tokens_evaluated"] < 512 + 20


def states(home: Path) -> list[Path]:
    return sorted((home / "cache" / "llama-state").glob("*.bin"))


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    home = tmp_path_factory.mktemp("states")
    first = lm(home, "What is 7 plus 5?")
    assert first["prompt_tokens_evaluated"] == first["prompt_tokens"] and len(states(home)) == 1
    return home, first


def test_a_new_process_reads_only_what_is_new_and_answers_as_from_scratch(kept, tmp_path):
    home, first = kept
    second = lm(home, "What is 9 plus 3?")  # a new process, another question: the call cache cannot answer it
    fresh = lm(tmp_path / "fresh", "What is 9 plus 3?", "--no-cache")
    assert second["text"] == fresh["text"] and second["completion_tokens"] == fresh["completion_tokens"]
    assert fresh["prompt_tokens_evaluated"] == fresh["prompt_tokens"] > 400
    assert restored(second)  # only what follows the kept state was read
    assert not states(tmp_path / "fresh")  # --no-cache keeps nothing


def test_a_damaged_state_is_read_again_with_one_warning(kept):
    home, _ = kept
    (state,) = states(home)
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    again = lm(home, "What is 2 plus 11?")
    assert again["prompt_tokens_evaluated"] == again["prompt_tokens"]  # read from scratch, never from the damaged file
    warnings = [line for line in again["stderr"].splitlines() if "damaged" in line]
    assert len(warnings) == 1 and "read again and its state saved anew" in warnings[0]
    assert restored(lm(home, "What is 4 plus 4?"))  # saved anew


def test_a_damaged_index_is_made_again_and_a_bad_limit_is_one_line(tmp_path):
    home = tmp_path / "home"
    first = lm(home, "What is 3 plus 3?")
    (home / "cache" / "llama-state" / "index.sqlite").write_bytes(b"not a database at all" * 100)
    again = lm(home, "What is 3 plus 4?")  # the index overwritten: its states dropped, with one warning
    warnings = [line for line in again["stderr"].splitlines() if "index.sqlite" in line]
    assert len(warnings) == 1 and "is damaged" in warnings[0] and "made again" in warnings[0]
    assert again["prompt_tokens_evaluated"] == again["prompt_tokens"] and len(states(home)) == 1
    assert restored(lm(home, "What is 3 plus 5?")) and first["text"]
    refused = subprocess.run(
        [sys.executable, "-m", "mhindex", "--home", str(home), "lm", "Hi", "--lm", "local:smollm2-135m"],
        capture_output=True, text=True, env={**os.environ, "MHINDEX_PROMPT_STATES_MB": "abc"},
    )  # fmt: skip
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        "mhindex: error: $MHINDEX_PROMPT_STATES_MB must be a number of megabytes (0 or more), not 'abc'"
    ]


def test_the_store_keeps_within_its_limit(tmp_path):
    home = tmp_path / "home"
    lm(home, "What is 1 plus 1?")
    size = states(home)[0].stat().st_size
    limit_mb = str(1.5 * size / (1 << 20))  # room for one state, not two
    other = lm(
        home, "What is 1 plus 1?", "--lm-context", "4096", env={"MHINDEX_PROMPT_STATES_MB": limit_mb}
    )  # another runtime, another key
    assert other["prompt_tokens_evaluated"] == other["prompt_tokens"] and len(states(home)) == 1


def test_ircot_answers_alike_from_kept_states_and_without_them(tmp_path):
    """A question in a new process that restores the kept demonstrations (and switches between IRCoT's steps and
    its reader, each going on where it left off) answers exactly as a process that reads everything itself
    (--no-cache). One question a process: each is three or more calls of two families, which is what is tested."""
    home = tmp_path / "home"
    musique = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
    mhindex = [sys.executable, "-m", "mhindex", "--home", str(home), "--quiet"]
    subprocess.run([*mhindex, "build", "musique", "--input", str(musique)], check=True, capture_output=True)
    questions = [json.loads(line) for line in (home / "musique" / "questions.jsonl").read_text().splitlines()][:2]
    # Four demonstrations: an opening long enough to be kept (two would be under a micro-batch).
    ask = [*mhindex, "ask", "-", "--lm", "local:smollm2-135m", "--lm-threads", "1", "--max-demos", "4",
           "--max-paragraph-words", "60", "-k", "2", "--max-steps", "2"]  # fmt: skip

    costs: list[dict] = []

    def answers(picked: list[dict], *extra: str) -> list[dict]:
        lines = "".join(json.dumps({"id": q["id"], "question": q["question"]}) + "\n" for q in picked)
        done = subprocess.run([*ask, *extra], input=lines, capture_output=True, text=True)
        assert done.returncode == 0 and not done.stderr.strip(), done.stderr
        costs.extend(json.loads(line)["lm"] for line in done.stdout.splitlines())
        # Times differ, and what the calls read: restored from the kept states, or read anew with --no-cache.
        return [
            {k: v for k, v in json.loads(line).items() if k not in ("seconds", "lm")}
            for line in done.stdout.splitlines()
        ]

    answers(questions[:1])  # keeps the demonstrations' states
    assert len(states(home)) == 2  # the reasoning steps' opening and the reader's
    restored = answers(questions[1:])  # another question: the call cache cannot answer it
    for record in restored:
        record["reader"].pop("seconds")
    from_scratch = answers(questions[1:], "--no-cache")
    for record in from_scratch:
        record["reader"].pop("seconds")
    assert restored == from_scratch
    # Every call accounted for: its prompt tokens read, restored or reused, and its seconds split into parts that
    # add up to them (what is left outside the model's own work included), summed over the question.
    calls = [call for lm in costs for call in lm["calls"]]
    assert len(calls) == sum(len(lm["calls"]) for lm in costs) >= 3 * 2
    for call in calls:
        assert call["read"] + call["restored"] + call["reused"] == call["prompt_tokens"], call
        parts = sum(call[part] for part in ("restore", "prompt", "generation", "save", "outside"))
        assert parts == pytest.approx(call["seconds"], abs=0.01), call
    assert any(call["restored"] >= 512 and call["restore"] > 0 for call in calls)  # a kept state, or a switch back
    assert any(call["save"] > 0 for call in calls)  # the family that held the slot saved at a switch
    for lm in costs:
        assert lm["seconds"] == pytest.approx(
            {part: sum(c[part] for c in lm["calls"]) for part in lm["seconds"]}, abs=0.01
        )


def test_closing_waits_for_a_statement_in_flight_and_later_ones_do_nothing(tmp_path):
    """After Ctrl-C a model call abandoned in its thread may still keep a prompt state (or store a call) while the
    command closes the store: closing under a statement crashed the process in C once (CI: the Ctrl-C test's
    process ended by SIGABRT, the JVM's report naming a SIGSEGV in sqlite3_last_insert_rowid)."""
    import threading

    from mhindex.lm.base import Completion
    from mhindex.lm.cache import CallCache
    from mhindex.lm.state import PromptStates

    kept = PromptStates(tmp_path / "states")
    calls = CallCache(tmp_path / "lm.sqlite")
    for store in (kept, calls):
        store._lock.acquire()  # a statement in flight, as a helper thread holds it
        closing = threading.Thread(target=store.close)
        closing.start()
        closing.join(0.3)
        assert closing.is_alive(), "closed under a statement in flight"
        store._lock.release()
        closing.join(5)
        assert not closing.is_alive()

    state = kept.file_of("family")
    state.write_bytes(b"saved by llama.cpp")
    kept.record("family", state)  # a thread that saved after the close: nothing is indexed
    assert kept.lookup("family") is None
    assert PromptStates(tmp_path / "states").lookup("family") is None
    kept.forget("family")
    completion = Completion(text="x", prompt_tokens=1, completion_tokens=1, seconds=0.1)
    calls.put("key", completion)
    assert calls.get("key") is None and not calls._failed  # no "the cache failed" warning after a Ctrl-C


def test_a_state_kept_at_one_thread_count_is_restored_at_another(kept, tmp_path):
    """The automatic thread count follows the machine's load: a state kept at 1 thread must serve a process at 2
    (states were once keyed by the thread count, and a quieter machine read everything again, 92 s against 33 s).
    The kernels are batch- and thread-invariant (lm/llamacpp.py, INVARIANT): the answer is a fresh process's."""
    home, _ = kept
    two = lm(home, "What is 8 plus 6?", "--lm-threads", "2")
    fresh = lm(tmp_path / "fresh", "What is 8 plus 6?", "--lm-threads", "2", "--no-cache")
    assert restored(two), two
    assert two["text"] == fresh["text"] and two["completion_tokens"] == fresh["completion_tokens"]
