"""`mhindex serve` for real: a Lucene index of the MuSiQue sample served by uvicorn on 127.0.0.1,
asked in each protocol with the request its own client sends (IRCoT's, ColBERT's, Search-R1's),
every answer checked against the same search in process; the limits and the API key; many
clients at once; and the remote backend (`--backend http://...`) reading each protocol back."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from conftest import SAMPLES
from mhindex.backends import build_index, open_retriever
from mhindex.cli import main
from mhindex.corpora import DATASETS
from mhindex.corpora.build import build_corpus
from mhindex.errors import UsageError
from mhindex.server.app import Limits, make_app

QUERIES = ["Who was Mach's principle named after?", "capital of the Andaman and Nicobar Islands", "Lost Gravity roller coaster", "AND OR : \" ( weird"]
KEY = "s3cret"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import uvicorn

    home = tmp_path_factory.mktemp("serve-home")
    corpus = build_corpus(DATASETS["musique"], [SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl"], home).corpus
    build_index(corpus, "lucene")
    retriever = open_retriever(corpus, "lucene")
    from mhindex.server.protocols import corpus_lines

    positions = corpus_lines(corpus)
    info = {"corpus": corpus.name, "backend": "lucene", "paragraphs": corpus.manifest()["counts"]["paragraphs"]}
    servers = {}
    for name, key in (("open", None), ("locked", KEY)):
        port = free_port()
        app = make_app(retriever, info, Limits(max_k=50, max_batch=8, max_body_bytes=20_000, threads=4), key, positions, access_log=False)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers[name] = (f"http://127.0.0.1:{port}", server, thread)
    deadline = time.time() + 30
    while not all(s.started for _, s, _ in servers.values()) and time.time() < deadline:
        time.sleep(0.05)
    yield {name: url for name, (url, _, _) in servers.items()}, retriever, corpus, home, positions
    for _, server, thread in servers.values():
        server.should_exit = True
        thread.join(timeout=10)
    retriever.close()


def ids(hits) -> list[str]:
    return [h.id for h in hits]


def test_own_api_answers_as_the_index_does_in_process(served):
    urls, retriever, corpus, _, _ = served
    url = urls["open"]
    assert httpx.get(url + "/health").json() == {"status": "ok"}
    assert httpx.get(url + "/info").json()["paragraphs"] == corpus.manifest()["counts"]["paragraphs"]
    for query in QUERIES:
        reply = httpx.post(url + "/search", json={"query": query, "k": 5}).json()
        assert reply["query"] == query and [h["id"] for h in reply["hits"]] == ids(retriever.search(query, 5))
    batch = httpx.post(url + "/search/batch", json={"queries": QUERIES, "k": 3}).json()["results"]
    assert [[h["id"] for h in r["hits"]] for r in batch] == [ids(retriever.search(q, 3)) for q in QUERIES]
    scoped = httpx.post(url + "/search", json={"query": "Ernst Mach", "k": 5, "titles": ["Mach bands"]}).json()["hits"]
    assert scoped and {h["title"] for h in scoped} == {"Mach bands"}


def test_ircot_colbert_and_search_r1_clients_get_their_shapes(served):
    urls, retriever, _, _, positions = served
    url = urls["open"]
    query = QUERIES[0]
    expected = retriever.search(query, 3)
    # IRCoT's client (commaqa/inference/ircot.py) posts to /retrieve and checks corpus_name.
    ircot = httpx.post(url + "/retrieve", json={"retrieval_method": "retrieve_from_elasticsearch", "query_text": query, "max_hits_count": 3, "corpus_name": "musique", "document_type": "title_paragraph_text"}).json()
    assert [r["id"] for r in ircot["retrieval"]] == ids(expected) and {r["corpus_name"] for r in ircot["retrieval"]} == {"musique"}
    assert set(ircot["retrieval"][0]) >= {"id", "title", "paragraph_text", "score"} and isinstance(ircot["time_in_seconds"], float)
    titled = httpx.post(url + "/retrieve/", json={"retrieval_method": "retrieve_from_elasticsearch", "query_text": "Ernst Mach", "max_hits_count": 3, "allowed_titles": ["Mach bands"], "corpus_name": "musique"}).json()
    assert {r["title"] for r in titled["retrieval"]} == {"Mach bands"}
    # ColBERT's server: GET /api/search?query=&k=, pids are corpus lines, probabilities sum to 1.
    colbert = httpx.get(url + "/api/search", params={"query": query, "k": 3}).json()
    assert colbert["query"] == query and [t["pid"] for t in colbert["topk"]] == [positions(h.id) for h in expected]
    assert [t["rank"] for t in colbert["topk"]] == [1, 2, 3] and abs(sum(t["prob"] for t in colbert["topk"]) - 1) < 1e-9
    assert colbert["topk"][0]["text"] == f"{expected[0].title} | {expected[0].text}"
    # Search-R1's client (search_r1/llm_agent/generation.py) posts queries, topk and return_scores.
    r1 = httpx.post(url + "/retrieve", json={"queries": QUERIES[:2], "topk": 3, "return_scores": True}).json()["result"]
    assert [[d["document"]["id"] for d in hits] for hits in r1] == [ids(retriever.search(q, 3)) for q in QUERIES[:2]]
    assert r1[0][0]["document"]["contents"] == f"{expected[0].title}\n{expected[0].text}" and isinstance(r1[0][0]["score"], float)
    bare = httpx.post(url + "/retrieve", json={"queries": [query], "topk": 2}).json()["result"]
    assert set(bare[0][0]) == {"id", "contents"}


def test_limits_and_the_api_key(served):
    urls, _, _, _, _ = served
    url = urls["open"]
    for path, body, status, fragment in [
        ("/search", {"query": "x", "k": 51}, 400, "k should be between 1 and 50"),
        ("/search", {"k": 3}, 400, "field 'query' is missing"),
        ("/search/batch", {"queries": ["x"] * 9}, 400, "at most 8"),
        ("/search", {"query": "x" * 30_000}, 413, "over 20,000 bytes"),
        ("/retrieve/", {"retrieval_method": "retrieve_from_faiss", "query_text": "x"}, 400, "is not served"),
    ]:
        reply = httpx.post(url + path, json=body)
        assert reply.status_code == status and fragment in reply.json()["error"], reply.text
    assert httpx.post(url + "/search", content=b"not json").status_code == 400
    locked = urls["locked"]
    assert httpx.get(locked + "/health").status_code == 401
    assert httpx.get(locked + "/health", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(locked + "/health", headers={"Authorization": f"Bearer {KEY}"}).json() == {"status": "ok"}
    assert httpx.get(locked + "/api/search", params={"query": "Mach"}, headers={"X-API-Key": KEY}).status_code == 200


def test_many_clients_at_once_get_their_own_answers(served):
    urls, retriever, _, _, _ = served
    expected = {q: ids(retriever.search(q, 4)) for q in QUERIES}
    work = [QUERIES[i % len(QUERIES)] for i in range(128)]
    with httpx.Client(limits=httpx.Limits(max_connections=32)) as client, ThreadPoolExecutor(32) as pool:
        replies = list(pool.map(lambda q: (q, client.post(urls["open"] + "/search", json={"query": q, "k": 4}).json()), work))
    wrong = [(q, reply) for q, reply in replies if reply.get("query") != q or [h["id"] for h in reply["hits"]] != expected[q]]
    assert not wrong, wrong[:2]


def test_the_remote_backend_reads_each_protocol_back(served):
    urls, retriever, corpus, _, _ = served
    for protocol in ("mhindex", "ircot", "colbert", "search-r1"):
        remote = open_retriever(corpus, urls["open"], {"remote_protocol": protocol})
        # ColBERT names a passage by its line and puts the title in its text: compare what it says.
        same = (lambda h: (h.title, h.text)) if protocol == "colbert" else (lambda h: (h.id, h.title, h.text))
        for query in QUERIES[:2]:
            assert [same(h) for h in remote.search(query, 4)] == [same(h) for h in retriever.search(query, 4)], protocol
        assert [[same(h) for h in hits] for hits in remote.search_many(QUERIES, 3)] == [[same(h) for h in retriever.search(q, 3)] for q in QUERIES], protocol
        remote.close()
    locked = open_retriever(None, urls["locked"], {"remote_api_key": KEY})
    assert ids(locked.search(QUERIES[0], 2)) == ids(retriever.search(QUERIES[0], 2))
    with pytest.raises(Exception, match="HTTP 401"):
        open_retriever(None, urls["locked"]).search("x", 1)
    with pytest.raises(UsageError, match="nothing to build here"):
        build_index(corpus, urls["open"])


def test_search_through_a_served_index_without_a_local_corpus(served, capsys):
    urls, retriever, _, home, _ = served
    other = home.parent / "client-home"  # the client has no corpus of its own
    capsys.readouterr()
    assert main(["--home", str(other), "search", "musique", QUERIES[0], "--backend", urls["open"], "-k", "3", "--json"]) == 0
    assert [h["id"] for h in json.loads(capsys.readouterr().out)["hits"]] == ids(retriever.search(QUERIES[0], 3))
    assert main(["--home", str(other), "search", "musique", "x", "--backend", "http://127.0.0.1:9"]) == 1
    assert "cannot reach the index server at http://127.0.0.1:9/search" in capsys.readouterr().err


def test_the_serve_command_starts_logs_and_stops_on_ctrl_c(served):
    import signal
    import subprocess
    import sys

    _, retriever, corpus, home, _ = served
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mhindex", "--home", str(home), "serve", corpus.name, "--port", str(port), "--api-key", KEY],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url, headers = f"http://127.0.0.1:{port}", {"X-API-Key": KEY}
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(url + "/health", headers=headers).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    info = httpx.get(url + "/info", headers=headers).json()
    assert info["corpus"] == corpus.name and info["backend"] == "lucene" and info["index"]["k1"] == 1.2
    hits = httpx.get(url + "/api/search", params={"query": QUERIES[0], "k": 2}, headers=headers).json()["topk"]
    assert [h["text"].split(" | ", 1)[1] for h in hits] == [h.text for h in retriever.search(QUERIES[0], 2)]
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert {"path": "/api/search", "status": 200} in [{"path": x.get("path"), "status": x.get("status")} for x in lines]  # the access log
