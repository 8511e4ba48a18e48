"""Elasticsearch. No Elasticsearch server can be installed on the machines this project is
developed and tested on, so the tests against a live server run only when MHINDEX_ES_URL
names one and are skipped (with that reason) otherwise. What needs no server is tested here
for real: the mapping, the query bodies, and a clear error when the server is unreachable."""

from __future__ import annotations

import os

import pytest

from conftest import SAMPLES, leftovers, read_jsonl
from mhindex.backends.elasticsearch import ElasticsearchOptions, alias_name, index_body, query_body

MUSIQUE = SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"
LIVE = os.environ.get("MHINDEX_ES_URL")


def test_mapping_uses_ircots_english_analyzer_and_bm25_parameters():
    body = index_body(ElasticsearchOptions(shards=3, replicas=1, k1=0.9, b=0.4))
    properties = body["mappings"]["properties"]
    assert properties["title"]["analyzer"] == properties["paragraph_text"]["analyzer"] == "english"
    assert properties["title"]["fields"]["raw"]["type"] == "keyword"
    assert body["settings"]["number_of_shards"] == 3 and body["settings"]["number_of_replicas"] == 1
    assert body["settings"]["similarity"]["default"] == {"type": "BM25", "k1": 0.9, "b": 0.4}


@pytest.mark.parametrize("query", ["AND OR", 'title:(x "', "a:b", ""])
def test_query_text_is_never_query_syntax(query):
    body = query_body(query, 7)
    assert body["size"] == 7
    assert body["query"]["bool"]["should"] == [{"match": {"paragraph_text": query}}, {"match": {"title": query}}]
    assert "query_string" not in str(body)


def test_title_restriction_is_an_exact_keyword_filter():
    body = query_body("who", 3, titles=["Lost Gravity", "Mack Rides"])
    assert body["query"]["bool"]["filter"] == [{"terms": {"title.raw": ["Lost Gravity", "Mack Rides"]}}]
    assert alias_name("MuSiQue") == "mhindex-musique"


def test_unreachable_server_is_one_clear_line(mh, home):
    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    # Nothing listens on port 9 of the loopback address: connection refused.
    result = mh("index", "musique", "--backend", "elasticsearch", "--es-url", "http://127.0.0.1:9")
    assert result.code == 1
    assert result.err.strip().splitlines() == [
        "mhindex: error: cannot reach Elasticsearch at http://127.0.0.1:9 (ConnectionError); start it or pass --es-url / set MHINDEX_ES_URL"
    ]
    assert not (home / "musique" / "indexes" / "elasticsearch").exists() and leftovers(home) == []


@pytest.mark.skipif(not LIVE, reason="needs a live Elasticsearch server: set MHINDEX_ES_URL")
def test_live_index_search_and_alias_switch(mh, home):
    assert mh("corpus", "musique", "--input", MUSIQUE).code == 0
    first = mh("index", "musique", "--backend", "elasticsearch", "--json")
    assert first.code == 0, first.err
    physical = first.json()["physical_index"]
    hits = mh("search", "musique", "Ensign Manufacturing Company founded", "--backend", "elasticsearch", "--json").json()["hits"]
    assert hits[0]["title"] == "Ensign Manufacturing Company"
    second = mh("index", "musique", "--backend", "elasticsearch", "--force", "--json").json()
    assert second["physical_index"] != physical and second["alias"] == first.json()["alias"]
    from mhindex.backends import open_retriever
    from mhindex.home import corpus_dir

    retriever = open_retriever(corpus_dir(home, "musique"), "elasticsearch")
    questions = read_jsonl(home / "musique" / "questions.jsonl")[:5]
    batched = retriever.search_many([q["question"] for q in questions], 5)
    assert [[h.id for h in b] for b in batched] == [[h.id for h in retriever.search(q["question"], 5)] for q in questions]
    scoped = retriever.search("company", 5, titles=["General Electric"])
    assert scoped and {h.title for h in scoped} == {"General Electric"}
    retriever.close()
