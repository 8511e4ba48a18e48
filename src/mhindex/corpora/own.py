"""Your own corpus, in the layouts researchers already hold: three datasets of their own.

- `jsonl`: JSON lines of `{"id", "contents"}` (Pyserini's JsonCollection; FlashRAG's and Search-R1's
  wiki-18, whose contents are `"Title"` on the first line, then the text), `{"id", "title", "text"}`,
  or BEIR's `{"_id", "title", "text"}`. Contents whose first line is not a quoted title are all text.
- `dpr`: DPR's `psgs_w100.tsv` (`id<TAB>text<TAB>title`, with its header; CSV quoting as DPR reads it).
- `beir`: a BEIR dataset's `corpus.jsonl`, `queries.jsonl` and `qrels/<split>.tsv`: the questions are
  the queries the qrels judge, their gold paragraphs those judged relevant (score > 0), their split the
  qrels file's name; their answers where `metadata.answer` gives them (BEIR's HotpotQA). Without answers `eval`
  scores retrieval alone on them; with both, answers and the ranking measures.

Questions for `jsonl` and `dpr`: JSON lines of `{"id", "question", "answers"}` (FlashRAG's
`golden_answers` too; optional `gold_ids`, `split`), told from paragraphs by their `question` field;
`dpr` also reads DPR's own `*.qa.csv` (`question<TAB>["answer", ...]`, ids `<file>-<row>` from 0).
Any input may be gzip, bz2 or zstd compressed (.gz, .bz2, .zst); all are streamed.

Ids are the source's. An id seen again keeps its first paragraph (the build warns and counts the
rest as duplicates); the same text under two ids is two paragraphs, since qrels and gold ids name
ids. Paragraph files are read before question files whatever the order given, so that gold ids can
be checked against the paragraphs kept.
"""

from __future__ import annotations

import ast
import csv
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from mhindex.corpora.dataset import Dataset
from mhindex.corpora.records import (
    COMPRESSED,
    FieldError,
    Paragraph,
    Question,
    RecordGuard,
    need,
    open_binary,
    optional,
    read_records,
)
from mhindex.errors import BadInput, UsageError
from mhindex.options import option

ID_TYPES = (str, int)


def _plain_name(path: Path) -> str:
    """The file's name without its compression suffix: `psgs_w100.tsv.gz` -> `psgs_w100.tsv`."""
    return path.stem if path.suffix in COMPRESSED else path.name


def record_id(record: dict, *keys: str) -> str:
    """The first of `keys` the record has, as a string (Pyserini and BEIR ids may be numbers)."""
    for key in keys:
        if key in record:
            value = need(record, key, ID_TYPES)
            if isinstance(value, bool) or str(value) == "":
                raise FieldError(f"field '{key}' should be a non-empty string or number")
            return str(value)
    raise FieldError(f"field '{keys[0]}' is missing")


TITLE_FROM = ("quoted", "first-line", "id", "none")


@dataclass(frozen=True)
class OwnSettings:
    title_from: str = option(
        "quoted",
        "jsonl, beir: the title of a paragraph its record gives none: quoted (a quoted first line of `contents`, as "
        "FlashRAG's wiki-18; else none), first-line (the first line, quoted or not), id, or none (untitled, "
        "and no warning).",
        choices=TITLE_FROM,
    )


def split_contents(contents: str, title_from: str = "quoted") -> tuple[str, str]:
    """FlashRAG's and Pyserini's wiki contents: `"Title"` on the first line, then the text (with
    `first-line`, the first line whether quoted or not)."""
    first, newline, rest = contents.partition("\n")
    quoted = len(first) >= 2 and first.startswith('"') and first.endswith('"')
    if newline and quoted and title_from in ("quoted", "first-line"):
        return first[1:-1], rest
    if newline and first.strip() and title_from == "first-line":
        return first.strip(), rest
    return "", contents


def paragraph_of(record: dict, title_from: str = "quoted") -> Paragraph:
    pid = record_id(record, "id", "_id", "docid")
    if "contents" in record:
        title, text = split_contents(need(record, "contents", str), title_from)
    else:
        title, text = optional(record, "title", str, ""), need(record, "text", str)
    return Paragraph(title or (pid if title_from == "id" else ""), text, id=pid)


def answers_of(record: dict) -> list[str]:
    for key in ("answers", "golden_answers", "answer"):
        value = record.get(key)
        if value is None:
            continue
        values = [value] if isinstance(value, str | int | float) and not isinstance(value, bool) else value
        if not isinstance(values, list) or not all(isinstance(v, str | int | float) for v in values):
            raise FieldError(f"field '{key}' should be a string or a list of strings")
        return [str(v) for v in values]
    return []


def question_of(record: dict, dataset: str) -> Question:
    gold = optional(record, "gold_ids", list, [])
    if not all(isinstance(g, ID_TYPES) and not isinstance(g, bool) for g in gold):
        raise FieldError("field 'gold_ids' should be a list of ids (strings or numbers)")
    extra = {"split": record["split"]} if isinstance(record.get("split"), str) else {}
    return Question(
        record_id(record, "id", "_id", "qid"),
        need(record, "question", str),
        answers_of(record),
        list(dict.fromkeys(str(g) for g in gold)),
        dataset,
        extra,
    )


def is_question(record: object) -> bool:
    return isinstance(record, dict) and "question" in record


def first_record(path: Path) -> object:
    """The first JSON line of a (possibly compressed) file, or None."""
    with open_binary(path) as handle:
        for line in handle:
            if line.strip():
                try:
                    return orjson.loads(line)
                except orjson.JSONDecodeError:
                    return None
    return None


def questions_last(inputs: list[Path]) -> list[Path]:
    """Paragraph files first, question files (JSON lines with `question`, DPR's .qa.csv) after."""

    def holds_questions(path: Path) -> bool:
        name = _plain_name(path)
        if name.endswith(".csv") or name.endswith(".tsv"):
            return name.endswith(".csv")
        return is_question(first_record(path))

    return sorted(inputs, key=holds_questions)  # sorted() is stable: each kind keeps the order given


# -- jsonl -------------------------------------------------------------------------------------------


def convert_jsonl_line(record: dict, title_from: str = "quoted") -> list:
    """One line of a paragraph or a question file (the workers of a large build call this)."""
    return [question_of(record, "jsonl")] if is_question(record) else [paragraph_of(record, title_from)]


def convert_jsonl(
    inputs: list[Path], guard: RecordGuard, on_bytes: Callable[[int], None], title_from: str = "quoted"
) -> Iterator:
    convert = functools.partial(convert_jsonl_line, title_from=title_from)
    for path in questions_last(inputs):
        for where, record in read_records(path, on_bytes):
            yield from guard.convert(path, where, record, convert)


# -- dpr ---------------------------------------------------------------------------------------------


def _text_lines(path: Path, on_bytes: Callable[[int], None]) -> Iterator[str]:
    with open_binary(path) as raw:
        for line in raw:
            on_bytes(len(line))
            yield line.decode("utf-8", errors="replace")


def dpr_passage(row: list[str], columns: dict[str, int]) -> list:
    if len(row) <= max(columns.values()):
        raise FieldError(f"expected {max(columns.values()) + 1} tab-separated fields (id, text, title), got {len(row)}")
    if not row[columns["id"]]:
        raise FieldError("field 'id' is empty")
    return [Paragraph(row[columns["title"]], row[columns["text"]], id=row[columns["id"]])]


def read_dpr_passages(path: Path, guard: RecordGuard, on_bytes: Callable[[int], None]) -> Iterator:
    """DPR's passages TSV, read with csv as DPR's own `load_passages` reads it (quoted text fields)."""
    rows = csv.reader(_text_lines(path, on_bytes), delimiter="\t")
    convert = functools.partial(dpr_passage, columns={"id": 0, "text": 1, "title": 2})
    for row in rows:
        where = f"line {rows.line_num}"
        if rows.line_num == 1 and row and row[0].strip().lower() == "id":
            names = [c.strip().lower() for c in row]
            if not {"id", "text", "title"} <= set(names):
                guard.fail(path, where, f"a header of id, text and title was expected, got {row}")
            else:
                convert = functools.partial(dpr_passage, columns={c: names.index(c) for c in ("id", "text", "title")})
            continue
        if row:
            yield from guard.convert(path, where, row, convert)


def dpr_question(row: list[str], qid: str) -> list:
    if len(row) < 2:
        raise FieldError(f"expected a question and a list of answers, tab-separated, got {len(row)} fields")
    try:
        answers = ast.literal_eval(row[1])
    except (ValueError, SyntaxError):
        answers = None
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise FieldError(f'the answers should be a list of strings such as ["Paris"], got {row[1][:60]!r}')
    return [Question(qid, row[0], answers, [], "dpr")]


def read_dpr_questions(path: Path, guard: RecordGuard, on_bytes: Callable[[int], None]) -> Iterator:
    """DPR's `*.qa.csv`: a question and a Python list of answers a row, no header, no ids."""
    rows = csv.reader(_text_lines(path, on_bytes), delimiter="\t")
    stem = _plain_name(path).removesuffix(".csv").removesuffix(".qa")
    for number, row in enumerate(rows):
        yield from guard.convert(
            path, f"line {rows.line_num}", row, functools.partial(dpr_question, qid=f"{stem}-{number}")
        )


def convert_dpr(inputs: list[Path], guard: RecordGuard, on_bytes: Callable[[int], None]) -> Iterator:
    for path in questions_last(inputs):
        name = _plain_name(path)
        if name.endswith(".tsv"):
            yield from read_dpr_passages(path, guard, on_bytes)
        elif name.endswith(".csv"):
            yield from read_dpr_questions(path, guard, on_bytes)
        else:
            for where, record in read_records(path, on_bytes):
                yield from guard.convert(path, where, record, lambda r: [question_of(r, "dpr")])


# -- beir --------------------------------------------------------------------------------------------


#: the largest relevance grade kept (trec_eval reads grades as C ints; orjson writes 64-bit whole numbers)
GRADE_LIMIT = 2**31 - 1


def qrel(fields: list[str], split: str, into: dict[str, dict]) -> list:
    """One judgement into `into`; it yields nothing of its own."""
    if len(fields) != 3:
        raise FieldError(f"expected query-id, corpus-id and score, tab-separated; got {len(fields)} fields")
    try:
        score = float(fields[2])
    except ValueError:
        raise FieldError(f"field 'score' should be a number, got {fields[2]!r}") from None
    if not score.is_integer():
        raise FieldError(f"field 'score' should be a whole relevance grade (0, 1, 2, ...), got {fields[2]!r}")
    if abs(score) > GRADE_LIMIT:  # JSON's and trec_eval's whole numbers: a grade past them cannot be written or scored
        raise FieldError(f"field 'score' should be a relevance grade of at most {GRADE_LIMIT:,}, got {fields[2]!r}")
    judged = into.setdefault(fields[0], {"split": split, "gold": [], "relevance": {}})
    if judged["split"] != split:  # one question has one split: its grades would mix two splits' judgements
        raise FieldError(
            f"query {fields[0]!r} is judged in both {judged['split']}.tsv and {split}.tsv; build one split at a time "
            "(-i corpus.jsonl -i queries.jsonl -i qrels/SPLIT.tsv)"
        )
    judged["relevance"][fields[1]] = int(score)  # graded, as the qrels give it: nDCG uses the grades
    if score > 0 and fields[1] not in judged["gold"]:
        judged["gold"].append(fields[1])
    return []


def read_qrels(path: Path, guard: RecordGuard, on_bytes: Callable[[int], None], into: dict[str, dict]) -> None:
    """BEIR's qrels TSV (`query-id<TAB>corpus-id<TAB>score`, with its header): relevant ids a query."""
    convert = functools.partial(qrel, split=_plain_name(path).removesuffix(".tsv"), into=into)
    for number, line in enumerate(_text_lines(path, on_bytes), start=1):
        fields = line.rstrip("\r\n").split("\t")
        if (number == 1 and fields[0] == "query-id") or not line.strip():
            continue
        guard.convert(path, f"line {number}", fields, convert)


def beir_files(given: list[Path]) -> list[Path]:
    """A BEIR dataset as BEIR's own loader takes it, its folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv,
    each maybe compressed); a corpus.jsonl given alone brings the queries and qrels beside it, said in a line."""
    from mhindex.ui import reporter

    def beside(folder: Path) -> list[Path]:
        found = [p for p in sorted(folder.iterdir()) if _plain_name(p) in ("queries.jsonl", "corpus.jsonl")]
        if (folder / "qrels").is_dir():
            found += [p for p in sorted((folder / "qrels").iterdir()) if _plain_name(p).endswith(".tsv")]
        return found

    files: list[Path] = []
    for path in given:
        if not path.is_dir():
            files.append(path)
            continue
        found = beside(path)
        if not any(_plain_name(p) == "corpus.jsonl" for p in found):
            raise BadInput(
                f"{path} holds no corpus.jsonl (BEIR's layout: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)"
            )
        files += found
    if len(given) == 1 and given[0].is_file() and _plain_name(given[0]) == "corpus.jsonl":
        others = [p for p in beside(given[0].parent) if p.resolve() != given[0].resolve()]
        if others:
            reporter().info(
                f"reading {', '.join(str(p.relative_to(given[0].parent)) for p in others)} beside {given[0].name} "
                "as well (BEIR's layout); give -i files one by one to leave any out"
            )
            files += others
    return files


def convert_beir(
    inputs: list[Path], guard: RecordGuard, on_bytes: Callable[[int], None], title_from: str = "quoted"
) -> Iterator:
    qrels = [p for p in inputs if _plain_name(p).endswith(".tsv")]
    queries = [p for p in inputs if p not in qrels and "quer" in _plain_name(p).lower()]
    judged: dict[str, dict] = {}
    for path in qrels:
        read_qrels(path, guard, on_bytes, judged)
    if queries and not qrels:
        raise UsageError("BEIR's queries need its qrels (-i qrels/test.tsv): they name each query's gold paragraphs")
    if qrels and not queries:
        raise UsageError(
            f"{qrels[0]}: BEIR's qrels judge the queries of its queries.jsonl, which is not among the inputs (-i "
            "queries.jsonl): without it there are no questions"
        )
    for path in (p for p in inputs if p not in qrels and p not in queries):
        for where, record in read_records(path, on_bytes):
            yield from guard.convert(path, where, record, lambda r: [paragraph_of(r, title_from)])

    def query(record: dict) -> list:
        qid = record_id(record, "_id", "id")
        if qid not in judged:
            return []
        extra = {"split": judged[qid]["split"], "relevance": judged[qid]["relevance"]}
        metadata = record.get("metadata")  # BEIR's HotpotQA gives each query its answer there
        answers = answers_of(metadata) if isinstance(metadata, dict) else []
        return [Question(qid, need(record, "text", str), answers, judged[qid]["gold"], "beir", extra)]

    for path in queries:
        for where, record in read_records(path, on_bytes):
            yield from guard.convert(path, where, record, query)


JSONL = Dataset(
    own_corpus=True,
    name="jsonl",
    description="Your own corpus: JSON lines of id and contents, or id, title and text (Pyserini, FlashRAG, BEIR)",
    convert=convert_jsonl,
    convert_line=convert_jsonl_line,
    Settings=OwnSettings,
    order_inputs=questions_last,
    given_ids=True,
)
DPR = Dataset(
    own_corpus=True,
    name="dpr",
    description="Your own corpus: DPR's passages TSV (psgs_w100.tsv), its .qa.csv or JSON-lines questions",
    convert=convert_dpr,
    order_inputs=questions_last,
    given_ids=True,
)
BEIR = Dataset(
    own_corpus=True,
    name="beir",
    description="A BEIR dataset: its folder (corpus.jsonl, queries.jsonl and qrels/<split>.tsv)",
    convert=convert_beir,
    expand_inputs=beir_files,
    Settings=OwnSettings,
    given_ids=True,
)
