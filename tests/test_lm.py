"""Language models for real: SmolLM2 (from its PyPI package) through llama.cpp in process, and
llama.cpp's OpenAI-compatible server started on 127.0.0.1, with a fault-injecting proxy in
front of it for the error paths (the proxy forwards to the real server otherwise)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import HANG_S
from mhindex.lm import load_lm
from mhindex.lm.base import LMError
from mhindex.lm.cache import CachedModel, CallCache
from mhindex.lm.llamacpp import LlamaCppModel
from mhindex.lm.packaged import packaged_model_path
from mhindex.lm.remote import CHARS_PER_TOKEN, RemoteModel
from mhindex.methods.base import call_entry
from servers import FaultProxy, llama_server

QUESTION = "Q: What is the capital of France?\nA:"


@pytest.fixture(scope="module")
def smollm2_path(tmp_path_factory) -> Path:
    return packaged_model_path("smollm2-135m", tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def local(smollm2_path):
    model = LlamaCppModel(smollm2_path, name="local:smollm2-135m", threads=1)
    yield model
    model.close()


@pytest.fixture(scope="module")
def server(smollm2_path):
    with llama_server(smollm2_path) as url:
        yield url


def test_local_greedy_completion_with_stop(local):
    first = local.complete(QUESTION, max_tokens=32, stop=["\n"])
    again = local.complete(QUESTION, max_tokens=32, stop=["\n"])
    assert "Paris" in first.text
    assert "\n" not in first.text
    assert first.text == again.text
    assert 0 < first.completion_tokens <= 32
    assert first.prompt_tokens == local.count_tokens(QUESTION)  # SmolLM2 adds no BOS token


def test_a_generation_cut_by_max_tokens_in_the_middle_of_a_stop_string_keeps_its_end(local, server):
    """llama.cpp holds back text that may begin a stop string, and a stream cut by max_tokens then never sends it:
    the local model (which streams) ended " 7, 8," where llama.cpp's server, asked for the whole reply, says
    " 7, 8, 9", as an OpenAI API does. ReAct's second step went another way in process than over HTTP: its
    action kept a held "\nObservation" there and lost it here."""
    asked = {"max_tokens": 8, "stop": [" 9, 10, 11"]}
    here = local.complete("1, 2, 3, 4, 5, 6,", **asked)
    there = RemoteModel("smollm2", server, retries=0, context_length=4096).complete("1, 2, 3, 4, 5, 6,", **asked)
    assert here.text == there.text == " 7, 8, 9" and here.finish_reason == there.finish_reason == "length"
    assert here.completion_tokens == there.completion_tokens == 8
    # Ended by the stop string, or by max_tokens outside one: as before, nothing held back to add.
    assert local.complete("1, 2, 3, 4, 5, 6,", max_tokens=12, stop=[" 9, 10"]).text == " 7, 8,"
    assert local.complete("1, 2, 3, 4, 5, 6,", max_tokens=5, stop=[" 9, 10"]).text == " 7, 8"


def test_local_respects_max_tokens_and_counts_tokens(local):
    long = local.complete("Count: one, two, three,", max_tokens=5)
    assert long.completion_tokens == 5 and long.finish_reason == "length"
    assert local.count_tokens("") == 0
    assert local.count_tokens("Paris is the capital of France.") < local.count_tokens(
        "Paris is the capital of France. " * 3
    )
    assert local.context_length == 8192


def test_local_reuses_the_shared_prefix(local):
    prefix = "Wikipedia Title: Paris\nParis is the capital and most populous city of France. " * 20
    local.complete(prefix + "\nQ: What is Paris?\nA:", max_tokens=4)
    second = local.complete(prefix + "\nQ: Which country is Paris the capital of?\nA:", max_tokens=4)
    assert second.prompt_tokens_evaluated is not None
    assert second.prompt_tokens_evaluated < second.prompt_tokens / 4  # only the new question was evaluated


def test_local_chat_uses_the_template(local):
    reply = local.chat("What is the capital of France? Answer in one word.", max_tokens=10)
    assert "Paris" in reply.text
    assert reply.prompt_tokens > local.count_tokens("What is the capital of France? Answer in one word.") + 5


@pytest.mark.parametrize("slots", [1, 2])
def test_local_slots_run_calls_at_once(smollm2_path, slots):
    """Each call waits at its first token until the other call has one too: with two slots both are
    decoding together and meet; with one, the calls take turns and the wait runs out."""
    import threading

    model = LlamaCppModel(smollm2_path, threads=1, context_length=2048, slots=slots)
    barrier = threading.Barrier(2, timeout=HANG_S if slots == 2 else 3)
    met, answers = [], []

    def call(prompt: str) -> None:
        waited = []

        def meet(text: str) -> bool:
            if not waited:
                waited.append(True)
                try:
                    barrier.wait()
                    met.append(True)
                except threading.BrokenBarrierError:
                    met.append(False)
            return False

        answers.append(model.complete(prompt, max_tokens=6, stop_when=meet))

    threads = [threading.Thread(target=call, args=(q,)) for q in (QUESTION, "Q: What is the capital of Italy?\nA:")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 2 and all(a.completion_tokens > 0 for a in answers)
    assert met == ([True, True] if slots == 2 else [False, False])


def test_cache_returns_stored_calls(local, tmp_path):
    cached = CachedModel(local, CallCache(tmp_path / "lm.sqlite"))
    first = cached.complete(QUESTION, max_tokens=16, stop=["\n"])
    second = cached.complete(QUESTION, max_tokens=16, stop=["\n"])
    assert not first.cached and second.cached and second.text == first.text
    assert not cached.complete(QUESTION, max_tokens=17, stop=["\n"]).cached  # other parameters, other key
    assert not cached.chat(QUESTION, max_tokens=16, stop=["\n"]).cached  # chat is another kind of call
    assert len(cached.cache) == 3
    # A fresh process sees the same cache.
    reopened = CachedModel(local, CallCache(tmp_path / "lm.sqlite"))
    assert reopened.complete(QUESTION, max_tokens=16, stop=["\n"]).cached


def test_lm_command_and_no_cache(mh, home):
    first = mh("lm", QUESTION, "--stop", "\\n", "--json")
    assert first.code == 0, first.err
    assert "Paris" in first.json()["text"] and not first.json()["cached"]
    assert mh("lm", QUESTION, "--stop", "\\n", "--json").json()["cached"]
    assert not mh("lm", QUESTION, "--stop", "\\n", "--json", "--no-cache").json()["cached"]
    plain = mh("lm", QUESTION, "--stop", "\\n")
    assert plain.out.strip() == first.json()["text"].strip()


def test_lm_spec_errors_are_one_line(mh, home, tmp_path):
    for spec, fragment in [
        ("llama:x", "is not one of"),
        ("local:gpt-9", "unknown packaged model 'gpt-9'"),
        (f"gguf:{tmp_path}/missing.gguf", "no GGUF model file at"),
        ("openai:model", "write openai:MODEL@http://host:port/v1"),
    ]:
        result = mh("lm", "hi", "--lm", spec)
        # A name that does not exist is a usage error (2); a file that cannot be used is a failure (1).
        assert (
            result.code == (1 if spec.startswith("gguf:") else 2)
            and fragment in result.err
            and len(result.err.strip().splitlines()) == 1
        ), result.err


def test_remote_completions_chat_stop_and_tokens(server, local):
    model = RemoteModel("smollm2", server)
    completion = model.complete(QUESTION, max_tokens=32, stop=["\n"])
    assert completion.text == local.complete(QUESTION, max_tokens=32, stop=["\n"]).text  # same weights, greedy
    assert completion.prompt_tokens > 0 and completion.completion_tokens > 0
    assert "Paris" in model.chat("What is the capital of France? Answer in one word.", max_tokens=10).text
    assert model.count_tokens("Paris is the capital of France.") == local.count_tokens(
        "Paris is the capital of France."
    )
    assert model.context_length == 4096  # what the server reports
    chat_only = load_lm(f"openai-chat:smollm2@{server}", cache=False)
    assert "Paris" in chat_only.complete("What is the capital of France? Answer in one word.", max_tokens=10).text
    chat_only.close()
    model.close()


def test_remote_retries_500_and_429_then_succeeds(server):
    with FaultProxy(server.removesuffix("/v1")) as proxy:
        model = RemoteModel("smollm2", proxy.url + "/v1", backoff=0.01, context_length=4096)
        proxy.faults = ["500", "429"]
        assert "Paris" in model.complete(QUESTION, max_tokens=16, stop=["\n"]).text
        assert proxy.requests.count("POST /v1/completions") == 3


def test_remote_malformed_bodies_are_clear_errors(server):
    with FaultProxy(server.removesuffix("/v1")) as proxy:
        model = RemoteModel("smollm2", proxy.url + "/v1", backoff=0.01, context_length=4096)
        proxy.faults = ["garbage"]
        with pytest.raises(LMError, match="answered with something that is not JSON: <html>502"):
            model.complete(QUESTION, max_tokens=8)
        proxy.faults = ["no-choices"]
        with pytest.raises(LMError, match="answered without a completion"):
            model.complete(QUESTION, max_tokens=8)
        proxy.faults = ["500"] * 3
        with pytest.raises(LMError, match="answered HTTP 500"):
            RemoteModel("smollm2", proxy.url + "/v1", retries=2, backoff=0.01, context_length=4096).complete(
                QUESTION, max_tokens=8
            )


def test_a_server_that_ignores_max_tokens_is_cut_and_one_that_fails_until_the_deadline_is_named(server):
    with FaultProxy(server.removesuffix("/v1")) as proxy:
        model = RemoteModel("smollm2", proxy.url + "/v1", backoff=0.01, context_length=4096)
        proxy.faults = ["flood"]
        completion = model.complete(QUESTION, max_tokens=8)
        assert completion.finish_reason == "capped" and len(completion.text) == 8 * CHARS_PER_TOKEN  # of 5 MB
        assert call_entry("answering", completion)["capped"] is True
        failing = RemoteModel("smollm2", proxy.url + "/v1", timeout=1.0, retries=6, backoff=0.5, context_length=4096)
        proxy.faults = ["500"] * 10
        with pytest.raises(LMError, match=r"did not finish within 1 s \(--lm-timeout\): it answered HTTP 500 until"):
            failing.complete(QUESTION, max_tokens=8)


def test_remote_timeout_is_one_deadline_for_the_whole_call(server):
    with FaultProxy(server.removesuffix("/v1")) as proxy:
        model = RemoteModel("smollm2", proxy.url + "/v1", timeout=0.5, retries=1, backoff=0.01, context_length=4096)
        proxy.faults = ["sleep2", "sleep2"]
        started = time.perf_counter()
        with pytest.raises(LMError, match=r"did not finish within 0.5 s \(--lm-timeout\)"):
            model.complete(QUESTION, max_tokens=8)
        # the deadline covers the retries too: each try alone would be its 2 s sleep (bounds wide for a loaded machine)
        assert time.perf_counter() - started < 3
        patient = RemoteModel("smollm2", proxy.url + "/v1", timeout=30, retries=1, backoff=0.01, context_length=4096)
        proxy.faults = ["sleep1"]  # a slow answer within the deadline is waited for
        assert "Paris" in patient.complete(QUESTION, max_tokens=16, stop=["\n"]).text
        proxy.faults = ["500"]  # a failure that comes back fast is tried again within it
        assert "Paris" in patient.complete(QUESTION, max_tokens=16, stop=["\n"]).text
        # A server that fails fast every time: the back-off between tries (0.5, 1, 2, 4 s...) is cut at the deadline.
        failing = RemoteModel("smollm2", proxy.url + "/v1", timeout=1.0, retries=6, backoff=0.5, context_length=4096)
        proxy.faults = ["500"] * 10
        started = time.perf_counter()
        with pytest.raises(LMError, match=r"did not finish within 1 s \(--lm-timeout\)"):
            failing.complete(QUESTION, max_tokens=8)
        assert time.perf_counter() - started < 4  # unbounded, the waits alone came to 7.5 s


def test_remote_server_down(mh, home):
    result = mh("lm", "hi", "--lm", "openai:m@http://127.0.0.1:9/v1", "--no-cache")
    assert result.code == 1
    assert (
        result.err.strip()
        == "mhindex: error: cannot reach the LM server at http://127.0.0.1:9/v1/completions: connection "
        "refused; is it running?"
    )


CONVERSATION = [
    {"role": "user", "content": "What is the capital of France? Answer in one word."},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And the capital of Italy? Answer in one word."},
]


def test_log_probabilities_local_remote_and_cached(local, server, tmp_path):
    plain = local.complete(QUESTION, max_tokens=16, stop=["\n"])
    scored = local.complete(QUESTION, max_tokens=16, stop=["\n"], logprobs=True)
    assert plain.token_logprobs is None and scored.text == plain.text  # asking for them changes nothing else
    # One pair per kept token: the tokens spell the text (up to the stop), each probability <= 1.
    assert "".join(token for token, _ in scored.token_logprobs) == scored.text
    assert all(lp <= 0 for _, lp in scored.token_logprobs) and scored.mean_logprob < 0
    remote = RemoteModel("smollm2", server)
    for call in (remote.complete, load_lm(f"openai-chat:smollm2@{server}", cache=False).complete):
        over_http = call(QUESTION, max_tokens=16, stop=["\n"], logprobs=True)
        assert over_http.token_logprobs and over_http.mean_logprob < 0
    assert remote.complete(QUESTION, max_tokens=16, stop=["\n"], logprobs=True).mean_logprob == pytest.approx(
        scored.mean_logprob, abs=1e-3
    )
    cached = CachedModel(local, CallCache(tmp_path / "lm.sqlite"))
    assert cached.complete(QUESTION, max_tokens=16, stop=["\n"]).token_logprobs is None
    first = cached.complete(QUESTION, max_tokens=16, stop=["\n"], logprobs=True)  # another key than the call without
    again = cached.complete(QUESTION, max_tokens=16, stop=["\n"], logprobs=True)
    assert not first.cached and again.cached and again.token_logprobs == first.token_logprobs
    remote.close()


def test_chat_takes_a_conversation_locally_and_over_http(local, server, tmp_path):
    reply = local.chat(CONVERSATION, max_tokens=8)
    assert "Rome" in reply.text
    # The earlier turns are the prefix of the next call: llama.cpp evaluates only what is new.
    longer = local.chat(
        [*CONVERSATION, {"role": "assistant", "content": reply.text}, {"role": "user", "content": "And of Spain?"}],
        max_tokens=8,
    )
    assert longer.prompt_tokens_evaluated is not None and longer.prompt_tokens_evaluated < longer.prompt_tokens / 2
    remote = load_lm(f"openai-chat:smollm2@{server}", cache=False)
    assert remote.chat(CONVERSATION, max_tokens=8).text == reply.text  # same template, same weights, greedy
    cached = CachedModel(local, CallCache(tmp_path / "lm.sqlite"))
    assert not cached.chat(CONVERSATION, max_tokens=8).cached
    assert cached.chat(CONVERSATION, max_tokens=8).cached
    assert not cached.chat(CONVERSATION[:1], max_tokens=8).cached  # another conversation, another key
    remote.close()


def test_stop_when_ends_generation_early_locally_and_over_http(local, server, tmp_path, monkeypatch):
    from mhindex.methods.prompts import sentence_complete

    prompt = "Write two sentences about Paris.\nParis"
    whole = local.complete(prompt, max_tokens=60, stop=["\n"])
    with monkeypatch.context() as patched:  # counted from the streamed timings, not by tokenizing the prompt again
        patched.setattr(local, "count_tokens", lambda text: pytest.fail("the prompt was tokenized again"))
        early = local.complete(prompt, max_tokens=60, stop=["\n"], stop_when=sentence_complete)
    assert sentence_complete(whole.text), whole.text  # the test needs a line of more than one sentence
    assert whole.text.startswith(early.text) and early.completion_tokens < whole.completion_tokens
    assert (
        early.finish_reason == "stop_when" and early.prompt_tokens == whole.prompt_tokens
    )  # counted though llama.cpp sent no summary
    streamed = RemoteModel("smollm2", server).complete(prompt, max_tokens=60, stop=["\n"], stop_when=sentence_complete)
    assert (
        streamed.text == early.text
        and streamed.finish_reason == "stop_when"
        and streamed.prompt_tokens == early.prompt_tokens
    )
    # The cache: a stopped generation never answers a whole call; a whole one serves a stopped call.
    cached = CachedModel(local, CallCache(tmp_path / "lm.sqlite"))
    assert cached.complete(prompt, max_tokens=60, stop=["\n"], stop_when=sentence_complete).text == early.text
    assert not cached.complete(prompt, max_tokens=60, stop=["\n"]).cached
    assert cached.complete(prompt, max_tokens=60, stop=["\n"], stop_when=sentence_complete).cached


def test_default_threads_leave_the_cores_other_processes_use():
    """llama.cpp's threads wait for each other, so a local model takes only the cores nobody else
    uses: with every core spinning in other processes it runs on one thread."""
    import os

    from mhindex.lm.llamacpp import default_threads, free_cores

    assert [free_cores(2, busy) for busy in (0.0, 0.3, 0.5, 1.0, 3.0)] == [2, 2, 1, 1, 1]
    assert [free_cores(8, busy) for busy in (0.0, 1.0, 2.2, 9.0)] == [8, 7, 6, 1]
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in os.sched_getaffinity(0)]
    try:
        time.sleep(0.5)
        assert default_threads() == 1
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def test_sentence_complete_keeps_the_first_sentence_identical():
    from mhindex.methods.prompts import first_sentence, sentence_complete

    for text in [
        "Mach's principle is named after Ernst Mach. Ernst Mach was an Austrian physicist.",
        "Dr. Smith moved to St. Louis in 1990. He died there.",
        "The film was directed by J. R. R. Tolkien's son. So the answer is: Christopher.",
        "The answer is 3.5 million. Next.",
        "No second sentence here",
    ]:
        prefixes = [text[:i] for i in range(1, len(text) + 1)]
        first_stop = next((p for p in prefixes if sentence_complete(p)), text)
        assert first_sentence(first_stop) == first_sentence(text), text


def test_a_model_in_parts_is_joined_once_and_checked(tmp_path, monkeypatch):
    """Packaged models in parts (qwen2.5-0.5b, qwen2.5-1.5b) are joined from the packages' data/
    files found on the path, checked against their sha256, and never left half-written."""
    import hashlib

    from mhindex.lm.packaged import _joined

    site = tmp_path / "site"
    pieces = [b"GGUF first part ", b"second part ", b"last"]
    for number, piece in enumerate(pieces, start=1):
        (site / f"model_part{number}" / "data").mkdir(parents=True)
        (site / f"model_part{number}" / "__init__.py").write_text("")
        (site / f"model_part{number}" / "data" / f"part{number:02d}.bin").write_bytes(piece)
    # Not a mock: three real (tiny) packages put on the real import path, found by the same
    # importlib lookup; the model's own 22 packages are 1.1 GB and installed on request only.
    monkeypatch.syspath_prepend(str(site))
    parts = [(f"model_part{n}", f"part{n:02d}.bin") for n in range(1, 4)]
    whole = b"".join(pieces)
    models = tmp_path / "models"

    with pytest.raises(LMError) as wrong:
        _joined(models, "tiny", "tiny.gguf", "0" * 64, parts, "pip install tiny-parts")
    assert "expected 0000" in str(wrong.value) and "reinstall: pip install tiny-parts" in str(wrong.value)
    assert not list(models.iterdir())  # nothing half-written

    joined = _joined(models, "tiny", "tiny.gguf", hashlib.sha256(whole).hexdigest(), parts, "pip install tiny-parts")
    assert joined == models / "tiny.gguf" and joined.read_bytes() == whole
    with pytest.raises(LMError, match="model_part9 is not installed: pip install tiny-parts"):
        _joined(tmp_path / "other", "tiny", "tiny.gguf", "0" * 64, [("model_part9", "x.bin")], "pip install tiny-parts")


@pytest.mark.parametrize(
    "mode, call, said",
    [
        (
            "template-null",
            lambda m: m.chat_prompt("Q?"),
            'rendered its chat template as {"prompt": null}, not a prompt',
        ),
        ("template-html", lambda m: m.chat_prompt("Q?"), "rendered its chat template as <html>"),
        ("logprobs-strings", lambda m: m.complete("Q?", max_tokens=4, logprobs=True), "a token log-probability"),
        ("logprobs-huge", lambda m: m.complete("Q?", max_tokens=4, logprobs=True), "a token log-probability"),
    ],
)
def test_a_model_server_s_reply_is_checked_where_it_enters(mode, call, said):
    """A chat template rendered as null or as a web page, log-probabilities that are strings or 1e308: one line
    naming the server, never the string "None" sent as a prompt (Search-R1) nor FLARE silently judging nothing."""
    from servers import MisbehavingLM

    with MisbehavingLM(mode) as lm:
        with pytest.raises(LMError, match=said):
            call(RemoteModel("m", lm.url, retries=0, context_length=4096, timeout=20))


def test_a_streamed_completion_that_never_ends_is_read_no_further_than_max_tokens():
    from servers import MisbehavingLM

    with MisbehavingLM("endless") as lm:
        made = RemoteModel("m", lm.url, retries=0, context_length=4096, timeout=20).complete(
            "Q?", max_tokens=8, stop_when=lambda text: False
        )
    assert made.finish_reason == "capped" and len(made.text) <= 8 * CHARS_PER_TOKEN
