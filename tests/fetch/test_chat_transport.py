"""The chat client's asynchronous transport against a raw loopback socket server: keep-alive
connections are reused, replies that are not HTTP or carry headers beyond any limit fail one
request (never the batch), a compressed body is not decoded, a proxy is never used for a loopback
server, and a cache entry torn by a crash (empty) is asked again.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fairsets.fetch.chat import ChatClient, ChatEndpoint, ChatRequest, user

pytestmark = pytest.mark.timeout(60)

Reply = Callable[[bytes], bytes]


def completion(text: str) -> bytes:
    body = json.dumps({"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


class RawServer:
    """Answers each HTTP request on a connection with ``reply(request_bytes)``; counts connections."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.connections = 0
        self.requests = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):  # the client hung up on a hostile reply
            self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests += 1
                conn.sendall(self.reply(head + b"\r\n\r\n" + rest[:length]))
                buf = rest[length:]

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw() -> Iterator[Callable[[Reply], RawServer]]:
    made: list[RawServer] = []

    def make(reply: Reply) -> RawServer:
        made.append(RawServer(reply))
        return made[-1]

    yield make
    for s in made:
        s.close()


def ask(srv: RawServer, n: int, cache: Path | None = None, **ep: object) -> list:
    endpoint = ChatEndpoint(base_url=srv.base_url, model="m", api_key_env="", timeout=5, **ep)  # type: ignore[arg-type]
    requests = [ChatRequest([user(f"q{i}")]) for i in range(n)]
    return ChatClient(endpoint, cache_dir=cache, max_retries=1, backoff=0.01).run(requests).results


def test_connections_are_kept_alive_and_reused(raw: Callable[[Reply], RawServer]) -> None:
    srv = raw(lambda req: completion("A"))
    results = ask(srv, 40, max_concurrency=2)
    assert [r.text for r in results] == ["A"] * 40
    assert srv.requests == 40 and srv.connections <= 2  # two slots: two connections, reused


def test_a_reply_that_is_not_http_fails_that_request_only(raw: Callable[[Reply], RawServer]) -> None:
    def reply(req: bytes) -> bytes:
        return b"SSH-2.0-OpenSSH_9.6\r\n\r\n" if b"q1" in req else completion("ok")

    results = ask(raw(reply), 3)
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].no_response and "failed" in (results[1].error or "")


def test_a_header_beyond_any_limit_fails_that_request_only(raw: Callable[[Reply], RawServer]) -> None:
    def reply(req: bytes) -> bytes:
        if b"q0" in req:
            return b"HTTP/1.1 200 OK\r\nX-Junk: " + b"x" * 200_000 + b"\r\nContent-Length: 2\r\n\r\n{}"
        return completion("ok")

    results = ask(raw(reply), 2)
    assert not results[0].ok and results[1].text == "ok"


def test_a_compressed_body_is_not_decoded(raw: Callable[[Reply], RawServer]) -> None:
    import gzip

    def reply(req: bytes) -> bytes:
        assert b"accept-encoding: identity" in req.lower()  # not asked for
        body = gzip.compress(json.dumps({"choices": [{"message": {"content": "A"}}]}).encode())
        return (
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )

    (result,) = ask(raw(reply), 1)
    assert result.error is not None and result.error.startswith("invalid response: not JSON")


def test_no_proxy_is_used_for_a_loopback_server(
    raw: Callable[[Reply], RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = socket.create_server(("127.0.0.1", 0))
    proxy = f"http://127.0.0.1:{dead.getsockname()[1]}"
    dead.close()  # a proxy that refuses every connection
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    (result,) = ask(raw(lambda req: completion("direct")), 1)
    assert result.text == "direct"


def test_an_empty_cache_entry_left_by_a_crash_is_asked_again(
    raw: Callable[[Reply], RawServer], tmp_path: Path
) -> None:
    srv = raw(lambda req: completion("A"))
    cache = tmp_path / "cache"
    assert [r.text for r in ask(srv, 3, cache)] == ["A"] * 3
    entries = sorted(cache.rglob("*.bin"))
    assert len(entries) == 3 and not [p for p in cache.rglob("*") if ".tmp-" in p.name]
    entries[0].write_bytes(b"")  # renamed into place, its data lost with the power
    results = ask(srv, 3, cache)
    assert [r.text for r in results] == ["A"] * 3 and sum(not r.cached for r in results) == 1
    assert srv.requests == 4
