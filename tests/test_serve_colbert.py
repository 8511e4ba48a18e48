"""ColBERT's protocol against a real `mhindex serve` of the MuSiQue sample (Lucene, on 127.0.0.1):
the answer of stanford-futuredata/ColBERT's `server.py` at 501c29d (`{"query", "topk": [{"text",
"pid", "rank", "score", "prob"}]}`, k capped at 100, sorted by score then pid), and DSPy's
`ColBERTv2` client from stanfordnlp/dspy at 4ed377e run unchanged (tests/peers/dspy_colbertv2.py),
by GET and by POST, at the server's root and at /api/search, with a key it can only carry in
its URL."""

from __future__ import annotations

import pytest
import requests

from conftest import serve_index
from peers.dspy_colbertv2 import ColBERTv2
from servers import Uvicorn

KEY = "k3y-for-colbert"
QUERY = "Who was Mach's principle named after?"


@pytest.fixture(scope="module")
def colbert(musique_lucene):
    corpus, retriever = musique_lucene
    with (
        Uvicorn(serve_index(corpus, retriever)) as open_server,
        Uvicorn(serve_index(corpus, retriever, api_key=KEY)) as locked,
    ):
        lines = {}
        reader = corpus.paragraphs()
        for line, record in enumerate(reader):
            lines[record["id"]] = line
        reader.close()
        yield {
            "url": open_server.url,
            "port": open_server.port,
            "locked": locked.url,
            "retriever": retriever,
            "lines": lines,
        }


def test_colbert_server_s_answer(colbert):
    expected = colbert["retriever"].search(QUERY, 4)
    reply = requests.get(colbert["url"] + "/api/search", params={"query": QUERY, "k": 4}).json()
    topk = reply["topk"]
    assert reply["query"] == QUERY and [t["rank"] for t in topk] == [1, 2, 3, 4]
    assert [t["pid"] for t in topk] == [
        colbert["lines"][h.id] for h in expected
    ]  # the passage's line in the collection
    assert [t["text"] for t in topk] == [f"{h.title} | {h.text}" for h in expected]
    assert topk == sorted(topk, key=lambda t: (-t["score"], t["pid"])) and sum(
        t["prob"] for t in topk
    ) == pytest.approx(1)
    assert [t["id"] for t in topk] == [h.id for h in expected]  # mhindex's addition: the corpus's own id


def test_k_edges(colbert):
    url = colbert["url"] + "/api/search"
    assert requests.get(url, params={"query": QUERY, "k": 0}).json()["topk"] == []
    assert len(requests.get(url, params={"query": QUERY}).json()["topk"]) == 10  # server.py: `if k == None: k = 10`
    assert len(requests.get(url, params={"query": QUERY, "k": 1000}).json()["topk"]) == 100  # min(int(k), 100)
    for bad in ("²", "-1", "three"):
        refused = requests.get(url, params={"query": QUERY, "k": bad})
        assert refused.status_code == 400 and refused.json()["error"] and "'k'" in refused.json()["message"], bad
    missing = requests.get(url, params={"k": 3})
    assert missing.status_code == 400 and "'query'" in missing.json()["message"]


@pytest.mark.parametrize("post", [False, True], ids=["get", "post"])
def test_dspy_colbertv2_at_the_root_and_at_api_search(colbert, post):
    expected = [f"{h.title} | {h.text}" for h in colbert["retriever"].search(QUERY, 3)]
    for client in (
        ColBERTv2(
            url="http://127.0.0.1", port=colbert["port"], post_requests=post
        ),  # DSPy's own default layout: the root URL
        ColBERTv2(url=colbert["url"] + "/api/search", post_requests=post),
    ):
        assert client(QUERY, k=3, simplify=True) == expected
        passages = client(QUERY, k=3)
        assert [p["text"] for p in passages] == expected and all({"pid", "score", "prob"} <= set(p) for p in passages)


def test_dspy_reaches_a_locked_server_with_the_key_in_its_url(colbert):
    for url in (
        colbert["locked"] + f"/k/{KEY}/api/search",
        colbert["locked"] + f"/api/search?api_key={KEY}",
        colbert["locked"] + f"/k/{KEY}",
    ):
        for post in (False, True):
            assert len(ColBERTv2(url=url, post_requests=post)(QUERY, k=2)) == 2, (url, post)
    with pytest.raises(requests.HTTPError, match="401"):
        ColBERTv2(url=colbert["locked"] + "/api/search")(QUERY, k=2)


def test_the_root_says_what_the_server_is(colbert):
    about = requests.get(colbert["url"] + "/").json()
    assert (
        "mhindex serve" in about["message"]
        and about["endpoints"]["/api/search"].startswith("GET, POST: ColBERT")
        and "/retrieve/" in about["endpoints"]
    )
    unknown = requests.get(colbert["url"] + "/nowhere")
    assert unknown.status_code == 404 and "/api/search" in unknown.json()["error"]
