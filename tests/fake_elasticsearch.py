"""A stand-in for an Elasticsearch node on 127.0.0.1, because no Elasticsearch server can be
installed on the machines these tests run on (not in Debian, not on PyPI or npm). It is a MOCK,
and only for that reason: it speaks the REST calls the official client makes when mhindex builds
and searches an index (create, bulk, settings, refresh, health, aliases, search, msearch), records
every request so that tests can check what mhindex asked for, and can reject bulk documents with
429 to exercise the retries. It does not pretend to rank like Elasticsearch: `match` scores by the
count of shared lowercase words; `knn` is exact (every stored vector), which is what HNSW
approximates, with Elasticsearch's `dot_product` score (1 + dot) / 2. The live tests, which run
when MHINDEX_ES_URL names a real server, check the real engine.
"""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import numpy as np
import orjson

WORD = re.compile(r"\w+")


class FakeElasticsearch:
    def __init__(self) -> None:
        self.requests: list[dict] = []  # {"method", "path", "query", "body", "thread"}
        self.indices: dict[str, dict] = {}  # name -> {"settings", "mappings", "docs": {id: source}}
        self.aliases: dict[str, str] = {}  # alias -> index
        self.reject_next: int = 0  # bulk documents to answer with 429, one per document
        self.rejected: list[str] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _handle(self) -> None:
                url = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer = fake.answer(self.command, url.path, parse_qs(url.query), raw)
                data = b"" if answer is None else orjson.dumps(answer)
                self.send_response(status)
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeElasticsearch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def calls(self, method: str, pattern: str) -> list[dict]:
        return [r for r in self.requests if re.fullmatch(method, r["method"]) and re.fullmatch(pattern, r["path"])]

    # -- the REST API ------------------------------------------------------------------------

    def answer(self, method: str, path: str, query: dict, raw: bytes) -> tuple[int, dict | None]:
        lines = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
        body = lines[0] if len(lines) == 1 else lines
        with self._lock:
            self.requests.append(
                {"method": method, "path": path, "query": query, "body": body, "thread": threading.get_ident()}
            )
        parts = [p for p in path.split("/") if p]
        if not parts:
            return 200, {"version": {"number": "8.15.0"}, "tagline": "You Know, for Search"}
        if parts[-1] == "_bulk":
            return 200, self._bulk(lines)
        if parts[0] == "_msearch":
            pairs = zip(lines[0::2], lines[1::2], strict=True)
            return 200, {"responses": [self._search(header["index"], search) for header, search in pairs]}
        if parts[0] == "_aliases":
            with self._lock:
                for action in body["actions"]:
                    ((verb, target),) = action.items()
                    if verb == "add":
                        self.aliases[target["alias"]] = target["index"]
                    elif self.aliases.get(target["alias"]) == target["index"]:
                        del self.aliases[target["alias"]]
            return 200, {"acknowledged": True}
        if parts[0] == "_alias":
            index = self.aliases.get(parts[1])
            return (
                (200, {index: {"aliases": {parts[1]: {}}}})
                if index
                else (404, {"error": "alias missing", "status": 404})
            )
        if parts[0] == "_cluster":
            return 200, {"status": "green", "number_of_nodes": 1}
        name = parts[0]
        if len(parts) == 1 and method == "PUT":
            self.indices[name] = {"settings": dict(body["settings"]), "mappings": body["mappings"], "docs": {}}
            return 200, {"acknowledged": True, "index": name}
        if len(parts) == 1 and method == "DELETE":
            self.indices.pop(name, None)
            return 200, {"acknowledged": True}
        if parts[1] == "_settings":
            self.indices[name]["settings"].update(body["index"])
            return 200, {"acknowledged": True}
        if parts[1] == "_refresh":
            return 200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}
        if parts[1] == "_search":
            return 200, self._search(name, body)
        return 400, {"error": f"the stand-in does not know {method} {path}", "status": 400}

    def _bulk(self, lines: list[dict]) -> dict:
        items = []
        for header, source in zip(lines[0::2], lines[1::2], strict=True):
            action = header["index"]
            with self._lock:
                reject = self.reject_next > 0
                self.reject_next -= reject
            if reject:
                self.rejected.append(action["_id"])
                items.append(
                    {
                        "index": {
                            "_index": action["_index"],
                            "_id": action["_id"],
                            "status": 429,
                            "error": {"type": "es_rejected_execution_exception"},
                        }
                    }
                )
                continue
            self.indices[action["_index"]]["docs"][action["_id"]] = source
            items.append(
                {"index": {"_index": action["_index"], "_id": action["_id"], "status": 201, "result": "created"}}
            )
        return {"took": 1, "errors": any(i["index"]["status"] >= 300 for i in items), "items": items}

    def _search(self, name: str, body: dict) -> dict:
        docs = self.indices[self.aliases.get(name, name)]["docs"]
        if "knn" in body:
            knn = body["knn"]
            allowed = _allowed_titles(knn["filter"]) if "filter" in knn else None
            ids = [i for i, d in docs.items() if allowed is None or d["title"].lower() in allowed]
            matrix = np.array([docs[i]["vector"] for i in ids], dtype=np.float32).reshape(len(ids), -1)
            scores = (1 + matrix @ np.array(knn["query_vector"], dtype=np.float32)) / 2
            ranked = [(float(scores[p]), ids[p]) for p in np.argsort(-scores, kind="stable")[: knn["k"]]]
        else:
            boolean = body["query"]["bool"]
            words = set(WORD.findall(boolean["should"][0]["match"]["paragraph_text"].lower()))
            allowed = _allowed_titles(boolean["filter"][0]) if "filter" in boolean else None
            required = boolean.get("minimum_should_match", 1)
            ranked = []
            for doc_id, doc in docs.items():
                shared = len(words & set(WORD.findall(f"{doc['title']} {doc['paragraph_text']}".lower())))
                if shared >= required and (allowed is None or doc["title"].lower() in allowed):
                    ranked.append((float(shared), doc_id))
            ranked.sort(key=lambda pair: -pair[0])
        hits = [
            {"_id": i, "_score": s, "_source": {f: docs[i][f] for f in body["_source"]}}
            for s, i in ranked[: body["size"]]
        ]
        return {"took": 1, "hits": {"total": {"value": len(hits), "relation": "eq"}, "hits": hits}}


def _allowed_titles(title_filter: dict) -> set[str]:
    """The pages of mhindex's title filter: `term` queries on title.raw, case-insensitive."""
    return {term["term"]["title.raw"]["value"].lower() for term in title_filter["bool"]["should"]}
