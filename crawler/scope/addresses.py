"""Which addresses a worker may connect to (the network guard's policy, no I/O): never
private, loopback, link-local, multicast or reserved addresses unless NETWORK_GUARD_ALLOW
opens their networks. The middleware and resolver that apply it at fetch time are
crawler/middlewares/netguard.py; seeds and submissions are held to it when they come in
(``literal_refusal``: an address written in the URL, no name resolved)."""

from __future__ import annotations

import ipaddress

from crawler.urls import InvalidURL, url_host


class AddressPolicy:
    """Which addresses may be connected to (no I/O)."""

    def __init__(self, allow=()):
        self.allow = [ipaddress.ip_network(net, strict=False) for net in allow]

    @classmethod
    def from_settings(cls, settings) -> AddressPolicy | None:
        """The policy of NETWORK_GUARD_ALLOW; None when NETWORK_GUARD_ENABLED is off."""
        if not settings.getbool("NETWORK_GUARD_ENABLED"):
            return None
        return cls(settings.getlist("NETWORK_GUARD_ALLOW"))

    def refusal(self, address: str) -> str | None:
        """Why ``address`` is refused (e.g. "loopback"), or None when it is allowed."""
        ip = ipaddress.ip_address(address.strip("[]"))
        if ip.version == 6 and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in net for net in self.allow):
            return None
        for reason in ("loopback", "link_local", "multicast", "reserved", "unspecified", "private"):
            if getattr(ip, f"is_{reason}"):
                return reason.replace("_", "-")
        return None if ip.is_global else "not-global"

    def literal_refusal(self, url: str, host: str | None = None) -> tuple[str, str] | None:
        """(address, why) when ``url``'s host (``host``: as url_host gives it, read
        already) is an address (or ``localhost``) this policy refuses; None otherwise. Names
        are not resolved (the guard at fetch time does)."""
        if host is None:
            try:
                host = url_host(url)
            except InvalidURL:
                return None
        if host == "localhost":
            host = "127.0.0.1"
        elif ":" not in host and not host[-1:].isdigit():  # a name (an address ends in a digit)
            return None
        if not ip_literal(host):
            return None
        why = self.refusal(host)
        return (host, why) if why else None


def ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def allow_network(address: str) -> str:
    """The network NETWORK_GUARD_ALLOW needs to let ``address`` in: 127.0.0.0/8 for a
    loopback IPv4 address, the address alone otherwise."""
    ip = ipaddress.ip_address(address.strip("[]"))
    return "127.0.0.0/8" if ip.version == 4 and ip.is_loopback else f"{ip}/{ip.max_prefixlen}"


def allow_hint(address: str) -> str:
    """How to crawl ``address`` all the same: the setting, with the address's network."""
    return f"to crawl it: -s NETWORK_GUARD_ALLOW={allow_network(address)}"


def guard_hint(refused: int) -> str:
    """The line for seeds the guard refused: what to set to crawl them."""
    return (
        f"{refused} seed{'s' if refused != 1 else ''} refused by the network guard (a loopback, private or "
        "reserved address): to crawl them, -s NETWORK_GUARD_ALLOW=NETWORKS (e.g. 127.0.0.0/8,192.168.0.0/16)"
    )
