"""The guard's special-purpose address table against the IANA registries, edge by edge.

The registries are transcribed here a second time, from the IANA pages, with the decision each
row implies; the oracle below looks an address up by brute force in this transcription. Every
block's first and last address and the addresses just outside it are checked — through
``check_ip`` (plain, IPv4-mapped, 6to4 and NAT64 forms, three policies), through a DNS name (the
resolver patched, never the network) and through a redirect from a loopback server. Only
127.0.0.1 is contacted: every other connection the guard lets through is stopped and recorded by
``no_egress``.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from typing import Any

import pytest

from fairsets.fetch.guard import BlockedAddress, FetchPolicy, check_ip, fetch_url, resolve_and_check, special
from fairsets.fetch.guard import addresses as guard_addresses
from servers import Response

# IANA IPv4 / IPv6 Special-Purpose Address Registries (2025), plus the multicast blocks and the
# deprecated site-local block. Columns: block, Globally Reachable (True / False / N/A), what the
# guard must do with a destination in it ("allow", "loopback": allow_loopback, "private" /
# "link-local" / "ngr": allow_private, "never": whatever the flags, "embedded": judge the IPv4
# address it carries).
REGISTRY = """
0.0.0.0/8            False  never       unspecified
0.0.0.0/32           False  never       unspecified
10.0.0.0/8           False  private     private
100.64.0.0/10        False  private     private
127.0.0.0/8          False  loopback    loopback
169.254.0.0/16       False  link-local  link-local
172.16.0.0/12        False  private     private
192.0.0.0/24         False  ngr         not_globally_reachable
192.0.0.0/29         False  ngr         not_globally_reachable
192.0.0.8/32         False  never       not_a_destination
192.0.0.9/32         True   allow       global
192.0.0.10/32        True   allow       global
192.0.0.170/32       False  never       not_a_destination
192.0.0.171/32       False  never       not_a_destination
192.0.2.0/24         False  ngr         not_globally_reachable
192.31.196.0/24      True   allow       global
192.52.193.0/24      True   allow       global
192.88.99.0/24       N/A    ngr         not_globally_reachable
192.88.99.2/32       False  ngr         not_globally_reachable
192.168.0.0/16       False  private     private
192.175.48.0/24      True   allow       global
198.18.0.0/15        False  ngr         not_globally_reachable
198.51.100.0/24      False  ngr         not_globally_reachable
203.0.113.0/24       False  ngr         not_globally_reachable
224.0.0.0/4          -      never       multicast
240.0.0.0/4          False  never       reserved
255.255.255.255/32   False  never       broadcast
::/128               False  never       unspecified
::1/128              False  loopback    loopback
::ffff:0:0/96        False  embedded    embedded
64:ff9b::/96         True   embedded    embedded
64:ff9b:1::/48       False  ngr         not_globally_reachable
100::/64             False  never       not_a_destination
100:0:0:1::/64       False  never       not_a_destination
2001::/23            False  ngr         not_globally_reachable
2001::/32            N/A    ngr         not_globally_reachable
2001:1::1/128        True   allow       global
2001:1::2/128        True   allow       global
2001:1::3/128        True   allow       global
2001:2::/48          False  ngr         not_globally_reachable
2001:3::/32          True   allow       global
2001:4:112::/48      True   allow       global
2001:10::/28         False  ngr         not_globally_reachable
2001:20::/28         True   allow       global
2001:30::/28         True   allow       global
2001:db8::/32        False  ngr         not_globally_reachable
2002::/16            N/A    embedded    embedded
2620:4f:8000::/48    True   allow       global
3fff::/20            False  ngr         not_globally_reachable
5f00::/16            False  ngr         not_globally_reachable
fc00::/7             False  private     private
fe80::/10            False  link-local  link-local
fec0::/10            -      private     private
ff00::/8             -      never       multicast
"""
ROWS = [line.split() for line in REGISTRY.strip().splitlines()]
NETS = [
    (ipaddress.ip_network(block), action, category.replace("_", " ")) for block, _, action, category in ROWS
]

POLICIES = {
    "default": FetchPolicy(timeout=1),
    "loopback": FetchPolicy(allow_loopback=True, timeout=1),
    "private": FetchPolicy(allow_private=True, timeout=1),
}
LOOP = POLICIES["loopback"]


def _carried(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv4-mapped, NAT64 (64:ff9b::/96) or 6to4 address (RFC 4291, 6052, 3056)."""
    n = int(ip)
    if n >> 32 == 0xFFFF or n >> 32 == 0x0064_FF9B_0000_0000_0000_0000:
        return ipaddress.IPv4Address(n & 0xFFFFFFFF)
    if n >> 112 == 0x2002:
        return ipaddress.IPv4Address((n >> 80) & 0xFFFFFFFF)
    return None


def expected(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, policy: FetchPolicy) -> tuple[bool, str]:
    """``(allowed, category)`` from the transcription above: the longest matching block decides."""
    # 6to4 and NAT64 addresses go to a relay or translator, never to this host or its network:
    # an allowance (loopback, private) holds only for the address itself or its IPv4-mapped form
    relayed = ip.version == 6 and _carried(ip) is not None and int(ip) >> 32 != 0xFFFF
    if ip.version == 6 and _carried(ip) is not None:
        ip = _carried(ip)  # type: ignore[assignment]
    matches = [
        (net.prefixlen, action, cat) for net, action, cat in NETS if net.version == ip.version and ip in net
    ]
    if matches:
        _, action, category = max(matches)
    elif ip.version == 4 or int(ip) >> 125 == 0b001:  # 2000::/3 is global unicast
        action, category = "allow", "global"
    else:
        action, category = "never", "reserved"
    allowed = {
        "allow": True,
        "never": False,
        "loopback": policy.allow_loopback,
        "private": policy.allow_private,
        "link-local": policy.allow_private,
        "ngr": policy.allow_private,
    }[action]
    if relayed and action not in ("allow", "never"):
        allowed = False
    return allowed, category


def _edges() -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Every block's first and last address and the ones just outside, once each."""
    out = set()
    for net, _, _ in NETS:
        cls = ipaddress.IPv4Address if net.version == 4 else ipaddress.IPv6Address
        top = 2**net.max_prefixlen - 1
        for n in (
            int(net.network_address) - 1,
            int(net.network_address),
            int(net.broadcast_address),
            int(net.broadcast_address) + 1,
        ):
            if 0 <= n <= top:
                out.add(cls(n))
    return sorted(out, key=lambda a: (a.version, int(a)))


EDGES = _edges()
V4_EDGES = [a for a in EDGES if a.version == 4]


def _forms(ip: ipaddress.IPv4Address) -> list[ipaddress.IPv6Address]:
    """IPv4-mapped, NAT64 and 6to4 forms of an IPv4 address."""
    n = int(ip)
    return [
        ipaddress.IPv6Address((0xFFFF << 32) | n),
        ipaddress.IPv6Address((0x0064_FF9B << 96) | n),
        ipaddress.IPv6Address((0x2002 << 112) | (n << 80) | 1),
    ]


# the attack's cloud metadata address, and its IPv4-mapped, NAT64 and 6to4 forms
ATTACK = [ipaddress.IPv4Address("192.0.0.192"), *_forms(ipaddress.IPv4Address("192.0.0.192"))]
ALL_PROBES = EDGES + [f for a in V4_EDGES for f in _forms(a)] + ATTACK
# through the network paths: plain and IPv4-mapped
PROBES = EDGES + [_forms(a)[0] for a in V4_EDGES] + ATTACK


def _verdict(ip: Any, policy: FetchPolicy) -> tuple[bool, str]:
    try:
        check_ip(ip, policy)
    except BlockedAddress as e:
        return False, e.detail
    return True, ""


def test_the_table_holds_every_registry_block_and_nothing_else() -> None:
    ours = {(str(e.network), e.category) for e in special.SPECIAL_V4 + special.SPECIAL_V6}
    theirs = {(str(net), cat) for net, _, cat in NETS}
    assert ours == theirs
    probed = set(EDGES)
    assert all({net.network_address, net.broadcast_address} <= probed for net, _, _ in NETS)


@pytest.mark.parametrize("policy_name", list(POLICIES))
def test_every_block_edge_and_its_carried_forms(policy_name: str) -> None:
    policy = POLICIES[policy_name]
    wrong = []
    for ip in ALL_PROBES:
        want_allowed, category = expected(ip, policy)
        allowed, detail = _verdict(ip, policy)
        if allowed != want_allowed or (not allowed and f" is {category}" not in detail):
            wrong.append((str(ip), want_allowed, category, allowed, detail))
    assert wrong == []


@pytest.mark.parametrize(
    ("ip", "allowed"),
    [
        # 192.0.0.0/24 is not globally reachable except two anycast addresses (the attack's 192.0.0.192)
        ("192.0.0.192", False),
        ("192.0.0.0", False),
        ("192.0.0.7", False),
        ("192.0.0.8", False),
        ("192.0.0.9", True),
        ("192.0.0.10", True),
        ("192.0.0.11", False),
        ("192.0.0.255", False),
        ("192.0.1.0", True),
        ("191.255.255.255", True),
        ("::ffff:192.0.0.192", False),
        ("64:ff9b::c000:c0", False),  # NAT64 of 192.0.0.192
        ("2002:c000:c0::1", False),  # 6to4 of 192.0.0.192
        ("::ffff:192.0.0.9", True),
        ("192.88.99.1", False),
        ("198.19.255.255", False),
        ("198.20.0.0", True),
        ("100.63.255.255", True),
        ("100.128.0.0", True),
        # 2001::/23 and its globally reachable exceptions
        ("2001::1", False),
        ("2001:1::1", True),
        ("2001:1::4", False),
        ("2001:3::1", True),
        ("2001:4:112::1", True),
        ("2001:4:113::1", False),
        ("2001:1f::1", False),
        ("2001:20::1", True),
        ("2001:3f:ffff::1", True),
        ("2001:40::1", False),
        ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", False),
        ("2001:200::1", True),
        ("3fff:fff:ffff::1", False),
        ("3fff:1000::", True),
        ("5f00::1", False),
        ("2001:db8::1", False),
        ("64:ff9b:1::a00:1", False),
        ("2620:4f:8000::1", True),
        ("4000::1", False),  # outside 2000::/3: reserved by the IETF
    ],
)
def test_hand_picked_addresses(ip: str, allowed: bool) -> None:
    assert _verdict(ip, FetchPolicy())[0] is allowed
    assert expected(ipaddress.ip_address(ip), FetchPolicy())[0] is allowed  # the oracle agrees


def test_refusal_names_the_block() -> None:
    with pytest.raises(BlockedAddress) as info:
        check_ip("192.0.0.192", FetchPolicy())
    assert info.value.detail == (
        "192.0.0.192 is not globally reachable (IETF Protocol Assignments, 192.0.0.0/24) "
        "(allowed only with allow_private=True)"
    )
    assert check_ip("192.0.0.192", FetchPolicy(allow_private=True)) == ipaddress.ip_address("192.0.0.192")
    with pytest.raises(BlockedAddress, match=r"is not a destination \(IPv4 dummy address"):
        check_ip("192.0.0.8", FetchPolicy(allow_private=True, allow_loopback=True))


def test_the_table_does_not_ask_the_standard_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decision is the table's: the ``is_*`` properties of ``ipaddress`` are never read."""

    def boom(self: Any) -> bool:
        raise AssertionError("ipaddress's own classification was used")

    for cls in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        for name in (
            "is_global",
            "is_private",
            "is_reserved",
            "is_loopback",
            "is_link_local",
            "is_multicast",
            "is_unspecified",
            "is_site_local",
            "sixtofour",
            "teredo",
        ):
            if hasattr(cls, name):
                monkeypatch.setattr(cls, name, property(boom))
    for ip in ("192.0.0.192", "::ffff:10.0.0.1", "2002:c000:c0::1", "8.8.8.8", "2001:1::1", "fe80::1"):
        _verdict(ip, LOOP)


def _outcome(res: Any, attempts: list[tuple[str, Any]], ip: Any, port: int) -> tuple[bool, str]:
    """What the guard did on a network path: refused (its reason) or let through to ``ip``."""
    if res.status == "rejected":
        assert attempts == [], (str(ip), attempts)
        assert res.error.startswith("blocked_address: "), (str(ip), res.error)
        return False, res.error
    # let through: a connection to exactly this address was made (loopback) or stopped (anything else)
    assert all(kind == "create_connection" for kind, _ in attempts), attempts
    assert [(ipaddress.ip_address(a[0]), a[1]) for _, a in attempts] in ([], [(ip, port)]), (
        str(ip),
        attempts,
    )
    return True, ""


def _check_all(run: Any, port: int, no_egress: Any) -> None:
    wrong = []
    for ip in PROBES:
        want_allowed, category = expected(ip, LOOP)
        res = run(ip)
        allowed, error = _outcome(res, no_egress.take(), ip, port)
        if allowed != want_allowed or (not allowed and f" is {category}" not in error):
            wrong.append((str(ip), want_allowed, category, res.status, res.error))
    assert wrong == []


def test_every_block_edge_through_a_dns_name(
    monkeypatch: pytest.MonkeyPatch, images: Any, no_egress: Any
) -> None:
    answer: list[Any] = []
    names: list[str] = []

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[tuple]:
        names.append(host)
        ip = answer[0]
        if ip.version == 4:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (str(ip), port))]
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (str(ip), port, 0, 0))]

    monkeypatch.setattr(guard_addresses, "_getaddrinfo", getaddrinfo)
    port = images.srv.port
    images.srv.route("/probe", lambda req: Response(200, {}, b"probe"))

    # one host name asked hundreds of times: not paced (politeness has tests of its own)
    unpaced = LOOP.model_copy(update={"per_host_rate": 0.0, "per_host_connections": 0})

    def run(ip: Any) -> Any:
        answer[:] = [ip]
        return fetch_url(f"http://probe.example.test:{port}/probe", unpaced)

    _check_all(run, port, no_egress)
    assert set(names) == {"probe.example.test"}
    assert len(names) == len(PROBES)
    answer[:] = [ipaddress.ip_address("192.0.0.192")]
    with pytest.raises(BlockedAddress, match=r"host probe\.example\.test: 192\.0\.0\.192 is not globally"):
        resolve_and_check("probe.example.test", 80, LOOP)


def test_every_block_edge_through_a_redirect(images: Any, no_egress: Any) -> None:
    images.srv.route("/hop", lambda req: Response(302, {"Location": req.query["to"][0]}))
    images.srv.route("/probe", lambda req: Response(200, {}, b"probe"))
    port = images.srv.port

    def run(ip: Any) -> Any:
        host = f"[{ip}]" if ip.version == 6 else str(ip)
        target = f"http://{host}:{port}/probe"
        return fetch_url(images.url("/hop?to=" + urllib.parse.quote(target, safe="")), LOOP)

    _check_all(run, port, no_egress)
    assert images.hits("/hop") == len(PROBES)


def test_loopback_and_private_carried_in_6to4_or_nat64_are_never_allowed() -> None:
    # allow_loopback lets the tests reach 127.0.0.1, not a relay that would carry 127.0.0.1 onwards
    both = FetchPolicy(allow_loopback=True, allow_private=True, timeout=1)
    for ip in ("64:ff9b::7f00:1", "2002:7f00:1::1", "64:ff9b::a00:1", "2002:c0a8:101::1"):
        allowed, detail = _verdict(ip, both)
        assert not allowed and "only with" not in detail, (ip, detail)
    for ip in ("127.0.0.1", "::ffff:127.0.0.1", "10.0.0.1", "::ffff:10.0.0.1"):
        assert _verdict(ip, both)[0], ip
