"""NoR: no retrieval; the reader answers from the model's own knowledge (IRCoT's baseline)."""

from __future__ import annotations

from typing import Any

from mhindex.backends.base import Retriever
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Clock, Meter, Method, MethodContext, Query
from mhindex.methods.reader import Reader
from mhindex.methods.settings import ReaderSettings, demo_set


class NoRetrieval(Method):
    name = "nor"
    title = "NoR"
    paper = "IRCoT's no-retrieval baseline (Trivedi et al., ACL 2023; StonyBrookNLP/ircot)"
    tables = {"IRCoT": {"ZeroR QA, Direct": {"reader": "direct"}, "ZeroR QA, CoT": {"reader": "cot"}}}
    needs_retriever = False

    @classmethod
    def most_calls(cls, settings: Any) -> int | None:
        return 1

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: ReaderSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        self.reader = Reader(lm, settings, demo_set(settings, context.dataset), False, context.dataset)

    def answer(self, query: Query) -> Answer:
        clock, meter = Clock(), Meter(self.lm)
        pinned = [(query.main_passage["title"], query.main_passage["text"])] if query.main_passage else []
        read = self.reader.read(meter, query.question, pinned)
        return Answer(
            query.id,
            query.question,
            read.answer,
            [],
            [],
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            clock(),
            read.output,
            self.name,
            details={"reader": read.record()},
        )
