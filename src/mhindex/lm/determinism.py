"""Whether a model writes the same completion for the same call whatever ran before: `mhindex doctor --determinism`.

A handful of calls shaped like the methods' (a prompt opening with IRCoT's demonstrations, kept on disk for the
next process; a short completion with its token log-probabilities, as FLARE asks; a chat turn, as Search-R1 and
SearChain send) is made on the configured model, then made again: in another order after the others, with the
prompt states the first pass kept (warm), at another thread count (a local model), and two at a time (a model of
two slots; a server's batch of two). Every completion is compared, text and log-probabilities, with the first
pass's. llama.cpp's prompt cache (`cache_prompt`) and a server's batching are what move answers elsewhere
(llama.cpp's server README warns of it; vLLM is batch-invariant only when started so); lm/slots.py is how mhindex
keeps them from it for llama.cpp. The result, with the settings that decide it, is kept in the data root
(`cache/determinism.json`, by model) and goes into each evaluation's fingerprint, which `mhindex diff` compares.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from mhindex.lm.base import Completion, LanguageModel

#: where the last check of each model is kept, under the data root
RESULTS = Path("cache") / "determinism.json"


@dataclass(frozen=True)
class Probe:
    """One call of the check: a completion (`messages` None) or a chat turn."""

    label: str
    prompt: str
    keep: int = 0
    logprobs: bool = False
    chat: bool = False
    max_tokens: int = 24

    def call(self, model: LanguageModel) -> Completion:
        if self.chat:
            return model.chat(self.prompt, max_tokens=self.max_tokens, logprobs=self.logprobs)
        return model.complete(
            self.prompt, max_tokens=self.max_tokens, stop=["\n\n"], logprobs=self.logprobs, keep=self.keep
        )


def probes() -> list[Probe]:
    """The calls the check makes: IRCoT's released 2WikiMultihopQA demonstrations with two questions after them
    (a kept opening, restored for the second), a short completion with log-probabilities, and a chat turn.

    The demonstrations' first 4,000 characters: over two of llama.cpp's micro-batches (about 1,100 tokens), so
    that a kept opening of two is restored and a third, partial one read after it, as IRCoT's prompts are. More
    shows nothing new and is read once a pass: 9,000 took the check 2.2 minutes on two cores with the 135M model."""
    folder = resources.files("mhindex").joinpath("prompts", "ircot", "2wikimultihopqa")
    demos = folder.joinpath("gold_with_1_distractors_context_cot_qa_codex.txt").read_text("utf-8")[:4000]
    return [
        Probe(
            "IRCoT's demonstrations, first question",
            f"{demos}\n\nQ: Who was born first, Kalki Koechlin or Nicolas Cage?\nA:",
            keep=len(demos),
        ),  # fmt: skip
        Probe(
            "IRCoT's demonstrations, second question",
            f"{demos}\n\nQ: Which film came out first, Kalavar King or Ogro?\nA:",
            keep=len(demos),
        ),  # fmt: skip
        Probe(
            "a short completion, with log-probabilities",
            "The capital of the country where the Danube ends is",
            logprobs=True,
        ),  # fmt: skip
        Probe(
            "a chat turn",
            "Name the director of the film Molokai: The Story Of Father Damien, in a few words.",
            chat=True,
        ),  # fmt: skip
    ]


def _said(completion: Completion) -> dict[str, Any]:
    return {"text": completion.text, "logprobs": completion.token_logprobs}


def _pass(model: LanguageModel, calls: Sequence[Probe], at_once: int = 1) -> dict[str, dict[str, Any]]:
    """Each call's completion; `at_once` calls at a time (each waits for a slot of the model)."""
    found: dict[str, dict[str, Any]] = {}
    if at_once == 1:
        return {probe.label: _said(probe.call(model)) for probe in calls}
    errors: list[BaseException] = []

    def make(probe: Probe) -> None:
        try:
            found[probe.label] = _said(probe.call(model))
        except BaseException as error:  # noqa: BLE001 - carried to the caller's thread
            errors.append(error)

    threads = [threading.Thread(target=make, args=(probe,)) for probe in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return found


def check(load: Callable[..., LanguageModel], local: bool) -> dict[str, Any]:
    """The check itself: `load(threads=, slots=, cache=)` gives a model (the configured one, loaded so). Returns
    whether every pass gave the first pass's completions, and which differed."""
    calls = probes()
    first = load(threads=2, slots=1, cache=False)
    try:
        passes = {"cold, in order": _pass(first, calls)}
        passes["after the others, in another order"] = _pass(first, list(reversed(calls)))
    finally:
        first.close()
    passes["again, the prompt states warm"] = _with(load(threads=2, slots=1, cache=True), calls)
    if local:
        passes["at one thread"] = _with(load(threads=1, slots=1, cache=False), calls)
    passes["two calls at a time (two slots)"] = _with(load(threads=2, slots=2, cache=False), calls, at_once=2)
    reference = passes["cold, in order"]
    differing = [
        f"{name}: {label}" for name, made in passes.items() for label, said in made.items() if said != reference[label]
    ]
    return {"identical": not differing, "calls": len(calls), "passes": list(passes), "differing": differing}


def _with(model: LanguageModel, calls: Sequence[Probe], at_once: int = 1) -> dict[str, dict[str, Any]]:
    try:
        return _pass(model, calls, at_once)
    finally:
        model.close()


def settings_of(model: LanguageModel) -> dict[str, Any]:
    """What decides whether the model's completions move with what ran before, as its fingerprint says it."""
    found = model.fingerprint()
    decided = ("runtime", "kernels", "ubatch", "prefix_reuse", "server", "server_slots", "load")
    return {key: found[key] for key in decided if key in found}


def kept(home: Path, spec: str) -> dict[str, Any] | None:
    """The last check of the model `spec` names in this data root, if any."""
    try:
        found = orjson.loads((home / RESULTS).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    result = found.get(spec) if isinstance(found, dict) else None
    return result if isinstance(result, dict) else None


def keep(home: Path, spec: str, result: dict[str, Any]) -> None:
    """The check's result kept for the model, whole or not at all (the data root's other models' are kept too)."""
    from mhindex.files import atomic_file

    path = home / RESULTS
    try:
        found = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        found = {}
    found = found if isinstance(found, dict) else {}
    found[spec] = {**result, "checked": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as handle:
        handle.write(orjson.dumps(found, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")


def recorded(home: Path, spec: str, model: LanguageModel) -> dict[str, Any]:
    """What an evaluation's fingerprint says of its model's determinism: the settings that decide it, and the last
    `mhindex doctor --determinism` of that model here (or that none was made)."""
    last = kept(home, spec)
    said: dict[str, Any] = {"settings": settings_of(model)}
    if last is None:
        said["check"] = "not made (mhindex doctor --determinism)"
    else:
        said["check"] = {k: last.get(k) for k in ("identical", "checked", "settings") if k in last}
    return said
