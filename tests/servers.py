"""Real HTTP servers on loopback for tests (never any other address).

``LoopbackServer`` is a threaded ``http.server`` with a route table. A route is a callable
``handler(request) -> Response`` registered for a path (exact match on the path without the
query string). ``request`` has ``method``, ``path``, ``query`` (dict of lists), ``headers`` and
``body``; every request is recorded in ``server.requests``.

    with LoopbackServer() as srv:
        srv.route("/a.jpg", lambda req: Response(200, {"Content-Type": "image/jpeg"}, data))
        srv.route("/slow", lambda req: Response(200, body=b"x", delay=5))
        srv.route("/drip", lambda req: Response(200, body=data, drip=0.5))  # one byte every 0.5 s
        url = srv.url("/a.jpg")   # http://127.0.0.1:<port>/a.jpg

A dripping route sends its whole answer (status line, headers, body; ``drip_headers=False``:
the body only) one byte at a time, ``drip`` seconds apart, until the client hangs up — the
server a per-operation socket timeout never ends.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LoopbackServer", "Request", "Response", "json_response"]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


@dataclass
class Response:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0  # seconds to wait before answering (a slow route)
    drip: float = 0.0  # > 0: send the answer one byte at a time, this many seconds apart
    drip_headers: bool = True  # drip the status line and headers too (else only the body)
    drop: bool = False  # close the connection without answering


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(obj).encode())


class _Server(ThreadingHTTPServer):
    """The standard threading server with a listen backlog for clients that connect many at once
    (the default of 5 drops the rest, which then retry a second later)."""

    request_queue_size = 256


class LoopbackServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        if not (host.startswith("127.") or host in ("localhost", "::1")):
            raise ValueError("test servers listen on loopback only")
        self.routes: dict[str, Callable[[Request], Response]] = {}
        self.requests: list[Request] = []
        self.fallback: Callable[[Request], Response] | None = None
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _handle(self) -> None:
                parsed = urllib.parse.urlsplit(self.path)
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    body = self._read_chunked()
                else:
                    length = int(self.headers.get("Content-Length") or 0)
                    body = self.rfile.read(length) if length else b""
                req = Request(
                    self.command,
                    parsed.path,
                    urllib.parse.parse_qs(parsed.query, keep_blank_values=True),
                    {k: v for k, v in self.headers.items()},
                    body,
                )
                if self.command == "POST" and self.headers.get("Content-Type", "").startswith(
                    "application/x-www-form-urlencoded"
                ):
                    for k, v in urllib.parse.parse_qs(body.decode(), keep_blank_values=True).items():
                        req.query.setdefault(k, []).extend(v)
                with server._lock:
                    server.requests.append(req)
                handler = server.routes.get(parsed.path) or server.fallback
                missing = Response(404, {"Content-Type": "text/plain"}, b"not found")
                resp = handler(req) if handler else missing
                if resp.drop:
                    self.close_connection = True
                    return
                if resp.delay:
                    time.sleep(resp.delay)
                if resp.drip:
                    self._drip(resp)
                    return
                try:
                    self.send_response(resp.status)
                    for k, v in resp.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(resp.body)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(resp.body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

            def _read_chunked(self) -> bytes:
                parts = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()  # the CRLF after each chunk

            def _drip(self, resp: Response) -> None:
                reason = self.responses.get(resp.status, ("",))[0]
                lines = [f"HTTP/1.1 {resp.status} {reason}"]
                lines += [f"{k}: {v}" for k, v in resp.headers.items()]
                lines += [f"Content-Length: {len(resp.body)}", "Connection: close", "", ""]
                head = "\r\n".join(lines).encode("latin-1")
                body = resp.body if self.command != "HEAD" else b""
                self.close_connection = True
                try:
                    if not resp.drip_headers:
                        self.wfile.write(head)
                        head = b""
                    data = head + body
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        time.sleep(resp.drip)
                except OSError:  # the client gave up (the deadline test)
                    pass

            do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _handle

        self.httpd = _Server((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def route(self, path: str, handler: Callable[[Request], Response]) -> None:
        self.routes[path] = handler

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"

    def hits(self, path: str) -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.path == path)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
