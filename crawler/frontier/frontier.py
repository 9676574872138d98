"""The URL frontier: front queues by priority, back queues by host, leases, URL-seen.

The verbs, each one Redis round trip, named as URL Frontier's API names them:

Work
``put(entries)``        admit URLs (trap guards, URL-seen, per-host limit, enqueue);
                        ``prepare`` (Python, no I/O) then ``send`` (Redis)
``get(n, ack=, landed=)``  lease up to n URLs from hosts that are due (acknowledging
                        and landing earlier leases in the same call)
``ack(*leases, landed=)``  the pages of these leases are handled: forget them (and the
                        downloads of ``landed`` leases ended)
``renew(leases)``       extend the leases of pages still in progress; ``epoch()``: the
                        crawl's identity, to notice its keys vanishing
``give_back(leases)``   a worker gives leases back unhandled: queued again now

Hosts
``set_delay(host, seconds)``  a host's interval (robots.txt Crawl-delay; the operator's
                        overrides, intervals.py, come first)
``block_until(host, ...)``  keep every worker away from a host for a while (429,
                        Retry-After, robots.txt unreachable, host down)
``fail(host, kind, url)``  a fetch failed: slow the host down, or block it when down
``slot(host, ...)``, ``end(host)``  the rate limiter: take a host's next slot; a
                        response the frontier does not track ended

Numbers
``stats()``             queue sizes, hosts, leases (and the oldest one's age),
                        counters, pages of the last minute, URL-seen report
``outlook(max_wait)``   finished, running or waiting (until when); ``deferred()``:
                        what waits and why; ``slowed()``: hosts slowed by failures;
                        ``busiest()``: the hosts with the longest queues

The Redis layout is in keys.py and the scripts' contracts in scripts.py.
"""

from __future__ import annotations

import logging
import random
import time
import zlib
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from crawler.frontier.intervals import HostIntervals, intervals_from_file
from crawler.frontier.keys import SEP, Keys
from crawler.frontier.scripts import ACK, BACKOFF, END, FAIL, POP, PUSH, SLOT
from crawler.frontier.traps import TrapGuard
from crawler.frontier.urlseen import SeenLayout, url_hashes
from crawler.urls import InvalidURL, url_host

logger = logging.getLogger(__name__)

ADDED, SEEN, HOST_FULL = "added", "seen", "host_full"
# why a host waits (hback reasons, and RETRY for URLs in the delayed set)
THROTTLED, ROBOTS, DOWN, RETRY, INTERVAL = "throttled", "robots", "down", "retry", "interval"
REASONS = {
    ROBOTS: "robots.txt unreachable",
    DOWN: "host down",
    THROTTLED: "asked to wait (429 / Retry-After)",
    RETRY: "URL retry pending",
    INTERVAL: "host interval",
}
FINISHED, RUNNING, WAITING = "finished", "running", "waiting"
RECENT_SECONDS = 60  # stats()["acked_last_minute"]: leases acknowledged in the last this many seconds
EPOCH = "epoch"  # field of the counters hash: when the crawl's keys were created (see Frontier.epoch)
_STATUS = {1: ADDED, 0: SEEN, 2: HOST_FULL}


@dataclass
class Entry:
    """One URL offered to the frontier."""

    url: str  # normalized
    payload: bytes  # what get() hands back (see codec.py)
    priority: int = 0  # Scrapy's sense: higher is sooner
    depth: int = 0
    dont_filter: bool = False  # skip URL-seen (retries, forced refetches)
    follow_up: bool = False  # straight to the host's back queue (retries, redirects)
    replaces_lease: bytes = b""  # lease released when this entry is admitted
    not_before: int = 0  # ms; a follow-up waits in the delayed set until then (a URL's retry)
    urgent: bool = False  # to the head of its host's back queue, past the front queues (submissions)


@dataclass
class Prepared:
    """A batch of entries ready to send (see Frontier.prepare)."""

    statuses: list  # per entry: its status if decided in Python, else None until sent
    batch: list  # (index, entry, host) of the entries that go to Redis
    release: list  # leases of entries refused in Python
    gen: int  # the URL-seen generation the arguments were sized for
    args: list  # the PUSH script's arguments


_NOW_ARG = 5  # index of "now" in the PUSH arguments


@dataclass
class Lease:
    id: bytes  # the lease itself: seq, attempt, host and payload (see scripts.py)
    payload: bytes
    due: int = 0  # ms: when its request may leave (the host's turn; see scripts.POP)
    interval: int = 0  # ms: its host is due again this long after its download ends


def now_ms() -> int:
    return int(time.time() * 1000)


@lru_cache(maxsize=1)
def _domain_extractor():
    import tldextract

    # the snapshot shipped with tldextract: never fetch the list at run time
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def politeness_key(url: str, mode: str = "host") -> str:
    """The key a URL's politeness interval and failure state are kept under: its host
    with the port when it is not the scheme's default (``127.0.0.1:8080``; a normalized
    URL carries no default port), so that one closed port leaves the others of the host
    alone; or its registered domain (``mode='domain'``, e.g. ``a.b.example.co.uk`` ->
    ``example.co.uk``), whatever the port."""
    host, port = _plain_authority(url)
    if mode == "domain":
        ext = _domain_extractor()(host)
        if ext.domain and ext.suffix:
            return f"{ext.domain}.{ext.suffix}"
        return host
    if not port:
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _plain_authority(url: str) -> tuple[str, str]:
    """(host, port or '') of a normalized URL, read without a full parse (urlsplit
    otherwise)."""
    netloc = url.partition("://")[2].partition("/")[0].partition("?")[0].partition("#")[0].rpartition("@")[2]
    host, _, port = netloc.partition(":")
    if not host or host[0] == "[" or host[-1] == "." or not host.isascii() or host != host.lower():
        host = url_host(url)
        try:
            port = str(urlsplit(url).port or "")
        except ValueError:
            port = ""
    return host, port if port.isdigit() else ""


class Frontier:
    def __init__(
        self,
        redis,
        crawl_name: str = "default",
        *,
        priority_levels: int = 3,
        host_interval: float = 1.0,
        politeness: str = "host",
        lease_seconds: float = 60.0,
        max_attempts: int = 3,
        refill_batch: int = 100,
        seen_capacity: int = 1_000_000,
        seen_error_rate: float = 1e-6,
        seen_growth: int = 4,
        max_pages_per_host: int = 0,
        max_in_flight: int = 1,
        recovery: float = 0.25,
        intervals: HostIntervals | None = None,
        traps: TrapGuard | None = None,
        shard: int | None = None,
    ):
        if priority_levels < 1:
            raise ValueError("FRONTIER_PRIORITY_LEVELS must be at least 1")
        self.redis = redis
        self.keys = Keys(crawl_name, shard)
        # every script names one key of the crawl (shard): a Redis Cluster sends the call
        # to the master of its hash tag, where all the keys the script computes live
        self._route = [self.keys.counters]
        self.levels = priority_levels
        self.weights = ",".join(str(2 ** (priority_levels - 1 - i)) for i in range(priority_levels))
        self.host_interval_ms = int(host_interval * 1000)
        self.politeness = politeness
        self.lease_ms = int(lease_seconds * 1000)
        self.max_attempts = max_attempts
        self.refill_batch = refill_batch
        self.layout = SeenLayout(seen_capacity, seen_error_rate, seen_growth)
        self.max_pages_per_host = max_pages_per_host
        self.max_in_flight = max_in_flight
        self.recovery = recovery
        self.intervals = intervals or HostIntervals()
        self.traps = traps or TrapGuard()
        self._push = redis.register_script(PUSH)
        self._pop = redis.register_script(POP)
        self._ack = redis.register_script(ACK)
        self._backoff = redis.register_script(BACKOFF)
        self._slot = redis.register_script(SLOT)
        self._end = redis.register_script(END)
        self._fail = redis.register_script(FAIL)
        self._generation = 0  # URL-seen generations known to this client; read on first push
        self.last_acked = 0  # leases the last get() acknowledged

    @classmethod
    def from_settings(cls, settings, redis, shard: int | None = None, shares: int = 1) -> Frontier:
        """``shares``: the number of shards the crawl is cut into; each sizes its URL-seen
        filter for its share of FRONTIER_SEEN_CAPACITY."""
        return cls(
            redis,
            settings.get("CRAWL_NAME"),
            priority_levels=settings.getint("FRONTIER_PRIORITY_LEVELS"),
            host_interval=settings.getfloat("FRONTIER_HOST_INTERVAL"),
            politeness=settings.get("FRONTIER_POLITENESS_KEY"),
            lease_seconds=settings.getfloat("FRONTIER_LEASE_SECONDS"),
            max_attempts=settings.getint("FRONTIER_LEASE_MAX_ATTEMPTS"),
            refill_batch=settings.getint("FRONTIER_REFILL_BATCH"),
            seen_capacity=settings.getint("FRONTIER_SEEN_CAPACITY") // max(shares, 1),
            seen_error_rate=settings.getfloat("FRONTIER_SEEN_ERROR_RATE"),
            seen_growth=settings.getint("FRONTIER_SEEN_GROWTH"),
            max_pages_per_host=settings.getint("FRONTIER_MAX_PAGES_PER_HOST"),
            max_in_flight=settings.getint("FRONTIER_HOST_MAX_IN_FLIGHT"),
            recovery=settings.getfloat("HOST_SLOWDOWN_RECOVERY"),
            intervals=intervals_from_file(settings.get("FRONTIER_HOST_INTERVALS_FILE")),
            traps=TrapGuard.from_settings(settings),
            shard=shard,
        )

    def shard_for(self, host: str) -> Frontier:
        """The frontier ``host`` lives on (this one; see shards.py)."""
        return self

    def content_shard(self, name: str) -> int:
        """The shard holding a content-seen record (the only one: see shards.py)."""
        return 0

    def on_shard(self, s: int, call):
        """``call()`` on shard ``s`` (the only one: see shards.py)."""
        return call()

    def politeness_key(self, url: str) -> str:
        """The key ``url``'s politeness is kept under (FRONTIER_POLITENESS_KEY: its host
        or its registered domain): every component asks here."""
        return politeness_key(url, self.politeness)

    # -- admit -------------------------------------------------------------------

    def level(self, priority: int) -> int:
        """Front queue level of a Scrapy priority: 0 (highest) .. levels-1."""
        mid = (self.levels - 1) // 2
        return min(max(mid - priority, 0), self.levels - 1)

    def put(self, entries: list[Entry], now: int | None = None) -> list[str]:
        """Admit entries; one status per entry: ``added``, ``seen``, ``host_full``,
        ``invalid`` or ``trap:<name>``. Entries refused in Python still release the
        lease they replace."""
        return self.send(self.prepare(entries), now)

    def prepare(self, entries: list[Entry]) -> Prepared:
        """The Python half of put (trap guards, politeness keys, URL hashes,
        script arguments); no I/O but reading the filter generation once. Seed ingestion
        prepares the next batch while the previous one is being sent."""
        statuses: list[str | None] = [None] * len(entries)
        batch: list[tuple[int, Entry, str]] = []
        release: list[str] = []
        for i, e in enumerate(entries):
            trap = None if e.follow_up else self.traps.check(e.url, e.depth)
            try:
                host = self.politeness_key(e.url)
            except InvalidURL:
                trap, host = "invalid", ""
            if trap:
                statuses[i] = trap if trap == "invalid" else f"trap:{trap}"
                if e.replaces_lease:
                    release.append(e.replaces_lease)
            else:
                batch.append((i, e, host))
        if not self._generation:
            self._generation = self._read_generation()
        args = self._push_args(batch, self._generation) if batch else []
        return Prepared(statuses, batch, release, self._generation, args)

    def send(self, prepared: Prepared, now: int | None = None) -> list[str]:
        """The Redis half of put: one script call per batch (more only when a
        URL-seen generation fills up, or another client started a new one)."""
        if prepared.release:
            self.ack(*prepared.release)
        statuses = prepared.statuses
        batch, gen, args = prepared.batch, prepared.gen, prepared.args
        done, stale = 0, 0
        while done < len(batch):
            args[_NOW_ARG] = now_ms() if now is None else now
            result = self._push(keys=self._route, args=args)
            if result == -1 or not result:
                stale += 1
                if stale > 5:
                    raise RuntimeError("URL-seen filter generation keeps changing")
            else:
                for (i, _, _), r in zip(batch[done:], result):
                    statuses[i] = _STATUS[r]
                done += len(result)
            if done < len(batch):  # a filter filled up, or the generation was stale
                gen = self._generation = self._read_generation()
                args = self._push_args(batch[done:], gen)
        return statuses  # type: ignore[return-value]

    def _push_args(self, batch, gen: int) -> list:
        gens = self.layout.generations(gen)
        args: list = [
            self.keys.prefix,
            gen,
            gens[-1].capacity,
            ",".join(str(g.buckets) for g in gens),
            self.max_pages_per_host,
            0,  # now: set when sent
            len(batch),
            self.max_in_flight,
            self.host_interval_ms,
        ]
        level = self.level
        leases = []
        for _, e, host in batch:
            flags = ("" if e.dont_filter else "f") + ("b" if e.follow_up or e.urgent else "")
            if e.not_before and e.follow_up:
                flags += f"d{int(e.not_before)}"
            hashes = "" if e.dont_filter else "{} {}".format(*url_hashes(e.url))
            lease = ""
            if e.replaces_lease:
                leases.append(e.replaces_lease)
                lease = len(leases)
            head = f"{flags}{SEP}{level(e.priority)}{SEP}{lease}{SEP}{hashes}{SEP}{host}{SEP}"
            args.append(head.encode() + e.payload)
        return args + leases

    def _read_generation(self) -> int:
        return int(self.redis.hget(self.keys.seen_meta, "gen") or 1)

    # -- hand out ----------------------------------------------------------------

    def get(
        self, n: int = 1, now: int | None = None, ack=(), landed=(), lookahead: int = 0
    ) -> tuple[list[Lease], int | None]:
        """Lease up to ``n`` URLs from hosts due within ``lookahead`` ms, first
        acknowledging the leases in ``ack`` and landing those in ``landed`` (in the same
        round trip). Returns the leases (each with the time its host is due: its request
        must not leave before, and its host's interval) and, when fewer than ``n`` were handed out, the time (ms)
        the next host or delayed retry is due (None when nothing is queued, or when ``n``
        leases were handed out). A host has at most ``max_in_flight`` leases in flight
        (popped, neither landed nor ended); 0 lifts the limit. A landed lease prefixed
        ``+`` says its host answered (see scripts.POP: recovery); a landing is a lease
        id (it ended now) or a pair (lease id, the time in ms it ended)."""
        now = now_ms() if now is None else now
        out = self._pop(
            keys=self._route,
            args=[
                self.keys.prefix,
                now,
                n,
                self.lease_ms,
                self.host_interval_ms,
                self.refill_batch,
                self.weights,
                self.max_attempts,
                self.max_in_flight,
                self.recovery,
                lookahead,
                len(ack),
                *ack,
                *_landings(landed, now),
            ],
        )
        next_due = int(out[0])
        self.last_acked = int(out[1])
        leases = [
            Lease(lease, lease.split(SEP.encode(), 3)[3], int(due), int(interval))
            for due, interval, lease in zip(out[2::3], out[3::3], out[4::3], strict=True)
        ]
        return leases, (None if next_due < 0 else next_due)

    def ack(self, *lease_ids, landed=(), now: int | None = None) -> int:
        """Forget these leases (their pages are handled) and land the ``landed`` ones
        (their downloads ended; ``+`` first: the host answered). Returns how many
        acknowledged leases were held."""
        if not lease_ids and not landed:
            return 0
        now = now_ms() if now is None else now
        args = [
            self.keys.prefix,
            now,
            self.max_in_flight,
            self.host_interval_ms,
            self.recovery,
            len(lease_ids),
            *lease_ids,
            *_landings(landed, now),
        ]
        return int(self._ack(keys=self._route, args=args))

    def renew(self, lease_ids, now: int | None = None) -> None:
        if not lease_ids:
            return
        expiry = (now_ms() if now is None else now) + self.lease_ms
        mapping = {lease_id: expiry for lease_id in lease_ids}
        self.redis.zadd(self.keys.leases, mapping, xx=True)

    def epoch(self, create: bool = False) -> int | None:
        """The crawl's epoch: a number written once, when the crawl's keys are first
        created (``create``: write it now if there is none). A worker that saw one and
        later finds another, or none, knows the crawl's keys vanished (a Redis restarted
        without persistence, the crawl cleared) and must not take it for finished."""
        p = self.redis.pipeline(transaction=False)
        if create:
            p.hsetnx(self.keys.counters, EPOCH, now_ms() * 1000 + random.randrange(1000))
        p.hget(self.keys.counters, EPOCH)
        value = p.execute()[-1]
        return int(value) if value else None

    def give_back(self, lease_ids) -> None:
        """Give leases back now: the next pop puts their URLs back in their queues."""
        if lease_ids:
            self.redis.zadd(self.keys.leases, {lease_id: 0 for lease_id in lease_ids}, xx=True)

    # -- politeness ----------------------------------------------------------------

    def slot(self, host: str, max_wait: float, now: int | None = None, not_before: int = 0) -> int:
        """The time (ms) a request to ``host`` may leave, at least its interval after
        the previous one and no sooner than ``not_before`` (ms): taken when it is at most
        ``max_wait`` seconds away, else the host is pushed back to it (scripts.SLOT)."""
        override = self.intervals.lookup(host)
        args = [
            self.keys.prefix,
            host,
            now_ms() if now is None else now,
            self.host_interval_ms,
            int(max_wait * 1000),
            "" if override is None else str(int(override * 1000)),
            int(not_before),
        ]
        return int(self._slot(keys=self._route, args=args))

    def end(self, host: str, now: int | None = None, client=None) -> None:
        """A response from ``host`` to a request the frontier did not hand out
        (robots.txt and its redirect hops) has just ended: the host's next slot and
        hand-out count from now (scripts.END). ``client``: a pipeline to add the call to."""
        args = [self.keys.prefix, host, now_ms() if now is None else now, self.host_interval_ms]
        self._end(keys=self._route, args=args, client=client)

    def blocked_until(self, host: str) -> int:
        """The end (ms) of the host's last back-off (0: none)."""
        state = self.redis.hget(self.keys.hback, host)
        return int(state.split(b":")[2]) if state else 0

    def fail(
        self,
        host: str,
        kind: str,
        url: str,
        *,
        factor: float = 2.0,
        max_factor: float = 8.0,
        down_after: int = 3,
        minimum: float,
        maximum: float,
        quiet: float,
        jitter: float = 1.0,
        now: int | None = None,
    ) -> tuple[bool, float, float]:
        """A fetch from ``host`` failed: ``kind`` 'url' (a 5xx or a timeout of ``url``)
        slows the host down by ``factor`` (at most ``max_factor``); 'down' (connection
        refused, DNS), or ``down_after`` distinct URLs failing in a row, backs it off
        (scripts.FAIL). Returns (down, back-off seconds, slow-down factor)."""
        state, delay, f = self._fail(
            keys=self._route,
            args=[
                self.keys.prefix,
                host,
                now_ms() if now is None else now,
                kind,
                format(zlib.crc32(url.encode()), "x"),
                factor,
                max_factor,
                down_after,
                int(minimum * 1000),
                int(maximum * 1000),
                int(quiet * 1000),
                jitter,
                self.host_interval_ms,
            ],
        )
        return bool(state), int(delay) / 1000, int(f) / 1000

    def block_until(
        self,
        host: str,
        *,
        minimum: float,
        maximum: float,
        quiet: float,
        retry_after: float = 0.0,
        jitter: float = 1.0,
        reason: str = THROTTLED,
        now: int | None = None,
    ) -> float:
        """Keep every worker away from ``host`` for a while (``reason``: it answered 429
        or sent Retry-After, its robots.txt is unreachable, it is down): Retry-After if
        given, else an exponential back-off (see scripts.BACKOFF). Returns the delay in
        seconds."""
        ms = self._backoff(
            keys=self._route,
            args=[
                self.keys.prefix,
                host,
                now_ms() if now is None else now,
                int(minimum * 1000),
                int(maximum * 1000),
                int(quiet * 1000),
                int(retry_after * 1000),
                jitter,
                reason,
            ],
        )
        return int(ms) / 1000

    def set_delay(self, host: str, seconds: float | None, client=None) -> None:
        """Set a host's interval (None: back to the default). ``client``: a pipeline to
        add the command to."""
        client = self.redis if client is None else client
        if seconds is None:
            client.hdel(self.keys.hdelay, host)
        else:
            client.hset(self.keys.hdelay, host, int(seconds * 1000))

    # -- numbers -------------------------------------------------------------------

    def stats(self) -> dict:
        k = self.keys
        now = now_ms()
        p = self.redis.pipeline(transaction=False)
        p.hgetall(k.counters)
        p.zcard(k.ready)
        p.zcount(k.ready, "-inf", now)
        p.zcard(k.leases)
        p.hlen(k.hnext)
        p.hgetall(k.seen_meta)
        p.scard(k.flying)
        p.hlen(k.hflight)
        p.zcard(k.delayed)
        p.hlen(k.hslow)
        p.zrangebyscore(k.leases, "(0", "+inf", start=0, num=1, withscores=True)  # the oldest held
        p.zcount(k.leases, 0, 0)  # given back, queued again at the next pop
        p.hgetall(k.acked_recent)
        for level in range(self.levels):
            p.llen(k.front(level))
        p.hkeys(k.hflight)
        res = p.execute()
        flying_hosts = [_str(h) for h in res[-1]]
        res = res[:-1]
        # hosts downloading now are out of the ready heap until their download ends: those
        # with URLs left count among the hosts with URLs queued
        busy = self.redis.pipeline(transaction=False)
        for host in flying_hosts:
            busy.llen(k.back(host))
        busy_with_queue = sum(1 for n in busy.execute() if n) if flying_hosts else 0
        counters = {_str(a): int(b) for a, b in res[0].items() if _str(a) != EPOCH}
        meta = {_str(a): int(b) for a, b in res[5].items()}
        gen = meta.get("gen", 1)
        oldest = res[10]
        front = res[13:]
        return {
            "queued": counters.get("queued", 0),
            "front_queued": sum(front),
            "front_by_level": front,
            "hosts_queued": res[1],
            "hosts_with_urls": res[1] + busy_with_queue,  # ready, or downloading with URLs left
            "hosts_due": res[2],
            "hosts_seen": res[4],
            "leased": res[3],
            "in_flight": res[6],  # leases whose downloads have not ended
            "hosts_in_flight": res[7],
            "retries_delayed": res[8],  # URLs waiting for their own retry time
            "hosts_slowed": res[9],  # hosts whose interval failures have stretched
            # seconds since the lease that expires first was taken or last renewed (its
            # expiry less the lease time); None when no lease is held
            "oldest_lease_age": (now - int(oldest[0][1]) + self.lease_ms) / 1000 if oldest else None,
            "lease_seconds": self.lease_ms / 1000,
            "given_back": res[11],
            "acked_last_minute": recent_count(res[12], now),
            "pushed": counters.get("pushed", 0),
            # every URL pushed or requeued after an expired lease is queued or was popped
            "popped": counters.get("pushed", 0) + counters.get("expired", 0) - counters.get("queued", 0),
            # every lease ends acknowledged, expired (and requeued), abandoned, or is held
            "acked": counters.get("pushed", 0) - counters.get("queued", 0) - res[3] - counters.get("abandoned", 0),
            "expired": counters.get("expired", 0),
            "abandoned": counters.get("abandoned", 0),
            "seen": self.layout.report([meta.get(f"n:{i}", 0) for i in range(gen)]),
        }

    def outlook(self, max_wait: float, now: int | None = None) -> dict:
        """Where the crawl stands (one round trip): ``state`` is ``finished`` (nothing
        queued, nothing leased), ``running`` (leases held, or a URL due within
        ``max_wait`` seconds) or ``waiting`` (URLs queued, none due within ``max_wait``:
        ``next_due`` (ms) says when the first is). Leases given back count as queued."""
        k = self.keys
        now = now_ms() if now is None else now
        horizon = now + int(max_wait * 1000)
        p = self.redis.pipeline(transaction=False)
        p.hget(k.counters, "queued")
        p.zcount(k.leases, "(0", "+inf")
        p.zcount(k.leases, 0, 0)  # given back by their workers: queued again at the next pop
        p.zrange(k.ready, 0, 0, withscores=True)
        p.zrange(k.delayed, 0, 0, withscores=True)
        for level in range(self.levels):
            p.llen(k.front(level))
        queued, leased, returned, ready, delayed, *front = p.execute()
        queued = int(queued or 0) + returned
        firsts = [int(score) for entries in (ready, delayed) for _, score in entries[:1]]
        next_due = min(firsts) if firsts else None
        if sum(front) or returned:
            next_due = now
        if queued <= 0 and not leased:
            state = FINISHED
        elif leased or (next_due is not None and next_due <= horizon):
            state = RUNNING
        else:
            state = WAITING
        return {"state": state, "queued": queued, "leased": leased, "next_due": next_due}

    def deferred(self, max_wait: float = 0.0, now: int | None = None, limit: int = 10_000) -> dict:
        """The URLs not due within ``max_wait`` seconds, by reason (REASONS): reason ->
        {"hosts", "urls", "due" (ms, the earliest), "examples" (a few hosts)}. Looks
        at ``limit`` hosts and ``limit`` delayed retries at most."""
        k = self.keys
        now = now_ms() if now is None else now
        horizon = now + int(max_wait * 1000)
        hosts = self.redis.zrangebyscore(k.ready, f"({horizon}", "+inf", start=0, num=limit, withscores=True)
        retries = self.redis.zrangebyscore(k.delayed, f"({horizon}", "+inf", start=0, num=limit, withscores=True)
        out: dict[str, dict] = {}

        def add(reason, host, urls, due):
            r = out.setdefault(reason, {"hosts": set(), "urls": 0, "due": due, "examples": []})
            if host not in r["hosts"] and len(r["examples"]) < 3:
                r["examples"].append(host)
            r["hosts"].add(host)
            r["urls"] += urls
            r["due"] = min(r["due"], due)

        if hosts:
            p = self.redis.pipeline(transaction=False)
            p.hmget(k.hback, [h for h, _ in hosts])
            for h, _ in hosts:
                p.llen(k.back(_str(h)))
            backs, *lengths = p.execute()
            for (h, score), back, length in zip(hosts, backs, lengths):
                reason = INTERVAL
                if back:
                    fields = _str(back).split(":")
                    if len(fields) > 3 and int(fields[2]) > now:
                        reason = fields[3]
                add(reason, _str(h), length, int(score))
        for member, score in retries:
            add(RETRY, _str(member.split(SEP.encode(), 2)[1]), 1, int(score))
        for r in out.values():
            r["hosts"] = len(r["hosts"])
        return out

    def busiest(self, n: int = 10, limit: int = 10_000, now: int | None = None) -> dict:
        """The ``n`` hosts with the most URLs in their back queues, most first (URLs still
        in the front queues are not sorted into hosts yet). Looks at ``limit`` hosts at
        most: the first of the ready heap (earliest due) and those at their in-flight
        limit (out of the heap while they download). Returns {"hosts": [{"host",
        "queued", "interval" (s, slow-down included), "slowed" (factor), "in_flight",
        "backoff" (None, or {"reason", "until" (ms), "level"} while it lasts),
        "next_due" (ms; None: when one of its downloads lands)}], "looked_at",
        "complete" (every host with a queue was looked at)}."""
        k = self.keys
        now = now_ms() if now is None else now
        p = self.redis.pipeline(transaction=False)
        p.zrange(k.ready, 0, limit - 1, withscores=True)
        p.zcard(k.ready)
        ready, in_heap = p.execute()
        due = {_str(h): int(score) for h, score in ready}
        cursor, flying = self.redis.hscan(k.hflight, 0, count=limit)
        others = [h for h in map(_str, flying) if h not in due]
        candidates = list(due) + others[: max(limit - len(due), 0)]
        complete = len(due) >= in_heap and not cursor and len(candidates) == len(due) + len(others)
        if not candidates:
            return {"hosts": [], "looked_at": 0, "complete": complete}
        p = self.redis.pipeline(transaction=False)
        for host in candidates:
            p.llen(k.back(host))
        lengths = p.execute()
        top = sorted(((q, h) for h, q in zip(candidates, lengths, strict=True) if q), key=lambda qh: (-qh[0], qh[1]))[
            :n
        ]
        hosts = [h for _, h in top]
        out = []
        if hosts:
            p = self.redis.pipeline(transaction=False)
            for key in (k.hdelay, k.hslow, k.hback, k.hnext, k.hflight):
                p.hmget(key, hosts)
            delays, slows, backs, nexts, flights = p.execute()
            for i, (q, host) in enumerate(top):
                factor = float(slows[i]) if slows[i] else 1.0
                interval = int(delays[i]) if delays[i] is not None else self.host_interval_ms
                backoff = None
                if backs[i]:
                    fields = _str(backs[i]).split(":")
                    if len(fields) > 3 and int(fields[2]) > now:
                        backoff = {"reason": fields[3], "until": int(fields[2]), "level": int(fields[0])}
                nxt = due.get(host)
                if nxt is None and not flights[i]:  # (not in the heap, nothing in flight: its hnext time)
                    nxt = int(nexts[i] or now)
                out.append(
                    {
                        "host": host,
                        "queued": q,
                        "interval": interval * factor / 1000,
                        "slowed": factor,
                        "in_flight": int(flights[i] or 0),
                        "backoff": backoff,
                        "next_due": nxt,
                    }
                )
        return {"hosts": out, "looked_at": len(candidates), "complete": complete}

    def slowed(self, limit: int = 5) -> list[tuple[str, float]]:
        """Up to ``limit`` hosts slowed down by failures, slowest first: (host, factor)."""
        _, found = self.redis.hscan(self.keys.hslow, 0, count=1000)
        hosts = [(_str(h), float(f)) for h, f in found.items()]
        return sorted(hosts, key=lambda hf: -hf[1])[:limit]

    def clear(self) -> int:
        """Delete every key of this crawl. Returns how many were deleted."""
        deleted = 0
        batch = []
        for key in self.redis.scan_iter(match=self.keys.pattern(), count=1000):
            batch.append(key)
            if len(batch) >= 500:
                deleted += self.redis.delete(*batch)
                batch = []
        if batch:
            deleted += self.redis.delete(*batch)
        self._generation = 0
        return deleted


def recent_count(buckets: dict, now: int, seconds: int = RECENT_SECONDS) -> int:
    """The leases acknowledged in the last ``seconds`` (at most 63) before ``now`` (ms),
    from the ``acked:recent`` hash (second mod 64 -> ``<second>:<count>``; see
    scripts._SETTLE): the fields of the seconds in (now - seconds, now]."""
    second = now // 1000
    total = 0
    for value in buckets.values():
        at, _, count = _str(value).partition(":")
        if second - seconds < int(at) <= second:
            total += int(count)
    return total


def _landings(landed, now: int) -> list:
    """The landing arguments of POP and ACK: each landing is a lease id (its download
    ended now) or a pair (lease id, the time in ms it ended)."""
    args = []
    for landing in landed:
        lease, ended = (landing, now) if isinstance(landing, bytes | str) else landing
        args += [ended, lease]
    return args


def _str(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
