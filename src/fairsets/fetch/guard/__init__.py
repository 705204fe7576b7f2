"""Guarded HTTP(S) fetching: no private addresses, a byte cap, and ``X-Robots-Tag`` opt-outs honoured.

Everything that downloads a URL taken from the outside world (search results, LAION rows,
Wikimedia file URLs) goes through :func:`guarded_opener` or :func:`fetch_url`. The guard is
enforced where the socket is made, not where the URL is parsed:

* the host of every request (the first one and every redirect hop) is resolved once, *every*
  resolved address is checked with :func:`check_ip`, and the socket is connected to one of the
  checked addresses — there is no second DNS lookup, so DNS rebinding cannot swap the address
  between check and connect. The ``Host`` header and TLS SNI/certificate checks still use the
  host name;
* addresses are judged by fairsets' own copy of the IANA IPv4 and IPv6 Special-Purpose Address
  Registries (:mod:`.special`: every entry, its "globally reachable" flag and the exceptions
  inside a larger block, the longest prefix deciding), never by the standard library's
  ``is_global``, whose answers differ between Python releases. Loopback is refused unless
  ``allow_loopback``; private, link-local, carrier-grade NAT, unique-local and the other blocks
  the registries mark not globally reachable (192.0.0.0/24, documentation, benchmarking, ...)
  are refused unless ``allow_private``; unspecified, multicast, broadcast, reserved and
  non-destination addresses are always refused. IPv4-mapped (``::ffff:a.b.c.d``), 6to4 and
  NAT64 (``64:ff9b::/96``) IPv6 addresses are judged by the IPv4 address they carry;
* a URL that can never be fetched (no host, a malformed host or port, white space or control
  characters, longer than ``MAX_URL_CHARS``) is refused as ``invalid_url`` before any lookup,
  on the first request or after a redirect (:func:`url_problem`): a decision, not a failure
  worth retrying;
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
* every request waits its host's turn (:mod:`.hosts`): at most ``per_host_connections`` open and
  ``per_host_rate`` started per second per host name, and none before a 429's ``Retry-After``
  (the URL is sent again after it, at most ``throttle_retries`` times);
* a successful response whose ``X-Robots-Tag`` carries a disallowed directive (``noai``,
  ``noimageai``) for every robot or for our token (``fairsets: noai``) raises :class:`OptedOut`;
  directives addressed to another robot (``otherbot: noai``) do not apply.

Refusals are :class:`FetchRefused` exceptions whose text starts with ``refused (<reason>)``; the
text names a host or an address, never a full URL (query strings can carry tokens).

API:
    * ``FetchPolicy`` — the knobs above (pydantic, frozen)
    * ``FetchRefused`` and its kinds ``BlockedAddress``, ``BlockedScheme``, ``InvalidURL``,
      ``TooManyRedirects``, ``TooLarge``, ``OptedOut``; ``refusal_reason(text) -> str | None``
      parses the reason back; ``allowing_flag(text)`` the policy flag that would have allowed a
      refused address
    * ``url_problem(url) -> str | None`` (why a URL can never be fetched), ``MAX_URL_CHARS``
    * ``TooSlow`` (deadline or minimum rate passed; transient); ``too_slow_reason(text)`` parses
      ``(reason, detail)`` back from a (possibly wrapped) message
    * ``trusted_policy(**overrides) -> FetchPolicy`` for API endpoints the curator configures
    * ``metered_handlers(policy)`` — urllib handlers with the deadline and rate only (API clients)
    * ``check_ip(ip, policy)``, ``resolve_and_check(host, port, policy)``
    * ``is_disallowed(headers, policy) -> str | None`` (the X-Robots-Tag decision)
    * ``guarded_opener(policy, user_agent=None) -> urllib.request.OpenerDirector``
    * ``fetch_url(url, policy, *, user_agent=None) -> FetchResult``

Modules, one idea each: :mod:`.policy` (the knobs), :mod:`.refusals` (the exceptions and their
reasons), :mod:`.special` (the IANA special-purpose table), :mod:`.urls` (URLs that can never be
fetched), :mod:`.addresses` (the address check
at the socket), :mod:`.robots` (``X-Robots-Tag``),
:mod:`.clock` (deadline and minimum rate), :mod:`.hosts` (politeness per host: connections,
rate and ``Retry-After`` pauses shared by a process's threads and a download's processes),
:mod:`.opener` (the urllib plumbing) and
:mod:`.one_url` (:func:`fetch_url`).
"""

from __future__ import annotations

from .addresses import check_ip, resolve_and_check
from .one_url import FetchResult, classify_http_status, fetch_url
from .opener import guarded_opener, metered_handlers
from .policy import FetchPolicy, trusted_policy
from .refusals import (
    BlockedAddress,
    BlockedScheme,
    FetchRefused,
    InvalidURL,
    OptedOut,
    TooLarge,
    TooManyRedirects,
    TooSlow,
    allowing_flag,
    refusal_reason,
    too_slow_reason,
)
from .robots import is_disallowed
from .urls import MAX_URL_CHARS, url_problem

__all__ = [
    "MAX_URL_CHARS",
    "BlockedAddress",
    "BlockedScheme",
    "FetchPolicy",
    "FetchRefused",
    "FetchResult",
    "InvalidURL",
    "OptedOut",
    "TooLarge",
    "TooManyRedirects",
    "TooSlow",
    "allowing_flag",
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
    "url_problem",
]
