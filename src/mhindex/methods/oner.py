"""OneR: one retrieval with the question (K paragraphs), then the reader (IRCoT's baseline). The
question is cleaned of its wh-words first, as IRCoT's release does for every BM25 query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mhindex.backends.base import Retriever
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Clock, Meter, Method, MethodContext, Query, Step
from mhindex.methods.queries import retrieval_query
from mhindex.methods.reader import Reader
from mhindex.methods.settings import CLEAN_QUERIES_HELP, ReaderSettings, demo_set
from mhindex.options import option


@dataclass(frozen=True)
class OneRSettings(ReaderSettings):
    k: int = option(15, "Paragraphs per retrieval (K).", flag="-k", min=1)
    clean_queries: bool = option(True, CLEAN_QUERIES_HELP, before=False)


class OneRetrieval(Method):
    name = "oner"
    title = "OneR"
    paper = "IRCoT's one-retrieval baseline (Trivedi et al., ACL 2023; StonyBrookNLP/ircot)"
    tables = {"IRCoT": {"OneR QA, Direct": {"reader": "direct"}, "OneR QA, CoT": {"reader": "cot"}}}
    Settings = OneRSettings

    settings: OneRSettings

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        return 1

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: OneRSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        self.k = settings.k
        self.clean = settings.clean_queries
        self.reader = Reader(lm, settings, demo_set(settings, context.dataset), True, context.dataset)

    def answer(self, query: Query) -> Answer:
        clock, meter = Clock(), Meter(self.lm)
        sent = retrieval_query(query.question, [], self.clean)  # IRCoT's release cleans OneR's query too
        hits = self.retriever.search(sent, self.k)
        step = Step("", sent, [h.id for h in hits], [h.title for h in hits], clock())
        pinned = [(query.main_passage["title"], query.main_passage["text"])] if query.main_passage else []
        read = self.reader.read(meter, query.question, pinned + [(h.title, h.text) for h in hits])
        retrieved = [{"id": h.id, "title": h.title} for h in hits]
        return Answer(
            query.id,
            query.question,
            read.answer,
            retrieved,
            [step],
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            clock(),
            read.output,
            self.name,
            details={"reader": read.record()},
        )
