"""Pivot: two retrievals and one reading, with no LM call between them.

The question retrieves K paragraphs; the title of the best one (the page the question most likely
bridges through) is added to the question for a second retrieval of K more, and IRCoT's reader answers
from both. A cheap two-hop baseline, and a worked example of a method plug-in: its settings, its
title, its trace and its answer, all in this one module.
"""

from __future__ import annotations

from dataclasses import dataclass

from mhindex.plugins import (
    Answer,
    Clock,
    Meter,
    Method,
    MethodContext,
    Query,
    Reader,
    ReaderSettings,
    Step,
    TraceStep,
    demo_set,
    option,
    trace_step,
)


@dataclass(frozen=True)
class PivotSettings(ReaderSettings):
    # Each field declared with option(...) is an option of `ask` and `eval`, checked and recorded in run.json.
    k: int = option(5, "Paragraphs per retrieval (Pivot makes two).", flag="-k", min=1)


class Pivot(Method):
    name = "pivot"
    title = "Pivot"
    paper = "an example plug-in (examples/mhindex-example-plugin)"
    # A row it adds to IRCoT's table (`eval --table IRCoT`): not one of the paper's, so shown apart and named so.
    tables = {"IRCoT": {"Pivot": {"k": 5}}}
    Settings = PivotSettings

    settings: PivotSettings

    def __init__(self, retriever, lm, settings: PivotSettings, context: MethodContext) -> None:
        super().__init__(retriever, lm, settings, context)
        self.reader = Reader(
            lm, settings, demo_set(settings, context.dataset), with_context=True, dataset=context.dataset
        )

    def answer(self, query: Query) -> Answer:
        clock, meter = Clock(), Meter(self.lm)
        first = self.retriever.search(query.question, self.settings.k)
        steps = [Step("", query.question, [h.id for h in first], [h.title for h in first], clock())]
        hits = list(first)
        if first:
            pivot = f"{query.question} {first[0].title}"
            seen = {h.id for h in first}
            second = [h for h in self.retriever.search(pivot, self.settings.k * 2) if h.id not in seen]
            second = second[: self.settings.k]
            steps.append(Step(f"pivot: {first[0].title}", pivot, [h.id for h in second], [h.title for h in second]))
            hits += second
        read = self.reader.read(meter, query.question, [(h.title, h.text) for h in hits])
        return Answer(
            query.id,
            query.question,
            read.answer,
            [{"id": h.id, "title": h.title} for h in hits],
            steps,
            meter.calls,
            meter.prompt_tokens,
            meter.completion_tokens,
            clock(),
            read.output,
            self.name,
            details={"reader": read.record(), "pivot": first[0].title if first else None},
        )

    @classmethod
    def trace_steps(cls, record: dict) -> list[TraceStep]:
        """The base trace (each retrieval and the reader), with the page it pivoted on first."""
        pivot = record.get("pivot")
        opening = [trace_step("Pivot", [["page", str(pivot)]])] if pivot else []
        return opening + super().trace_steps(record)
