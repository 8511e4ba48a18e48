"""The retriever interface every backend implements, and what a search returns.

A backend builds an index from a corpus folder into an index folder and opens a `Retriever`
over it. Methods only ever see `Retriever`, so each of them runs on every backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    title: str
    text: str
    score: float

    def record(self) -> dict:
        return {"id": self.id, "title": self.title, "text": self.text, "score": round(self.score, 4)}


class Retriever(Protocol):
    """Ranked paragraphs for free-text queries. Any query text is accepted: punctuation, quotes,
    `AND`, `:` and the like are words, never syntax, and never raise."""

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        """Top `k` paragraphs; with `titles`, only paragraphs whose title is one of them."""
        ...

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        """One ranked list per query, in order; backends batch where they can."""
        ...

    def close(self) -> None: ...


class Backend(Protocol):
    name: str

    def build(self, corpus_file: Path, target: Path, options: dict[str, Any]) -> dict[str, Any]:
        """Index `corpus_file` into the (empty, temporary) folder `target`; returns facts for the manifest."""
        ...

    def open(self, index_dir: Path, manifest: dict[str, Any], options: dict[str, Any]) -> Retriever: ...
