"""overlap: a backend with no engine, as a worked example of a backend plug-in. Paragraphs are ranked by
the idf-weighted count of query words they contain; the index is one JSON file of each paragraph's words
and the corpus's document frequencies."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from mhindex.plugins import Backend, BackendContext, CorpusDir, Hit, option, search_within_titles

WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


@dataclass(frozen=True)
class OverlapOptions:
    # stage="index": fixed when the index is built and recorded in its manifest; "search": each time it opens.
    min_word_length: int = option(2, "Words shorter than this are not indexed.", min=1, stage="index")


class OverlapRetriever:
    def __init__(self, paragraphs: list[dict], frequencies: dict[str, int], minimum: int) -> None:
        self.paragraphs = paragraphs
        self.sets = [set(p["words"]) for p in paragraphs]
        total = max(1, len(paragraphs))
        self.idf = {w: math.log(1 + total / n) for w, n in frequencies.items()}
        self.minimum = minimum

    def _ranked(self, query: str, depth: int) -> list[Hit]:
        asked = {w for w in words(query) if len(w) >= self.minimum}
        scores = Counter({i: sum(self.idf.get(w, 0.0) for w in asked & s) for i, s in enumerate(self.sets)})
        best = [(i, score) for i, score in scores.most_common(depth) if score > 0]
        return [
            Hit(self.paragraphs[i]["id"], self.paragraphs[i]["title"], self.paragraphs[i]["text"], s) for i, s in best
        ]

    def search(self, query: str, k: int = 10, titles: Sequence[str] | None = None) -> list[Hit]:
        if titles is not None:
            return search_within_titles(lambda depth: self._ranked(query, depth), k, titles, len(self.paragraphs))
        return self._ranked(query, k)

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        return [self.search(query, k) for query in queries]

    def close(self) -> None:
        pass


class OverlapBackend(Backend):
    name = "overlap"
    title = "word overlap (example plug-in)"
    Settings = OverlapOptions

    def build(
        self, corpus: CorpusDir, target: Path, options: OverlapOptions, context: BackendContext
    ) -> dict[str, Any]:
        paragraphs, frequencies = [], Counter()
        with open(corpus.corpus, "rb") as lines:
            for line in lines:
                record = orjson.loads(line)
                kept = sorted(
                    w for w in words(f"{record['title']} {record['text']}") if len(w) >= options.min_word_length
                )
                frequencies.update(kept)
                paragraphs.append({"id": record["id"], "title": record["title"], "text": record["text"], "words": kept})
        (target / "index.json").write_bytes(orjson.dumps({"paragraphs": paragraphs, "frequencies": frequencies}))
        # `paragraphs` is checked against the corpus before the new index replaces an old one.
        return {"paragraphs": len(paragraphs)}

    def open(
        self,
        corpus: CorpusDir,
        index_dir: Path,
        manifest: dict[str, Any],
        options: OverlapOptions,
        context: BackendContext,
    ) -> OverlapRetriever:
        index = orjson.loads((index_dir / "index.json").read_bytes())
        return OverlapRetriever(index["paragraphs"], index["frequencies"], options.min_word_length)
