"""`mhindex serve` for real: a Lucene index of the MuSiQue sample served by uvicorn on 127.0.0.1.
mhindex's own API against the same search in process; what every protocol shares (limits, the
API key in every form a client can carry it, bad bodies, failures, slow and vanishing clients, the
access log); many clients at once; the remote backend (`--backend http://...`) reading each
protocol back with the corpus's own ids; and the serve command itself. Each peer's protocol has
its own module (test_serve_ircot.py, test_serve_search_r1.py, test_serve_colbert.py)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import orjson
import pytest

from conftest import HANG_S, read_jsonl, serve_index
from mhindex.backends import BackendSpec, build_index, open_retriever
from mhindex.cli import main
from mhindex.errors import UsageError
from mhindex.eval.metrics import retrieval_recall
from servers import Uvicorn, free_port, wait_until_serving

QUERIES = [
    "Who was Mach's principle named after?",
    "capital of the Andaman and Nicobar Islands",
    "Lost Gravity roller coaster",
    'AND OR : " ( weird',
]
KEY = "s3cret"


@pytest.fixture(scope="module")
def served(musique_lucene):
    corpus, retriever = musique_lucene
    small = {"max_k": 50, "max_batch": 8, "max_body_bytes": 20_000, "body_seconds": 1.0}
    with (
        Uvicorn(serve_index(corpus, retriever, **small)) as open_server,
        Uvicorn(serve_index(corpus, retriever, api_key=KEY, **small)) as locked,
    ):
        yield {"open": open_server.url, "locked": locked.url}, retriever, corpus


def ids(hits) -> list[str]:
    return [h.id for h in hits]


def test_a_served_index_and_an_evaluation_are_compared_on_their_retrieval(served, tmp_path, monkeypatch):
    """`mhindex.diff` with a server: its /info against an evaluation's run.json, the retrieval alone (a server
    answers nothing, so no model or method is compared); a ranking setting that differs is one line."""
    import mhindex

    urls, _, corpus = served
    about = httpx.get(urls["open"] + "/info").json()
    assert about["corpus_sha256"] == corpus.manifest()["corpus_sha256"] and about["index"]["k1"] == 1.2
    assert (
        about["fingerprint"]["corpus"]["sha256"] == about["corpus_sha256"]
        and "Porter" in about["fingerprint"]["retrieval"]["queries"]
    )
    run = {"corpus_sha256": about["corpus_sha256"], "backend": "lucene", "index": about["index"], "lm": "local:x"}
    (tmp_path / "run.json").write_text(json.dumps({**run, "settings": {"oner": {"k": 5}}}))
    assert mhindex.diff(urls["open"], tmp_path) == [] and mhindex.diff(urls["open"], urls["open"]) == []
    (tmp_path / "run.json").write_text(json.dumps({**run, "index": {**about["index"], "b": 0.4, "threads": 9}}))
    assert mhindex.diff(tmp_path, urls["open"]) == ["retrieval.b: 0.4 in the first, 0.75 in the second"]
    monkeypatch.delenv("MHINDEX_API_KEY", raising=False)
    with pytest.raises(mhindex.UsageError, match="no /info of a served index there"):
        mhindex.diff(urls["locked"], tmp_path)  # no key for it: one line, not a traceback
    monkeypatch.setenv("MHINDEX_API_KEY", KEY)
    assert mhindex.diff(urls["locked"], urls["open"]) == []  # with its key from the environment


def test_own_api_answers_as_the_index_does_in_process(served):
    urls, retriever, corpus = served
    url = urls["open"]
    assert httpx.get(url + "/health").json() == {"status": "ok"}
    about = httpx.get(url + "/info").json()
    assert about["paragraphs"] == corpus.manifest()["counts"]["paragraphs"] and about["limits"]["max_batch"] == 8
    for query in QUERIES:
        reply = httpx.post(url + "/search", json={"query": query, "k": 5}).json()
        assert reply["query"] == query and [h["id"] for h in reply["hits"]] == ids(retriever.search(query, 5))
    batch = httpx.post(url + "/search/batch", json={"queries": QUERIES, "k": 3}).json()["results"]
    assert [[h["id"] for h in r["hits"]] for r in batch] == [ids(retriever.search(q, 3)) for q in QUERIES]
    scoped = httpx.post(url + "/search", json={"query": "Ernst Mach", "k": 5, "titles": ["mach bands"]}).json()["hits"]
    assert scoped and {h["title"] for h in scoped} == {"Mach bands"}
    assert (
        len(httpx.post(url + "/search", json={"query": "American film", "k": 500}).json()["hits"]) == 50
    )  # capped at --max-k
    assert httpx.post(url + "/search", json={"query": "Mach", "k": 0}).json()["hits"] == []


def test_limits_and_bad_bodies_are_400s_with_the_reason(served):
    url = served[0]["open"]
    for path, body, status, fragment in [
        ("/search", {"query": "x", "k": -1}, 400, "k should be 0 or more"),
        ("/search", {"k": 3}, 400, "field 'query' is missing"),
        ("/search/batch", {"queries": ["x"] * 9}, 413, "at most 8"),
        ("/search", {"query": "x" * 30_000}, 413, "over 20,000 bytes"),
        ("/search", [1, 2], 400, "should be a JSON object"),
        *(
            ("/search", {"query": "x", "titles": titles}, 400, "'titles' should be a list of strings")
            for titles in ([1, 2], [[1]], [{}], [None], "Mach bands")
        ),
        # A field no endpoint reads is refused, never passed over ({"K": 3} once answered 10 hits)
        ("/search", {"query": "x", "K": 3}, 400, "unknown field 'K': POST /search takes query, k, titles"),
        ("/search/batch", {"queries": ["x"], "top_n": 3}, 400, "unknown field 'top_n'"),
        # A /retrieve body of neither dialect: once HTTP 200 and an empty `retrieval` (IRCoT's shape, FastAPI's
        # {"detail"} error, as IRCoT's server is FastAPI)
        ("/retrieve", {}, 400, "a /retrieve body is Search-R1's"),
        ("/retrieve", {"q": "Mach bands", "n": 3}, 400, "this one has 'q', 'n'"),
    ]:
        reply = httpx.post(url + path, json=body)
        said = reply.json().get("error") or reply.json().get("detail")
        assert reply.status_code == status and fragment in said, (body, reply.text)
    assert "not JSON" in httpx.post(url + "/search", content=b"not json").json()["error"]
    wrong_method = httpx.get(url + "/search")
    assert wrong_method.status_code == 405 and "POST /search" in wrong_method.json()["error"]


def test_the_api_key_in_every_form_a_client_can_carry_it(served):
    locked = served[0]["locked"]
    # A load balancer's probe sends no key: /health answers it, saying nothing of the index; the rest wants one.
    assert httpx.get(locked + "/health").json() == {"status": "ok"}
    assert httpx.post(locked + "/health").status_code == 401
    assert httpx.get(locked + "/info").status_code == 401
    assert httpx.get(locked + "/info", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(locked + "/info", params={"api_key": "wrong"}).status_code == 401
    for request in (
        {"headers": {"Authorization": f"Bearer {KEY}"}},
        {"headers": {"X-API-Key": KEY}},
        {"auth": ("key", KEY)},
        {"auth": (KEY, "")},
        {"params": {"api_key": KEY}},
    ):
        assert httpx.get(locked + "/info", **request).json()["backend"] == "lucene", request
    assert httpx.get(f"{locked}/k/{KEY}/health").json() == {"status": "ok"}
    assert httpx.post(f"{locked}/k/{KEY}/search", json={"query": "Mach", "k": 1}).json()["hits"]
    with pytest.raises(ValueError, match="empty"):
        serve_index(served[2], served[1], api_key="")


def test_a_failing_search_is_a_500_in_each_protocol_s_shape(served):
    _, _, corpus = served
    broken = open_retriever(corpus, BackendSpec.parse("lucene"))
    broken.close()  # searching a closed Lucene index raises inside the JVM
    with Uvicorn(serve_index(corpus, broken)) as server:
        for method, path, body, key in [
            ("POST", "/search", {"query": "Mach"}, "error"),
            ("POST", "/retrieve", {"query_text": "Mach", "corpus_name": "musique"}, "detail"),
            ("POST", "/retrieve", {"queries": ["Mach"]}, "detail"),
            ("GET", "/api/search?query=Mach", None, "message"),
        ]:
            reply = httpx.request(method, server.url + path, json=body)
            assert reply.status_code == 500 and reply.json()[key].startswith(
                "the search failed: IndexDamaged: searching the lucene index of 'musique'"
            ), (path, reply.text)
            assert (
                "JavaException" in reply.json()[key]
                and "rebuild it: mhindex index musique --backend lucene --force" in reply.json()[key]
            )
            assert "\n" not in reply.json()[key]


def test_slow_and_vanishing_clients(served):
    url = served[0]["open"]
    port = int(url.rsplit(":", 1)[1])
    # A body that trickles in is cut off after --body time (1 s here), with a 408.
    with socket.create_connection(("127.0.0.1", port)) as slow:
        slow.sendall(
            b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            b'{"query"'
        )
        slow.settimeout(10)
        started = time.time()
        answer = b""
        while b"within" not in answer and (chunk := slow.recv(4096)):
            answer += chunk
        answer = answer.decode()
    assert answer.startswith("HTTP/1.1 408") and "did not arrive within 1 s" in answer and time.time() - started < 5
    # A client that hangs up mid-body leaves the server answering others.
    with socket.create_connection(("127.0.0.1", port)) as gone:
        gone.sendall(b'POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"qu')
    assert httpx.get(url + "/health").json() == {"status": "ok"}


def test_many_clients_at_once_get_their_own_answers(served):
    urls, retriever, _ = served
    expected = {q: ids(retriever.search(q, 4)) for q in QUERIES}
    work = [QUERIES[i % len(QUERIES)] for i in range(128)]
    with httpx.Client(limits=httpx.Limits(max_connections=32)) as client, ThreadPoolExecutor(32) as pool:
        replies = list(
            pool.map(lambda q: (q, client.post(urls["open"] + "/search", json={"query": q, "k": 4}).json()), work)
        )
    wrong = [
        (q, reply) for q, reply in replies if reply.get("query") != q or [h["id"] for h in reply["hits"]] != expected[q]
    ]
    assert not wrong, wrong[:2]


def test_the_remote_backend_reads_each_protocol_back_with_the_corpus_s_ids(served):
    urls, retriever, corpus = served
    questions = [orjson.loads(line) for line in corpus.questions.read_bytes().splitlines()][:20]
    in_process = [retrieval_recall(ids(retriever.search(q["question"], 15)), q["gold_ids"]) for q in questions]
    for protocol in ("mhindex", "ircot", "colbert", "search-r1"):
        remote = open_retriever(corpus, BackendSpec.parse(urls["open"], {"remote_protocol": protocol}))
        for query in QUERIES[:2]:
            assert [(h.id, h.title, h.text) for h in remote.search(query, 4)] == [
                (h.id, h.title, h.text) for h in retriever.search(query, 4)
            ], protocol
        assert [ids(hits) for hits in remote.search_many(QUERIES, 3)] == [
            ids(retriever.search(q, 3)) for q in QUERIES
        ], protocol
        scoped = remote.search("Ernst Mach", 3, titles=["Mach bands"])
        assert scoped and {h.title for h in scoped} == {"Mach bands"}, protocol
        recall = [retrieval_recall(ids(remote.search(q["question"], 15)), q["gold_ids"]) for q in questions]
        assert recall == in_process and sum(recall) > 0, protocol  # eval's recall is the same on every protocol
        remote.close()
    # A ColBERT server that sends no `id` (stanford-futuredata/ColBERT's own): the local corpus's
    # paragraph on line `pid`, when its text is the one served.
    remote = open_retriever(corpus, BackendSpec.parse(urls["open"], {"remote_protocol": "colbert"}))
    hit = retriever.search(QUERIES[0], 1)[0]
    line = next(i for i, record in enumerate(corpus.paragraphs()) if record["id"] == hit.id)
    assert remote._colbert_hit({"text": f"{hit.title} | {hit.text}", "pid": line, "score": 1.0}).id == hit.id
    assert remote._colbert_hit({"text": "Other | text", "pid": line, "score": 1.0}).id == str(line)
    remote.close()
    locked = open_retriever(None, BackendSpec.parse(urls["locked"], {"remote_api_key": KEY}))
    assert ids(locked.search(QUERIES[0], 2)) == ids(retriever.search(QUERIES[0], 2))
    with pytest.raises(Exception, match="HTTP 401"):
        open_retriever(None, BackendSpec.parse(urls["locked"])).search("x", 1)
    with pytest.raises(UsageError, match="nothing to build here"):
        build_index(corpus, BackendSpec.parse(urls["open"]))


def test_search_through_a_served_index_without_a_local_corpus(served, capsys, tmp_path):
    urls, retriever, _ = served
    other = tmp_path / "client-home"  # the client has no corpus of its own
    capsys.readouterr()
    assert (
        main(["--home", str(other), "search", "musique", QUERIES[0], "--backend", urls["open"], "-k", "3", "--json"])
        == 0
    )
    assert [h["id"] for h in json.loads(capsys.readouterr().out)["hits"]] == ids(retriever.search(QUERIES[0], 3))
    assert main(["--home", str(other), "search", "musique", "x", "--backend", "http://127.0.0.1:9"]) == 1
    assert "cannot reach the index server at http://127.0.0.1:9/search" in capsys.readouterr().err


def test_the_serve_command_starts_logs_keeps_keys_out_of_the_log_and_stops_on_ctrl_c(served, capsys):
    _, retriever, corpus = served
    home = corpus.root.parent
    assert main(["--home", str(home), "serve", corpus.name, "--api-key", ""]) == 2
    assert "--api-key (or $MHINDEX_API_KEY) is empty" in capsys.readouterr().err
    with pytest.MonkeyPatch.context() as env:  # the empty variable is refused too, not taken for "no key"
        env.setenv("MHINDEX_API_KEY", "")
        assert main(["--home", str(home), "serve", corpus.name]) == 2
        assert "--api-key (or $MHINDEX_API_KEY) is empty" in capsys.readouterr().err
    with socket.socket() as taken:  # a port in use is one line, before "serving" is ever said
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = taken.getsockname()[1]
        assert main(["--home", str(home), "serve", corpus.name, "--port", str(busy)]) == 2
        said = capsys.readouterr().err
        assert f"cannot listen on 127.0.0.1:{busy} (Address already in use): another server is on it" in said
        assert "serving" not in said
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mhindex",
            "--home",
            str(home),
            "serve",
            corpus.name,
            "--port",
            str(port),
            "--api-key",
            KEY,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(url + "/health", headers={"X-API-Key": KEY}).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    info = httpx.get(f"{url}/k/{KEY}/info").json()
    assert info["corpus"] == corpus.name and info["backend"] == "lucene" and info["index"]["k1"] == 1.2
    hits = httpx.get(url + "/api/search", params={"query": QUERIES[0], "k": 2, "api_key": KEY}).json()["topk"]
    assert [h["text"].split(" | ", 1)[1] for h in hits] == [h.text for h in retriever.search(QUERIES[0], 2)]
    for odd in (f"/search/k/{KEY}", f"//k/{KEY}/info", f"/K/{KEY}/info"):  # where no client puts a key
        assert httpx.get(url + odd).status_code in (401, 404)
    with socket.create_connection(("127.0.0.1", port)) as gone:  # hangs up mid-body
        gone.sendall(f"POST /k/{KEY}/search HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{{".encode())
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=HANG_S)
    assert process.returncode == 0, err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert {"path": "/api/search", "status": 200} in [
        {"path": x.get("path"), "status": x.get("status")} for x in lines
    ]  # the access log
    assert {"path": "/search", "status": 499} in [
        {"path": x.get("path"), "status": x.get("status")} for x in lines
    ]  # one line, no traceback
    assert KEY not in err and "Traceback" not in err
    assert any(x.get("path") == "/search/k/***" for x in lines)  # logged, the key blanked


class Slow:
    """The MuSiQue retriever, each query taking `seconds` more: a worker's time that a test can count on."""

    def __init__(self, retriever, seconds: float) -> None:
        self.retriever, self.seconds = retriever, seconds

    def search(self, query, k, **options):
        time.sleep(self.seconds)
        return self.retriever.search(query, k, **options)

    def search_many(self, queries, k, **options):
        time.sleep(self.seconds * len(queries))
        return self.retriever.search_many(queries, k, **options)

    def __getattr__(self, name):
        return getattr(self.retriever, name)


@pytest.mark.parametrize("fresh", [False, True], ids=["after-a-search", "fresh"])
def test_a_request_that_would_wait_past_max_wait_ms_is_refused_at_once(musique_lucene, fresh):
    """One worker, queries of 0.3 s, --max-wait-ms 700: while a 5-query batch holds the worker, the searches queued
    behind it are admitted while the queries ahead of them would take at most 0.7 s (three: 0, 0.3 and 0.6 s), the
    next refused at once with 503 and Retry-After; the admitted ones are answered in full, and once the queue has
    gone the server admits again. A fresh server, before its first search, holds the same limit (it times one
    search before it answers anything; it once queued any burst until a search had ended)."""
    import threading

    corpus, retriever = musique_lucene
    for query in QUERIES:  # Lucene warm, so that the server's first search times what a query takes
        retriever.search(query, 3)
    app = serve_index(corpus, Slow(retriever, 0.3), workers=1, max_wait_ms=700)
    with Uvicorn(app) as server:
        if not fresh:
            assert httpx.post(f"{server.url}/search", json={"query": QUERIES[0], "k": 3}).status_code == 200
        answers: dict[int, tuple[httpx.Response, float]] = {}

        def post(number: int, body: dict, path: str = "/search") -> None:
            sent = time.perf_counter()
            answer = httpx.post(f"{server.url}{path}", json=body, timeout=HANG_S)
            answers[number] = (answer, time.perf_counter() - sent)

        threads = [threading.Thread(target=post, args=(0, {"queries": QUERIES[:1] * 5, "k": 3}, "/search/batch"))]
        threads[0].start()
        time.sleep(0.2)  # the batch holds the worker for 1.5 s
        for number in range(1, 6):
            threads.append(threading.Thread(target=post, args=(number, {"query": QUERIES[1], "k": 3})))
            threads[-1].start()
            time.sleep(0.1)  # in this order
        for thread in threads:
            thread.join()
        statuses = [answers[n][0].status_code for n in range(6)]
        assert statuses == [200, 200, 200, 200, 503, 503]
        for refused, seconds in (answers[4], answers[5]):
            assert seconds < 0.6 and refused.headers["Retry-After"] == "1"  # at once, not after the queue
            assert "would wait about 0.9 s for a worker" in refused.json()["error"]
        expected = [h.id for h in retriever.search(QUERIES[1], 3)]
        assert all([h["id"] for h in answers[n][0].json()["hits"]] == expected for n in (1, 2, 3))
        assert httpx.post(f"{server.url}/search", json={"query": QUERIES[2], "k": 3}).status_code == 200


def test_served_lucene_searches_of_concurrent_requests_go_to_anserini_s_threads_together(musique_lucene):
    """With --threads 2 and --gather-ms, the queries of requests that come together are one Anserini batch on its
    own threads (a single Lucene search runs on one core): each request gets the paragraphs it gets searched alone."""
    corpus, alone = musique_lucene
    threaded = open_retriever(corpus, BackendSpec.parse("lucene", {"threads": 2}))
    batches: list[int] = []

    class Counted:
        def search_many(self, queries, k=10):
            batches.append(len(queries))
            return threaded.search_many(queries, k)

        def __getattr__(self, name):
            return getattr(threaded, name)

    questions = [q["question"] for q in read_jsonl(corpus.questions)][:24]
    assert BackendSpec.parse("lucene").batches  # what `serve` hands the app: it gathers for Lucene
    app = serve_index(corpus, Counted(), batches=True, workers=1, gather_ms=50.0)
    try:
        with Uvicorn(app) as server, ThreadPoolExecutor(12) as pool:
            replies = list(pool.map(lambda q: httpx.post(f"{server.url}/search", json={"query": q, "k": 5}), questions))
    finally:
        threaded.close()
    for question, reply in zip(questions, replies, strict=True):
        expected, hits = alone.search(question, 5), reply.json()["hits"]
        assert [h["id"] for h in hits] == [h.id for h in expected], question
        # Anserini builds its own query of the same terms: the same BM25 summed in another order
        assert [h["score"] for h in hits] == pytest.approx([h.score for h in expected], rel=1e-4)
    assert sum(batches) == len(questions) and max(batches) > 1  # gathered


@pytest.mark.slow
def test_a_large_batch_shares_the_workers_and_a_full_queue_is_refused_with_retry_after(musique_lucene):
    """One worker: a batch of thousands of queries is searched a chunk at a time, so a single search sent while it
    runs waits one chunk, not the batch; requests past `max_waiting` waiting searches are answered 503 with
    Retry-After at once, the others in full, and the server goes on."""
    import threading

    corpus, retriever = musique_lucene
    limits = {"workers": 1, "batch_chunk": 16, "max_waiting": 2, "max_batch": 10_000}
    many = [f"{QUERIES[i % 3]} {i}" for i in range(4000)]
    with Uvicorn(serve_index(corpus, retriever, **limits)) as server:
        finished: dict[str, float] = {}
        answered: dict[str, httpx.Response] = {}

        def batch() -> None:
            answered["batch"] = httpx.post(f"{server.url}/search/batch", json={"queries": many, "k": 3}, timeout=HANG_S)
            finished["batch"] = time.perf_counter()

        running = threading.Thread(target=batch)
        running.start()
        time.sleep(0.5)  # the batch is under way: 4,000 queries take seconds, a chunk milliseconds
        single = httpx.post(f"{server.url}/search", json={"query": QUERIES[0], "k": 3}, timeout=HANG_S)
        finished["single"] = time.perf_counter()
        running.join()
        assert single.status_code == 200 and answered["batch"].status_code == 200
        assert finished["single"] < finished["batch"]  # it did not wait for the whole batch
        results = answered["batch"].json()["results"]
        assert len(results) == 4000
        for i in (0, 1999, 3999):  # chunked or not, each query's hits are its own
            assert [h["id"] for h in results[i]["hits"]] == [h.id for h in retriever.search(many[i], 3)]

        # Six batches at once on one worker: the queue holds two waiting searches; the rest are refused at once.
        def post(_: int) -> httpx.Response:
            return httpx.post(f"{server.url}/search/batch", json={"queries": many[:800], "k": 3}, timeout=HANG_S)

        with ThreadPoolExecutor(6) as pool:
            burst = list(pool.map(post, range(6)))
        busy = [r for r in burst if r.status_code == 503]
        assert busy and all(r.headers["Retry-After"] == "1" and "the server is busy" in r.json()["error"] for r in busy)
        assert all(len(r.json()["results"]) == 800 for r in burst if r.status_code == 200)
        assert any(r.status_code == 200 for r in burst)
        assert httpx.get(f"{server.url}/health").status_code == 200
        assert httpx.post(f"{server.url}/search", json={"query": QUERIES[1], "k": 2}).status_code == 200


def test_a_keyless_loopback_server_answers_only_requests_addressed_to_it(served):
    """DNS rebinding: a web page's script reaching 127.0.0.1 through a name of its own sends that name as the Host
    (and its site as the Origin): refused, 403, naming it. A server with a key answers whoever has it."""
    urls, _, _ = served
    body = {"query": QUERIES[0], "k": 1}
    assert httpx.post(urls["open"] + "/search", json=body).status_code == 200
    assert (
        httpx.post(urls["open"] + "/search", json=body, headers={"Origin": "http://localhost:3000"}).status_code == 200
    )
    for headers, said in (({"Host": "evil.example"}, "not Host evil.example"),
                          ({"Origin": "http://evil.example"}, "not Origin http://evil.example")):  # fmt: skip
        refused = httpx.post(urls["open"] + "/search", json=body, headers=headers)
        assert refused.status_code == 403 and said in refused.text
    keyed = httpx.post(urls["locked"] + "/search", json=body, headers={"Host": "evil.example", "X-API-Key": KEY})
    assert keyed.status_code == 200


@pytest.mark.parametrize(
    "reply, said",
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested more than 16 levels deep"),
        (b'{"index": [1, 2]}', "field 'index' is not a JSON object"),
        (b'{"fingerprint": {"corpus": "x"}}', "fingerprint.corpus is not a JSON object"),
        (b'{"pad": "' + b"x" * (2 << 20) + b'"}', "passed 1,048,576 bytes"),
    ],
)
def test_a_peer_s_reply_to_diff_is_read_with_limits(reply, said):
    """`mhindex diff http://HOST` reads a peer's /info with a size, depth, shape and time limit: one line each."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import mhindex
    from servers import FileServer  # noqa: F401 - the file server's module; the peer here is a bare one

    class Peer(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    peer = ThreadingHTTPServer(("127.0.0.1", 0), Peer)
    threading.Thread(target=peer.serve_forever, daemon=True).start()
    try:
        with pytest.raises(mhindex.UsageError, match=said):
            mhindex.diff(f"http://127.0.0.1:{peer.server_address[1]}", f"http://127.0.0.1:{peer.server_address[1]}")
    finally:
        peer.shutdown()


STOPPED_WHILE_SEARCHING = """
import sys
import time
from pathlib import Path

from mhindex.backends import BackendSpec, open_retriever
from mhindex.home import open_corpus
from mhindex.server import app as server
from mhindex.server.limits import Limits
from mhindex.ui import stop_signals


class Slow:  # each batch holds the one worker 4 s, past the shutdown's grace of 1 s
    def __init__(self, retriever):
        self.retriever = retriever

    def search_many(self, queries, k, **options):
        time.sleep(4)
        return self.retriever.search_many(queries, k, **options)

    def __getattr__(self, name):
        return getattr(self.retriever, name)


corpus = open_corpus(Path(sys.argv[1]), sys.argv[2])
retriever = Slow(open_retriever(corpus, BackendSpec.parse("lucene")))
server.SHUTDOWN_GRACE_S = 1
sock = server.listening_socket("127.0.0.1", int(sys.argv[3]))
with stop_signals():  # as the CLI runs it: SIGTERM unwinds as Ctrl-C does
    server.serve(server.make_app(retriever, {"corpus": corpus.name}, Limits(workers=1)), sock)
"""


def test_sigterm_while_batches_run_refuses_what_has_not_begun_and_prints_no_traceback(musique_lucene, tmp_path):
    """A real server over the MuSiQue index, one worker, each batch 4 s, SIGTERM while one batch runs and two wait:
    the two waiting are refused at once (503, not begun), the one running is answered 503 when the shutdown's grace
    is over, and the log holds one line for each, no "Exception in ASGI application" and no traceback (before,
    the waiting ones were searched through the grace and the one cut short printed uvicorn's traceback)."""
    corpus, _ = musique_lucene
    port, script = free_port(), tmp_path / "serve_slowly.py"
    script.write_text(STOPPED_WHILE_SEARCHING)
    process = subprocess.Popen(
        [sys.executable, str(script), str(corpus.root.parent), corpus.name, str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url)

        def batch(_: int) -> httpx.Response:
            return httpx.post(url + "/search/batch", json={"queries": QUERIES[:2], "k": 3}, timeout=HANG_S)

        with ThreadPoolExecutor(3) as pool:
            first = pool.submit(batch, 0)
            time.sleep(0.5)  # the first holds the worker
            waiting = [pool.submit(batch, n) for n in (1, 2)]
            time.sleep(0.5)
            process.send_signal(signal.SIGTERM)
            answers = [first.result(), *(w.result() for w in waiting)]
        _, err = process.communicate(timeout=HANG_S)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert [a.status_code for a in answers] == [503, 503, 503]
    errors = [a.json()["error"] for a in answers]
    assert "stopped before this search was done" in errors[0]
    assert all("stopping: this search was not begun" in e for e in errors[1:])
    assert "Traceback" not in err and "Exception in ASGI" not in err, err
    logged = [json.loads(line) for line in err.splitlines() if line.startswith('{"time"')]
    assert sorted(x["status"] for x in logged if x["path"] == "/search/batch") == [503, 503, 503]


def test_a_client_that_hangs_up_mid_batch_is_logged_as_such_and_not_searched_for(musique_lucene):
    """A client that sends a batch of 2,000 queries and hangs up 0.3 s later: the rest of its batch is not searched
    (499), and the log says it hung up during its search, not that it "disconnected before its request was read"."""
    corpus, _ = musique_lucene
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mhindex", "--home", str(corpus.root.parent), "serve", corpus.name, "--port", str(port),
         "--batch-chunk", "8"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_until_serving(f"http://127.0.0.1:{port}")
        body = json.dumps({"queries": [f"who founded company {n}" for n in range(2000)], "k": 20}).encode()
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(b"POST /search/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)  # fmt: skip
            time.sleep(0.3)
        time.sleep(2)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=HANG_S)
    finally:
        process.kill()
    logged = [json.loads(line) for line in err.splitlines() if line.startswith('{"time"')]
    batch = [x for x in logged if x["path"] == "/search/batch"]
    assert len(batch) == 1 and batch[0]["status"] == 499 and batch[0]["ms"] < 2000, batch
    assert batch[0]["error"] == "the client hung up during its search: the rest of its batch was not searched"
    assert "Traceback" not in err
