"""OneR: one retrieval with the question (K paragraphs), then the reader (IRCoT's baseline)."""

from __future__ import annotations

from dataclasses import dataclass

from mhindex.methods.base import Answer, Clock, Meter, Method, MethodContext, Query, Step
from mhindex.methods.reader import Reader
from mhindex.methods.settings import ReaderSettings, demo_set
from mhindex.options import option


@dataclass(frozen=True)
class OneRSettings(ReaderSettings):
    k: int = option(15, "Paragraphs per retrieval (K).", flag="-k", min=1)


class OneRetrieval(Method):
    name = "oner"
    Settings = OneRSettings

    def __init__(self, retriever, lm, settings: OneRSettings, context: MethodContext) -> None:
        self.retriever = retriever
        self.lm = lm
        self.k = settings.k
        self.reader = Reader(lm, settings, demo_set(settings, context.dataset), with_context=True)

    def answer(self, query: Query) -> Answer:
        clock, meter = Clock(), Meter(self.lm)
        hits = self.retriever.search(query.question, self.k)
        step = Step("", query.question, [h.id for h in hits], [h.title for h in hits], clock())
        pinned = [(query.main_passage["title"], query.main_passage["text"])] if query.main_passage else []
        answer, reasoning = self.reader.read(meter, query.question, pinned + [(h.title, h.text) for h in hits])
        retrieved = [{"id": h.id, "title": h.title} for h in hits]
        return Answer(query.id, query.question, answer, retrieved, [step], meter.calls, meter.prompt_tokens, meter.completion_tokens, clock(), reasoning, self.name)
