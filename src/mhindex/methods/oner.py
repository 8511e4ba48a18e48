"""OneR: one retrieval with the question (K paragraphs), then the reader (IRCoT's baseline)."""

from __future__ import annotations

from mhindex.methods.base import Answer, Clock, Method, Meter, Query, Step
from mhindex.methods.reader import Reader

DEFAULT_K = 15


class OneRetrieval(Method):
    name = "oner"

    def __init__(self, retriever, lm, settings, demo_set: str) -> None:
        self.retriever = retriever
        self.lm = lm
        self.k = min(settings.k or DEFAULT_K, settings.max_paragraphs)
        self.reader = Reader(lm, settings, demo_set, with_context=True)

    def answer(self, query: Query) -> Answer:
        clock, meter = Clock(), Meter(self.lm)
        hits = self.retriever.search(query.question, self.k)
        step = Step("", query.question, [h.id for h in hits], [h.title for h in hits], clock())
        pinned = [(query.main_passage["title"], query.main_passage["text"])] if query.main_passage else []
        answer, reasoning = self.reader.read(meter, query.question, pinned + [(h.title, h.text) for h in hits])
        retrieved = [{"id": h.id, "title": h.title} for h in hits]
        return Answer(query.id, query.question, answer, retrieved, [step], meter.calls, meter.prompt_tokens, meter.completion_tokens, clock(), reasoning, self.name)
