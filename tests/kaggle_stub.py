"""A local HTTP server standing in for Kaggle in tests: records every request, answers from routes.

It serves the kaggle CLI and kagglehub outside a notebook (KAGGLE_API_ENVIRONMENT=LOCALHOST plus
HTTP_PROXY=<stub url>: requests for http://localhost/api/v1/... arrive here as a proxy's), kagglehub
inside a Kaggle notebook (KAGGLE_DATA_PROXY_URL=<stub url>), Kaggle's in-notebook clients
(KAGGLE_URL_BASE=<stub url>) and plain file downloads by URL.

A route gets the request's JSON body ({} when there is none or it is not JSON) and headers, and
returns (HTTP status, answer) or (status, answer, extra headers); an answer is a dict or list (sent
as JSON), bytes, or text. Routes are looked up as "METHOD /path", then "/path", then the longest
matching prefix ending in "*" ("GET /files/*").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

Route = Callable[[dict, dict], tuple]


@dataclass
class Request:
    method: str
    path: str  # without scheme, host and query, also when the client sent a proxy-style absolute URL
    headers: dict
    body: dict
    raw: bytes = b""
    host: str = ""  # the server the client meant (localhost for KAGGLE_API_ENVIRONMENT=LOCALHOST)
    query: str = ""


def _encode(answer: Any) -> tuple[bytes, str]:
    if isinstance(answer, (dict, list)):
        return json.dumps(answer).encode(), "application/json"
    if isinstance(answer, str):
        return answer.encode(), "text/plain; charset=utf-8"
    return answer or b"", "application/octet-stream"


def _json(raw: bytes) -> dict:
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


@dataclass
class StubServer:
    routes: dict[str, Route]
    requests: list[Request] = field(default_factory=list)

    def route_for(self, method: str, path: str) -> Route | None:
        """The route for a request: exact "METHOD /path", then "/path", then the longest prefix."""
        found = self.routes.get(f"{method} {path}") or self.routes.get(path)
        if found:
            return found
        prefixes = [
            key
            for key in self.routes
            if key.endswith("*") and (f"{method} {path}".startswith(key[:-1]) or path.startswith(key[:-1]))
        ]
        return self.routes[max(prefixes, key=len)] if prefixes else None

    def __enter__(self) -> StubServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = urlsplit(self.path)
                request = Request(
                    self.command,
                    parts.path,
                    dict(self.headers),
                    _json(raw),
                    raw,
                    self.headers.get("Host", ""),
                    parts.query,
                )
                stub.requests.append(request)
                route = stub.route_for(self.command, parts.path)
                reply = route(request.body, request.headers) if route else (404, {"code": 404, "message": "no route"})
                status, answer, extra = (*reply, {})[:3]
                data, content_type = _encode(answer)
                self.send_response(status)
                for name, value in {"Content-Type": content_type, **extra}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_HEAD = _serve

            def do_CONNECT(self) -> None:  # an HTTPS request through this server as a proxy: refused
                stub.requests.append(Request("CONNECT", self.path, dict(self.headers), {}, host=self.path))
                self.send_response(502)
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.close_connection = True

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that hung up without reading the answer (the kaggle CLI skipping a file)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
