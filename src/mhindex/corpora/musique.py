"""MuSiQue v1.0: `musique_ans_*` and `musique_full_*` JSON-lines files.

All files given go into one corpus, as in IRCoT. Gold paragraphs are those marked
`is_supporting`; answers are the answer plus its aliases; the hop count and the question
decomposition are kept, each hop with the id of its supporting paragraph (`paragraph_id`, for
training EfficientRAG's models from it), and as `gold_hops` (eval/hops.py). A question id seen in an earlier
file (the full variant repeats the answerable questions) is kept once by the corpus builder.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

from mhindex.corpora.dataset import Dataset
from mhindex.corpora.download import Download
from mhindex.corpora.records import Paragraph, Question, RecordGuard, need, optional, read_records, strings

NAME = "musique"


def convert_question(record: dict) -> list:
    paragraphs, gold = [], []
    for i, raw in enumerate(need(record, "paragraphs", list)):
        if (
            type(raw) is dict
            and type(title := raw.get("title")) is str
            and type(text := raw.get("paragraph_text")) is str
        ):
            supporting = raw.get("is_supporting")
        else:  # something is wrong: the careful reading names the field
            at = f"paragraphs[{i}]"
            title, text, supporting = need(raw, "title", str, at), need(raw, "paragraph_text", str, at), None
        if supporting is not None and type(supporting) is not bool:
            supporting = optional(raw, "is_supporting", bool, False, f"paragraphs[{i}]")
        paragraph = Paragraph(title, text)
        paragraphs.append(paragraph)
        if supporting and paragraph.id not in gold:
            gold.append(paragraph.id)
    qid = need(record, "id", str)
    answer = optional(record, "answer", str)
    answers = ([answer] if answer else []) + [
        a for a in strings(record, "answer_aliases", required=False) if a != answer
    ]
    extra: dict = {}
    if hops := re.match(r"(\d+)hop", qid):
        extra["hops"] = int(hops.group(1))
    if isinstance(decomposition := record.get("question_decomposition"), list):
        extra["decomposition"] = [_with_paragraph_id(hop, paragraphs) for hop in decomposition]
        extra["gold_hops"] = gold_hops(extra["decomposition"])
    if isinstance(record.get("answerable"), bool):
        extra["answerable"] = record["answerable"]
    question = Question(qid, need(record, "question", str), answers, gold, NAME, extra)
    return [*paragraphs, question]


def gold_hops(decomposition: list) -> list[dict]:
    """The hops in order, each its sub-question, its answer and its supporting paragraph (eval/hops.py); a hop
    whose paragraph the release does not name has none."""
    return [
        {
            "question": hop.get("question") if isinstance(hop.get("question"), str) else "",
            "answer": hop.get("answer") if isinstance(hop.get("answer"), str) else "",
            "paragraph_ids": [hop["paragraph_id"]] if "paragraph_id" in hop else [],
        }
        for hop in decomposition
        if isinstance(hop, dict)
    ]


def _with_paragraph_id(hop, paragraphs: list[Paragraph]):
    support = hop.get("paragraph_support_idx") if isinstance(hop, dict) else None
    if type(support) is not int or not 0 <= support < len(paragraphs):
        return hop
    return {**hop, "paragraph_id": paragraphs[support].id}


def convert(inputs: list[Path], guard: RecordGuard, on_bytes: Callable[[int], None]) -> Iterator:
    for path in inputs:
        for where, record in read_records(path, on_bytes):
            yield from guard.convert(path, where, record, convert_question)


DATASET = Dataset(
    title="MuSiQue",
    answer_f1="squad",
    name=NAME,
    description="MuSiQue v1.0: the ans and full variants of train, dev and test",
    convert=convert,
    release=(
        Download(
            "https://drive.usercontent.google.com/download?id=1tGdADlNjWFaHLeZZGShh2IRcpO6Lv24h"
            "&export=download&confirm=t",
            "musique_v1.0.zip",
            unpack=True,
        ),
    ),
    release_inputs=tuple(f"musique_{v}_v1.0_{s}.jsonl" for v in ("ans", "full") for s in ("train", "dev", "test")),
    samples=("musique_ans_v1.0_dev.sample.jsonl",),
    convert_line=convert_question,
)
