"""Servers on 127.0.0.1 for the tests: a small HTTP file server with Range support and scripted faults, for the
download tests (nothing can be fetched from the real dataset hosts here), a fault-injecting proxy, and llama.cpp's
own OpenAI-compatible server (scripts/lm_server.py) over a packaged model."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conftest import HANG_S, REPO


@contextmanager
def llama_server(model: Path, threads: int = 1, context: int = 4096) -> Iterator[str]:
    """llama.cpp's server over `model` on a free port, one slot of `context` tokens; yields its OpenAI base URL. It
    stops when its stdin closes, so it cannot outlive the test session. (Greedy tokens can depend on the context
    length: IRCoT's second step with SmolLM2-135M came out otherwise at 4,096 than in process, and the same at the
    local model's 8,192; a test comparing long prompts' answers with a local model's gives the server 8,192.)"""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(REPO / "scripts" / "lm_server.py"), "--model", str(model), "--port", str(port),
         "--context", str(context), "--threads", str(threads), "--until-stdin-closes"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == f"http://127.0.0.1:{port}"
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=HANG_S)


class FileServer:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.requests: list[dict] = []
        self.faults: list[str] = []  # consumed one per request: "500", "cut" (send half, then close)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                name = self.path.lstrip("/").split("?")[0]
                server.requests.append({"path": name, "range": self.headers.get("Range")})
                fault = server.faults.pop(0) if server.faults else None
                if fault == "500":
                    self.send_error(500, "scripted failure")
                    return
                target = server.folder / name
                if not target.is_file():
                    self.send_error(404)
                    return
                data = target.read_bytes()
                start = 0
                if rng := self.headers.get("Range"):
                    start = int(rng.split("=")[1].split("-")[0])
                    if start >= len(data):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if fault == "cut":
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FaultProxy:
    """Forwards every request to a real upstream server, except where a scripted fault says to
    answer 500 / 429, answer a body that is not JSON, or stall past the client's timeout."""

    def __init__(self, upstream: str) -> None:
        import httpx

        self.upstream = upstream.rstrip("/")
        self.faults: list[str] = []
        self.requests: list[str] = []
        proxy = self
        client = httpx.Client(timeout=HANG_S)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _relay(self, method: str) -> None:
                import time

                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.requests.append(f"{method} {self.path}")
                fault = (
                    proxy.faults.pop(0) if proxy.faults and method == "POST" and "completions" in self.path else None
                )
                if fault in ("500", "429"):
                    payload = b'{"error": {"message": "scripted failure"}}'
                    self.send_response(int(fault))
                    if fault == "429":
                        self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if fault == "garbage":
                    payload = b"<html>502 Bad Gateway from a confused proxy</html>"
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if fault == "no-choices":
                    payload = b'{"id": "x", "object": "text_completion", "choices": []}'
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if fault == "flood":  # a server that ignores max_tokens: megabytes of completion
                    payload = json.dumps(
                        {
                            "choices": [{"text": "word " * 1_000_000, "finish_reason": "length"}],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 1_000_000},
                        }
                    ).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if fault and fault.startswith("sleep"):
                    time.sleep(float(fault[5:]))
                response = client.request(
                    method, proxy.upstream + self.path, content=body, headers={"Content-Type": "application/json"}
                )
                self.send_response(response.status_code)
                self.send_header("Content-Type", response.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(response.content)))
                self.end_headers()
                self.wfile.write(response.content)

            def do_GET(self) -> None:
                self._relay_quietly("GET")

            def do_POST(self) -> None:
                self._relay_quietly("POST")

            def _relay_quietly(self, method: str) -> None:
                try:
                    self._relay(method)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Uvicorn:
    """An ASGI application served for real by uvicorn on a free port of 127.0.0.1, in a thread."""

    def __init__(self, app) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Uvicorn:
        import time

        self.thread.start()
        deadline = time.time() + 30
        while not self.server.started and time.time() < deadline:
            time.sleep(0.02)
        assert self.server.started, "uvicorn did not start"
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class MisbehavingLM:
    """An OpenAI-compatible endpoint on 127.0.0.1 that misbehaves on purpose, since no real server
    can be made to: `mode` says how. "trickle" sends a byte every half second and never ends;
    "silent" never answers; "usage" / "tokens" / "timings" answer a completion whose `usage`,
    token count or `timings` has the wrong type; "chunks" streams chunks of another shape;
    "echo-key" refuses with a body that repeats the request's Authorization header; "template-null" and
    "template-html" answer /apply-template with a null prompt or an HTML page; "endless" streams a token a chunk
    and never ends; "logprobs-strings" and "logprobs-huge" answer log-probabilities that are none."""

    def __init__(self, mode: str) -> None:
        import json
        import time

        self.mode = mode
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(404, {"error": "not here"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                mode = server.mode
                if self.path.endswith("/apply-template") and mode.startswith("template-"):
                    if mode == "template-null":
                        self._send(200, {"prompt": None})
                    else:  # template-html
                        data = b"<html><body>Bad Gateway</body></html>"
                        self.send_response(200)
                        self.send_header("Content-Type", "text/html")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                    return
                if not self.path.endswith("/completions"):
                    self._send(404, {"error": "not here"})
                    return
                try:
                    if mode == "trickle":
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.end_headers()
                        while not server.stop.is_set():
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(0.5)
                    elif mode == "silent":
                        server.stop.wait(120)
                    elif mode == "echo-key":
                        self._send(
                            401,
                            {"error": f"bad credentials in header: Authorization: {self.headers.get('Authorization')}"},
                        )
                    elif mode == "endless" and request.get("stream"):  # a token a chunk, never a last one
                        self.send_response(200)
                        self.send_header("Content-Type", "text/event-stream")
                        self.end_headers()
                        while not server.stop.is_set():
                            self.wfile.write(b'data: {"choices": [{"text": " more"}]}\n\n')
                            self.wfile.flush()
                    elif mode in ("logprobs-strings", "logprobs-huge"):
                        value = "x" if mode == "logprobs-strings" else 1e308
                        choice = {"text": "Paris", "finish_reason": "stop",
                                  "logprobs": {"tokens": ["Paris"], "token_logprobs": [value]}}  # fmt: skip
                        self._send(200, {"choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
                    elif mode == "chunks" and request.get("stream"):
                        self.send_response(200)
                        self.send_header("Content-Type", "text/event-stream")
                        self.end_headers()
                        self.wfile.write(b'data: {"choices": "not a list"}\n\n')
                        self.wfile.flush()
                    else:
                        choice = {"text": "Paris", "message": {"content": "Paris"}, "finish_reason": "stop"}
                        usage = (
                            {"usage": "bad"}
                            if mode == "usage"
                            else {"usage": {"prompt_tokens": "abc", "completion_tokens": 1}}
                            if mode == "tokens"
                            else {"usage": {"prompt_tokens": 3, "completion_tokens": 1}}
                        )
                        timings = {"timings": "fast"} if mode == "timings" else {}
                        self._send(200, {"choices": [choice], **usage, **timings})
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> MisbehavingLM:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def wait_until_serving(url: str, seconds: float = 60) -> None:
    """Until `mhindex serve` at `url` answers /health (it opens its index first)."""
    import httpx

    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError(f"nothing served at {url} within {seconds:.0f} s")
