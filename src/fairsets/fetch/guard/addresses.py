"""Private-address refusal at the socket: every resolved address is checked, and the socket is
connected to a checked address only (no second DNS lookup, so no DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

from .policy import FetchPolicy
from .refusals import (
    BlockedAddress,
)

#: The resolver used by :func:`resolve_and_check`; tests patch this, never the network.
_getaddrinfo = socket.getaddrinfo

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


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
