"""Retrieval scored against qrels (eval/ranking.py), as a researcher with a BEIR dataset does it: a BEIR
folder made from the bundled HotpotQA sample (as BEIR made its HotpotQA: a document per title, the
supporting titles relevant) with graded judgements, given as its folder, indexed with Lucene, evaluated
with the `retrieve` method and scored. Every measure must equal what ir_measures computes on its own from
`mhindex search`'s TREC run and the qrels, to the fourth decimal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import ir_measures
import orjson
import pytest
from ir_measures import AP, RR, R, nDCG

from conftest import SAMPLES, read_jsonl, small_wiki_corpus

HOTPOTQA = SAMPLES / "hotpotqa" / "hotpot_dev_distractor_v1.sample.json"
QUERIES = 12


def beir_folder(folder: Path) -> list[tuple[str, str, int]]:
    """corpus.jsonl, queries.jsonl and qrels/test.tsv; returns the judgements. Grades as a graded collection
    (TREC-COVID's 0/1/2) gives them: every third query's first supporting title 2, the other supporting
    titles 1, one distractor judged 0, so that nDCG's gains and judged non-relevant documents are exercised."""
    documents: dict[str, tuple[str, str]] = {}
    by_title: dict[str, str] = {}
    judged, queries = [], []
    for n, record in enumerate(json.loads(HOTPOTQA.read_text())[:QUERIES]):
        supporting = list(dict.fromkeys(title for title, _ in record["supporting_facts"]))
        for title, sentences in record["context"]:
            doc = by_title.setdefault(title, f"doc{len(by_title)}")
            documents.setdefault(doc, (title, "".join(sentences)))
            if title in supporting:
                judged.append((record["_id"], doc, 2 if n % 3 == 0 and title == supporting[0] else 1))
        distractor = next(t for t, _ in record["context"] if t not in supporting)
        judged.append((record["_id"], by_title[distractor], 0))
        queries.append({"_id": record["_id"], "text": record["question"], "metadata": {}})
    (folder / "qrels").mkdir(parents=True)
    lines = [json.dumps({"_id": d, "title": t, "text": x, "metadata": {}}) for d, (t, x) in documents.items()]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in judged)
    )
    return judged


@pytest.fixture
def beir(mh, tmp_path) -> list[tuple[str, str, int]]:
    judged = beir_folder(tmp_path / "hotpotqa-beir")
    built = mh("corpus", "beir", "-i", tmp_path / "hotpotqa-beir", "--name", "hpbeir", "--json")
    assert built.code == 0, built.err
    assert built.json()["counts"]["questions"] == QUERIES
    assert mh("index", "hpbeir").code == 0
    return judged


def test_a_beir_folder_is_scored_on_its_qrels_as_ir_measures_scores_it(mh, home, beir, tmp_path, monkeypatch):
    # The grades are kept, 0 included; the gold paragraphs are those above 0.
    questions = {q["id"]: q for q in read_jsonl(home / "hpbeir" / "questions.jsonl")}
    for qid, doc, grade in beir:
        assert questions[qid]["relevance"][doc] == grade and (doc in questions[qid]["gold_ids"]) == (grade > 0)

    evaluated = mh("eval", "hpbeir", "--method", "retrieve", "--sweep", "retrieve.k=5,15", "--lm", "local:smollm2-135m",
                   "--json")  # fmt: skip
    assert evaluated.code == 0, evaluated.err
    report = evaluated.json()
    top15 = report["methods"]["retrieve@k=15"]
    assert report["questions"] == QUERIES and top15["scored"] == "retrieval" and "f1" not in top15
    # Retrieval alone calls no model: none is loaded or named (the folder, run.json, the chart's title), and the
    # title names the corpus, not its format ("beir").
    (folder,) = (home / "hpbeir" / "eval").iterdir()
    assert folder.name.startswith("no-lm-lucene-") and report["lm"] is None and report["lm_context"] is None
    assert "smollm2" not in (folder / "run.json").read_text().lower()
    from mhindex.corpora import shown_dataset
    from mhindex.eval.report import run_title
    from mhindex.methods.session import titles

    title = run_title(shown_dataset(report["dataset"], report["corpus"]), QUERIES, *titles(report["lm"], "lucene"))
    assert title == f"hpbeir: {QUERIES} questions, BM25 (Lucene)", title

    # The same ranking, run by `mhindex search` as a TREC run and scored by ir_measures from its own readers.
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(json.dumps({"id": q, "query": questions[q]["question"]})
                                                         + "\n" for q in questions)))  # fmt: skip
    searched = mh("search", "hpbeir", "-", "-k", "15", "--output-format", "trec")
    assert searched.code == 0, searched.err
    run_file = tmp_path / "run.trec"
    run_file.write_text(searched.out)
    qrels_file = tmp_path / "qrels.trec"
    qrels_file.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in beir))
    expected = ir_measures.calc_aggregate(
        [nDCG @ 10, AP, RR, R @ 15],
        list(ir_measures.read_trec_qrels(str(qrels_file))),
        list(ir_measures.read_trec_run(str(run_file))),
    )
    assert 0 < expected[nDCG @ 10] < 1 and 0 < expected[AP] < 1
    # The run's scores are the engine's at full precision (rounded, close scores would tie and be broken by id).
    import mhindex

    with mhindex.corpus("hpbeir", home=home).searcher() as searcher:
        first = next(iter(questions))
        engine = {h.id: h.score for h in searcher.search(questions[first]["question"], 15)}
    written = {
        line.split()[2]: float(line.split()[4]) for line in searched.out.splitlines() if line.split()[0] == first
    }
    assert written == engine and any(round(score, 4) != score for score in written.values())
    for key, measure in (("ndcg_10", nDCG @ 10), ("map", AP), ("mrr", RR), ("recall", R @ 15)):
        assert top15[key] == pytest.approx(expected[measure], abs=1e-12), key

    # `score` reads the TREC run itself against the corpus's qrels: the same numbers.
    scored = mh("score", run_file, "--questions", "hpbeir", "--json")
    assert scored.code == 0, scored.err
    (summary,) = scored.json().values()
    for key in ("ndcg_10", "map", "mrr", "recall"):
        assert summary[key] == pytest.approx(top15[key], abs=1e-12), key

    # A run of every query, as `search -` of the whole queries.jsonl gives it (real BEIR releases hold unjudged
    # queries too): those are skipped and counted, as trec_eval skips them, and the judged ones score the same.
    unjudged = "".join(f"unjudged-{n} Q0 doc0 1 1.0 run\n" for n in range(3))
    (tmp_path / "every.trec").write_text(run_file.read_text() + unjudged)
    every = mh("score", tmp_path / "every.trec", "--questions", "hpbeir", "--json")
    assert every.code == 0, every.err
    assert "3 of its" in every.err and "have no judgements" in every.err and "skipped" in every.err
    (same,) = every.json().values()
    assert same["ndcg_10"] == pytest.approx(summary["ndcg_10"])

    # A score of nan is refused, naming the file, line and field (trec_eval and ir_measures would order it
    # otherwise than mhindex's sort, and the run would score another figure there than here).
    first, *rest = run_file.read_text().splitlines(keepends=True)
    (tmp_path / "nan.trec").write_text(" ".join([*first.split()[:4], "nan", first.split()[5]]) + "\n" + "".join(rest))
    nan = mh("score", tmp_path / "nan.trec", "--questions", "hpbeir", "--json")
    assert nan.code == 2 and f"{tmp_path / 'nan.trec'} line 1: field 'score' should be a finite number" in nan.err
    assert "Traceback" not in nan.err

    # Several files side by side, each under its recorded method (or the variant its file names), with their
    # paired differences: the TREC run ranks as retrieve@k=15 did, so it differs from it in nothing.
    (five,) = (home / "hpbeir" / "eval").glob("*/retrieve@k=5.jsonl")
    side = mh("score", five, five.with_name("retrieve@k=15.jsonl"), run_file, "--questions", "hpbeir", "--json")
    assert side.code == 0, side.err
    assert list(side.json()["methods"]) == ["retrieve@k=5", "retrieve@k=15", "run"]
    against_run = [p for p in side.json()["paired"] if (p["a"], p["b"]) == ("retrieve@k=15", "run")]
    assert {p["metric"] for p in against_run} == {"ndcg_10", "map", "mrr", "recall"}
    assert all(p["difference"] == 0 for p in against_run)

    # Paired differences on the ranking measures; five paragraphs never recall more than fifteen.
    paired = {row["metric"]: row for row in report["paired"]}
    assert set(paired) == {"ndcg_10", "map", "mrr", "recall"}
    assert paired["recall"]["a_better"] == 0 and report["methods"]["retrieve@k=5"]["recall"] <= top15["recall"]

    # The table shows the ranking measures, and no answer columns (there are no answers).
    table = mh("eval", "hpbeir", "--method", "retrieve", "--lm", "local:smollm2-135m")
    assert table.code == 0, table.err
    header = next(line for line in table.out.splitlines() if "Method" in line)
    assert all(column in header for column in ("nDCG@10", "MAP", "MRR", "Recall")), header
    assert "F1" not in header and "EM" not in header


def test_a_lone_corpus_jsonl_brings_the_queries_and_qrels_beside_it(mh, home, tmp_path):
    beir_folder(tmp_path / "hotpotqa-beir")
    built = mh("corpus", "beir", "-i", tmp_path / "hotpotqa-beir" / "corpus.jsonl", "--name", "lone", "--json")
    assert built.code == 0, built.err
    assert "reading queries.jsonl, qrels/test.tsv beside corpus.jsonl" in built.err
    assert built.json()["counts"]["questions"] == QUERIES
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = mh("corpus", "beir", "-i", empty, "--name", "none")
    assert refused.code == 2 and refused.err.strip().splitlines() == [
        f"mhindex: error: {empty} holds no corpus.jsonl (BEIR's layout: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)"
    ]


def test_a_query_judged_in_two_splits_and_qrels_without_queries_are_refused_never_mixed(mh, home, tmp_path):
    """A question has one split: a query judged in test.tsv and dev.tsv would take one split with both splits'
    grades, so it is one line naming the query and the files; qrels without queries.jsonl would build no
    question at all, so that is one line too. Nothing is built either way."""
    judged = beir_folder(tmp_path / "two")
    query, document, _ = judged[0]
    (tmp_path / "two" / "qrels" / "dev.tsv").write_text(f"query-id\tcorpus-id\tscore\n{query}\t{document}\t1\n")
    refused = mh("corpus", "beir", "-i", tmp_path / "two", "--name", "two")
    assert refused.code == 2 and len(refused.err.strip().splitlines()) == 1
    assert f"query {query!r} is judged in both" in refused.err and "build one split at a time" in refused.err
    assert not (home / "two").exists()
    beir_folder(tmp_path / "noqueries")
    (tmp_path / "noqueries" / "queries.jsonl").unlink()
    none = mh("corpus", "beir", "-i", tmp_path / "noqueries", "--name", "noqueries")
    assert none.code == 2 and "which is not among the inputs (-i queries.jsonl)" in none.err
    assert not (home / "noqueries").exists()


def test_a_beir_folder_keeps_its_answers_and_is_scored_on_both(mh, tmp_path):
    """BEIR's HotpotQA gives each query its answer in `metadata.answer`: kept, so that `score` (and `eval`) give the
    answer measures and the ranking ones on the same questions, with no second questions file."""
    judged = beir_folder(tmp_path / "beir")
    answers = {r["_id"]: r["answer"] for r in json.loads(HOTPOTQA.read_text())[:QUERIES]}
    queries = tmp_path / "beir" / "queries.jsonl"
    rows = [json.loads(line) for line in queries.read_text().splitlines()]
    queries.write_text("".join(json.dumps({**r, "metadata": {"answer": answers[r["_id"]]}}) + "\n" for r in rows))
    assert mh("corpus", "beir", "-i", tmp_path / "beir", "--name", "answered").code == 0
    first = next(iter(answers))
    gold = [d for q, d, g in sorted(judged, key=lambda j: -j[2]) if q == first and g > 0]  # the best first
    predictions = tmp_path / "mine.jsonl"
    predictions.write_text(json.dumps({"id": first, "answer": answers[first], "retrieved": [{"id": d} for d in gold]}))
    scored = mh("score", predictions, "--questions", "answered", "--json")
    assert scored.code == 0, scored.err
    (summary,) = scored.json().values()
    assert summary["questions"] == 1 and summary["em"] == 1.0 and summary["f1"] == 1.0  # the answer, right
    assert summary["ndcg_10"] == pytest.approx(1.0) and summary["recall"] == 1.0  # its ranking, ideal


def test_a_retrieval_only_run_on_questions_with_answers_shows_no_answer_columns(mh, home, tmp_path):
    """`eval --method retrieve` and `score run.trec` on a corpus whose questions have answers: the run answers
    nothing, so its answer columns are absent (alone) or "-" (beside a method that answers), never 0.0, in the
    table, metrics.json and `score --json` alike; recall is scored as before."""
    home.mkdir(parents=True)
    small_wiki_corpus(home)
    assert mh("--quiet", "index", "wiki", "--backend", "lucene").code == 0
    evaluated = mh("eval", "wiki", "--method", "retrieve", "--limit", "5", "--out", tmp_path / "run")
    assert evaluated.code == 0, evaluated.err
    header = next(line for line in evaluated.out.splitlines() if "Method" in line)
    assert "Recall" in header and "F1" not in header and "EM" not in header, header
    stored = orjson.loads((tmp_path / "run" / "metrics.json").read_bytes())["methods"]["retrieve"]
    assert stored["em"] is None and stored["f1"] is None and stored["f1_interval"] is None and stored["recall"] > 0
    # A TREC run of the same queries, and beside it a file that answers: its EM and F1 are "-" for the run.
    records = read_jsonl(tmp_path / "run" / "retrieve.jsonl")
    lines = [f"{r['id']} Q0 {hit['id']} {rank} {hit['score']} bm25" for r in records
             for rank, hit in enumerate(r["retrieved"], start=1)]  # fmt: skip
    (tmp_path / "run.trec").write_text("\n".join(lines) + "\n")
    gold = {q["id"]: q for q in read_jsonl(home / "wiki" / "questions.jsonl")}
    answering = [{"id": r["id"], "answer": gold[r["id"]]["answers"][0], "method": "gold"} for r in records]
    (tmp_path / "gold.jsonl").write_text("\n".join(orjson.dumps(a).decode() for a in answering) + "\n")
    alone = mh("score", tmp_path / "run.trec", "--questions", "wiki", "--json")
    assert alone.code == 0 and alone.json()["run"]["em"] is None and alone.json()["run"]["recall"] == stored["recall"]
    side = mh("score", tmp_path / "run.trec", tmp_path / "gold.jsonl", "--questions", "wiki", "--format", "md")
    assert side.code == 0, side.err
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]] for line in side.out.splitlines()
            if line.startswith("| ")}  # fmt: skip
    em_at = rows["Method"].index("EM")
    assert rows["run"][em_at] == "-" and rows["run"][rows["Method"].index("F1")] == "-"
    assert rows["gold"][em_at] == "100.0"
