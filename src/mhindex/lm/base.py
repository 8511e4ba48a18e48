"""The one interface every language model implements.

Methods complete prompts greedily with stop sequences and never know which model runs: a
GGUF file through llama.cpp, a transformers folder, or an OpenAI-compatible server. Each
model also tells its context length and counts tokens, so that methods can pack as many
demonstrations as fit. A chat call takes a whole conversation (SearChain talks to the model
over several turns), and any call can return each generated token's log-probability (a
confidence for readers that have no other).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Self, Union

from mhindex.errors import MhindexError
from mhindex.options import option
from mhindex.requirements import Requirement


class LMError(MhindexError):
    """The model could not answer: server down, garbage in the reply, a missing model file."""


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    # Prompt tokens the model actually evaluated: fewer than prompt_tokens when a shared prefix
    # was reused from the previous call (llama.cpp's prompt cache). None where not reported.
    prompt_tokens_evaluated: int | None = None
    finish_reason: str | None = None
    cached: bool = False
    # Seconds spent evaluating the prompt, where the back-end reports it (llama.cpp does).
    prompt_seconds: float | None = None
    # [token, log-probability] of each generated token up to the stop, when asked for.
    token_logprobs: list[tuple[str, float]] | None = None
    # Where the rest of a local call's time went (None where the back-end cannot say): generating its tokens,
    # restoring prompt states into the model's slot and saving them (lm/llamacpp.py); and of its prompt tokens,
    # how many came restored from a kept state and how many llama.cpp reused from the call before.
    generation_seconds: float | None = None
    restore_seconds: float | None = None
    save_seconds: float | None = None
    prompt_tokens_restored: int | None = None
    prompt_tokens_reused: int | None = None

    def record(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def outside_seconds(self) -> float | None:
        """The call's seconds outside the model's own work (tokenizing, templates, sampling and stop checks in
        Python, waiting for a slot): what is left of `seconds` once the parts the back-end timed are taken."""
        if self.prompt_seconds is None or self.generation_seconds is None:
            return None
        inside = self.prompt_seconds + self.generation_seconds + (self.restore_seconds or 0) + (self.save_seconds or 0)
        return max(0.0, self.seconds - inside)

    @property
    def mean_logprob(self) -> float | None:
        """The generation's average token log-probability (None: not asked for, or nothing generated)."""
        if not self.token_logprobs:
            return None
        return sum(lp for _, lp in self.token_logprobs) / len(self.token_logprobs)


def checked(made: object, model: str, logprobs: bool = False) -> Completion:
    """A model's completion as the methods read it, checked at their door (a plug-in's model, a server's reply):
    text a string, token counts whole numbers of 0 or more, seconds finite, and where log-probabilities were asked
    for, a list of (token, log-probability) with each a finite number of at most 0, one at least for a text. One
    LMError naming the model and the field otherwise, not a traceback further on or a silently empty judgement."""
    if not isinstance(made, Completion):
        raise LMError(f"the model {model} returned a {type(made).__name__}, not a Completion")
    if not isinstance(made.text, str):
        raise LMError(f"the model {model} returned a completion whose text is {made.text!r}, not a string")
    for name in ("prompt_tokens", "completion_tokens"):
        value = getattr(made, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise LMError(f"the model {model} returned {name} = {value!r}, not a whole number of tokens")
    if isinstance(made.seconds, bool) or not isinstance(made.seconds, int | float) or not math.isfinite(made.seconds):
        raise LMError(f"the model {model} returned seconds = {made.seconds!r}, not a finite number")
    if logprobs and made.token_logprobs is not None:
        for pair in made.token_logprobs:
            token, value = pair if isinstance(pair, tuple | list) and len(pair) == 2 else (None, None)
            if (
                not isinstance(token, str)
                or isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (math.isfinite(value) and value <= 1e-6)
            ):
                raise LMError(f"the model {model} returned a token log-probability {pair!r}: not a token and a "
                              "finite log-probability of at most 0")  # fmt: skip
        if made.text.strip() and not made.token_logprobs:
            raise LMError(f"the model {model} returned no token log-probabilities for its text, though asked")
    return made


#: a conversation: {"role": "system"|"user"|"assistant", "content": str} turns; a string is one user turn
Messages = Union[str, Sequence[dict[str, Any]]]
#: a test on the text generated so far: generation stops as soon as it is True (IRCoT keeps only a
#: step's first sentence, so it stops once that sentence is complete). Runtimes that stream apply
#: it at each token; the text may run a token past the point, never short of it.
StopWhen = Callable[[str], bool]


def as_messages(messages: Messages) -> list[dict[str, Any]]:
    return [{"role": "user", "content": messages}] if isinstance(messages, str) else [dict(m) for m in messages]


def transcript(messages: Messages) -> str:
    """A conversation as "User: ..." / "Assistant: ..." paragraphs, ending where the assistant speaks."""
    return "\n\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in as_messages(messages)) + "\n\nAssistant:"


def tokens_within(pairs: Sequence[tuple[str, float]], text: str) -> list[tuple[str, float]]:
    """The leading tokens that make up `text` (a generation cut at a stop sequence keeps only the
    log-probabilities of what is kept)."""
    kept, length = [], 0
    for token, logprob in pairs:
        if length >= len(text):
            break
        kept.append((token, logprob))
        length += len(token)
    return kept


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Truncate at the first stop sequence, for back-ends that may overrun one."""
    cut = len(text)
    for s in stop:
        if s and (i := text.find(s)) != -1:
            cut = min(cut, i)
    return text[:cut]


@dataclass(frozen=True)
class Generation:
    """One completion as `mhindex lm` asks for it (its options are these fields)."""

    max_tokens: int = option(64, "Most tokens to generate.", min=1)
    stop: list[str] | None = option(None, "Stop sequence (repeatable; \\n for a newline, \\t for a tab).")
    temperature: float = option(0.0, "0 is greedy.")
    chat: bool = option(False, "Send the prompt as one user turn through the chat template.")
    keep: int = option(
        0,
        "How many leading characters open every prompt alike (demonstrations): a local model keeps their "
        "evaluation on disk for the next process, as methods do with theirs.",
        min=0,
        metavar="CHARS",
    )

    def complete(self, model: LanguageModel, prompt: str) -> Completion:
        """The completion asked for, the prompt and stops read as a shell gives them (\\n a newline, \\t a tab)."""
        from mhindex.text import shell_unescape

        call = model.chat if self.chat else model.complete
        stops = [shell_unescape(stop) for stop in self.stop or []]
        return call(shell_unescape(prompt), max_tokens=self.max_tokens, stop=stops, temperature=self.temperature,
                    keep=self.keep)  # fmt: skip


def lacking(model: object, where: str) -> LanguageModel:
    """`model`, if it is a LanguageModel with what the methods read of one (its `name`, a whole `context_length`); else
    a one-line UsageError saying what to set, before any method uses it (not an AttributeError mid-answer)."""
    from mhindex.errors import UsageError

    if not isinstance(model, LanguageModel):
        raise UsageError(f"{where} is not an mhindex LanguageModel (a {type(model).__name__})")
    missing = [m for m in ("name", "context_length") if not hasattr(model, m)]
    length = getattr(model, "context_length", None)
    if missing or isinstance(length, bool) or not isinstance(length, int) or length < 1:
        said = f"lacks {', '.join(missing)}" if missing else f"has context_length {length!r}"
        raise UsageError(
            f"{where} {said}: a LanguageModel sets `name` and `context_length` (its context window, in tokens)"
        )
    return model


class LanguageModel(ABC):
    #: what `--lm` named, e.g. "local:smollm2-135m"; also the cache key's model part with `identity`
    name: str
    context_length: int
    #: CPU threads a local model runs on (chosen when it loads), None where the model runs elsewhere
    threads: int | None = None

    @property
    def identity(self) -> str:
        """What makes two instances give the same outputs (name plus weights), for the call cache."""
        return self.name

    def fingerprint(self) -> dict[str, Any]:
        """What decides this model's answers besides the prompts, for the environment's fingerprint (`mhindex
        diff`): its name and context here; a local model adds its file's sha256 and its chat template's."""
        return {"lm": self.name, "context": self.context_length}

    @property
    def parameters(self) -> int | None:
        """The model's parameter count where the runtime tells it (None: unknown). Methods choose
        prompting by it: small models read better with direct prompting."""
        return None

    @property
    def seq2seq(self) -> bool:
        """An encoder-decoder model (Flan-T5), prompted as the IRCoT paper prompts Flan-T5."""
        return False

    @abstractmethod
    def complete(
        self,
        prompt: str,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        logprobs: bool = False,
        stop_when: StopWhen | None = None,
        keep: int = 0,
        seed: int | None = None,
    ) -> Completion:
        """`keep`: how many leading characters of the prompt every question of the run shares (the
        demonstrations). A local model keeps their evaluation on disk for the next process and
        restores it between prompt families (lm/state.py); other models ignore it. `seed`: a sampled
        call's (temperature > 0) random seed, so that its sample is the same on a rerun."""

    def chat(
        self,
        messages: Messages,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        logprobs: bool = False,
        stop_when: StopWhen | None = None,
        keep: int = 0,
        seed: int | None = None,
    ) -> Completion:
        """A conversation through the model's chat template; the answer is the next assistant turn.
        Models without a template complete a plain transcript of the turns."""
        return self.complete(transcript(messages), max_tokens, stop, temperature, logprobs, stop_when, seed=seed)

    def chat_prompt(self, messages: Messages) -> str | None:
        """The text the model's chat template makes of `messages`, the assistant's turn opened, for a method that
        writes into that turn itself and lets the model go on (Search-R1 puts retrieved passages there); None:
        the model has no chat template, and such a method sends its prompt as it is (as Search-R1's does)."""
        return None

    @abstractmethod
    def count_tokens(self, text: str) -> int: ...

    def close(self) -> None:  # noqa: B027 - optional: most models hold nothing to release
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class LoadRequest:
    """How a model is to be loaded, whatever its provider: the data root (models and caches live there),
    threads and context of a local model, how many calls it runs at once, a remote call's deadline."""

    spec: str
    home: Path
    threads: int | None = None
    context_length: int | None = None
    cache: bool = True
    slots: int = 1
    timeout: float = 300.0


@dataclass(frozen=True)
class LMProvider:
    """One kind of `--lm KIND:REST`: how to load it, how `--help` writes it, what it needs installed."""

    #: as `--help` and errors write it: "gguf:PATH"
    usage: str
    #: the model `REST` names, loaded
    load: Callable[[str, LoadRequest], LanguageModel]
    requirements: tuple[Requirement, ...] = ()
    #: how a figure's title names the model REST names ("Qwen2.5-0.5B (local)"); None: as written
    title: Callable[[str], str | None] | None = None
