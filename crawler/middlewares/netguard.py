"""Network guard: never connect to private, loopback, link-local, multicast or reserved
addresses unless NETWORK_GUARD_ALLOW opens them.

Two checks, because Twisted resolves names but not IP literals:

- ``GuardedResolver`` (TWISTED_DNS_RESOLVER) checks the address a name resolves to, at
  connection time, so a public name that resolves to a private address is refused too.
  Every connection, redirect hops included, resolves through it.
- ``NetworkGuardMiddleware`` (a downloader middleware) checks every request, redirect
  hops included (each is a request of its own): IP literals directly, names by resolving
  them through the guarded resolver, so that a refusal is recorded as one and counted.

A refusal raises ``AddressRefused`` (an IgnoreRequest: never retried); the spider's
errback records it as a Page with the error. With an HTTP proxy (http_proxy,
https_proxy), a name is the proxy's to resolve; IP-literal targets are still checked,
and the proxy's own host is allowed.
"""

from __future__ import annotations

import logging
import time
import urllib.request
from urllib.parse import urlsplit

from scrapy.exceptions import NotConfigured
from scrapy.resolver import CachingThreadedResolver
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import defer, reactor, threads
from twisted.internet.error import DNSLookupError

from crawler import meta
from crawler.exceptions import AddressRefused
from crawler.frontier.addresses import Lookup, LookupFailed
from crawler.scope.addresses import AddressPolicy, allow_hint, ip_literal
from crawler.services import recorded_address

logger = logging.getLogger(__name__)


CACHE_MIN_TTL = 60.0  # seconds an answer of DNS_NAMESERVERS is kept at least
CACHE_NAMES = 10_000  # answers kept at most (all forgotten at once past it)
# seconds a name whose look-up failed (no such name, no answer in time) fails again at once:
# the guard's look-up and the download's, and the host's next requests, each waited for
# the look-up's whole timeout (a DNS server that never answers held a request's slot
# some 90 s, and a few such hosts a whole worker)
FAILED_FOR = 60.0


class RefusedResolution(DNSLookupError):
    """A name resolved to a refused address. A DNSLookupError, so that Twisted treats
    it as a failed lookup (no connection) rather than as a resolver crash."""


def proxy_hosts() -> set[str]:
    """The hosts of the proxies configured in the environment."""
    return {urlsplit(url).hostname or "" for url in urllib.request.getproxies().values()} - {""}


class GuardedResolver(CachingThreadedResolver):
    """Scrapy's caching resolver, refusing names that resolve to refused addresses. With
    FRONTIER_ADDRESS_POLITENESS, a host's address is the one the frontier recorded for every
    worker and handed out with its URL (FrontierClient.address_of): the request goes to the
    address whose budget it was charged to."""

    policy: AddressPolicy | None = None
    allowed_names: set[str] = set()
    process = None  # with FRONTIER_ADDRESS_POLITENESS: the process, whose crawlers' clients it asks
    lookup: Lookup | None = None  # with DNS_NAMESERVERS: names resolved through those servers
    _answers: dict[str, tuple[str, float]] = {}  # name -> (address, until): DNS_NAMESERVERS' answers
    _failed: dict[str, tuple[str, float]] = {}  # name -> (why, until): look-ups that failed (FAILED_FOR)

    @classmethod
    def from_crawler(cls, crawler, reactor):
        # (``crawler``: the CrawlerProcess, which makes one resolver for all its crawlers)
        resolver = super().from_crawler(crawler, reactor)
        if crawler.settings.getbool("NETWORK_GUARD_ENABLED"):
            resolver.policy = AddressPolicy.from_settings(crawler.settings)
            resolver.allowed_names = proxy_hosts()
        if crawler.settings.getbool("FRONTIER_ADDRESS_POLITENESS"):
            resolver.process = crawler
        if crawler.settings.getlist("DNS_NAMESERVERS"):
            resolver.lookup = Lookup.from_settings(crawler.settings)  # (5 s at most, as the frontier's rounds)
            resolver._answers = {}
        resolver._failed = {}
        return resolver

    def recorded(self, name: str) -> str | None:
        """The address a crawler's frontier recorded for ``name`` (None: none did)."""
        for crawler in getattr(self.process, "crawlers", ()):
            address = recorded_address(crawler, name)
            if address is not None:
                return address
        return None

    def getHostByName(self, name: str, timeout=()):
        recorded = self.recorded(name)
        failed = self._failed.get(name)
        if recorded is not None:
            d = defer.succeed(recorded)
        elif ":" in name and ip_literal(name):  # an IPv6 literal: gethostbyname knows IPv4 only
            d = defer.succeed(name.strip("[]"))
        elif failed is not None and failed[1] > time.monotonic():
            return defer.fail(DNSLookupError(failed[0]))
        elif self.lookup is not None:
            d = threads.deferToThread(self._looked_up, name).addErrback(self._lookup_failed, name)
        else:
            d = super().getHostByName(name, timeout).addErrback(self._lookup_failed, name)
        if self.policy is not None and name not in self.allowed_names:
            d.addCallback(self._check, name)
        return d

    def _looked_up(self, name: str) -> str:
        """``name``'s address from DNS_NAMESERVERS, kept for its TTL (at least CACHE_MIN_TTL
        seconds, CACHE_NAMES names at most)."""
        now = time.monotonic()
        cached = self._answers.get(name)
        if cached is not None and cached[1] > now:
            return cached[0]
        try:
            address, ttl = self.lookup.lookup(name)
        except LookupFailed as exc:
            raise DNSLookupError(f"{name}: {exc}") from None
        if len(self._answers) >= CACHE_NAMES:
            self._answers.clear()
        self._answers[name] = (address, now + max(ttl or 0, CACHE_MIN_TTL))
        return address

    def _lookup_failed(self, failure, name: str):
        """A look-up of ``name`` failed (no such name, no answer in time): it fails at once
        for FAILED_FOR seconds."""
        if failure.check(DNSLookupError, defer.TimeoutError):
            if len(self._failed) >= CACHE_NAMES:
                self._failed.clear()
            why = str(failure.value) or type(failure.value).__name__
            self._failed[name] = (why, time.monotonic() + FAILED_FOR)
        return failure

    def _check(self, address: str, name: str) -> str:
        reason = self.policy.refusal(address)
        if reason:
            raise RefusedResolution(f"network guard: {name} resolves to {address} ({reason}; {allow_hint(address)})")
        return address


class NetworkGuardMiddleware:
    def __init__(self, stats, policy: AddressPolicy):
        self.stats = stats
        self.policy = policy

    @classmethod
    def from_crawler(cls, crawler):
        if not crawler.settings.getbool("NETWORK_GUARD_ENABLED"):
            raise NotConfigured
        return cls(crawler.stats, AddressPolicy.from_settings(crawler.settings))

    async def process_request(self, request, spider=None):
        host = urlparse_cached(request).hostname or ""
        if ip_literal(host):
            reason = self.policy.refusal(host)
            if reason:
                raise AddressRefused(f"network guard: {host} is a {reason} address ({allow_hint(host)})")
        elif not request.meta.get(meta.PROXY):  # through a proxy, the name is the proxy's
            # Resolve now, through the guarded resolver: a refused name is recorded here
            # as a refusal; the connection then gets the same (cached) answer, and the
            # resolver refuses again should it resolve differently by then.
            try:
                await maybe_deferred_to_future(reactor.resolve(host))
            except RefusedResolution as exc:
                raise AddressRefused(str(exc)) from None
            except Exception:  # an ordinary lookup failure: the download reports it
                pass
        return None

    def process_exception(self, request, exception, spider=None):
        if isinstance(exception, AddressRefused):
            self.stats.inc_value("netguard/refused")
            logger.info("Refused %s: %s", request.url, exception)
        return None
