"""Private-address refusal at the socket: every resolved address is checked, and the socket is
connected to a checked address only (no second DNS lookup, so no DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

from .policy import FetchPolicy
from .refusals import BlockedAddress
from .special import FLAG_OF, embedded_ipv4, lookup

#: The resolver used by :func:`resolve_and_check`; tests patch this, never the network.
_getaddrinfo = socket.getaddrinfo

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _unwrap(ip: IPAddress) -> IPAddress:
    """IPv6 addresses that carry an IPv4 address (mapped, NAT64, 6to4) are judged by that address."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            return embedded
    return ip


def check_ip(ip: str | IPAddress, policy: FetchPolicy) -> IPAddress:
    """Check one address against ``policy``, by fairsets' own table of the IANA special-purpose
    registries (:mod:`.special`; never the standard library's ``is_global``).

    Args:
        ip: an address (a string may carry an IPv6 scope, ``fe80::1%eth0``).
        policy: the fetch policy.

    Returns:
        The address judged (IPv4 for an IPv4-mapped/6to4/NAT64 IPv6 address).

    Raises:
        BlockedAddress: with the category (loopback, private, link-local, not globally
            reachable, ...) as detail.
        ValueError: if ``ip`` is not an IP address.
    """
    raw = ipaddress.ip_address(str(ip).split("%", 1)[0]) if isinstance(ip, str) else ip
    addr = _unwrap(raw)
    shown = str(raw) if raw == addr else f"{raw} (= {addr})"
    entry = lookup(addr)
    category = entry.category
    if category == "global":
        return addr
    flag = FLAG_OF.get(category)
    # An allowance is for the address itself (or its IPv4-mapped form, which a dual-stack socket
    # connects to as is). A 6to4 or NAT64 address is routed to a relay or translator, not to this
    # host or its network, so a loopback or private address carried inside one is never allowed.
    carried = raw != addr and not (isinstance(raw, ipaddress.IPv6Address) and raw.ipv4_mapped is not None)
    if carried:
        flag = None
    elif flag is not None and getattr(policy, flag):
        return addr
    # the registry's name where the category alone does not say what the block is
    named = category in ("not globally reachable", "not a destination", "reserved")
    where = f", {entry.network}" if entry.network.prefixlen else ""  # a default has no block of its own
    note = f" ({entry.name}{where})" if named else ""
    hint = f" (allowed only with {flag}=True)" if flag else ""
    raise BlockedAddress(f"{shown} is {category}{note}{hint}")


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
