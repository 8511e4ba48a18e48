"""2WikiMultihopQA (the `data_ids` release: train, dev, test JSON arrays).

Same context layout as HotpotQA; gold paragraphs by supporting-fact titles; `type` and
`evidences` (the gold reasoning triples) are kept with each question.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

from mhindex.corpora.hotpotqa import context_question
from mhindex.corpora.records import RecordGuard, read_records

NAME = "2wikimultihopqa"


def convert_question(record: dict) -> list:
    return context_question(record, NAME, ("type", "evidences"))


def convert(inputs: list[Path], guard: RecordGuard, on_bytes: Callable[[int], None]) -> Iterator:
    for path in inputs:
        for where, record in read_records(path, on_bytes):
            yield from guard.convert(path, where, record, convert_question)
