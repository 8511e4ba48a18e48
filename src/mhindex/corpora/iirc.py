"""IIRC: `train.json`/`dev.json` (main passages with their questions) and
`context_articles.json` (lower-cased title -> article HTML), as IRCoT processes them.

Corpus: the paragraphs of the linked articles (HTML stripped, split on newlines, paragraphs of
10 words or fewer dropped). The main passage is not in the corpus: it is kept with each
question (`main_passage`), since IRCoT always puts it in the prompt. Gold paragraphs: for each
context snippet of a linked article, the article paragraph that contains it (white space
normalised), else the one sharing most of its words. Unanswerable questions are dropped, as in
IRCoT. The articles file (about 1 GB) is streamed; question files are read first, so that only
the articles they cite are held for gold mapping.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path

import ijson

from mhindex.corpora.dataset import Dataset
from mhindex.corpora.download import Download
from mhindex.corpora.records import (
    FieldError,
    Paragraph,
    Question,
    RecordGuard,
    first_char,
    need,
    optional,
    read_records,
    stamp_split,
)
from mhindex.errors import BadInput
from mhindex.files import CountingReader

NAME = "iirc"
MIN_WORDS = 11  # IRCoT keeps paragraphs of more than 10 words
_SPACE = re.compile(r"\s+")


class _TextOnly(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def article_paragraphs(html: str) -> list[str]:
    parser = _TextOnly()
    parser.feed(html)
    parser.close()
    text = "".join(parser.parts)
    return [line.strip() for line in text.split("\n") if len(line.split()) >= MIN_WORDS]


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def best_paragraph(paragraphs: list[str], snippet: str) -> str | None:
    """The paragraph holding the snippet; failing that, the one with most of its words (at least half)."""
    wanted = _normal(snippet)
    if not wanted:
        return None
    for paragraph in paragraphs:
        if wanted in _normal(paragraph):
            return paragraph
    words = set(wanted.split())
    best, best_share = None, 0.5
    for paragraph in paragraphs:
        share = len(words & set(_normal(paragraph).split())) / len(words)
        if share >= best_share:
            best, best_share = paragraph, share
    return best


class _Pending:
    """A question read from a question file, waiting for the articles to map its gold snippets."""

    __slots__ = ("question", "snippets")

    def __init__(self, question: Question, snippets: list[tuple[str, str]]) -> None:
        self.question = question
        self.snippets = snippets


def _answers(answer: dict) -> list[str] | None:
    kind = need(answer, "type", str, "answer")
    if kind == "none":
        return None
    if kind == "span":
        spans = need(answer, "answer_spans", list, "answer")
        return [need(span, "text", str, f"answer.answer_spans[{i}]").strip() for i, span in enumerate(spans)]
    if kind in ("binary", "value"):
        return [str(need(answer, "answer_value", (str, int, float), "answer")).strip()]
    raise FieldError(f"field 'answer.type' should be span, value, binary or none, got {kind!r}")


def _questions_of_passage(passage: dict) -> list:
    title = need(passage, "title", str).strip()
    text = need(passage, "text", str).strip()
    links = []
    for i, link in enumerate(optional(passage, "links", list, [])):
        links.append(need(link, "target", str, f"links[{i}]"))
    pending: list[_Pending | None] = []
    for i, raw in enumerate(need(passage, "questions", list)):
        at = f"questions[{i}]"
        question_text = need(raw, "question", str, at)
        answers = _answers(need(raw, "answer", dict, at))
        snippets = []
        for j, context in enumerate(optional(raw, "context", list, [], at)):
            source = need(context, "passage", str, f"{at}.context[{j}]").strip()
            if source != "main":
                snippets.append((source, need(context, "text", str, f"{at}.context[{j}]")))
        if answers is None:
            pending.append(None)  # unanswerable: dropped, as IRCoT does
            continue
        qid = (
            optional(raw, "qid", str)
            or hashlib.blake2b(f"{title}\n{question_text}".encode(), digest_size=8).hexdigest()
        )
        question = Question(
            id=qid,
            question=question_text,
            answers=answers,
            gold_ids=[],
            dataset=NAME,
            extra={
                "answer_type": raw["answer"]["type"],
                "main_passage": {"title": title, "text": text},
                "links": links,
            },
        )
        pending.append(_Pending(question, snippets))
    return pending


def _stream_articles(path: Path, on_bytes: Callable[[int], None]) -> Iterator[tuple[str, str]]:
    if first_char(path) != "{":
        raise BadInput(f"{path}: expected a JSON object mapping article titles to HTML")
    key = None
    with open(path, "rb") as raw:
        try:
            for key, html in ijson.kvitems(CountingReader(raw, on_bytes), ""):
                yield key, html
        except ijson.JSONError as error:
            after = f" after article {key!r}" if key is not None else ""
            reason = str(error).strip().splitlines()[0]
            raise BadInput(f"{path}: not valid JSON{after} ({reason})") from None


def convert(inputs: list[Path], guard: RecordGuard, on_bytes: Callable[[int], None]) -> Iterator:
    question_files = [p for p in inputs if first_char(p) == "["]
    article_files = [p for p in inputs if p not in question_files]
    if not article_files:
        raise BadInput("iirc needs context_articles.json among the inputs (the linked articles are the corpus)")

    pending: list[_Pending] = []
    for path in question_files:
        for where, record in read_records(path, on_bytes):
            for item in guard.convert(path, where, record, _questions_of_passage):
                if item is None:
                    guard.notes["unanswerable questions (IRCoT drops them)"] += 1
                else:
                    stamp_split(item.question, path)
                    pending.append(item)

    wanted = {source.lower() for p in pending for source, _ in p.snippets}
    # Article keys are lower-cased; links and contexts carry the real title, so use it when known.
    cased = {link.lower(): link for p in pending for link in p.question.extra["links"]}
    cased.update({source.lower(): source for p in pending for source, _ in p.snippets})
    held: dict[str, list[Paragraph]] = {}

    for path in article_files:
        for number, (key, html) in enumerate(_stream_articles(path, on_bytes)):
            if not isinstance(html, str):
                guard.fail(path, f"article {number} ({key!r})", "value should be the article's HTML as a string")
                continue
            title = cased.get(key, key)
            paragraphs = [Paragraph(title, text) for text in article_paragraphs(html)]
            if key in wanted:
                held[key] = paragraphs
            yield from paragraphs

    for item in pending:
        question = item.question
        for source, snippet in item.snippets:
            paragraphs = held.get(source.lower(), [])
            text = best_paragraph([p.text for p in paragraphs], snippet)
            if text is None:
                question.unmapped.append(f"{source}: {snippet[:60]}")
                continue
            gold = next(p.id for p in paragraphs if p.text == text)
            if gold not in question.gold_ids:
                question.gold_ids.append(gold)
        yield question


DATASET = Dataset(
    title="IIRC",
    name=NAME,
    description="IIRC: train and dev questions with the linked Wikipedia articles as corpus",
    convert=convert,
    release=(
        Download(
            "https://iirc-dataset.s3.us-west-2.amazonaws.com/iirc_train_dev.tgz", "iirc_train_dev.tgz", unpack=True
        ),
        Download(
            "https://iirc-dataset.s3.us-west-2.amazonaws.com/context_articles.tar.gz",
            "context_articles.tar.gz",
            unpack=True,
        ),
    ),
    release_inputs=("train.json", "dev.json", "context_articles.json"),
    samples=("dev.handmade.json", "context_articles.handmade.json"),
)
