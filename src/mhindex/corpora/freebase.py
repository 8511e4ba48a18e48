"""Freebase subgraphs -> passages, one per head entity, as KD-CoT retrieves them.

KD-CoT linearises Freebase the way DecAF does (`Knowledge/process_freebase.py` and
`linearize.py` in awslabs/decode-answer-logical-form): a head entity's out-edges become one
passage, each triple the sentence `"{head} {relation} {tail} ."` with the relation's `.` and `_`
turned into spaces, and a passage over 100 words is cut into 100-word chunks (split on single
spaces, as DecAF does) that keep the entity as title.

CVT nodes (unnamed `m.`/`g.` ids: the node between a person and a sibling, an actor and a
film role) are where the two ways differ, chosen with `cvt`:

- `collapse` (the default): `A --people.person.sibling_s--> m.0gx --people.sibling_relationship.sibling--> B`
  becomes one sentence of A's passage, `A people person sibling s people sibling relationship sibling B .`,
  with every named fact of the CVT (joined by ` , `; the edge back to A and edges into further
  CVTs are left out). A CVT that no named entity points to keeps a passage of its own, as in DecAF.
- `decaf`: DecAF exactly. Edges into CVTs are dropped, and each CVT's out-edges form a passage
  titled with its id whose sentences have no subject (`" {relation} {tail} ."`), so that "A's
  sibling is B" is in no passage that names A.

What DecAF has and these inputs lack: entity MIDs (titles are names, not "name mid"), and
Freebase's topic/type lines, which need the whole dump.

Inputs, told apart by their shape, streamed record by record (RoG-cwq is 11 GB uncompressed):
- RoG's per-question subgraphs (`rmanluo/RoG-webqsp`, `RoG-cwq`), parquet or JSON lines:
  `{id, question, answer, q_entity, a_entity, graph: [[head, relation, tail], ...]}`;
- reasoning-path strings `A -> rel -> B -> rel -> C` in a field `input` (GNN-RAG / RoG output);
- named triples: `crucial_triples` (`mid_crucial_triples` hold MIDs only and are not used:
  passages need names);
- the official question files, for questions and answers: WebQSP (`{"Questions": [...]}` or a
  bare list; answers `Parses[].Answers[].EntityName`, else `AnswerArgument`) and CWQ (`answers:
  [{answer, answer_id, aliases}]`, or `answer` as a name, a list of names or a list of MIDs).
Files of one dataset may be given together: the facts about one question id are merged.

Triples are deduplicated on disk (SQLite in a temporary folder) and grouped by head there, so
memory holds the questions, not the graph. Gold passages are the chunks whose sentences link a
question entity (or, with `decaf`, a CVT under it) to an answer entity.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from mhindex.corpora.dataset import Dataset
from mhindex.corpora.download import Download
from mhindex.corpora.records import (
    FieldError,
    Paragraph,
    Question,
    RecordGuard,
    need,
    open_binary,
    optional,
    read_json_items,
    read_records,
    split_of,
)
from mhindex.errors import BadInput, UsageError
from mhindex.options import option
from mhindex.requirements import package

CVT_MODES = ("collapse", "decaf")
CHUNK_WORDS = 100  # DecAF's passage length
IGNORED_RELATIONS = frozenset({"type.object.name"})  # DecAF's filter: the name is the title already
_UNNAMED = re.compile(r"^[mg]\.[0-9a-z_]+$")
_RELATION = re.compile(r"^[\w-]+(\.[\w-]+)+$")


def is_cvt(node: str) -> bool:
    """An unnamed node: a Freebase id where a name should be (CVTs, and entities with no name)."""
    return bool(_UNNAMED.match(node))


def relation_words(relation: str) -> str:
    return relation.replace(".", " ").replace("_", " ")


@dataclass
class QuestionFacts:
    """What the input files say about one question; several files may add to it."""

    id: str
    question: str = ""
    answers: list[str] = field(default_factory=list)
    answer_ids: list[str] = field(default_factory=list)
    q_entities: list[str] = field(default_factory=list)
    a_entities: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def merge(self, other: QuestionFacts) -> None:
        self.question = self.question or other.question
        for mine, theirs in (
            (self.answers, other.answers),
            (self.answer_ids, other.answer_ids),
            (self.q_entities, other.q_entities),
            (self.a_entities, other.a_entities),
        ):
            mine.extend(x for x in theirs if x not in mine)
        for key, value in other.extra.items():
            self.extra.setdefault(key, value)


# -- reading one record ------------------------------------------------------------------------


def _names(values: Any, at: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        raise FieldError(f"field '{at}' should be a list of names")
    return [v.strip() for v in values if isinstance(v, str) and v.strip()]


def _split_answers(names: list[str]) -> tuple[list[str], list[str]]:
    """Answer names, and the answers that are MIDs (ChatKBQA's CWQ copy gives only those)."""
    return [n for n in names if not is_cvt(n)], [n for n in names if is_cvt(n)]


def _triples(rows: Any, at: str) -> list[tuple[str, str, str]]:
    if not isinstance(rows, list):
        raise FieldError(f"field '{at}' should be a list of [head, relation, tail]")
    triples = []
    for i, row in enumerate(rows):
        if not (isinstance(row, list | tuple) and len(row) == 3 and all(isinstance(x, str) for x in row)):
            raise FieldError(f"field '{at}[{i}]' should be [head, relation, tail], three strings")
        head, relation, tail = (x.strip() for x in row)
        if head and relation and tail:
            triples.append((head, relation, tail))
    return triples


def path_triples(text: str) -> list[tuple[str, str, str]]:
    """Triples of the `A -> rel -> B -> rel -> C` lines in a prompt; other lines are ignored."""
    triples: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(" -> ")]
        if len(parts) < 3 or len(parts) % 2 == 0 or not all(_RELATION.match(r) for r in parts[1::2]):
            continue
        triples.extend(
            (parts[i], parts[i + 1], parts[i + 2]) for i in range(0, len(parts) - 2, 2) if parts[i] and parts[i + 2]
        )
    return triples


def _webqsp_answers(record: dict) -> list[str]:
    answers = []
    for p, parse in enumerate(need(record, "Parses", list)):
        for a, answer in enumerate(optional(parse, "Answers", list, [], f"Parses[{p}]")):
            at = f"Parses[{p}].Answers[{a}]"
            name = optional(answer, "EntityName", str, None, at) or optional(answer, "AnswerArgument", str, "", at)
            if name.strip() and name.strip() not in answers:
                answers.append(name.strip())
    return answers


def read_record(record: Any) -> tuple[QuestionFacts | None, list[tuple[str, str, str]]]:
    """The question facts and the triples of one input record, whatever its source."""
    if not isinstance(record, dict):
        raise FieldError("a record should be a JSON object")
    triples: list[tuple[str, str, str]] = []
    if "graph" in record:  # RoG
        triples = _triples(record["graph"], "graph")
    elif isinstance(record.get("input"), str) and " -> " in record["input"]:  # reasoning paths
        triples = path_triples(record["input"])
    elif "crucial_triples" in record:
        triples = _triples(record["crucial_triples"], "crucial_triples")
    elif not any(k in record for k in ("Parses", "answers", "answer", "question", "RawQuestion")):
        raise FieldError(
            "not a WebQSP, CWQ or RoG record: expected 'graph', paths in 'input', 'crucial_triples', 'Parses' "
            "or 'answers'"
        )

    qid = record.get("QuestionId", record.get("ID", record.get("id")))
    if qid is None:
        return None, triples  # a bare subgraph: passages only
    if not isinstance(qid, str | int):
        raise FieldError("field 'id' should be a string")
    facts = QuestionFacts(str(qid))
    facts.question = (optional(record, "RawQuestion", str) or optional(record, "question", str) or "").strip()
    if "Parses" in record:  # official WebQSP
        facts.answers = _webqsp_answers(record)
        facts.q_entities = _names(
            [optional(p, "TopicEntityName", str) for p in record["Parses"] if isinstance(p, dict)],
            "Parses[].TopicEntityName",
        )
    if isinstance(record.get("answers"), list):  # official CWQ
        for i, answer in enumerate(record["answers"]):
            at = f"answers[{i}]"
            if isinstance(answer, str):
                names, ids = _split_answers([answer])
                facts.answers += names
                facts.answer_ids += ids
                continue
            facts.answers += _names(optional(answer, "answer", str, None, at), f"{at}.answer")
            facts.answers += _names(optional(answer, "aliases", list, [], at), f"{at}.aliases")
            facts.answer_ids += _names(optional(answer, "answer_id", str, None, at), f"{at}.answer_id")
    for key in ("answer", "ground_truth"):  # RoG, GNN-RAG, ToG and GraSP copies
        names, ids = _split_answers(_names(record.get(key), key))
        facts.answers += names
        facts.answer_ids += ids
    facts.answers = list(dict.fromkeys(facts.answers))
    facts.answer_ids = list(dict.fromkeys(facts.answer_ids))
    facts.q_entities += _names(record.get("q_entity"), "q_entity")
    if isinstance(record.get("topic_entity"), dict):
        facts.q_entities += _names(list(record["topic_entity"].values()), "topic_entity")
    if "input" in record and triples:  # reasoning paths start at the question's entities
        facts.q_entities += [
            line.split(" -> ")[0].strip() for line in record["input"].splitlines() if path_triples(line)
        ]
    facts.q_entities = [e for e in dict.fromkeys(facts.q_entities) if e and not is_cvt(e)]
    facts.a_entities = [e for e in dict.fromkeys(_names(record.get("a_entity"), "a_entity")) if not is_cvt(e)]
    for key in ("compositionality_type", "webqsp_ID"):
        if isinstance(record.get(key), str):
            facts.extra[key] = record[key]
    return facts, triples


# -- reading the files -------------------------------------------------------------------------


def _is_parquet(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(4) == b"PAR1"


def read_parquet(
    path: Path, on_bytes: Callable[[int], None] | None = None, batch_rows: int = 64
) -> Iterator[tuple[str, Any]]:
    """Rows of a parquet file, a few at a time (a RoG row carries a whole subgraph)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError(f"{path}: reading parquet needs pyarrow: pip install 'mhindex[freebase]'") from None
    source = pq.ParquetFile(path)
    size, groups = path.stat().st_size, max(1, source.metadata.num_row_groups)
    row = 0
    for group in range(source.metadata.num_row_groups):
        for batch in source.iter_batches(batch_size=batch_rows, row_groups=[group]):
            for record in batch.to_pylist():
                yield f"row {row}", record
                row += 1
        if on_bytes:
            on_bytes(size // groups)


def _wrapped_questions(path: Path) -> bool:
    """WebQSP's official file: one JSON object holding `Questions`, usually over many lines."""
    import orjson

    with open_binary(path) as handle:
        first = handle.readline()
    if not first.lstrip().startswith(b"{"):
        return False
    try:
        parsed = orjson.loads(first)
    except orjson.JSONDecodeError:
        return True  # an object that spans lines: not JSON lines
    return isinstance(parsed, dict) and "Questions" in parsed


def read_input(path: Path, on_bytes: Callable[[int], None] | None = None) -> Iterator[tuple[str, Any]]:
    if not path.is_file():
        raise BadInput(f"{path}: no such file")
    if _is_parquet(path):
        yield from read_parquet(path, on_bytes)
    elif _wrapped_questions(path):
        yield from read_json_items(path, on_bytes, "Questions.item", "Questions[{}]")
    else:
        yield from read_records(path, on_bytes)


# -- the triple store and the passages ---------------------------------------------------------


class TripleStore:
    """Distinct triples on disk, in first-seen order within each head."""

    def __init__(self, folder: Path) -> None:
        self.db = sqlite3.connect(folder / "triples.sqlite")
        self.db.executescript(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA temp_store=FILE;"
            "CREATE TABLE triples(head TEXT, relation TEXT, tail TEXT, head_unnamed INTEGER, UNIQUE(head, "
            "relation, tail));"
        )

    def add(self, triples: list[tuple[str, str, str]]) -> None:
        self.db.executemany(
            "INSERT OR IGNORE INTO triples VALUES (?, ?, ?, ?)",
            ((h, r, t, is_cvt(h)) for h, r, t in triples if r not in IGNORED_RELATIONS),
        )

    def finish_loading(self) -> None:
        self.db.execute("CREATE INDEX tails ON triples(tail)")

    def by_head(self) -> Iterator[tuple[str, list[tuple[str, str]]]]:
        rows = self.db.execute("SELECT head, relation, tail FROM triples ORDER BY head, rowid")
        for head, group in groupby(rows, key=lambda row: row[0]):
            yield head, [(r, t) for _, r, t in group]

    def edges(self, head: str) -> list[tuple[str, str]]:
        return self.db.execute("SELECT relation, tail FROM triples WHERE head = ? ORDER BY rowid", (head,)).fetchall()

    def named_parents(self, node: str) -> list[str]:
        return [
            h
            for (h,) in self.db.execute(
                "SELECT DISTINCT head FROM triples WHERE tail = ? AND head_unnamed = 0", (node,)
            )
        ]

    def close(self) -> None:
        self.db.close()


@dataclass
class Sentence:
    text: str
    tails: set[str]  # the named nodes it links its subject to (lower case)


def entity_sentences(
    head: str, edges: list[tuple[str, str]], store: TripleStore, cvt: str, notes: dict
) -> list[Sentence]:
    """The sentences of a named head's passage."""
    sentences = []
    for relation, tail in edges:
        if not is_cvt(tail):
            sentences.append(Sentence(f"{head} {relation_words(relation)} {tail} .", {tail.lower()}))
            continue
        if cvt == "decaf":
            continue  # DecAF drops edges into CVTs
        behind = store.edges(tail)
        facts = [(r, t) for r, t in behind if t != head and not is_cvt(t)]
        nested = sum(1 for _, t in behind if is_cvt(t))
        if nested:
            notes["edges between two CVTs"] = notes.get("edges between two CVTs", 0) + nested
        if facts:
            said = " , ".join(f"{relation_words(r)} {t}" for r, t in facts)
            sentences.append(Sentence(f"{head} {relation_words(relation)} {said} .", {t.lower() for _, t in facts}))
    return sentences


def cvt_sentences(edges: list[tuple[str, str]]) -> list[Sentence]:
    """DecAF's sentences for a CVT's own passage: no subject (the empty name joined with a space)."""
    return [Sentence(f" {relation_words(r)} {t} .", {t.lower()}) for r, t in edges if not is_cvt(t)]


def chunk(sentences: list[Sentence]) -> list[tuple[str, set[str]]]:
    """DecAF's 100-word chunks of the joined sentences, each with the tails of the sentences it holds part of."""
    words = " ".join(s.text for s in sentences).split(" ")
    chunks: list[tuple[str, set[str]]] = [
        (" ".join(words[i : i + CHUNK_WORDS]), set()) for i in range(0, len(words), CHUNK_WORDS)
    ]
    start = 0
    for sentence in sentences:
        end = start + len(sentence.text.split(" "))
        for c in range(start // CHUNK_WORDS, (end - 1) // CHUNK_WORDS + 1):
            chunks[c][1].update(sentence.tails)
        start = end  # the joining space splits into no extra word
    return chunks


# -- the converter -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FreebaseSettings:
    cvt: str = option(
        "collapse",
        "webqsp, cwq: CVT nodes collapsed into their parent's passage (collapse), or kept as DecAF does, in "
        "subject-less passages of their own (decaf).",
        choices=CVT_MODES,
    )


def convert(
    inputs: list[Path], guard: RecordGuard, on_bytes: Callable[[int], None], *, dataset: str, cvt: str = "collapse"
) -> Iterator:
    if cvt not in CVT_MODES:
        raise UsageError(f"--cvt {cvt}: choose one of {', '.join(CVT_MODES)}")
    questions: dict[str, QuestionFacts] = {}
    with tempfile.TemporaryDirectory(prefix="mhindex-freebase-") as folder:
        store = TripleStore(Path(folder))
        try:
            for path in inputs:
                for where, record in read_input(path, on_bytes):
                    for facts, triples in guard.convert(path, where, record, lambda r: [read_record(r)]):
                        store.add(triples)
                        if facts is not None:
                            if (split := split_of(path)) is not None and "split" not in facts.extra:
                                facts.extra["split"] = split
                            if facts.id in questions:
                                questions[facts.id].merge(facts)
                            else:
                                questions[facts.id] = facts
            store.finish_loading()
            yield from _passages(store, questions, dataset, cvt, guard)
        finally:
            store.close()
    for facts in questions.values():
        if not facts.question:
            guard.notes["questions with no question text"] += 1
            continue
        yield _question(facts, dataset)


def _passages(
    store: TripleStore, questions: dict[str, QuestionFacts], dataset: str, cvt: str, guard: RecordGuard
) -> Iterator[Paragraph]:
    asked_about = {e for f in questions.values() for e in f.q_entities}
    # For each question entity: answer-name (lower case) -> the passages linking it there.
    links: dict[str, dict[str, list[str]]] = {}
    notes: dict = {}
    meta = {"source": dataset}
    for head, edges in store.by_head():
        if is_cvt(head):
            parents = store.named_parents(head)
            if cvt == "collapse" and parents:
                continue  # its facts are sentences of its parents' passages
            sentences, owners = cvt_sentences(edges), [p for p in parents if p in asked_about]
        else:
            sentences, owners = entity_sentences(head, edges, store, cvt, notes), [head] if head in asked_about else []
        if not sentences:
            continue
        for text, tails in chunk(sentences):
            paragraph = Paragraph(head, text, meta)
            for owner in owners:
                for tail in tails:
                    links.setdefault(owner, {}).setdefault(tail, []).append(paragraph.id)
            yield paragraph
    for reason, count in notes.items():
        guard.notes[reason] += count
    for facts in questions.values():
        answers = {a.lower() for a in (*facts.answers, *facts.a_entities)}
        gold = [pid for e in facts.q_entities for a in answers for pid in links.get(e, {}).get(a, [])]
        facts.extra["gold_ids"] = list(dict.fromkeys(gold))


def _question(facts: QuestionFacts, dataset: str) -> Question:
    extra = {k: v for k, v in facts.extra.items() if k != "gold_ids"}
    extra["q_entities"] = facts.q_entities
    if facts.answer_ids:
        extra["answer_ids"] = facts.answer_ids
    return Question(
        facts.id, facts.question, facts.answers or facts.a_entities, facts.extra.get("gold_ids", []), dataset, extra
    )


_WEBQSP = "https://download.microsoft.com/download/F/5/0/F5012144-A4FB-4084-897F-CFDA99C60BDF/WebQSP.zip"
# RoG's per-question Freebase subgraphs (test split), as parquet shards on the Hugging Face hub.
_ROG = "https://huggingface.co/datasets/rmanluo/{name}/resolve/main/data/{shard}"


def _rog(name: str, shards: int) -> tuple[Download, ...]:
    files = [f"test-{i:05d}-of-{shards:05d}.parquet" for i in range(shards)]
    return tuple(Download(_ROG.format(name=name, shard=f), f"{name}-{f}") for f in files)


_FREEBASE_NEEDS = (package("Freebase parquet", "pyarrow", "pyarrow", "pip install 'mhindex[freebase]'"),)
_KDCOT_METRICS = ("kdcot_hit1", "kdcot_f1")  # KD-CoT's scores of WebQSP and CWQ (eval/metrics.py)

WEBQSP = Dataset(
    name="webqsp",
    title="WebQSP",
    paper_metrics=_KDCOT_METRICS,
    requirements=_FREEBASE_NEEDS,
    description="WebQuestionsSP: Freebase passages (one per head entity) from RoG's subgraphs, questions from "
    "the official files",
    convert=functools.partial(convert, dataset="webqsp"),
    release=(Download(_WEBQSP, "WebQSP.zip", unpack=True), *_rog("RoG-webqsp", 2)),
    release_inputs=("WebQSP.test.json", "RoG-webqsp-test-*.parquet"),
    samples=("WebQSP.test.sample.json", "RoG-webqsp_test.gnn-rag_reasoning_paths.sample.jsonl"),
    Settings=FreebaseSettings,
)
CWQ = Dataset(
    name="cwq",
    title="CWQ",
    paper_metrics=_KDCOT_METRICS,
    requirements=_FREEBASE_NEEDS,
    description="ComplexWebQuestions: Freebase passages (one per head entity) from RoG's subgraphs or named triples",
    convert=functools.partial(convert, dataset="cwq"),
    release=_rog("RoG-cwq", 3),
    release_inputs=("ComplexWebQuestions_test.json", "RoG-cwq-test-*.parquet"),
    samples=("cwq_test.sample.crucial_triples.json",),
    Settings=FreebaseSettings,
)
