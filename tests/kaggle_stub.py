"""A local HTTP server standing in for Kaggle in tests: records every request, answers from routes."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# A route gets the request's JSON body and headers and returns (HTTP status, JSON answer).
Route = Callable[[dict, dict], "tuple[int, dict]"]


@dataclass
class Request:
    method: str
    path: str  # without scheme and host, also when the client sent a proxy-style absolute URL
    headers: dict
    body: dict


@dataclass
class StubServer:
    routes: dict[str, Route]  # path -> route
    requests: list[Request] = field(default_factory=list)

    def __enter__(self) -> StubServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                path = urlsplit(self.path).path
                request = Request("POST", path, dict(self.headers), json.loads(raw or b"{}"))
                stub.requests.append(request)
                route = stub.routes.get(path)
                status, answer = (
                    route(request.body, request.headers)
                    if route
                    else (404, {"code": 404, "message": f"no route {path}"})
                )
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_CONNECT(self) -> None:  # an HTTPS request through this server as a proxy: refused
                stub.requests.append(Request("CONNECT", self.path, dict(self.headers), {}))
                self.send_response(502)
                self.end_headers()

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
