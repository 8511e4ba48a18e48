"""Freebase corpora (WebQSP, CWQ) from the bundled samples and from records written in each of
the input shapes users have: passage counts are computed here from the triples, independently
of the converter."""

from __future__ import annotations

import json
import math
import re

from conftest import SAMPLES, read_jsonl
from mhindex.corpora.freebase import read_parquet

CWQ = SAMPLES / "cwq" / "cwq_test.sample.crucial_triples.json"
WEBQSP = SAMPLES / "webqsp" / "WebQSP.test.sample.json"
PATHS = SAMPLES / "webqsp" / "RoG-webqsp_test.gnn-rag_reasoning_paths.sample.jsonl"
UNNAMED = re.compile(r"^[mg]\.[0-9a-z_]+$")


def words(relation: str) -> str:
    return relation.replace(".", " ").replace("_", " ")


def distinct_triples(records: list[list]) -> list[tuple[str, str, str]]:
    seen = {}
    for triples in records:
        for h, r, t in triples:
            if r != "type.object.name":
                seen.setdefault((h.strip(), r.strip(), t.strip()), None)
    return list(seen)


def mentions(answer: str, text: str) -> bool:
    """The answer is in the text, or cut by a chunk boundary: a chunk begins with its end or ends with its start."""
    answer, text = answer.lower(), text.lower()
    parts = answer.split(" ")
    return answer in text or any(
        text.startswith(" ".join(parts[i:])) or text.endswith(" ".join(parts[:i])) for i in range(1, len(parts))
    )


def corpus_of(mh, home, dataset, *args):
    result = mh("--quiet", "corpus", dataset, *args, "--json")
    assert result.code == 0, result.err
    name = result.json()["name"]
    return result.json(), read_jsonl(home / name / "corpus.jsonl"), read_jsonl(home / name / "questions.jsonl")


def test_decaf_mode_gives_the_passages_decaf_would(mh, home):
    """--cvt decaf: one passage per head (named entity or CVT), 100-word chunks of its sentences,
    edges into CVTs dropped, CVT sentences without a subject."""
    records = json.loads(CWQ.read_text())
    triples = distinct_triples([r["crucial_triples"] for r in records])
    expected = {}
    for head in dict.fromkeys(h for h, _, _ in triples):
        subject = "" if UNNAMED.match(head) else head
        sentences = [f"{subject} {words(r)} {t} ." for h, r, t in triples if h == head and not UNNAMED.match(t)]
        if sentences:
            tokens = " ".join(sentences).split(" ")
            expected[head] = [" ".join(tokens[i : i + 100]) for i in range(0, len(tokens), 100)]
    manifest, corpus, _ = corpus_of(mh, home, "cwq", "--cvt", "decaf", "--name", "decaf")
    assert manifest["options"] == {"cvt": "decaf"}
    got: dict[str, list[str]] = {}
    for paragraph in corpus:
        got.setdefault(paragraph["title"], []).append(paragraph["text"])
    assert {h: sorted(p) for h, p in got.items()} == {h: sorted(set(p)) for h, p in expected.items()}
    assert len(corpus) == len({(h, p) for h, ps in expected.items() for p in ps})
    assert all(p["source"] == "cwq" for p in corpus)


def test_collapse_mode_keeps_one_passage_per_named_head_and_names_what_is_behind_a_cvt(mh, home):
    records = json.loads(CWQ.read_text())
    triples = distinct_triples([r["crucial_triples"] for r in records])
    cvt_facts: dict[str, list[tuple[str, str]]] = {}
    for h, r, t in triples:
        if UNNAMED.match(h):
            cvt_facts.setdefault(h, []).append((r, t))
    named_heads = {
        h
        for h, _, t in triples
        if not UNNAMED.match(h)
        and (not UNNAMED.match(t) or any(ft != h and not UNNAMED.match(ft) for _, ft in cvt_facts.get(t, [])))
    }
    orphans = {h for h in cvt_facts if not any(t == h and not UNNAMED.match(x) for x, _, t in triples)}
    _, corpus, _ = corpus_of(mh, home, "cwq")
    titles = {p["title"] for p in corpus}
    assert titles == named_heads | {o for o in orphans if any(not UNNAMED.match(t) for _, t in cvt_facts[o])}
    # Passages: one per head unless it is over 100 words; the chunks' word counts add up.
    for head in named_heads:
        texts = [p["text"] for p in corpus if p["title"] == head]
        total = sum(len(t.split(" ")) for t in texts)
        assert len(texts) == math.ceil(total / 100) or len(texts) == 1
    # Brad Paisley --people.person.education--> m.0h3d7qj --education.education.student--> Brad Paisley:
    # the CVT's only named fact points back at him, so it says nothing new and is left out; a CVT
    # with other facts becomes a sentence of its parent's passage that names them.
    for h, r, t in triples:
        if UNNAMED.match(t) and not UNNAMED.match(h):
            others = [(fr, ft) for fr, ft in cvt_facts.get(t, []) if ft != h and not UNNAMED.match(ft)]
            if others:
                said = f"{h} {words(r)} " + " , ".join(f"{words(fr)} {ft}" for fr, ft in others) + " ."
                assert any(
                    said in p["text"] or said.startswith(p["text"].split(" . ")[-1]) for p in corpus if p["title"] == h
                ), said
    assert not any(UNNAMED.match(p["title"]) for p in corpus if p["title"] not in orphans)


def test_collapsing_a_cvt_on_a_handmade_graph(mh, home, tmp_path):
    graph = [
        ["Barack Obama", "people.person.sibling_s", "m.0gx"],
        ["m.0gx", "people.sibling_relationship.sibling", "Maya Soetoro-Ng"],
        ["m.0gx", "people.sibling_relationship.sibling", "Barack Obama"],
        ["Barack Obama", "people.person.place_of_birth", "Honolulu"],
        ["Barack Obama", "type.object.name", "Barack Obama"],
    ]
    row = {
        "id": "q1",
        "question": "who is barack obama's sister?",
        "answer": ["Maya Soetoro-Ng"],
        "q_entity": ["Barack Obama"],
        "a_entity": ["Maya Soetoro-Ng"],
        "graph": graph,
    }
    source = tmp_path / "rog.jsonl"
    source.write_text(json.dumps(row) + "\n")
    _, collapsed, questions = corpus_of(mh, home, "webqsp", "--input", source, "--name", "collapsed")
    assert [(p["title"], p["text"]) for p in collapsed] == [
        (
            "Barack Obama",
            "Barack Obama people person sibling s people sibling relationship sibling Maya Soetoro-Ng . Barack "
            "Obama people person place of birth Honolulu .",
        )
    ]
    assert questions[0]["gold_ids"] == [collapsed[0]["id"]] and questions[0]["answers"] == ["Maya Soetoro-Ng"]
    _, decaf, questions = corpus_of(mh, home, "webqsp", "--input", source, "--name", "decaf", "--cvt", "decaf")
    assert sorted((p["title"], p["text"]) for p in decaf) == [
        ("Barack Obama", "Barack Obama people person place of birth Honolulu ."),
        (
            "m.0gx",
            " people sibling relationship sibling Maya Soetoro-Ng . "
            " people sibling relationship sibling Barack Obama .",
        ),
    ]
    # DecAF's way, the sister is only in the CVT's passage: gold, as a CVT under the question entity.
    assert questions[0]["gold_ids"] == [p["id"] for p in decaf if p["title"] == "m.0gx"]


def test_webqsp_questions_answers_and_gold_passages(mh, home):
    official = json.loads(WEBQSP.read_text())
    manifest, corpus, questions = corpus_of(mh, home, "webqsp")
    assert manifest["counts"]["questions"] == len(official) == len(questions)
    by_id = {q["id"]: q for q in questions}
    for record in official:
        names = {a["EntityName"] or a["AnswerArgument"] for p in record["Parses"] for a in p["Answers"]}
        assert set(by_id[record["QuestionId"]]["answers"]) == names
        assert by_id[record["QuestionId"]]["question"] == record["RawQuestion"]
    passages = {p["id"]: p for p in corpus}
    gold = [(q, passages[g]) for q in questions for g in q["gold_ids"]]
    assert len(gold) >= 30
    for question, passage in gold:  # a gold passage is about a question entity and names an answer
        assert passage["title"] in question["q_entities"]
        assert any(mentions(a, passage["text"]) for a in question["answers"]), (question["answers"], passage["text"])
    mary = by_id["WebQTest-646"]
    assert [passages[g]["title"] for g in mary["gold_ids"]] == ["Mary Bell"] and "Newcastle upon Tyne" in passages[
        mary["gold_ids"][0]
    ]["text"]
    # One passage per head entity: chunks of one head are consecutive 100-word pieces.
    for title in {p["title"] for p in corpus}:
        chunks = [p["text"] for p in corpus if p["title"] == title]
        assert len(chunks) == 1 or all(len(c.split(" ")) <= 100 for c in chunks)


def test_official_question_file_shapes(mh, home, tmp_path):
    official = json.loads(WEBQSP.read_text())[:5]
    wrapped = tmp_path / "WebQSP.test.json"
    wrapped.write_text(json.dumps({"Version": "1.0", "FreebaseVersion": "2015-08-09", "Questions": official}, indent=2))
    _, _, from_wrapped = corpus_of(mh, home, "webqsp", "--input", wrapped, "--input", PATHS, "--name", "wrapped")
    _, _, from_list = corpus_of(mh, home, "webqsp", "--input", WEBQSP, "--input", PATHS, "--name", "listed")
    assert [q for q in from_list if q["id"] in {q["id"] for q in from_wrapped}][:5] == from_wrapped[:5]
    # CWQ as released (answers with aliases), and as copies carry it (a MID list; a name).
    cwq = tmp_path / "ComplexWebQuestions_test.json"
    cwq.write_text(
        json.dumps(
            [
                {
                    "ID": "a",
                    "question": "Q1?",
                    "answers": [{"answer": "Belmont University", "answer_id": "m.01qdhx", "aliases": ["Belmont"]}],
                },
                {"ID": "b", "question": "Q2?", "answer": ["m.0abc"]},
                {
                    "ID": "c",
                    "question": "Q3?",
                    "answer": "Tina Turner",
                    "topic_entity": {"m.1": "Nutbush City Limits"},
                    "crucial_triples": [["Nutbush City Limits", "music.composition.composer", "Tina Turner"]],
                },
            ]
        )
    )
    _, corpus, questions = corpus_of(mh, home, "cwq", "--input", cwq, "--name", "shapes")
    by_id = {q["id"]: q for q in questions}
    assert by_id["a"]["answers"] == ["Belmont University", "Belmont"] and by_id["a"]["answer_ids"] == ["m.01qdhx"]
    assert by_id["b"]["answers"] == [] and by_id["b"]["answer_ids"] == ["m.0abc"]
    assert by_id["c"]["answers"] == ["Tina Turner"] and by_id["c"]["gold_ids"] == [corpus[0]["id"]]


def test_parquet_input_is_streamed_and_converts_like_json_lines(mh, home, tmp_path):
    import pyarrow as pa  # the freebase extra, which scripts/setup.sh installs
    import pyarrow.parquet as pq

    from mhindex.corpora.freebase import path_triples

    rows = []
    for line in PATHS.read_text().splitlines():
        record = json.loads(line)
        graph = [list(t) for t in path_triples(record["input"])]
        rows.append(
            {
                "id": record["id"],
                "question": record["question"],
                "answer": record["ground_truth"],
                "q_entity": [graph[0][0]] if graph else [],
                "a_entity": record["ground_truth"],
                "graph": graph,
            }
        )
    parquet = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet, row_group_size=5)
    jsonl = tmp_path / "rog-test.jsonl"  # named for its split, as the parquet shard is
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    a, corpus_a, questions_a = corpus_of(mh, home, "webqsp", "--input", parquet, "--name", "parquet")
    b, corpus_b, questions_b = corpus_of(mh, home, "webqsp", "--input", jsonl, "--name", "jsonl")
    assert a["corpus_sha256"] == b["corpus_sha256"] and questions_a == questions_b and len(corpus_a) > 50
    assert {q["split"] for q in questions_a} == {"test"}
    # Streamed: the first rows arrive before the reader has gone past the first row group.
    groups_read = []
    stream = read_parquet(parquet, on_bytes=groups_read.append, batch_rows=2)
    next(stream)
    assert groups_read == []
    assert sum(1 for _ in stream) == len(rows) - 1 and len(groups_read) == math.ceil(len(rows) / 5)


def test_a_corpus_from_several_sources_keeps_each_paragraphs_source(mh, home):
    manifest, corpus, questions = corpus_of(mh, home, "webqsp", "--add", "musique", "--name", "kb-and-wiki")
    sources = {p["source"] for p in corpus}
    assert sources == {"webqsp", "musique"}
    assert {q["dataset"] for q in questions} == {"webqsp"}  # the added source gives paragraphs only
    assert [s["dataset"] for s in manifest["sources"]] == ["webqsp", "musique"]
    alone = mh("--quiet", "corpus", "musique", "--json").json()
    assert sum(1 for p in corpus if p["source"] == "musique") == alone["counts"]["paragraphs"]
    refused = mh("--quiet", "corpus", "musique", "--cvt", "decaf")
    assert refused.code != 0 and "--cvt is an option of webqsp, cwq, not of musique" in refused.err


def test_a_record_of_no_known_shape_is_a_one_line_error(mh, home, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "graph": [["a", "r.s"]]}\n')
    result = mh("corpus", "webqsp", "--input", bad)
    assert result.code != 0 and f"{bad} line 1: field 'graph[0]' should be [head, relation, tail]" in result.err
    assert "Traceback" not in result.err and not (home / "webqsp").exists()
