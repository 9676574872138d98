"""Persistent connections kept per host and per the address the frontier recorded for it
(FRONTIER_ADDRESS_POLITENESS; decision 0056): Twisted's pool keys a connection by (scheme,
host, port), so a host whose address changed would go on being reached at its old address
over a kept connection, while its budget is charged to the new one. Here the key also holds
the recorded address: a host that moved gets a new connection, to its new address (the
resolver answers with it), and the old one times out in the pool."""

from __future__ import annotations

from collections.abc import Callable

from twisted.web.client import HTTPConnectionPool


class AddressedPool(HTTPConnectionPool):
    def __init__(self, reactor, address_of: Callable[[str], str | None], persistent: bool = True):
        """``address_of``: the address recorded for a host name, or None."""
        super().__init__(reactor, persistent=persistent)
        self.address_of = address_of

    def getConnection(self, key, endpoint):
        host = key[1] if isinstance(key, tuple) and len(key) > 1 else None
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        if isinstance(host, str):
            key = (key, self.address_of(host.strip("[]")))
        return super().getConnection(key, endpoint)
