"""A DNS server on loopback for the tests and benchmarks of politeness per address
(FRONTIER_ADDRESS_POLITENESS): ``Zone`` answers the names it is given (A or AAAA, with a
TTL), NXDOMAIN for any other, and counts the questions; its answers may change while it
runs (``move``). dnslib's server, UDP and TCP, on 127.0.0.1 and a free port; the workers are
pointed at it with DNS_NAMESERVERS. Nothing leaves the machine."""

from __future__ import annotations

import ipaddress
import threading
from collections import Counter

from dnslib import AAAA, QTYPE, RCODE, RR, A
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from testing.servers import free_port


class Zone(BaseResolver):
    def __init__(self, names: dict[str, str], ttl: int = 60):
        self.names = dict(names)  # name -> address
        self.ttl = ttl
        self.asked: Counter = Counter()  # name -> questions
        self._lock = threading.Lock()
        self.port = free_port()
        self._servers = [
            DNSServer(
                self,
                port=self.port,
                address="127.0.0.1",
                tcp=tcp,
                logger=DNSLogger("-request,-reply,-truncated,-error,-recv,-send,-data"),
            )
            for tcp in (False, True)
        ]

    @property
    def nameserver(self) -> str:
        """What DNS_NAMESERVERS takes."""
        return f"127.0.0.1:{self.port}"

    def move(self, name: str, address: str) -> None:
        with self._lock:
            self.names[name] = address

    def resolve(self, request, handler):
        reply = request.reply()
        name = str(request.q.qname).rstrip(".")
        with self._lock:
            self.asked[name] += 1
            address = self.names.get(name)
        if address is None:
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        version = ipaddress.ip_address(address).version
        if request.q.qtype == QTYPE.A and version == 4:
            reply.add_answer(RR(name, QTYPE.A, rdata=A(address), ttl=self.ttl))
        elif request.q.qtype == QTYPE.AAAA and version == 6:
            reply.add_answer(RR(name, QTYPE.AAAA, rdata=AAAA(address), ttl=self.ttl))
        return reply

    def __enter__(self) -> Zone:
        for server in self._servers:
            server.start_thread()
        return self

    def __exit__(self, *exc) -> None:
        for server in self._servers:
            server.stop()
