"""HotpotQA: question files (train, dev distractor, dev/test fullwiki) and the Wikipedia
abstracts release (a tar of bz2 JSON-lines files, one page a line), as IRCoT uses them.

Corpus: every abstract and every context paragraph (sentences joined with spaces, as IRCoT
does); the same paragraph under many questions is kept once by the corpus builder.
Gold paragraphs: those of the question's context whose titles appear in `supporting_facts`; its hops
(`gold_hops`, for eval/hops.py): one a supporting page, in the order of the facts.
"""

from __future__ import annotations

import bz2
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

from mhindex.corpora.dataset import Dataset
from mhindex.corpora.download import Download
from mhindex.corpora.records import (
    FieldError,
    Paragraph,
    Question,
    RecordGuard,
    checked_stream,
    first_char,
    join_sentences,
    need,
    optional,
    read_records,
    strings,
)
from mhindex.errors import BadInput
from mhindex.files import CountingReader, parse_jsonl

NAME = "hotpotqa"


def context_paragraphs(record: dict) -> list[Paragraph]:
    """[[title, [sentence, ...]], ...] to paragraphs; shared with 2WikiMultihopQA's identical layout."""
    paragraphs = []
    for i, entry in enumerate(need(record, "context", list)):
        if not (
            isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], list)
        ):
            raise FieldError(f"field 'context[{i}]' should be [title, [sentences]]")
        for j, sentence in enumerate(entry[1]):
            if not isinstance(sentence, str):
                raise FieldError(f"field 'context[{i}][1][{j}]' should be a string")
        paragraphs.append(Paragraph(entry[0], join_sentences(entry[1])))
    return paragraphs


def supporting_titles(record: dict) -> list[str]:
    titles: list[str] = []
    for i, fact in enumerate(optional(record, "supporting_facts", list, [])):
        if not (isinstance(fact, list) and len(fact) >= 1 and isinstance(fact[0], str)):
            raise FieldError(f"field 'supporting_facts[{i}]' should be [title, sentence index]")
        if fact[0] not in titles:
            titles.append(fact[0])
    return titles


def gold_by_titles(paragraphs: list[Paragraph], titles: list[str]) -> tuple[list[str], list[str]]:
    """Ids of the context paragraphs named by `titles`, and the titles that name none."""
    by_title: dict[str, str] = {}
    for paragraph in paragraphs:
        by_title.setdefault(paragraph.title, paragraph.id)
    gold = [by_title[t] for t in titles if t in by_title]
    return gold, [t for t in titles if t not in by_title]


def context_question(record: dict, dataset: str, keep: tuple[str, ...]) -> list:
    """A record in HotpotQA's layout (also 2WikiMultihopQA's): its context paragraphs, then the
    question with gold ids from the supporting-fact titles and the fields named in `keep`."""
    paragraphs = context_paragraphs(record)
    titles = supporting_titles(record)
    gold, unmapped = gold_by_titles(paragraphs, titles)
    answer = optional(record, "answer", str)
    # One hop a supporting page, in the order the release lists its facts (a comparison's two are parallel).
    pages = [{"title": title, "paragraph_ids": gold_by_titles(paragraphs, [title])[0]} for title in titles]
    hops = {"gold_hops": pages} if pages else {}
    question = Question(
        id=need(record, "_id", str),
        question=need(record, "question", str),
        answers=[answer] if answer is not None else [],
        gold_ids=gold,
        dataset=dataset,
        extra={k: record[k] for k in keep if isinstance(record.get(k), (str, list))} | hops,
        unmapped=unmapped,
    )
    return [*paragraphs, question]


def convert_question(record: dict) -> list:
    return context_question(record, NAME, ("type", "level"))


def convert_abstract(record: dict) -> list:
    sentences = strings(record, "text")
    text = join_sentences(sentences)
    if not text:
        return []
    url = optional(record, "url", str)
    return [Paragraph(need(record, "title", str), text, {"url": url} if url else None)]


def _abstract_lines(label: str, stream, guard: RecordGuard) -> Iterator:
    for number, record, problem in parse_jsonl(stream):
        yield from guard.convert(label, f"line {number}", FieldError(problem) if problem else record, convert_abstract)


def _abstracts_archive(path: Path, guard: RecordGuard, on_bytes: Callable[[int], None]) -> Iterator:
    """Stream the release tar: never unpacked to disk, never held in memory."""
    with open(path, "rb") as raw:
        try:
            with tarfile.open(fileobj=CountingReader(raw, on_bytes), mode="r|*") as archive:
                for member in archive:
                    if not (member.isfile() and member.name.endswith(".bz2")):
                        continue
                    inner = archive.extractfile(member)
                    if inner is None:
                        continue
                    with bz2.open(inner, "rb") as stream:
                        yield from _abstract_lines(f"{path}:{member.name}", stream, guard)
        except (tarfile.TarError, OSError, EOFError) as error:
            raise BadInput(f"{path}: not a readable tar archive of bz2 files ({error})") from None


def is_archive(path: Path) -> bool:
    return any(path.name.endswith(s) for s in (".tar", ".tar.bz2", ".tbz2", ".tar.gz", ".tgz"))


def convert(inputs: list[Path], guard: RecordGuard, on_bytes: Callable[[int], None]) -> Iterator:
    for path in inputs:
        if not path.is_file():
            raise BadInput(f"{path}: no such file")
        if is_archive(path):
            yield from _abstracts_archive(path, guard, on_bytes)
        elif path.suffix == ".bz2" and first_char(path) == "{":
            with (
                open(path, "rb") as raw,
                checked_stream(bz2.open(CountingReader(raw, on_bytes)), path, "bzip2") as stream,
            ):
                yield from _abstract_lines(str(path), stream, guard)
        else:
            for where, record in read_records(path, on_bytes):
                yield from guard.convert(path, where, record, convert_question)


_HOTPOT = "http://curtis.ml.cmu.edu/datasets/hotpot/"
DATASET = Dataset(
    title="HotpotQA",
    name=NAME,
    description="HotpotQA: train and dev-distractor questions; corpus from the Wikipedia abstracts release",
    convert=convert,
    release=(
        # Sizes and SHA-1 sums as published with GluonNLP's dataset scripts.
        Download(
            _HOTPOT + "hotpot_train_v1.1.json",
            "hotpot_train_v1.1.json",
            "sha1:08c42431c22984f362e94de0e635c7b858c3cff0",
            566426227,
        ),
        Download(
            _HOTPOT + "hotpot_dev_distractor_v1.json",
            "hotpot_dev_distractor_v1.json",
            "sha1:825b6cfc34a61db41e82bbb14d978d5a834925f8",
            46320117,
        ),
        Download(
            "https://nlp.stanford.edu/projects/hotpotqa/enwiki-20171001-pages-meta-current-withlinks-abstracts.tar.bz2",
            "enwiki-20171001-pages-meta-current-withlinks-abstracts.tar.bz2",
        ),
    ),
    release_inputs=(
        "hotpot_train_v1.1.json",
        "hotpot_dev_distractor_v1.json",
        "enwiki-20171001-pages-meta-current-withlinks-abstracts.tar.bz2",
    ),
    samples=("hotpot_dev_distractor_v1.sample.json",),
)
