"""The one interface every language model implements.

Methods complete prompts greedily with stop sequences and never know which model runs: a
GGUF file through llama.cpp, a transformers folder, or an OpenAI-compatible server. Each
model also tells its context length and counts tokens, so that methods can pack as many
demonstrations as fit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from mhindex.errors import MhindexError


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

    def record(self) -> dict:
        return asdict(self)


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Truncate at the first stop sequence, for back-ends that may overrun one."""
    cut = len(text)
    for s in stop:
        if s and (i := text.find(s)) != -1:
            cut = min(cut, i)
    return text[:cut]


class LanguageModel(ABC):
    #: what `--lm` named, e.g. "local:smollm2-135m"; also the cache key's model part with `identity`
    name: str
    context_length: int

    @property
    def identity(self) -> str:
        """What makes two instances give the same outputs (name plus weights), for the call cache."""
        return self.name

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
    def complete(self, prompt: str, max_tokens: int = 256, stop: Sequence[str] = (), temperature: float = 0.0) -> Completion: ...

    def chat(self, prompt: str, max_tokens: int = 256, stop: Sequence[str] = (), temperature: float = 0.0) -> Completion:
        """One user turn through the model's chat template; models without one just complete."""
        return self.complete(prompt, max_tokens, stop, temperature)

    @abstractmethod
    def count_tokens(self, text: str) -> int: ...

    def close(self) -> None:  # noqa: B027 - optional: most models hold nothing to release
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
