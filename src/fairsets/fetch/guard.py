"""Guarded HTTP(S) fetching: no private addresses, a byte cap, and ``X-Robots-Tag`` opt-outs honoured.

Everything that downloads a URL taken from the outside world (search results, LAION rows,
Wikimedia file URLs) goes through :func:`guarded_opener` or :func:`fetch_url`. The guard is
enforced where the socket is made, not where the URL is parsed:

* the host of every request (the first one and every redirect hop) is resolved once, *every*
  resolved address is checked with :func:`check_ip`, and the socket is connected to one of the
  checked addresses — there is no second DNS lookup, so DNS rebinding cannot swap the address
  between check and connect. The ``Host`` header and TLS SNI/certificate checks still use the
  host name;
* loopback is refused unless ``allow_loopback``; private, link-local, carrier-grade NAT,
  unique-local and other non-global ranges are refused unless ``allow_private``; unspecified,
  multicast and reserved addresses are always refused. IPv4-mapped (``::ffff:a.b.c.d``), 6to4
  and NAT64 (``64:ff9b::/96``) IPv6 addresses are judged by the IPv4 address they carry;
* environment proxies are ignored (a proxy would make the checked address the proxy's), and
  only the schemes of the policy (``http``, ``https``) are opened — never ``file:``, ``ftp:``
  or ``data:``, on the first request or after a redirect;
* at most ``max_redirects`` redirects are followed;
* a response announcing more than ``max_bytes`` (``Content-Length``) is refused before its body
  is read, and reading more than ``max_bytes`` raises :class:`TooLarge` whatever the headers say;
* every download has a wall-clock ``deadline`` (connect, TLS handshake, redirects, headers and
  body together) and, once ``rate_grace`` seconds have passed, a minimum average rate of
  ``min_rate`` bytes/s. ``timeout`` alone bounds one socket operation, so a server that drips a
  byte every half second would otherwise keep a download alive forever. The connect, the TLS
  handshake (bounded as a whole by the socket timeout) and every socket read and write of a
  guarded connection get at most the time left. Passing a limit raises :class:`TooSlow` (a
  ``TimeoutError``: transient, retried, the sample *fails* rather than being rejected);
* a successful response whose ``X-Robots-Tag`` carries a disallowed directive (``noai``,
  ``noimageai``) for every robot or for our token (``fairsets: noai``) raises :class:`OptedOut`;
  directives addressed to another robot (``otherbot: noai``) do not apply.

Refusals are :class:`FetchRefused` exceptions whose text starts with ``refused (<reason>)``; the
text names a host or an address, never a full URL (query strings can carry tokens).

API:
    * ``FetchPolicy`` — the knobs above (pydantic, frozen)
    * ``FetchRefused`` and its kinds ``BlockedAddress``, ``BlockedScheme``, ``TooManyRedirects``,
      ``TooLarge``, ``OptedOut``; ``refusal_reason(text) -> str | None`` parses the reason back
    * ``TooSlow`` (deadline or minimum rate passed; transient); ``too_slow_reason(text)`` parses
      ``(reason, detail)`` back from a (possibly wrapped) message
    * ``trusted_policy(**overrides) -> FetchPolicy`` for API endpoints the curator configures
    * ``metered_handlers(policy)`` — urllib handlers with the deadline and rate only (API clients)
    * ``check_ip(ip, policy)``, ``resolve_and_check(host, port, policy)``
    * ``is_disallowed(headers, policy) -> str | None`` (the X-Robots-Tag decision)
    * ``guarded_opener(policy, user_agent=None) -> urllib.request.OpenerDirector``
    * ``fetch_url(url, policy, *, user_agent=None) -> FetchResult``
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import io
import ipaddress
import logging
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from email.message import Message
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "BlockedAddress",
    "BlockedScheme",
    "FetchPolicy",
    "FetchRefused",
    "FetchResult",
    "OptedOut",
    "TooLarge",
    "TooManyRedirects",
    "TooSlow",
    "check_ip",
    "classify_http_status",
    "fetch_url",
    "guarded_opener",
    "is_disallowed",
    "metered_handlers",
    "refusal_reason",
    "resolve_and_check",
    "too_slow_reason",
    "trusted_policy",
]

log = logging.getLogger(__name__)

#: The resolver used by :func:`resolve_and_check`; tests patch this, never the network.
_getaddrinfo = socket.getaddrinfo

_CHUNK = 64 * 1024

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class FetchPolicy(BaseModel):
    """What a guarded fetch may reach and accept."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    allow_loopback: bool = Field(default=False, description="allow 127.0.0.0/8 and ::1 (tests)")
    allow_private: bool = Field(
        default=False,
        description="allow private, link-local, CGNAT (100.64/10), unique-local (fc00::/7), "
        "link-local IPv6 (fe80::/10) and other non-global unicast addresses",
    )
    max_bytes: int = Field(default=20_000_000, ge=1, description="largest body accepted, in bytes")
    max_pixels: int = Field(
        default=40_000_000,
        ge=1,
        description="largest downloaded image accepted, in pixels (width x height from its header, "
        "checked before it is decoded: a 650 kB PNG can decode to gigabytes)",
    )
    timeout: float = Field(default=20, gt=0, description="seconds per connect / socket read")
    deadline: float = Field(
        default=60,
        gt=0,
        description="wall-clock seconds for one download: connect, redirects, headers and body together",
    )
    min_rate: float = Field(
        default=1024,
        ge=0,
        description="least average bytes/s over a download once rate_grace seconds have passed (0: off)",
    )
    rate_grace: float = Field(
        default=20,
        gt=0,
        description="seconds before min_rate applies (connect, a slow first byte; as long as timeout)",
    )
    max_redirects: int = Field(default=5, ge=0, description="redirects followed at most")
    disallowed_directives: tuple[str, ...] = Field(
        default=("noai", "noimageai"), description="X-Robots-Tag directives that forbid our use"
    )
    user_agent_token: str = Field(
        default="fairsets", min_length=1, description="robot name matched in `X-Robots-Tag: <token>: ...`"
    )
    schemes: tuple[str, ...] = Field(default=("http", "https"), description="URL schemes that may be opened")

    @field_validator("disallowed_directives", "schemes")
    @classmethod
    def _lower_all(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(v.strip().lower() for v in values if v.strip())

    @field_validator("user_agent_token")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()

    @field_validator("schemes")
    @classmethod
    def _known_schemes(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(values) - {"http", "https"})
        if unknown:
            raise ValueError(f"only http and https can be guarded, not {unknown}")
        return values


class FetchRefused(Exception):
    """A fetch the policy refuses: a decision about the sample, not a transient failure.

    Attributes:
        reason: a short code (``blocked_address``, ``blocked_scheme``, ``too_many_redirects``,
            ``too_large``, ``opted_out``).
        detail: human-readable detail (a host or address, never a full URL).
    """

    reason = "refused"

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"refused ({self.reason}): {detail}")


class BlockedAddress(FetchRefused):
    """The host resolves to an address the policy does not allow (loopback, private, ...)."""

    reason = "blocked_address"


class BlockedScheme(FetchRefused):
    """The URL (or a redirect target) uses a scheme outside ``policy.schemes``."""

    reason = "blocked_scheme"


class TooManyRedirects(FetchRefused):
    """More than ``policy.max_redirects`` redirects."""

    reason = "too_many_redirects"


class TooLarge(FetchRefused):
    """The body is (or announces to be) larger than ``policy.max_bytes``."""

    reason = "too_large"


class OptedOut(FetchRefused):
    """The response carries an ``X-Robots-Tag`` directive forbidding our use."""

    reason = "opted_out"


class TooSlow(TimeoutError):
    """A download passed its wall-clock deadline or fell below the minimum transfer rate.

    Transient (the server may be fast tomorrow), so a ``TimeoutError``: retried by
    :func:`fairsets.fetch.retry.call_with_retry`, and a sample that hits it *fails* (retriable
    with ``--retry-failed``) rather than being rejected. The text starts with
    ``too slow (<reason>)``, reason ``deadline`` or ``min_rate``; it names the host, never a URL.

    Attributes:
        reason: ``deadline`` or ``min_rate``.
        detail: what was measured, and the setting that decided.
    """

    def __init__(self, reason: str, detail: str | None = None) -> None:
        if detail is None:  # one message, as in ``type(exc)(f"host: {exc}")``: keep the reason
            reason, detail = too_slow_reason(reason) or ("deadline", reason)
        self.reason = reason
        self.detail = detail
        super().__init__(f"too slow ({reason}): {detail}")


_REFUSAL_RE = re.compile(r"refused \(([a-z_]+)\)")
_TOO_SLOW_RE = re.compile(r"too slow \((deadline|min_rate)\): (.*?)>?$", re.S)


def too_slow_reason(text: str | None) -> tuple[str, str] | None:
    """Return ``(reason, detail)`` of a :class:`TooSlow` from its text, even wrapped by urllib.

    Args:
        text: an error message (``"<urlopen error too slow (deadline): ...>"``).

    Returns:
        ``("deadline" | "min_rate", detail)``, or None if ``text`` is not a :class:`TooSlow`.
    """
    if not text:
        return None
    m = _TOO_SLOW_RE.search(text.strip())
    return (m.group(1), m.group(2)) if m else None


def refusal_reason(text: str | None) -> str | None:
    """Return the reason code of a :class:`FetchRefused` from its text (e.g. as stored by img2dataset).

    Args:
        text: an error message, possibly wrapped (``"<urlopen error refused (too_large): ...>"``).

    Returns:
        The reason code, or None if ``text`` is not a refusal.
    """
    if not text:
        return None
    m = _REFUSAL_RE.search(text)
    return m.group(1) if m else None


# --- addresses ---

_V4_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_V4_BROADCAST = ipaddress.ip_address("255.255.255.255")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_PRIVATE_NETS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",  # carrier-grade NAT
        "fc00::/7",  # unique local
        "fec0::/10",  # deprecated site-local
    )
)


def _unwrap(ip: IPAddress) -> IPAddress:
    """IPv6 addresses that carry an IPv4 address are judged by that address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def check_ip(ip: str | IPAddress, policy: FetchPolicy) -> IPAddress:
    """Check one address against ``policy``.

    Args:
        ip: an address (a string may carry an IPv6 scope, ``fe80::1%eth0``).
        policy: the fetch policy.

    Returns:
        The address judged (IPv4 for an IPv4-mapped/6to4/NAT64 IPv6 address).

    Raises:
        BlockedAddress: with the category (loopback, private, link-local, ...) as detail.
        ValueError: if ``ip`` is not an IP address.
    """
    raw = ipaddress.ip_address(str(ip).split("%", 1)[0]) if isinstance(ip, str) else ip
    addr = _unwrap(raw)
    shown = str(raw) if raw == addr else f"{raw} (= {addr})"

    def refuse(category: str, flag: str | None = None) -> BlockedAddress:
        hint = f" (allowed only with {flag}=True)" if flag else ""
        return BlockedAddress(f"{shown} is {category}{hint}")

    if addr.is_unspecified or (isinstance(addr, ipaddress.IPv4Address) and addr in _V4_THIS_NETWORK):
        raise refuse("unspecified")
    if addr.is_multicast:
        raise refuse("multicast")
    if addr == _V4_BROADCAST:
        raise refuse("broadcast")
    if addr.is_loopback:
        if policy.allow_loopback:
            return addr
        raise refuse("loopback", "allow_loopback")
    if addr.is_link_local:
        if policy.allow_private:
            return addr
        raise refuse("link-local", "allow_private")
    if any(addr in net for net in _PRIVATE_NETS if net.version == addr.version):
        if policy.allow_private:
            return addr
        raise refuse("private", "allow_private")
    if addr.is_reserved:
        raise refuse("reserved")
    if not addr.is_global:
        if policy.allow_private:
            return addr
        raise refuse("not globally routable", "allow_private")
    return addr


def resolve_and_check(host: str, port: int, policy: FetchPolicy) -> list[tuple[int, Any]]:
    """Resolve ``host`` once and check every address it resolves to.

    A host with *any* refused address is refused as a whole (a name that resolves to a public
    and a private address is not to be trusted with either).

    Args:
        host: a host name or an IP literal (no brackets).
        port: the TCP port.
        policy: the fetch policy.

    Returns:
        ``[(family, sockaddr), ...]`` ready for ``socket.connect``, in resolver order, without
        duplicates.

    Raises:
        BlockedAddress: if an address is refused or the name resolves to nothing.
        OSError: (``socket.gaierror``) if the name cannot be resolved.
    """
    host = host.strip("[]")
    try:
        literal = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        literal = None
    if literal is not None:
        check_ip(host, policy)
        family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
        sockaddr: tuple[Any, ...] = (host, port) if family == socket.AF_INET else (host, port, 0, 0)
        return [(family, sockaddr)]
    infos = _getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    out: list[tuple[int, Any]] = []
    for family, _type, _proto, _canon, sockaddr in infos:
        try:
            check_ip(sockaddr[0], policy)
        except BlockedAddress as e:
            raise BlockedAddress(f"host {host}: {e.detail}") from None
        if (family, sockaddr) not in out:
            out.append((family, sockaddr))
    if not out:
        raise BlockedAddress(f"host {host} resolves to no address")
    return out


def trusted_policy(**overrides: Any) -> FetchPolicy:
    """A policy for API endpoints the curator configures (a query service, a mirror, a local server).

    Such endpoints may be private or loopback (the curator chose them), and their answers are
    not images, so no opt-out directive applies. An answer may take long to start (a query
    being computed), so there is no minimum rate unless asked for; the deadline, byte cap and
    timeout still hold, so no API call can hang on a server that drips or never answers.

    Args:
        **overrides: :class:`FetchPolicy` fields (``timeout``, ``deadline``, ``max_bytes``, ...).
    """
    fields: dict[str, Any] = {
        "allow_loopback": True,
        "allow_private": True,
        "disallowed_directives": (),
        "max_bytes": 200_000_000,
        "min_rate": 0,
    }
    return FetchPolicy(**(fields | overrides))


def _connect_checked(
    address: tuple[str, int], timeout: float | None, source_address: Any, policy: FetchPolicy
) -> socket.socket:
    """``socket.create_connection`` that only ever connects to checked addresses."""
    host, port = address
    last: OSError | None = None
    for _family, sockaddr in resolve_and_check(host, port, policy):
        try:
            # an IP literal: create_connection does no DNS lookup for it
            return socket.create_connection(sockaddr[:2], timeout, source_address)
        except OSError as e:
            last = e
    assert last is not None
    raise last


# --- headers ---

_VALUED_DIRECTIVES = {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
_TOKEN_RE = re.compile(r"^[a-z0-9_.\-]+$")


def _robots_rules(values: Iterable[str]) -> list[tuple[str | None, str]]:
    """``[(robot or None, directive), ...]`` from ``X-Robots-Tag`` header values.

    ``"otherbot: noindex, noai"`` applies both directives to ``otherbot`` (Google's reading);
    ``"max-image-preview: none"`` is a directive with a value, not a robot name.
    """
    rules: list[tuple[str | None, str]] = []
    for value in values:
        robot: str | None = None
        for part in str(value).split(","):
            part = part.strip().lower()
            if not part:
                continue
            head, sep, rest = part.partition(":")
            head = head.strip()
            if sep and head not in _VALUED_DIRECTIVES and _TOKEN_RE.match(head):
                robot = head
                part = rest.strip()
                if not part:
                    continue
            directive = part.split(":", 1)[0].strip()
            rules.append((robot, directive))
    return rules


def is_disallowed(headers: Message | http.client.HTTPMessage | Any, policy: FetchPolicy) -> str | None:
    """Return the offending ``X-Robots-Tag`` directive, or None if our use is allowed.

    Args:
        headers: response headers (anything with ``get_all``).
        policy: gives the disallowed directives and our robot token.
    """
    values = headers.get_all("X-Robots-Tag") or []
    banned = set(policy.disallowed_directives)
    for robot, directive in _robots_rules(values):
        if directive in banned and robot in (None, policy.user_agent_token):
            return directive if robot is None else f"{robot}: {directive}"
    return None


# --- deadlines ---


class _Clock:
    """The wall-clock budget of one download (shared by its redirect hops)."""

    def __init__(self, policy: FetchPolicy) -> None:
        self.start = time.monotonic()
        self.policy = policy
        self.received = 0
        self.host = "?"

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def expired(self) -> bool:
        return self.elapsed() >= self.policy.deadline

    def check(self) -> None:
        """Raise :class:`TooSlow` if the deadline has passed or the average rate is too low."""
        p = self.policy
        elapsed = self.elapsed()
        if elapsed >= p.deadline:
            raise TooSlow(
                "deadline",
                f"no complete answer from {self.host} within {p.deadline:g} s "
                f"({self.received} bytes received; setting: deadline)",
            )
        if p.min_rate > 0 and elapsed >= p.rate_grace and self.received < p.min_rate * elapsed:
            raise TooSlow(
                "min_rate",
                f"{self.host} sent {self.received} bytes in {elapsed:.1f} s, "
                f"{self.received / elapsed:.0f} bytes/s, less than min_rate {p.min_rate:g} bytes/s",
            )

    def op_timeout(self) -> float:
        """Seconds one socket operation may block: the per-operation timeout, cut to what is left.

        Raises:
            TooSlow: if no time is left.
        """
        self.check()
        p = self.policy
        left = min(p.timeout, p.deadline - self.elapsed())
        if p.min_rate > 0:  # when the average rate would fall below min_rate if nothing more came
            left = min(left, max(p.rate_grace, self.received / p.min_rate) - self.elapsed())
        return max(left, 0.001)

    def timed_out(self, exc: BaseException) -> BaseException:
        """The exception to raise for ``exc``: :class:`TooSlow` if a limit has passed, else ``exc``."""
        try:
            self.check()
        except TooSlow as slow:
            return slow
        return exc


class _MeteredReader(io.RawIOBase):
    """The raw stream under an HTTP response: every read gets the time left, and is counted."""

    def __init__(self, sock: socket.socket, clock: _Clock) -> None:
        super().__init__()
        self._sock = sock
        self._inner = sock.makefile("rb", buffering=0)  # holds a reference: closes with us
        self._clock = clock

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._inner.fileno()

    def readinto(self, b: Any) -> int | None:
        self._sock.settimeout(self._clock.op_timeout())
        try:
            n = self._inner.readinto(b)
        except OSError as e:  # a timeout cut short by the clock
            raise self._clock.timed_out(e) from None
        if n:
            self._clock.received += n
            self._clock.check()
        return n

    def close(self) -> None:
        if not self.closed:
            self._inner.close()
        super().close()


class _MeteredSocket:
    """A connected (possibly TLS) socket whose reads and writes keep to the download's clock."""

    def __init__(self, sock: socket.socket, clock: _Clock) -> None:
        self._sock = sock
        self._clock = clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def makefile(self, mode: str = "r", buffering: int | None = None, **kwargs: Any) -> Any:
        if mode != "rb" or kwargs:
            raise ValueError(f"a guarded connection is read as 'rb', not {mode!r}")
        raw = _MeteredReader(self._sock, self._clock)
        return raw if buffering == 0 else io.BufferedReader(raw, buffering or io.DEFAULT_BUFFER_SIZE)

    def sendall(self, data: Any, *args: Any) -> None:
        self._sock.settimeout(self._clock.op_timeout())
        try:
            self._sock.sendall(data, *args)
        except OSError as e:
            raise self._clock.timed_out(e) from None

    def close(self) -> None:
        self._sock.close()


def _metered_connect(conn: http.client.HTTPConnection, clock: _Clock, connect: Any) -> None:
    """Run ``connect()`` of ``conn`` within the clock, then meter its socket."""
    clock.host = conn.host
    conn.timeout = clock.op_timeout()
    try:
        connect()
    except OSError as e:
        raise clock.timed_out(e) from None
    conn.sock = _MeteredSocket(conn.sock, clock)  # type: ignore[assignment]


# --- urllib plumbing ---


def _host(req: urllib.request.Request) -> str:
    """The host name of a request, for messages (never the full URL: query strings carry tokens)."""
    return urllib.parse.urlsplit(req.full_url).hostname or req.host


class _Guarded:
    """The guard and the clock of one connection, mixed into http.client's connection classes.

    ``checked=False`` (metered_handlers): the clock only, for endpoints the curator configured.
    """

    def __init__(
        self,
        *args: Any,
        policy: FetchPolicy,
        clock: _Clock | None = None,
        checked: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if checked:
            self._create_connection = functools.partial(_connect_checked, policy=policy)
        self._clock = clock or _Clock(policy)

    def connect(self) -> None:
        _metered_connect(self, self._clock, super().connect)  # type: ignore[misc]


class _GuardedHTTPConnection(_Guarded, http.client.HTTPConnection):
    pass


class _GuardedHTTPSConnection(_Guarded, http.client.HTTPSConnection):
    # HTTPSConnection.connect() calls HTTPConnection.connect() (which uses _create_connection)
    # and then wraps the socket with server_hostname=self.host: SNI and certificate checks keep the name.
    # The socket's timeout (cut to the time left) bounds the whole TLS handshake, not each read.
    pass


def _clock_of(req: urllib.request.Request) -> _Clock | None:
    """The clock of a download (set by :class:`_ResponseGuard`, carried over redirect hops)."""
    return getattr(req, "_fairsets_clock", None)


def _start_clock(req: urllib.request.Request, policy: FetchPolicy) -> None:
    if not getattr(req, "_fairsets_hops", 0):  # a new download (a request object may be reused)
        req._fairsets_clock = _Clock(policy)  # type: ignore[attr-defined]


class _GuardedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, policy: FetchPolicy, checked: bool = True) -> None:
        super().__init__()
        self._policy = policy
        self._checked = checked

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        conn = functools.partial(
            _GuardedHTTPConnection, policy=self._policy, clock=_clock_of(req), checked=self._checked
        )
        return self.do_open(conn, req)


class _GuardedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, policy: FetchPolicy, checked: bool = True) -> None:
        super().__init__()
        self._policy = policy
        self._checked = checked

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        conn = functools.partial(
            _GuardedHTTPSConnection, policy=self._policy, clock=_clock_of(req), checked=self._checked
        )
        return self.do_open(conn, req, context=self._context)


class _ClockStarter(urllib.request.BaseHandler):
    """Starts the clock of every new request (:func:`metered_handlers`)."""

    handler_order = 100

    def __init__(self, policy: FetchPolicy) -> None:
        self._policy = policy

    def http_request(self, req: urllib.request.Request) -> urllib.request.Request:
        _start_clock(req, self._policy)
        return req

    https_request = http_request


class _SchemeGuard(urllib.request.BaseHandler):
    """Runs before any opener (``default_open``): refuse schemes outside the policy."""

    handler_order = 0

    def __init__(self, policy: FetchPolicy) -> None:
        self._policy = policy

    def default_open(self, req: urllib.request.Request) -> None:
        if req.type not in self._policy.schemes:
            raise BlockedScheme(f"scheme {req.type!r} is not one of {list(self._policy.schemes)}")
        return None


class _RedirectHandler(urllib.request.HTTPRedirectHandler):
    """Follow at most ``max_redirects`` redirects, to allowed schemes only.

    Each hop is a new ``parent.open`` call, so it goes through the scheme guard and the checked
    connection again.
    """

    def __init__(self, policy: FetchPolicy) -> None:
        self._policy = policy
        self.max_redirections = policy.max_redirects + 1  # ours fires first, with a clear reason
        self.max_repeats = policy.max_redirects + 1  # urllib's loop check too (a multi-line http_302)

    def http_error_302(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any) -> Any:
        location = headers.get("location") or headers.get("uri")
        if location:
            scheme = urllib.parse.urlsplit(location.strip()).scheme.lower()
            if scheme and scheme not in self._policy.schemes:
                raise BlockedScheme(f"redirect to scheme {scheme!r} from {_host(req)}")
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        hops = getattr(req, "_fairsets_hops", 0) + 1
        if hops > self._policy.max_redirects:
            raise TooManyRedirects(f"more than {self._policy.max_redirects} redirects from {_host(req)}")
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            new._fairsets_hops = hops  # type: ignore[attr-defined]
            new._fairsets_clock = _clock_of(req)  # type: ignore[attr-defined]  # one deadline for all hops
            log.debug("redirect %d from %s to %s", hops, _host(req), _host(new))
        return new


class _CappedResponse:
    """A response whose body reads raise :class:`TooLarge` past ``max_bytes``; all else delegates."""

    def __init__(self, raw: Any, max_bytes: int, host: str) -> None:
        self._raw = raw
        self._max = max_bytes
        self._host = host
        self._seen = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def _count(self, n: int) -> None:
        self._seen += n
        if self._seen > self._max:
            self._raw.close()
            raise TooLarge(f"body from {self._host} exceeds {self._max} bytes")

    def _read(self, n: int) -> bytes:
        data = self._raw.read(n)
        if not data and n > 0:
            # http.client's read(n) returns b"" when the server closes early, even with bytes of
            # Content-Length still missing: a truncated image would decode and be published.
            missing = getattr(self._raw, "length", None)
            if isinstance(missing, int) and missing > 0:
                self._raw.close()
                raise http.client.IncompleteRead(b"", missing)
        return data

    def read(self, amt: int | None = None) -> bytes:
        if amt is not None and amt >= 0:
            data = self._read(min(amt, self._max - self._seen + 1))
            self._count(len(data))
            return data
        parts = []
        while True:
            chunk = self._read(min(_CHUNK, self._max - self._seen + 1))
            if not chunk:
                break
            self._count(len(chunk))
            parts.append(chunk)
        return b"".join(parts)

    def read1(self, amt: int = -1) -> bytes:
        return self.read(amt if amt is not None and amt >= 0 else _CHUNK)

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def readline(self, limit: int = -1) -> bytes:
        cap = self._max - self._seen + 1
        line = self._raw.readline(cap if limit is None or limit < 0 else min(limit, cap))
        self._count(len(line))
        return line

    def __iter__(self) -> Any:
        while line := self.readline():
            yield line

    def __enter__(self) -> _CappedResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._raw.close()


class _ResponseGuard(urllib.request.BaseHandler):
    """Set the User-Agent on every request; cap and vet every response.

    Runs before ``HTTPErrorProcessor`` (order 1000), so redirect and error bodies are capped too;
    the size announcement and the opt-out are checked on successful (2xx) answers only.
    """

    handler_order = 100

    def __init__(self, policy: FetchPolicy, user_agent: str) -> None:
        self._policy = policy
        self._ua = user_agent

    def http_request(self, req: urllib.request.Request) -> urllib.request.Request:
        _start_clock(req, self._policy)
        req.add_header("User-Agent", self._ua)  # replaces any earlier one (img2dataset's)
        req.unredirected_hdrs.pop("User-agent", None)
        return req

    https_request = http_request

    def http_response(self, req: urllib.request.Request, response: Any) -> Any:
        host = _host(req)
        if 200 <= response.status < 300:
            length = response.headers.get("Content-Length")
            try:
                announced = int(length) if length is not None else None
            except ValueError:
                announced = None
            if announced is not None and announced > self._policy.max_bytes:
                response.close()
                raise TooLarge(f"{host} announces {announced} bytes, more than {self._policy.max_bytes}")
            directive = is_disallowed(response.headers, self._policy)
            if directive is not None:
                response.close()
                raise OptedOut(f"X-Robots-Tag {directive!r} from {host}")
        return _CappedResponse(response, self._policy.max_bytes, host)

    https_response = http_response


def guarded_opener(policy: FetchPolicy, user_agent: str | None = None) -> urllib.request.OpenerDirector:
    """Build an opener that enforces ``policy`` on every request and redirect hop.

    The opener has no proxy, FTP, file or data handlers. Its result can be used like
    ``urllib.request.urlopen``'s: ``with opener.open(req, timeout=t) as r: r.headers; r.read()``
    — ``urllib.request.install_opener(guarded_opener(policy))`` makes ``urlopen`` itself guarded.

    Args:
        policy: the fetch policy.
        user_agent: the User-Agent sent on every request (replacing the request's own); default
            :func:`fairsets.fetch.retry.user_agent`.

    Returns:
        The opener.
    """
    if user_agent is None:
        from .retry import user_agent as default_user_agent

        user_agent = default_user_agent()
    opener = urllib.request.OpenerDirector()
    for handler in (
        _SchemeGuard(policy),
        _ResponseGuard(policy, user_agent),
        _GuardedHTTPHandler(policy),
        _GuardedHTTPSHandler(policy),
        urllib.request.HTTPDefaultErrorHandler(),
        _RedirectHandler(policy),
        urllib.request.HTTPErrorProcessor(),
        urllib.request.UnknownHandler(),
    ):
        opener.add_handler(handler)
    return opener


def metered_handlers(policy: FetchPolicy) -> list[urllib.request.BaseHandler]:
    """urllib handlers that hold every request to ``policy``'s timeout, deadline and minimum rate only.

    For clients of endpoints the curator configures (an LLM server, a statistics API), which keep
    their own opener (environment proxies, their redirect rules) but must not hang on a server
    that drips or never answers: ``urllib.request.build_opener(*metered_handlers(p), ...)``. No
    address, scheme, size or opt-out check is made (use :func:`guarded_opener` for URLs from the
    outside world); a redirect hop, if the opener follows one, starts its own clock.

    Args:
        policy: gives ``timeout``, ``deadline``, ``min_rate`` and ``rate_grace``.

    Returns:
        ``[clock starter, HTTP handler, HTTPS handler]``; the HTTP(S) handlers replace urllib's.
    """
    return [
        _ClockStarter(policy),
        _GuardedHTTPHandler(policy, checked=False),
        _GuardedHTTPSHandler(policy, checked=False),
    ]


# --- one URL ---


@dataclass
class FetchResult:
    """The outcome of :func:`fetch_url`.

    Attributes:
        url: the URL asked for.
        final_url: the URL answered after redirects (None if no answer).
        status: ``ok``; ``rejected`` (a decision: refused address/scheme, opt-out, too large,
            HTTP 3xx/4xx other than 408/429, invalid URL — not worth retrying); ``failed``
            (transient: timeouts, the deadline or minimum rate passed, connection errors, 5xx,
            408, 429).
        http_status: the HTTP status of the final answer, if any.
        data: the body when ``ok``.
        content_type: the ``Content-Type`` of the final answer, if any.
        error: ``"<reason>: <detail>"`` when not ok (no URL in it).
    """

    url: str
    final_url: str | None
    status: Literal["ok", "failed", "rejected"]
    http_status: int | None = None
    data: bytes | None = None
    content_type: str | None = None
    error: str | None = None


def classify_http_status(code: int) -> Literal["failed", "rejected"]:
    """``failed`` for HTTP answers worth retrying later (408, 429, 5xx), else ``rejected``."""
    return "failed" if code in (408, 429) or code >= 500 else "rejected"


def _is_timeout(exc: BaseException | None) -> bool:
    return isinstance(exc, (TimeoutError, socket.timeout))


def fetch_url(url: str, policy: FetchPolicy, *, user_agent: str | None = None) -> FetchResult:
    """Download one (small) URL through :func:`guarded_opener`, classifying the outcome.

    No retries here; wrap with :func:`fairsets.fetch.retry.call_with_retry` for that.

    Args:
        url: an http(s) URL.
        policy: the fetch policy.
        user_agent: the User-Agent; default :func:`fairsets.fetch.retry.user_agent`.

    Returns:
        A :class:`FetchResult`; this function does not raise for network or HTTP errors.
    """
    host = urllib.parse.urlsplit(url).hostname or "?"
    opener = guarded_opener(policy, user_agent)
    try:
        req = urllib.request.Request(url)
        with opener.open(req, timeout=policy.timeout) as r:
            try:
                data = r.read()
            except ValueError as e:  # broken framing (a negative chunk size): the server's fault
                raise http.client.HTTPException(f"malformed response body: {type(e).__name__}: {e}") from None
            return FetchResult(
                url=url,
                final_url=r.geturl(),
                status="ok",
                http_status=r.status,
                data=data,
                content_type=r.headers.get("Content-Type"),
            )
    except FetchRefused as e:
        log.debug("%s: %s", host, e)
        return FetchResult(url, None, "rejected", error=f"{e.reason}: {e.detail}")
    except urllib.error.HTTPError as e:
        with contextlib.suppress(Exception):
            e.close()
        return FetchResult(
            url,
            None,
            classify_http_status(e.code),
            http_status=e.code,
            content_type=e.headers.get("Content-Type") if e.headers else None,
            error=f"http_{e.code}: {e.reason}",
        )
    except TooSlow as e:
        return FetchResult(url, None, "failed", error=f"{e.reason}: {e.detail}")
    except urllib.error.URLError as e:
        if isinstance(e.reason, TooSlow):
            return FetchResult(url, None, "failed", error=f"{e.reason.reason}: {e.reason.detail}")
        kind = "timeout" if _is_timeout(e.reason) else "connection"
        return FetchResult(url, None, "failed", error=f"{kind}: {e.reason}")
    except ValueError as e:  # malformed URL; the message would repeat the URL
        return FetchResult(url, None, "rejected", error=f"invalid_url: {type(e).__name__}")
    except (OSError, http.client.HTTPException) as e:
        kind = "timeout" if _is_timeout(e) else "connection"
        return FetchResult(url, None, "failed", error=f"{kind}: {type(e).__name__}: {e}")
