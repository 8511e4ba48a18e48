"""The same answer whatever ran before (lm/slots.py, lm/llamacpp.py): every LM call of an evaluation, byte for byte,
from a fresh process with a cold prompt-state store, and again after other methods in another order, with the store
warm, with the call cache off, at 1 and 2 threads, with two workers, and through llama.cpp's HTTP server
(scripts/lm_server.py, one slot): each compared with one reference, made once for the module. The methods are a kept
opening's (IRCoT: its demonstrations restored from a state), loose ones whose prompts are short (FLARE, with its token
probabilities; Search-R1, through the chat template), on the fast packaged model. Before lm/slots.py, FLARE's
look-ahead moved with the calls made before it in the same process, and a kept state was stored per thread count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from conftest import SAMPLES, read_jsonl
from mhindex.cli import main

METHODS = "flare,searchr1,ircot"
SHORT = ["--limit", "2", "--seed", "3", "--quiet", "-k", "2", "--max-demos", "1", "--max-steps", "2",
         "--answer-tokens", "16", "--step-tokens", "40", "--max-rounds", "2", "--look-ahead", "24",
         "--max-turns", "1"]  # fmt: skip
#: Each method's own options among SHORT's (a method evaluated alone is given no option of another's)
OWN = {
    "flare": {"-k", "--max-rounds", "--look-ahead"},
    "searchr1": {"-k", "--step-tokens", "--max-turns"},
    "ircot": {"-k", "--max-demos", "--max-steps", "--answer-tokens", "--step-tokens"},
}
# What an answer's record holds that follows the clock or the process, not the model: left out of the comparison.
TIMED = {"seconds", "lm", "prompt_seconds", "generation_seconds", "restore_seconds", "save_seconds"}


def _calls(folder: Path) -> dict[str, dict]:
    """Every row's records by (row, question), the timings left out: what the model wrote and what it was asked."""

    def untimed(value):
        if isinstance(value, dict):
            return {k: untimed(v) for k, v in value.items() if k not in TIMED and not k.endswith("_seconds")}
        if isinstance(value, list):
            return [untimed(v) for v in value]
        return value

    return {
        f"{rows.stem}/{record['id']}": untimed(record)
        for rows in sorted(folder.glob("*.jsonl"))
        for record in read_jsonl(rows)
    }


@pytest.fixture(scope="module")
def musique(tmp_path_factory):
    home = tmp_path_factory.mktemp("determinism")
    sample = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
    assert main(["--quiet", "--home", str(home), "build", "musique", "--input", str(sample)]) == 0
    return home


def _eval(home: Path, out: Path, methods: str, *more: str) -> dict[str, dict]:
    assert main(["--home", str(home), "eval", "musique", "--method", methods, *SHORT, "--out", str(out), *more]) == 0
    return _calls(out)


@pytest.fixture(scope="module")
def reference(musique, tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    """Every call of the evaluation made in a process of its own, the prompt states cold, the call cache on, at two
    threads; and the copy of the data root it ran in (holding the prompt states it kept)."""
    base = tmp_path_factory.mktemp("reference")
    cold = base / "cold-home"
    cold.mkdir()
    subprocess.run(["cp", "-r", str(musique / "musique"), str(cold / "musique")], check=True)
    done = subprocess.run(
        [sys.executable, "-m", "mhindex", "--home", str(cold), "eval", "musique", "--method", METHODS, *SHORT,
         "--out", str(base / "reference"), "--lm-threads", "2"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return cold, _calls(base / "reference")


@pytest.mark.slow
def test_every_call_is_the_same_whatever_ran_before(musique, reference, tmp_path):
    cold, reference = reference
    assert len(reference) == 6 and all(r.get("answer") is not None for r in reference.values())
    flare = [r for key, r in reference.items() if key.startswith("flare/")]
    assert any(rounds.get("probabilities") or rounds.get("tokens") for r in flare for rounds in r["flare"]["rounds"])

    # This process: other methods first, then these in another order, the prompt states warm (kept by the reference),
    # the answers made again (its call cache emptied), one thread.
    before = ["--limit", "2", "--seed", "3", "--quiet", "-k", "2", "--answer-tokens", "16", "--no-cache"]
    assert main(["--home", str(musique), "eval", "musique", "--method", "nor,oner", *before, "--out",
                 str(tmp_path / "before")]) == 0  # fmt: skip
    (cold / "cache" / "lm.sqlite").unlink()
    assert list((cold / "cache" / "llama-state").glob("*.bin"))  # IRCoT's opening, kept
    warm = {}
    for method in reversed(METHODS.split(",")):  # each alone, with the options that are its own
        own = [*SHORT[:5], *(w for o, v in zip(SHORT[5::2], SHORT[6::2]) if o in OWN[method] for w in (o, v))]
        assert main(["--home", str(cold), "eval", "musique", "--method", method, *own, "--lm-threads", "1",
                     "--out", str(tmp_path / f"warm-{method}")]) == 0  # fmt: skip
        warm |= _calls(tmp_path / f"warm-{method}")
    assert warm == reference
    # The call cache off (this process's own prompt states, cold), with two workers (two slots) at two threads.
    assert _eval(cold, tmp_path / "two", METHODS, "--no-cache", "--workers", "2", "--lm-threads", "2") == reference


@pytest.mark.slow
def test_llama_cpp_s_server_answers_every_call_as_in_process(musique, reference, tmp_path):
    from mhindex.lm.packaged import packaged_model_path
    from servers import llama_server

    _, reference = reference
    with llama_server(packaged_model_path("smollm2-135m", musique / "models"), threads=2, context=8192) as url:
        served = _eval(musique, tmp_path / "served", METHODS, "--no-cache", "--lm", f"openai:smollm2@{url}")
    # The model's name differs in each record's trace of its calls, nothing the model wrote.
    for record in served.values():
        record.pop("lm_name", None)
    assert {k: _without_model(v) for k, v in served.items()} == {k: _without_model(v) for k, v in reference.items()}


def _without_model(record: dict) -> dict:
    """A record with the model's name left out (the only thing the LM's kind changes in it)."""
    said = orjson.dumps(record)
    return orjson.loads(said.replace(b"openai:smollm2", b"MODEL").replace(b"local:smollm2-135m", b"MODEL"))
