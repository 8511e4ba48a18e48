"""2WikiMultihopQA (the `data_ids` release: train, dev, test JSON arrays).

Same context layout as HotpotQA; gold paragraphs by supporting-fact titles; `type` and
`evidences` (the gold reasoning triples) are kept with each question.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

from mhindex.corpora.hotpotqa import context_paragraphs, gold_by_titles, supporting_titles
from mhindex.corpora.records import Question, RecordGuard, need, optional, read_records

NAME = "2wikimultihopqa"


def convert_question(record: dict) -> list:
    paragraphs = context_paragraphs(record)
    gold, unmapped = gold_by_titles(paragraphs, supporting_titles(record))
    answer = optional(record, "answer", str)
    extra = {}
    if isinstance(record.get("type"), str):
        extra["type"] = record["type"]
    if isinstance(record.get("evidences"), list):
        extra["evidences"] = record["evidences"]
    question = Question(
        id=need(record, "_id", str),
        question=need(record, "question", str),
        answers=[answer] if answer is not None else [],
        gold_ids=gold,
        dataset=NAME,
        extra=extra,
        unmapped=unmapped,
    )
    return [*paragraphs, question]


def convert(inputs: list[Path], guard: RecordGuard, on_bytes: Callable[[int], None]) -> Iterator:
    for path in inputs:
        for where, record in read_records(path, on_bytes):
            yield from guard.convert(path, where, record, convert_question)
