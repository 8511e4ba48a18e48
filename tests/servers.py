"""A small HTTP file server on 127.0.0.1 with Range support and scripted faults, for the
download tests (nothing can be fetched from the real dataset hosts here)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


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

    def __enter__(self) -> "FileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
