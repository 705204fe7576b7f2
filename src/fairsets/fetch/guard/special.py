"""fairsets' own copy of the IANA IPv4 and IPv6 Special-Purpose Address Registries.

The guard decides on this table, never on the standard library's ``is_global`` /
``is_private`` / ``is_reserved``, whose answers differ between Python releases (Python 3.11.7
lets most of 192.0.0.0/24 through, 192.0.0.192 included; later releases changed the tables for
CVE-2024-4032). Every entry of both registries is here with its "Globally Reachable" flag, the
more specific entries inside a larger one included (192.0.0.9/32 and 192.0.0.10/32 inside
192.0.0.0/24, the anycast, AMT, AS112, ORCHIDv2 and DET prefixes inside 2001::/23): the longest
matching prefix decides. Entries the registry marks "N/A" (the deprecated 6to4 relay anycast
192.88.99.0/24, TEREDO 2001::/32) count as not globally reachable. Three more blocks come from
the other IANA registries: multicast (224.0.0.0/4, ff00::/8) and the deprecated IPv6 site-local
fec0::/10.

IPv6 addresses outside the global unicast block 2000::/3 and outside every entry are reserved
by the IETF (IANA IPv6 Address Space). Three IPv6 blocks carry an IPv4 address and are judged
by it (:func:`embedded_ipv4`): IPv4-mapped ``::ffff:0:0/96``, NAT64 ``64:ff9b::/96`` (its last
32 bits) and 6to4 ``2002::/16`` (bits 16-47).

Sources: https://www.iana.org/assignments/iana-ipv4-special-registry/ and
https://www.iana.org/assignments/iana-ipv6-special-registry/ (as of 2025: RFC 9602's 5f00::/16,
RFC 9637's 3fff::/20, RFC 9665's 2001:1::3/128, RFC 9780's 100:0:0:1::/64 included).

Categories (what the guard does with them, :func:`fairsets.fetch.guard.check_ip`):

* ``global`` — allowed;
* ``loopback`` — allowed only with ``allow_loopback``;
* ``private``, ``link-local``, ``not globally reachable`` — allowed only with ``allow_private``;
* ``unspecified``, ``multicast``, ``broadcast``, ``reserved``, ``not a destination`` (the
  dummy and NAT64-discovery addresses, whose Destination is False in the registry, and the
  discard-only prefix, where every packet is dropped) — never allowed.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

#: Categories allowed by a policy flag; the others but ``global`` are never allowed.
FLAG_OF = {
    "loopback": "allow_loopback",
    "private": "allow_private",
    "link-local": "allow_private",
    "not globally reachable": "allow_private",
}

_NGR = "not globally reachable"
_NOT_DEST = "not a destination"

# (block, registry name, category). "global" marks the registry's Globally Reachable = True.
_V4: tuple[tuple[str, str, str], ...] = (
    ("0.0.0.0/8", '"This network"', "unspecified"),
    ("0.0.0.0/32", '"This host on this network"', "unspecified"),
    ("10.0.0.0/8", "Private-Use", "private"),
    ("100.64.0.0/10", "Shared Address Space", "private"),
    ("127.0.0.0/8", "Loopback", "loopback"),
    ("169.254.0.0/16", "Link Local", "link-local"),
    ("172.16.0.0/12", "Private-Use", "private"),
    ("192.0.0.0/24", "IETF Protocol Assignments", _NGR),
    ("192.0.0.0/29", "IPv4 Service Continuity Prefix", _NGR),
    ("192.0.0.8/32", "IPv4 dummy address", _NOT_DEST),
    ("192.0.0.9/32", "Port Control Protocol Anycast", "global"),
    ("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "global"),
    ("192.0.0.170/32", "NAT64/DNS64 Discovery", _NOT_DEST),
    ("192.0.0.171/32", "NAT64/DNS64 Discovery", _NOT_DEST),
    ("192.0.2.0/24", "Documentation (TEST-NET-1)", _NGR),
    ("192.31.196.0/24", "AS112-v4", "global"),
    ("192.52.193.0/24", "AMT", "global"),
    ("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", _NGR),
    ("192.88.99.2/32", "6a44-relay anycast address", _NGR),
    ("192.168.0.0/16", "Private-Use", "private"),
    ("192.175.48.0/24", "Direct Delegation AS112 Service", "global"),
    ("198.18.0.0/15", "Benchmarking", _NGR),
    ("198.51.100.0/24", "Documentation (TEST-NET-2)", _NGR),
    ("203.0.113.0/24", "Documentation (TEST-NET-3)", _NGR),
    ("224.0.0.0/4", "Multicast", "multicast"),  # IANA IPv4 Multicast Address Space Registry
    ("240.0.0.0/4", "Reserved", "reserved"),
    ("255.255.255.255/32", "Limited Broadcast", "broadcast"),
)

_V6: tuple[tuple[str, str, str], ...] = (
    ("::/128", "Unspecified Address", "unspecified"),
    ("::1/128", "Loopback Address", "loopback"),
    ("::ffff:0:0/96", "IPv4-mapped Address", "embedded"),
    ("64:ff9b::/96", "IPv4-IPv6 Translat.", "embedded"),
    ("64:ff9b:1::/48", "IPv4-IPv6 Translat. (local use)", _NGR),
    ("100::/64", "Discard-Only Address Block", _NOT_DEST),
    ("100:0:0:1::/64", "Dummy IPv6 Prefix", _NOT_DEST),
    ("2001::/23", "IETF Protocol Assignments", _NGR),
    ("2001::/32", "TEREDO", _NGR),
    ("2001:1::1/128", "Port Control Protocol Anycast", "global"),
    ("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "global"),
    ("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "global"),
    ("2001:2::/48", "Benchmarking", _NGR),
    ("2001:3::/32", "AMT", "global"),
    ("2001:4:112::/48", "AS112-v6", "global"),
    ("2001:10::/28", "Deprecated (previously ORCHID)", _NGR),
    ("2001:20::/28", "ORCHIDv2", "global"),
    ("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "global"),
    ("2001:db8::/32", "Documentation", _NGR),
    ("2002::/16", "6to4", "embedded"),
    ("2620:4f:8000::/48", "Direct Delegation AS112 Service", "global"),
    ("3fff::/20", "Documentation", _NGR),
    ("5f00::/16", "Segment Routing (SRv6) SIDs", _NGR),
    ("fc00::/7", "Unique-Local", "private"),
    ("fe80::/10", "Link-Local Unicast", "link-local"),
    ("fec0::/10", "Site-Local (deprecated)", "private"),  # RFC 3879; IANA IPv6 Address Space
    ("ff00::/8", "Multicast", "multicast"),  # IANA IPv6 Multicast Address Space Registry
)

_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")


@dataclass(frozen=True)
class Special:
    """One registry entry: its block, the registry's name for it and the guard's category."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    name: str
    category: str


def _table(rows: tuple[tuple[str, str, str], ...]) -> tuple[Special, ...]:
    entries = [Special(ipaddress.ip_network(block), name, cat) for block, name, cat in rows]
    return tuple(sorted(entries, key=lambda e: -e.network.prefixlen))  # longest prefix first


#: The entries, longest prefix first (the first match is the one that decides).
SPECIAL_V4 = _table(_V4)
SPECIAL_V6 = _table(_V6)

_DEFAULT_V4 = Special(ipaddress.IPv4Network("0.0.0.0/0"), "public IPv4", "global")
_DEFAULT_V6_GLOBAL = Special(_GLOBAL_UNICAST_V6, "Global Unicast", "global")
_DEFAULT_V6_RESERVED = Special(ipaddress.IPv6Network("::/0"), "Reserved by IETF", "reserved")


def lookup(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> Special:
    """The entry that decides for ``ip``: its longest matching special-purpose block, else the default
    (IPv4: global; IPv6: global in 2000::/3, reserved elsewhere). IPv6 forms that carry an IPv4
    address come back as category ``embedded``: judge :func:`embedded_ipv4` instead."""
    if ip.version == 4:
        return next((e for e in SPECIAL_V4 if ip in e.network), _DEFAULT_V4)
    found = next((e for e in SPECIAL_V6 if ip in e.network), None)
    if found is not None:
        return found
    return _DEFAULT_V6_GLOBAL if ip in _GLOBAL_UNICAST_V6 else _DEFAULT_V6_RESERVED


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, NAT64 (``64:ff9b::/96``) or 6to4 address carries, else None."""
    entry = lookup(ip)
    if entry.category != "embedded":
        return None
    value = int(ip)
    if entry.network.prefixlen == 16:  # 6to4: 2002:AABB:CCDD::/48 carries AA.BB.CC.DD
        return ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF)
    return ipaddress.IPv4Address(value & 0xFFFFFFFF)  # IPv4-mapped and NAT64: the last 32 bits
