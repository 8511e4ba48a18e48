"""Hybrid retrieval for real: a Lucene and a dense (packaged MiniLM, FAISS) index of the same small
2WikiMultihopQA corpus, fused by reciprocal rank or by weighted normalised scores, in process, on the
command line and served; each fused ranking checked against the parts' own rankings."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from conftest import serve_index, small_wiki_corpus
from mhindex.backends import BackendSpec, open_index, open_retriever
from mhindex.cli import main
from mhindex.home import open_corpus
from servers import Uvicorn

QUERY = "Who is the director of the film that came out first?"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    home = small_wiki_corpus(tmp_path_factory.mktemp("hybrid-home"))
    # One command builds every part, each as itself.
    assert main(["--quiet", "--home", str(home), "index", "wiki", "--backend", "lucene+dense"]) == 0
    return open_corpus(home, "wiki")


@pytest.fixture(scope="module")
def parts(corpus):
    lucene, dense = (
        open_retriever(corpus, BackendSpec.parse("lucene")),
        open_retriever(corpus, BackendSpec.parse("dense")),
    )
    yield lucene, dense
    lucene.close()
    dense.close()


def test_rrf_is_the_sum_of_reciprocal_ranks_over_the_parts(corpus, parts):
    opened = open_index(corpus, BackendSpec.parse("lucene+dense", {"rrf_k": 60, "fusion_depth": 50}))
    try:
        fused = opened.retriever.search(QUERY, 10)
        expected: dict[str, float] = {}
        for ranking in (part.search(QUERY, 50) for part in parts):
            for rank, hit in enumerate(ranking, start=1):
                expected[hit.id] = expected.get(hit.id, 0.0) + 1 / (60 + rank)
        texts = {h.id: (h.title, h.text) for part in parts for h in part.search(QUERY, 50)}
        assert all(texts[h.id] == (h.title, h.text) for h in fused)  # texts read only for each part's own top k
        best = sorted(expected.values(), reverse=True)[:10]
        assert [round(h.score, 9) for h in fused] == [round(s, 9) for s in best]
        assert all(abs(expected[h.id] - h.score) < 1e-12 for h in fused)
        # Both engines contribute: the fusion is neither part's ranking alone.
        lucene_ids, dense_ids = ([h.id for h in part.search(QUERY, 10)] for part in parts)
        assert [h.id for h in fused] not in (lucene_ids, dense_ids)
        assert opened.settings["fusion"] == "rrf" and set(opened.settings["parts"]) == {"lucene", "dense"}
        assert opened.settings["parts"]["dense"]["encoder"]  # every part's settings, as run.json records them
    finally:
        opened.close()


def test_weighted_fusion_normalises_and_weighs_each_part(corpus, parts):
    lucene, dense = parts
    only_lucene = open_retriever(corpus, BackendSpec.parse("lucene+dense", {"fusion": "weighted", "weights": "1,0"}))
    only_dense = open_retriever(corpus, BackendSpec.parse("lucene+dense", {"fusion": "weighted", "weights": "0,1"}))
    even = open_retriever(corpus, BackendSpec.parse("lucene+dense", {"fusion": "weighted"}))
    try:
        assert [h.id for h in only_lucene.search(QUERY, 5)] == [h.id for h in lucene.search(QUERY, 5)]
        assert [h.id for h in only_dense.search(QUERY, 5)] == [h.id for h in dense.search(QUERY, 5)]
        # A part weighed 0 gives every paragraph the same 0: the ties keep its own order, and the text of
        # every kept paragraph is still at hand (each part reads its own top k), in a batch as alone.
        queries = [QUERY, "Which country", "film director born"]
        for fused, part in ((only_lucene, lucene), (only_dense, dense)):
            batch = fused.search_many(queries, 5)
            assert [[(h.id, h.text) for h in r] for r in batch] == [
                [(h.id, h.text) for h in part.search(q, 5)] for q in queries
            ]
        top = even.search(QUERY, 5)
        assert top[0].score <= 1.0 and all(a.score >= b.score for a, b in zip(top, top[1:]))
        # Weights are relative: 1e308,1e308 (whose sum overflows to inf) ranks and scores as 1,1 does.
        huge = open_retriever(
            corpus, BackendSpec.parse("lucene+dense", {"fusion": "weighted", "weights": "1e308,1e308"})
        )
        assert [(h.id, h.score) for h in huge.search(QUERY, 5)] == [(h.id, h.score) for h in top]
        huge.close()
    finally:
        for retriever in (only_lucene, only_dense, even):
            retriever.close()


def test_title_scoped_and_batched_search_go_through_every_part(corpus, parts):
    fused = open_retriever(corpus, BackendSpec.parse("lucene+dense"))
    try:
        title = parts[0].search(QUERY, 1)[0].title
        scoped = fused.search("born", 5, titles=[title.upper()])  # titles compare as IRCoT compares them
        assert scoped and {h.title for h in scoped} == {title}
        queries = [QUERY, "Which country", "film director born"]
        assert [[h.id for h in r] for r in fused.search_many(queries, 4)] == [
            [h.id for h in fused.search(q, 4)] for q in queries
        ]
        threaded = open_retriever(
            corpus, BackendSpec.parse("lucene+dense", {"threads": 2})
        )  # Anserini's threaded batch for Lucene
        try:
            assert [[(h.id, h.text, h.score) for h in r] for r in threaded.search_many(queries, 4)] == [
                [(h.id, h.text, h.score) for h in fused.search(q, 4)] for q in queries
            ]
        finally:
            threaded.close()
    finally:
        fused.close()


def test_the_command_line_routes_each_option_to_its_part(corpus, capsys):
    home = str(corpus.root.parent)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["--home", home, *args])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = run("search", "wiki", QUERY, "--backend", "lucene+dense", "--k1", "0.9", "--rrf-k", "10", "--json")
    assert code == 0 and len(json.loads(out)["hits"]) == 10
    code, _, err = run("search", "wiki", QUERY, "--backend", "lucene", "--weights", "1,1")
    assert code == 2 and "--weights is an option of the hybrid backend, not of lucene" in err
    code, _, err = run("search", "wiki", QUERY, "--backend", "lucene", "--rrf-k", "10")  # milvus's --rrf-k too
    assert code == 2 and "--rrf-k is an option of the milvus and hybrid backends, not of lucene" in err
    code, _, err = run("search", "wiki", QUERY, "--backend", "lucene+dense", "--weights", "1,0")
    assert code == 2 and "give it with --fusion weighted" in err
    for weights in ("nan,1", "inf,1"):
        code, _, err = run("search", "wiki", QUERY, "-b", "lucene+dense", "--fusion", "weighted", "--weights", weights)
        assert code == 2 and "--weights needs 2 finite numbers of 0 or more" in err
    code, _, err = run("search", "wiki", QUERY, "--backend", "lucene+http://x")
    assert code == 2 and "a hybrid fuses indexes built here" in err
    code, _, err = run("search", "wiki", QUERY, "--backend", "lucene+bm25s")  # a part not built yet
    assert code == 2 and "has no bm25s index; run `mhindex index wiki --backend bm25s`" in err


def test_a_served_hybrid_answers_in_mhindex_and_ircot_protocols(corpus):
    opened = open_index(corpus, BackendSpec.parse("lucene+dense"))
    try:
        fused = opened.retriever.search(QUERY, 3)
        with Uvicorn(serve_index(corpus, opened.retriever)) as server:
            mine = httpx.post(server.url + "/search", json={"query": QUERY, "k": 3}).json()
            assert [h["id"] for h in mine["hits"]] == [h.id for h in fused]
            ircot = httpx.post(server.url + "/retrieve/", json={"query_text": QUERY, "max_hits_count": 3}).json()
            assert [h["title"] for h in ircot["retrieval"]] == [h.title for h in fused]
    finally:
        opened.close()


def test_the_terminal_table_prints_fused_scores_that_tell_ranks_apart(corpus, capsys):
    """Reciprocal-rank scores differ in the third or fourth decimal: the table prints as many decimals as the
    scores need (they once all printed as `0.03`)."""
    home = str(corpus.root.parent)
    assert main(["--home", home, "search", "wiki", QUERY, "--backend", "lucene+dense", "--json"]) == 0
    scores = [hit["score"] for hit in json.loads(capsys.readouterr().out)["hits"]]
    assert len({f"{score:.2f}" for score in scores}) < len(set(scores))  # two decimals would merge some
    assert main(["--home", home, "search", "wiki", QUERY, "--backend", "lucene+dense"]) == 0
    printed = re.findall(r"^\S\s+(\d+)\s+\S\s+(\d+\.\d+)\s", capsys.readouterr().out, re.M)
    assert [int(rank) for rank, _ in printed] == list(range(1, len(scores) + 1))
    assert len({score for _, score in printed}) == len(set(scores))
    assert [float(score) for _, score in printed] == pytest.approx(scores, abs=10 ** -len(printed[0][1].split(".")[1]))
