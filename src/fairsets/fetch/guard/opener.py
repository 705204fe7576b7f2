"""The urllib plumbing of the guard: checked and metered connections, the scheme, redirect and
response guards, the byte cap on bodies, and the openers built from them
(:func:`guarded_opener`, :func:`metered_handlers`).
"""

from __future__ import annotations

import functools
import http.client
import io
import logging
import urllib.parse
import urllib.request
import weakref
from typing import Any

from .addresses import _connect_checked
from .clock import _Clock, _metered_connect
from .hosts import DEFAULT_BACKOFF, HostPacer, pacer_for
from .policy import FetchPolicy
from .refusals import (
    BlockedScheme,
    InvalidURL,
    OptedOut,
    TooLarge,
    TooManyRedirects,
)
from .robots import is_disallowed
from .urls import url_problem

log = logging.getLogger(__package__)  # one logger for the whole guard, as before the split

_CHUNK = 64 * 1024


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


def _paced_open(pacer: HostPacer | None, req: urllib.request.Request, open_: Any) -> Any:
    """``open_()`` in the host's turn (:mod:`.hosts`): the wait is not counted in the deadline, and
    the connection slot is given back when the answer is closed (``req._fairsets_release``)."""
    if pacer is None:
        return open_()
    waited, release = pacer.acquire(_host(req).lower())
    clock = _clock_of(req)
    if clock is not None:
        clock.start += waited
    try:
        response = open_()
    except BaseException:
        release()
        raise
    req._fairsets_release = release  # type: ignore[attr-defined]
    return response


class _GuardedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, policy: FetchPolicy, checked: bool = True, pacer: HostPacer | None = None) -> None:
        super().__init__()
        self._policy = policy
        self._checked = checked
        self._pacer = pacer

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        conn = functools.partial(
            _GuardedHTTPConnection, policy=self._policy, clock=_clock_of(req), checked=self._checked
        )
        return _paced_open(self._pacer, req, lambda: self.do_open(conn, req))


class _GuardedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, policy: FetchPolicy, checked: bool = True, pacer: HostPacer | None = None) -> None:
        super().__init__()
        self._policy = policy
        self._checked = checked
        self._pacer = pacer

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        conn = functools.partial(
            _GuardedHTTPSConnection, policy=self._policy, clock=_clock_of(req), checked=self._checked
        )
        return _paced_open(self._pacer, req, lambda: self.do_open(conn, req, context=self._context))


class _ThrottleHandler(urllib.request.BaseHandler):
    """A 429 (or a 503 with ``Retry-After``) pauses its host (:meth:`HostPacer.pause`) and sends the
    request again in the host's next turn, at most ``throttle_retries`` times; then, or when the
    pause is longer than ``retry_after_max``, the error stands (``http_429``: the row fails)."""

    def __init__(self, policy: FetchPolicy, pacer: HostPacer) -> None:
        self._policy = policy
        self._pacer = pacer

    def http_error_429(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any) -> Any:
        from ..retry import parse_retry_after

        retry_after = parse_retry_after(headers.get("Retry-After")) if headers is not None else None
        if code == 503 and retry_after is None:
            return None  # an ordinary 503: the error stands
        tries = getattr(req, "_fairsets_throttled", 0)
        wait = retry_after if retry_after is not None else DEFAULT_BACKOFF * 2**tries
        self._pacer.pause(_host(req).lower(), wait)
        if tries >= self._policy.throttle_retries or wait > self._policy.retry_after_max:
            return None
        fp.close()
        log.debug("%s answered %d: paused %.1f s, try %d", _host(req), code, wait, tries + 1)
        req._fairsets_throttled = tries + 1  # type: ignore[attr-defined]
        req._fairsets_clock = _Clock(self._policy)  # type: ignore[attr-defined]  # a new try: a new deadline
        return self.parent.open(req, timeout=req.timeout)

    http_error_503 = http_error_429


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
    """Runs before any opener (``default_open``): refuse schemes outside the policy; and first of
    the request processors: refuse an http(s) URL that can never be fetched (:func:`url_problem`:
    no host, a malformed host or port, ...) before urllib's own checks make it a transient error."""

    handler_order = 0

    def __init__(self, policy: FetchPolicy) -> None:
        self._policy = policy

    def http_request(self, req: urllib.request.Request) -> urllib.request.Request:
        problem = url_problem(req.full_url)
        if problem is not None:
            raise InvalidURL(problem)
        return req

    https_request = http_request

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

    def __init__(self, raw: Any, max_bytes: int, host: str, release: Any = None) -> None:
        self._raw = raw
        self._max = max_bytes
        self._host = host
        self._seen = 0
        self._release = release  # gives the host's connection slot back (hosts.py)
        if release is not None:  # an answer dropped without close() frees its slot when collected
            weakref.finalize(self, release)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def _count(self, n: int) -> None:
        self._seen += n
        if self._seen > self._max:
            self.close()
            raise TooLarge(f"body from {self._host} exceeds {self._max} bytes")

    def _read(self, n: int) -> bytes:
        data = self._raw.read(n)
        if not data and n > 0:
            # http.client's read(n) returns b"" when the server closes early, even with bytes of
            # Content-Length still missing: a truncated image would decode and be published.
            missing = getattr(self._raw, "length", None)
            if isinstance(missing, int) and missing > 0:
                self.close()
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
        if self._release is not None:
            self._release()


class _ReadError(io.BytesIO):
    """A redirect or error answer read into memory (at most ``_ERROR_BODY`` bytes) and closed, so
    that its connection slot is free whatever happens next (a refused redirect, an ``HTTPError``
    nobody closes)."""

    def __init__(self, raw: Any, limit: int) -> None:
        try:
            data = raw.read(limit)
        except (OSError, http.client.HTTPException, ValueError):
            data = b""
        raw.close()
        super().__init__(data)
        self._raw = raw
        self.length = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


_ERROR_BODY = 64 * 1024


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
        release = getattr(req, "_fairsets_release", None)
        req._fairsets_release = None  # type: ignore[attr-defined]  # the answer owns it now
        try:
            return self._vet(req, response, host, release)
        except BaseException:
            if release is not None:
                release()
            raise

    def _vet(self, req: urllib.request.Request, response: Any, host: str, release: Any) -> Any:
        if not 200 <= response.status < 300 and release is not None:  # a redirect or an error
            response = _ReadError(response, min(_ERROR_BODY, self._policy.max_bytes))
            release()
            release = None
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
        return _CappedResponse(response, self._policy.max_bytes, host, release)

    https_response = http_response


def guarded_opener(
    policy: FetchPolicy, user_agent: str | None = None, *, pause_dir: str | None = None
) -> urllib.request.OpenerDirector:
    """Build an opener that enforces ``policy`` on every request and redirect hop.

    Requests wait their host's turn (``per_host_rate``, ``per_host_connections``, a 429's
    ``Retry-After``: :mod:`.hosts`), shared with every guarded opener of the process under the same
    limits. The opener has no proxy, FTP, file or data handlers. Its result can be used like
    ``urllib.request.urlopen``'s: ``with opener.open(req, timeout=t) as r: r.headers; r.read()``
    — ``urllib.request.install_opener(guarded_opener(policy))`` makes ``urlopen`` itself guarded.

    Args:
        policy: the fetch policy.
        user_agent: the User-Agent sent on every request (replacing the request's own); default
            :func:`fairsets.fetch.retry.user_agent`.
        pause_dir: a folder through which the worker processes of one download share the
            pauses 429s ask for (None: this process only).

    Returns:
        The opener.
    """
    if user_agent is None:
        from ..retry import user_agent as default_user_agent

        user_agent = default_user_agent()
    pacer = pacer_for(policy, pause_dir)
    opener = urllib.request.OpenerDirector()
    for handler in (
        _SchemeGuard(policy),
        _ResponseGuard(policy, user_agent),
        _GuardedHTTPHandler(policy, pacer=pacer),
        _GuardedHTTPSHandler(policy, pacer=pacer),
        urllib.request.HTTPDefaultErrorHandler(),
        _RedirectHandler(policy),
        urllib.request.HTTPErrorProcessor(),
        urllib.request.UnknownHandler(),
        *([_ThrottleHandler(policy, pacer)] if pacer is not None else []),
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
