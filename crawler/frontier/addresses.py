"""Hosts' addresses, looked up once for every worker (FRONTIER_ADDRESS_POLITENESS; decision
0056).

With politeness per address, POP hands a host out only once its address is known, and holds
the hosts of one address class to the class's budget (``lua/pop.lua``: the address gate).
The workers look the addresses up: ``HostAddresses.round(now)`` claims the hosts due (RESOLVE
``claim``: hosts POP met without an address, and hosts whose answer expired), asks DNS for
each, and records (RESOLVE ``commit``) each host's address and class for every worker, kept
for the answer's TTL bounded by FRONTIER_ADDRESS_TTL_MIN and _MAX.

- The address: the host's first IPv4 address in sorted order (an answer's order rotates),
  else its first IPv6 one; a literal address is its own.
- The class: the address's network of FRONTIER_ADDRESS_PREFIX_V4 (or _V6) bits
  (``AddressClasses``): 32 and 128 keep each address apart; or, for an address in a network
  of an ``address`` entry of CRAWL_RULES with ``class=NAME`` (a CDN's edges), NAME. Such an
  entry's ``interval`` and ``in_flight`` are recorded as the class's own.
- A host that does not resolve, with no address yet, is a host failure: down, backed off,
  and given up after HOST_GIVE_UP_AFTER (its URLs recorded as not fetched), as a host that
  refuses connections is. It is looked up again when its back-off ends.
- A host whose answer expired and does not resolve now keeps its last address until it
  does (serving stale, as RFC 8767 lets a resolver).

Blocking (DNS, with a few lookups at once): run a round off the reactor. The worker's
frontier client does, after its takes (client.py).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import dns.exception
import dns.nameserver
import dns.resolver

from crawler.frontier.hosts import backoff_settings, key_host
from crawler.frontier.shards import AWAY
from crawler.frontier.words import now_ms

logger = logging.getLogger(__name__)

CLAIM_MS = 60_000  # a claim a worker does not commit in this time passes to another
HOSTS_A_CALL = 64  # hosts a claim takes at most
LOOKUPS_AT_ONCE = 8
LOOKUP_MOST = 5.0  # seconds a look-up takes at most (DNS_TIMEOUT if less): a claim's 8 rounds
# of 8 look-ups end well within CLAIM_MS


class LookupFailed(Exception):
    """A name that did not resolve; the message says why, in a few words."""


@dataclass(frozen=True)
class AddressClasses:
    """Which addresses share one budget: those of one network of ``v4_prefix`` (IPv4) or
    ``v6_prefix`` (IPv6) bits, named by the network (an address alone: by itself)."""

    v4_prefix: int = 32
    v6_prefix: int = 64

    def class_of(self, address: str) -> str:
        ip = ipaddress.ip_address(address)
        bits = self.v4_prefix if ip.version == 4 else self.v6_prefix
        if bits >= ip.max_prefixlen:
            return str(ip)
        return str(ipaddress.ip_network(f"{ip}/{bits}", strict=False))


class Lookup:
    """A name's address and its TTL, from DNS (dnspython): ``nameservers``, each ``address``
    or ``address:port`` (``[v6]:port``), or the machine's (/etc/resolv.conf, then the
    system's own look-up for names DNS does not know, /etc/hosts' among them)."""

    @classmethod
    def from_settings(cls, settings) -> Lookup:
        """DNS_NAMESERVERS' (or the machine's), each look-up LOOKUP_MOST at most (DNS_TIMEOUT
        if less)."""
        return cls(settings.getlist("DNS_NAMESERVERS"), min(settings.getfloat("DNS_TIMEOUT"), LOOKUP_MOST))

    def __init__(self, nameservers: list[str] | tuple[str, ...] = (), timeout: float = 10.0):
        self.own = bool(nameservers)
        self.timeout = timeout
        self.resolver = dns.resolver.Resolver(configure=not self.own)
        if self.own:
            self.resolver.nameservers = [_nameserver(spec) for spec in nameservers]

    def lookup(self, name: str) -> tuple[str, int | None]:
        """(address, TTL in seconds; None for a literal or the system's answer)."""
        literal = name.strip("[]")
        try:
            return str(ipaddress.ip_address(literal)), None
        except ValueError:
            pass
        why = "no address"
        for rdtype in ("A", "AAAA"):
            try:
                answer = self.resolver.resolve(name, rdtype, lifetime=self.timeout, search=False)
            except dns.resolver.NoAnswer:
                continue
            except dns.resolver.NXDOMAIN:
                why = "no such name"
                break
            except dns.exception.Timeout:
                raise LookupFailed(f"DNS timed out after {self.timeout:g} s") from None
            except (dns.resolver.NoNameservers, dns.exception.DNSException) as exc:
                raise LookupFailed(f"DNS failed: {type(exc).__name__}") from None
            return sorted(rr.address for rr in answer)[0], answer.rrset.ttl
        if not self.own:  # the machine's own names (/etc/hosts), as its resolver would
            try:
                infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
            except OSError:
                raise LookupFailed(why) from None
            v4 = sorted(info[4][0] for info in infos if info[0] == socket.AF_INET)
            return (v4 or sorted(info[4][0] for info in infos))[0], None
        raise LookupFailed(why)


def _nameserver(spec: str) -> dns.nameserver.Do53Nameserver:
    spec = spec.strip()
    host, port = spec, 53
    if spec.startswith("["):
        host, _, rest = spec[1:].partition("]")
        port = int(rest[1:]) if rest.startswith(":") else 53
    elif spec.count(":") == 1:
        host, port_text = spec.split(":")
        port = int(port_text)
    return dns.nameserver.Do53Nameserver(host, port)


class HostAddresses:
    """Hosts' addresses looked up and recorded for every worker, a round at a time."""

    def __init__(
        self,
        frontier,
        lookup: Lookup,
        classes: AddressClasses,
        *,
        ttl_min: float = 60.0,
        ttl_max: float = 86_400.0,
        failure: dict | None = None,
        stats=None,
    ):
        self.shards = frontier.shards
        self._guarded = frontier.on_shard  # (a server away or hanging: passed over, see Spill)
        self.lookup = lookup
        self.classes = classes
        self.ttl_min_ms, self.ttl_max_ms = int(ttl_min * 1000), int(ttl_max * 1000)
        self.failure = failure or {"minimum": 60.0, "maximum": 3600.0, "quiet": 600.0}  # FAIL's back-off
        self.stats = stats  # Scrapy's stats collector (None: not counted)

    @classmethod
    def from_settings(cls, settings, frontier, stats=None) -> HostAddresses | None:
        """The crawl's look-ups with FRONTIER_ADDRESS_POLITENESS, else None."""
        if not settings.getbool("FRONTIER_ADDRESS_POLITENESS"):
            return None
        return cls(
            frontier,
            Lookup.from_settings(settings),
            AddressClasses(
                settings.getint("FRONTIER_ADDRESS_PREFIX_V4"), settings.getint("FRONTIER_ADDRESS_PREFIX_V6")
            ),
            ttl_min=settings.getfloat("FRONTIER_ADDRESS_TTL_MIN"),
            ttl_max=settings.getfloat("FRONTIER_ADDRESS_TTL_MAX"),
            failure=backoff_settings(settings),
            stats=stats,
        )

    def _inc(self, key: str, count: int = 1) -> None:
        if self.stats is not None and count:
            self.stats.inc_value(key, count)

    def _answer(self, host: str) -> tuple[str, int | None] | LookupFailed:
        try:
            return self.lookup.lookup(key_host(host))
        except LookupFailed as exc:
            return exc

    def round(self, now: int | None = None) -> tuple[int, int]:
        """Look up the hosts due on each shard, one claim's worth: (hosts recorded, hosts
        that did not resolve)."""
        recorded = failed = 0
        for s, shard in enumerate(self.shards):
            try:
                done = self._guarded(s, lambda shard=shard: self._round_on(shard, now))
            except AWAY:  # (its claims expire: the next round, or another worker, looks them up)
                continue
            recorded, failed = recorded + done[0], failed + done[1]
        self._inc("frontier/addresses_resolved", recorded)
        self._inc("frontier/addresses_unresolved", failed)
        return recorded, failed

    def _round_on(self, shard, now: int | None) -> tuple[int, int]:
        """One claim's worth of ``shard``'s hosts looked up: (recorded, did not resolve)."""
        recorded = failed = 0
        t = now_ms() if now is None else now
        claimed = shard.resolve_claim(CLAIM_MS, HOSTS_A_CALL, now=t)
        if claimed:
            with ThreadPoolExecutor(min(LOOKUPS_AT_ONCE, len(claimed))) as pool:
                answers = list(pool.map(self._answer, [host for host, _ in claimed]))
            t = now_ms() if now is None else now
            rules = shard.current_rules()
            records = []
            for (host, known), answer in zip(claimed, answers, strict=True):
                if isinstance(answer, LookupFailed):
                    failed += 1
                    records.append((host, "", "", t + self._retry_ms(shard, host, known, str(answer), t), None, None))
                    continue
                address, ttl = answer
                keep = self.ttl_min_ms if ttl is None else min(max(ttl * 1000, self.ttl_min_ms), self.ttl_max_ms)
                class_, interval, cap = self._class(rules, address)
                records.append((host, class_, address, t + keep, interval, cap))
            recorded += shard.resolve_commit(records, now=t)
        return recorded, failed

    def _class(self, rules, address: str) -> tuple[str, int | None, int | None]:
        """The address's class and the class's own interval (ms) and cap, None when not set
        (CRAWL_RULES' address entries)."""
        entry = rules.address_overrides(address)
        if entry is None:
            return self.classes.class_of(address), None, None
        interval = None if entry.interval is None else int(entry.interval * 1000)
        return entry.class_name or self.classes.class_of(address), interval, entry.in_flight

    def _retry_ms(self, shard, host: str, known: bool, why: str, now: int) -> int:
        """A host that did not resolve: down (backed off) when it has no address yet, looked
        up again when its back-off ends; one with an address keeps it, and is looked up
        again after TTL_MIN."""
        if known:
            logger.warning("%s did not resolve (%s): its last address serves until it does", key_host(host), why)
            return self.ttl_min_ms
        _, delay, _ = shard.fail(host, "down", f"dns:{host}", **self.failure, now=now)
        logger.warning(
            "%s did not resolve (%s): down for every worker, looked up again in %.0f s", key_host(host), why, delay
        )
        return max(int(delay * 1000), 1000)
