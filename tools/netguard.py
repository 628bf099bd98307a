"""The network policy of tools that reach out (webfetch today, the browser next):
an address is refused unless it is a public internet address (SSRF guard), and a
host is refused when any address it resolves to is."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

import httpx

from traces.runner.tool_api import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Why an address may not be reached (None: it may); `blocked_reason` unless private targets are allowed.
AddressCheck = Callable[[IPAddress], str | None]
DEFAULT_PORTS = {"http": 80, "https": 443}

_NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")


def resolve_host(url: httpx.URL, check: AddressCheck | None) -> list[IPAddress]:
    """The addresses `url`'s host resolves to, each passed by `check`, or a ToolError.

    One refused address refuses the host: which of them a connection would use is
    not ours to choose.
    """
    host = url.raw_host.decode("ascii")
    try:
        infos = socket.getaddrinfo(host, url.port or DEFAULT_PORTS[url.scheme], type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ToolError(f"Cannot resolve the host of {url}: {exc}.") from None
    addresses: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise ToolError(f"Cannot resolve the host of {url}: no address.")
    if check is None:
        return addresses
    for address in addresses:
        reason = check(address)
        if reason:
            raise ToolError(
                f"Refused {url}: {host} resolves to {address}, {reason}. webfetch only reaches public "
                "internet addresses (an operator can allow private ones with AGENT_WEBFETCH_ALLOW_PRIVATE)."
            )
    return addresses


def blocked_reason(address: IPAddress) -> str | None:
    """Why webfetch must not connect to `address`, or None for a public address.

    IPv6 forms that carry an IPv4 address (mapped, compatible, 6to4, NAT64) are
    judged by the IPv4 address they carry.
    """
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            reason = blocked_reason(embedded)
            return f"an IPv6 form of {embedded}, which is {reason}" if reason else None
    if address.is_loopback:
        return "a loopback address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private network address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a public internet address"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    value = int(address)
    if address in _NAT64_PREFIX:
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    # IPv4-compatible ::a.b.c.d (deprecated); :: and ::1 are their own IPv6 addresses.
    if value >> 32 == 0 and value > 1:
        return ipaddress.IPv4Address(value)
    return None
