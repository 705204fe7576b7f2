"""The fetch guard: addresses, redirects, schemes, byte cap, X-Robots-Tag, classification."""

from __future__ import annotations

import contextlib
import socket
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from fairsets.fetch.guard import (
    BlockedAddress,
    FetchPolicy,
    OptedOut,
    TooLarge,
    check_ip,
    fetch_url,
    guarded_opener,
    is_disallowed,
    refusal_reason,
    resolve_and_check,
)
from fairsets.fetch.guard import addresses as guard_addresses
from servers import LoopbackServer, Response

LOOP = FetchPolicy(allow_loopback=True, timeout=1)


# --- addresses ---


@pytest.mark.parametrize(
    ("ip", "category"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),
        ("fd12:3456::1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:192.168.0.1", "private"),
        ("2002:c0a8:0101::1", "private"),  # 6to4 of 192.168.1.1
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("::ffff:169.254.169.254", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.10", "not globally reachable"),
        ("192.0.0.192", "not globally reachable"),
    ],
)
def test_check_ip_refuses_non_public_addresses(ip: str, category: str) -> None:
    with pytest.raises(BlockedAddress, match=f"is {category}") as info:
        check_ip(ip, FetchPolicy())
    assert info.value.reason == "blocked_address"
    assert str(info.value).startswith("refused (blocked_address): ")


@pytest.mark.parametrize("ip", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_check_ip_allows_public_addresses(ip: str) -> None:
    assert check_ip(ip, FetchPolicy()) is not None


def test_check_ip_flags() -> None:
    assert str(check_ip("::ffff:127.0.0.1", FetchPolicy(allow_loopback=True))) == "127.0.0.1"
    with pytest.raises(BlockedAddress):
        check_ip("10.0.0.1", FetchPolicy(allow_loopback=True))
    for ip in ("10.0.0.1", "169.254.1.1", "100.100.0.1", "fd00::5", "fe80::2"):
        assert check_ip(ip, FetchPolicy(allow_private=True)) is not None
    with pytest.raises(BlockedAddress, match="loopback"):
        check_ip("127.0.0.1", FetchPolicy(allow_private=True))
    # always refused, whatever the flags
    everything = FetchPolicy(allow_loopback=True, allow_private=True)
    for ip in ("0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "240.0.0.1"):
        with pytest.raises(BlockedAddress):
            check_ip(ip, everything)


def _fake_resolver(table: dict[str, list[str]], calls: list[str]) -> Any:
    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[tuple]:
        calls.append(host)
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "unknown test name")
        out = []
        for ip in table[host]:
            fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
            addr = (ip, port) if fam == socket.AF_INET else (ip, port, 0, 0)
            out.append((fam, socket.SOCK_STREAM, 6, "", addr))
        return out

    return getaddrinfo


def test_resolve_and_check_refuses_a_name_with_any_private_address(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    table = {"mixed.example.test": ["93.184.216.34", "10.1.1.1"], "pub.example.test": ["93.184.216.34"]}
    monkeypatch.setattr(guard_addresses, "_getaddrinfo", _fake_resolver(table, calls))
    with pytest.raises(BlockedAddress, match=r"mixed\.example\.test: 10\.1\.1\.1 is private"):
        resolve_and_check("mixed.example.test", 80, FetchPolicy())
    assert resolve_and_check("pub.example.test", 443, FetchPolicy()) == [
        (socket.AF_INET, ("93.184.216.34", 443))
    ]
    # IP literals are checked without any lookup
    assert resolve_and_check("[::ffff:8.8.8.8]", 80, FetchPolicy())[0][0] == socket.AF_INET6
    assert calls == ["mixed.example.test", "pub.example.test"]


def test_hostname_resolving_to_private_is_refused_before_connecting(
    monkeypatch: pytest.MonkeyPatch, no_egress: Any
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(
        guard_addresses, "_getaddrinfo", _fake_resolver({"img.example.test": ["10.20.30.40"]}, calls)
    )
    res = fetch_url("http://img.example.test/a.jpg?token=SECRET", LOOP)
    assert res.status == "rejected"
    expected = "host img.example.test: 10.20.30.40 is private (allowed only with allow_private=True)"
    assert res.error == f"blocked_address: {expected}"
    assert "SECRET" not in res.error
    assert calls == ["img.example.test"]
    assert no_egress.attempts == []


def test_name_is_resolved_once_and_host_header_kept(monkeypatch: pytest.MonkeyPatch, images: Any) -> None:
    """The connection goes to the checked address; a second lookup (rebinding) would get 10.x."""
    calls: list[str] = []
    answers = iter([["127.0.0.1"], ["10.0.0.1"], ["10.0.0.1"]])

    def rebinding(host: str, port: int, *args: Any, **kwargs: Any) -> list[tuple]:
        return _fake_resolver({host: next(answers)}, calls)(host, port)

    monkeypatch.setattr(guard_addresses, "_getaddrinfo", rebinding)
    seen_hosts: list[str] = []
    images.srv.route(
        "/host.jpg", lambda req: (seen_hosts.append(req.headers["Host"]), Response(200, {}, b"x"))[1]
    )
    port = images.srv.port
    res = fetch_url(f"http://cdn.example.test:{port}/host.jpg", LOOP)
    assert res.status == "ok", res.error
    assert res.data == b"x"
    assert calls == ["cdn.example.test"]
    assert seen_hosts == [f"cdn.example.test:{port}"]


# --- loopback, redirects, schemes ---


def test_loopback_refused_unless_allowed(images: Any) -> None:
    res = fetch_url(images.url("/ok.jpg"), FetchPolicy(timeout=1))
    assert res.status == "rejected"
    assert res.error.startswith("blocked_address: 127.0.0.1 is loopback")
    assert images.hits("/ok.jpg") == 0
    res = fetch_url(images.url("/ok.jpg"), LOOP)
    assert (res.status, res.http_status, res.data, res.content_type) == ("ok", 200, images.jpeg, "image/jpeg")
    assert res.final_url == images.url("/ok.jpg")
    assert images.hits("/ok.jpg") == 1


def test_redirect_to_private_is_refused_without_a_connection_attempt(images: Any, no_egress: Any) -> None:
    res = fetch_url(images.url("/redirect-private"), LOOP)
    assert res.status == "rejected"
    assert res.error == "blocked_address: 10.0.0.1 is private (allowed only with allow_private=True)"
    assert images.hits("/redirect-private") == 1
    assert no_egress.attempts == []


def test_no_egress_fixture_catches_a_redirect_the_guard_lets_through(images: Any, no_egress: Any) -> None:
    """Control: with private addresses allowed the client does try 10.0.0.1 — and the fixture stops it."""
    res = fetch_url(
        images.url("/redirect-private"), FetchPolicy(allow_loopback=True, allow_private=True, timeout=1)
    )
    assert res.status == "failed"
    assert res.error.startswith("connection: ")
    assert no_egress.take() == [("create_connection", ("10.0.0.1", 80))]


@pytest.mark.parametrize(
    "location",
    [
        "http://[::ffff:10.0.0.1]/x.jpg",
        "http://169.254.169.254/latest/meta-data/",
        "https://192.168.0.1/x.jpg",
        "http://[fd00::1]:8080/x.jpg",
        "http://0.0.0.0/x.jpg",
    ],
)
def test_redirects_to_other_blocked_addresses(images: Any, no_egress: Any, location: str) -> None:
    images.srv.route("/r", lambda req: Response(301, {"Location": location}))
    res = fetch_url(images.url("/r"), LOOP)
    assert res.status == "rejected"
    assert res.error.startswith("blocked_address: ")
    assert no_egress.attempts == []


def test_https_to_private_refused_before_tls(no_egress: Any) -> None:
    res = fetch_url("https://10.9.8.7/secret.jpg", FetchPolicy(timeout=1))
    assert (res.status, res.error.split(":")[0]) == ("rejected", "blocked_address")
    assert no_egress.attempts == []


def test_redirect_ok_and_redirect_limit(images: Any) -> None:
    res = fetch_url(images.url("/redirect-ok"), LOOP)
    assert (res.status, res.data, res.final_url) == ("ok", images.jpeg, images.url("/ok.jpg"))
    images.srv.route("/loop", lambda req: Response(302, {"Location": "/loop"}))
    res = fetch_url(images.url("/loop"), FetchPolicy(allow_loopback=True, max_redirects=2, timeout=1))
    assert res.status == "rejected"
    assert res.error.startswith("too_many_redirects: more than 2 redirects")
    assert images.hits("/loop") == 3
    res = fetch_url(images.url("/redirect-ok"), FetchPolicy(allow_loopback=True, max_redirects=0, timeout=1))
    assert res.error.startswith("too_many_redirects")


def test_schemes_other_than_http_are_refused(images: Any, tmp_path: Any) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    res = fetch_url(secret.as_uri(), LOOP)
    assert (res.status, res.data) == ("rejected", None)
    assert res.error.startswith("blocked_scheme: scheme 'file'")
    for target in (secret.as_uri(), "ftp://127.0.0.1/x", "data:text/plain,hello"):
        images.srv.route("/to-scheme", lambda req, t=target: Response(302, {"Location": t}))
        res = fetch_url(images.url("/to-scheme"), LOOP)
        assert res.status == "rejected", target
        assert res.error.startswith("blocked_scheme: redirect to scheme"), res.error
    with pytest.raises(ValidationError):
        FetchPolicy(schemes=("http", "ftp"))


def test_environment_proxy_is_not_used(images: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy would make the checked address the proxy's; the guarded opener ignores them."""
    with LoopbackServer() as proxy:
        proxy.route("/", lambda req: Response(200, {}, b"proxied"))
        monkeypatch.setenv("http_proxy", proxy.url("/"))
        monkeypatch.setenv("HTTP_PROXY", proxy.url("/"))
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        res = fetch_url(images.url("/ok.jpg"), LOOP)
        assert (res.status, res.data) == ("ok", images.jpeg)
        assert proxy.requests == []


# --- X-Robots-Tag ---


def test_opt_out_headers(images: Any) -> None:
    res = fetch_url(images.url("/optout.jpg"), LOOP)
    assert (res.status, res.error, res.data) == (
        "rejected",
        "opted_out: X-Robots-Tag 'noai' from 127.0.0.1",
        None,
    )
    res = fetch_url(images.url("/optout-ua.jpg"), LOOP)
    assert (res.status, res.error) == (
        "rejected",
        "opted_out: X-Robots-Tag 'fairsets: noimageai' from 127.0.0.1",
    )
    res = fetch_url(images.url("/optout-other.jpg"), LOOP)
    assert (res.status, res.data) == ("ok", images.jpeg)
    as_otherbot = FetchPolicy(allow_loopback=True, timeout=1, user_agent_token="OtherBot")
    assert fetch_url(images.url("/optout-other.jpg"), as_otherbot).status == "rejected"
    assert fetch_url(images.url("/optout-ua.jpg"), as_otherbot).status == "ok"
    nothing_banned = FetchPolicy(allow_loopback=True, timeout=1, disallowed_directives=())
    assert fetch_url(images.url("/optout.jpg"), nothing_banned).status == "ok"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["noai"], "noai"),
        (["NoImageAI"], "noimageai"),
        (["noindex, noai"], "noai"),
        (["fairsets: noai"], "fairsets: noai"),
        (["otherbot: noai"], None),
        (["otherbot: noindex, noai"], None),  # both directives are otherbot's
        (["otherbot: noai", "noimageai"], "noimageai"),
        (["otherbot: noai", "fairsets: noimageai"], "fairsets: noimageai"),
        (["max-image-preview: none"], None),
        (["unavailable_after: 25 Jun 2030 15:00:00 PST"], None),
        (["noindex, nofollow"], None),
        ([], None),
    ],
)
def test_is_disallowed(values: list[str], expected: str | None) -> None:
    from email.message import Message

    headers = Message()
    for v in values:
        headers["X-Robots-Tag"] = v
    assert is_disallowed(headers, FetchPolicy()) == expected


# --- byte cap ---


def test_content_length_above_cap_is_refused_before_reading(images: Any) -> None:
    policy = FetchPolicy(allow_loopback=True, timeout=1, max_bytes=len(images.jpeg) + 100)
    res = fetch_url(images.url("/big.jpg"), policy)
    assert res.status == "rejected"
    assert (
        res.error == f"too_large: 127.0.0.1 announces {len(images.big)} bytes, more than {policy.max_bytes}"
    )
    exact = FetchPolicy(allow_loopback=True, timeout=1, max_bytes=len(images.jpeg))
    assert fetch_url(images.url("/ok.jpg"), exact).data == images.jpeg


class _NoLengthHandler(BaseHTTPRequestHandler):
    """HTTP/1.0 answers without Content-Length: the body ends when the connection closes."""

    protocol_version = "HTTP/1.0"
    body = b""
    headers_to_send: ClassVar[dict[str, str]] = {}

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "image/jpeg")
        for k, v in self.headers_to_send.items():
            self.send_header(k, v)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(self.body)


@pytest.fixture
def no_length_server() -> Iterator[type[_NoLengthHandler]]:
    handler = type("Handler", (_NoLengthHandler,), {"body": b"", "headers_to_send": {}})
    httpd = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    handler.url = f"http://127.0.0.1:{httpd.server_address[1]}/x.jpg"  # type: ignore[attr-defined]
    yield handler
    httpd.shutdown()
    httpd.server_close()


def test_streaming_cap_without_content_length(no_length_server: Any) -> None:
    no_length_server.body = b"\xff" * 5000
    policy = FetchPolicy(allow_loopback=True, timeout=1, max_bytes=4096)
    res = fetch_url(no_length_server.url, policy)
    assert res.status == "rejected"
    assert res.error == "too_large: body from 127.0.0.1 exceeds 4096 bytes"
    no_length_server.body = b"\xff" * 4096
    res = fetch_url(no_length_server.url, policy)
    assert (res.status, res.data) == ("ok", b"\xff" * 4096)


def test_capped_response_partial_reads(no_length_server: Any) -> None:
    no_length_server.body = b"abcdefghij" * 100
    opener = guarded_opener(FetchPolicy(allow_loopback=True, timeout=1, max_bytes=250), "ua-test")
    with opener.open(no_length_server.url, timeout=1) as r:
        got = r.read(100) + r.read(100)
        assert got == no_length_server.body[:200]
        buf = bytearray(50)
        assert r.readinto(buf) == 50
        with pytest.raises(TooLarge):
            r.read(100)


# --- how img2dataset uses urllib ---


def test_installed_opener_guards_plain_urlopen(images: Any, no_egress: Any) -> None:
    """img2dataset does ``with urllib.request.urlopen(req, timeout=t) as r: r.headers; r.read()``."""
    previous = urllib.request._opener  # type: ignore[attr-defined]
    urllib.request.install_opener(guarded_opener(LOOP, "fairsets-test/1"))
    try:
        req = urllib.request.Request(images.url("/ok.jpg"), headers={"User-Agent": "Mozilla/5.0 img2dataset"})
        with urllib.request.urlopen(req, timeout=1) as r:
            assert r.headers["Content-Type"] == "image/jpeg"
            assert r.read() == images.jpeg
        assert images.ua_seen == ["fairsets-test/1"]
        with pytest.raises(BlockedAddress):
            urllib.request.urlopen(images.url("/redirect-private"), timeout=1)
        with pytest.raises(OptedOut):
            urllib.request.urlopen(images.url("/optout.jpg"), timeout=1)
    finally:
        urllib.request.install_opener(previous)
    assert no_egress.attempts == []


def test_default_user_agent_is_the_project_one(images: Any) -> None:
    assert fetch_url(images.url("/ok.jpg"), LOOP).status == "ok"
    assert images.ua_seen[-1].startswith("fairsets/")


# --- classification ---


def test_fetch_url_classification(images: Any) -> None:
    res = fetch_url(images.url("/missing.jpg"), LOOP)
    assert (res.status, res.http_status, res.error) == ("rejected", 404, "http_404: Not Found")
    res = fetch_url(images.url("/flaky.jpg"), LOOP)
    assert (res.status, res.http_status, res.error) == ("failed", 500, "http_500: Internal Server Error")
    for code, status in (
        (403, "rejected"),
        (410, "rejected"),
        (408, "failed"),
        (429, "failed"),
        (503, "failed"),
    ):
        images.srv.route(f"/s{code}", lambda req, c=code: Response(c, {}, b""))
        once = LOOP.model_copy(update={"throttle_retries": 0})  # the host's backoff is tested elsewhere
        assert fetch_url(images.url(f"/s{code}"), once).status == status, code
    res = fetch_url(images.url("/slow.jpg"), FetchPolicy(allow_loopback=True, timeout=0.3))
    assert res.status == "failed"
    assert res.error.startswith("timeout: ")
    # nothing listens on this port any more: a connection error is transient
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    res = fetch_url(f"http://127.0.0.1:{port}/x.jpg", LOOP)
    assert (res.status, res.error.split(":")[0]) == ("failed", "connection")
    res = fetch_url("not a url?token=SECRET", LOOP)
    assert res.status == "rejected"
    assert res.error == "invalid_url: white space or control characters in the URL"
    res = fetch_url("nourl?token=SECRET", LOOP)
    assert (res.status, res.error) == ("rejected", "invalid_url: ValueError")


def test_refusal_reason_and_policy_model() -> None:
    assert refusal_reason("<urlopen error refused (too_large): x>") == "too_large"
    assert refusal_reason(str(OptedOut("X-Robots-Tag 'noai'"))) == "opted_out"
    assert refusal_reason("HTTP Error 404: Not Found") is None
    assert refusal_reason(None) is None
    with pytest.raises(ValidationError):
        FetchPolicy(allow_loopbak=True)  # type: ignore[call-arg]
    policy = FetchPolicy(disallowed_directives=(" NoAI ",), user_agent_token=" FairSets ")
    assert (policy.disallowed_directives, policy.user_agent_token) == (("noai",), "fairsets")
    with pytest.raises(ValidationError):
        policy.max_bytes = 5  # type: ignore[misc]
