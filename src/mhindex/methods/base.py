"""What every question-answering method takes and returns.

A method gets a retriever and a language model, answers one `Query` at a time and returns an
`Answer` with its trace: each step's generated sentence, the query it issued, and what that
query retrieved, plus the LM calls, tokens and time it cost. Methods are stateless between
questions, so several questions can run at once.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Sequence

from mhindex import ui
from mhindex.lm.base import Completion, LanguageModel


@dataclass(frozen=True)
class Query:
    id: str
    question: str
    # IIRC: the passage the question is about; IRCoT always puts it in the prompt.
    main_passage: dict | None = None
    # IIRC: titles of the pages the main passage links to.
    links: tuple[str, ...] = ()


@dataclass
class Step:
    text: str
    query: str
    retrieved_ids: list[str]
    titles: list[str] = field(default_factory=list)
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def record(self) -> dict:
        return {"text": self.text, "query": self.query, "retrieved_ids": self.retrieved_ids}


@dataclass
class Answer:
    id: str
    question: str
    answer: str
    retrieved: list[dict]
    steps: list[Step]
    lm_calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    reasoning: str = ""
    method: str = ""
    # IIRC: the corpus titles retrieval was restricted to (the pages the model named).
    scope: list[str] | None = None

    def record(self) -> dict:
        return {
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "retrieved": self.retrieved,
            "steps": [s.record() for s in self.steps],
            "lm_calls": self.lm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 3),
            "method": self.method,
            "reasoning": self.reasoning,
            **({"scope": self.scope} if self.scope is not None else {}),
        }


class Meter:
    """Counts one question's LM calls and tokens, while the model itself is shared."""

    def __init__(self, lm: LanguageModel) -> None:
        self.lm = lm
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._lock = threading.Lock()

    def complete(self, prompt: str, max_tokens: int, stop: Sequence[str], label: str = "generating") -> Completion:
        """One greedy call; `label` says what it is for on the live status line of `ask`."""
        ui.check_stop()
        ui.note(f"{label} (LM call {self.calls + 1}, {self.prompt_tokens + self.completion_tokens:,} tokens so far)")
        completion = self.lm.complete(prompt, max_tokens=max_tokens, stop=stop, temperature=0.0)
        with self._lock:
            self.calls += 1
            self.prompt_tokens += completion.prompt_tokens
            self.completion_tokens += completion.completion_tokens
        return completion


class Method(ABC):
    name: str

    @abstractmethod
    def answer(self, query: Query) -> Answer: ...


class Clock:
    def __init__(self) -> None:
        self.started = time.perf_counter()

    def __call__(self) -> float:
        return time.perf_counter() - self.started
