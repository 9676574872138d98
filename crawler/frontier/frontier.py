"""The URL frontier: front queues by priority, back queues by host, leases, URL-seen.

The verbs, each one Redis round trip, named as URL Frontier's API names them:

Work
``put(entries)``        admit URLs (trap guards, URL-seen, per-host limit, enqueue);
                        ``prepare`` (Python, no I/O) then ``send`` (Redis)
``promote(entries)``    URLs queued already to the head of their hosts' queues
                        (submissions that ``put`` found seen)
``credit(credits)``     FRONTIER_ORDER importance: URLs linked again gain importance
``get(n, ack=, landed=)``  lease up to n URLs from hosts that are due (acknowledging
                        and landing earlier leases in the same call)
``ack(*leases, landed=)``  the pages of these leases are handled: forget them (and the
                        downloads of ``landed`` leases ended)
``renew(leases)``       extend the leases of pages still in progress; ``epoch()``: the
                        crawl's identity, to notice its keys vanishing
``give_back(leases)``   a worker gives leases back unhandled: queued again now

Steering (steering.py)
``pause(host=None)``, ``resume(host=None)``  the operator holds the crawl, or a host:
                        nothing new is handed out; ``paused()``: what is held
``drop(host)``          a host's URLs are recorded as not fetched, not fetched (also
                        when it is down for HOST_GIVE_UP_AFTER); ``resume`` undoes it
``budget()``            the page budget (CRAWL_MAX_PAGES) and what is spent of it

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

The Redis layout is in keys.py and the scripts' contracts at the top of their files, lua/*.lua.
"""

from __future__ import annotations

import itertools
import logging
import random
import struct
from dataclasses import dataclass

import redis

from crawler.frontier.hosts import FrontierHosts, politeness_key
from crawler.frontier.intervals import HostIntervals, intervals_from_file
from crawler.frontier.keys import EPOCH, NAMES, SEP, Keys
from crawler.frontier.reports import FrontierReports
from crawler.frontier.scripts import (
    ACK,
    BACKOFF,
    CREDIT,
    END,
    EVICT,
    FAIL,
    HOLD,
    LOAD,
    POP,
    PROMOTE,
    PUSH,
    RESOLVE,
    SLOT,
    SPILL,
)
from crawler.frontier.steering import FrontierSteering
from crawler.frontier.urlseen import STRINGS, SeenLayout, hashes_text, kind_for
from crawler.frontier.words import (
    ADDED,
    HOST_FULL,
    PROMOTED,
    SEEN,
    now_ms,
)
from crawler.scope.reasons import INVALID
from crawler.scope.rules import EMPTY, RulesWatch
from crawler.scope.scope import CrawlScope
from crawler.urls import InvalidURL, plain_authority

logger = logging.getLogger(__name__)

_STATUS = {1: ADDED, 0: SEEN, 2: HOST_FULL}
SEED_CASH = 1.0  # FRONTIER_ORDER importance: what a seed (or a due URL put back) starts with
PROMOTED_DAYS = 7  # a promotion whose second copy never came up is forgotten after this
KNOWN_HOSTS = 100_000  # hosts whose politeness key and scope verdict prepare remembers
INBOX_SLICE = 100_000  # inbox entries that make it due at once, and a drain's claim at most (spill.py)
WORK_FRESH_MS = 1_000  # a short get()'s reading of a spill round's work serves spill_due this long


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
    cash: float = 0.0  # FRONTIER_ORDER importance: the importance it brings (SEED_CASH for a seed; a link's share)
    outside: bool = False  # from outside the crawl (a seed, a submission): held to the network guard at once


@dataclass
class Prepared:
    """A batch of entries ready to send (see Frontier.prepare)."""

    statuses: list  # per entry: its status if decided in Python, else None until sent
    batch: list  # (index, entry, host) of the entries that go to Redis
    release: list  # leases of entries refused in Python
    gen: int  # the URL-seen generation the arguments were sized for
    args: list  # the PUSH script's arguments


_NOW_ARG = 4  # index of "now" in the PUSH arguments
PLAIN = "\x02"  # the first byte of a plain entry's PUSH argument (push.lua)


@dataclass
class Lease:
    id: bytes  # the lease itself: seq, attempt, host and payload (see lua/pop.lua)
    payload: bytes
    due: int = 0  # ms: when its request may leave (the host's turn; see scripts.POP)
    interval: int = 0  # ms: its host is due again this long after its download ends
    cash: float = 0.0  # FRONTIER_ORDER importance: the page's importance, to share among its links
    address: str = ""  # FRONTIER_ADDRESS_POLITENESS: the address its host was resolved to ('' without)


class Frontier(FrontierHosts, FrontierReports, FrontierSteering):
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
        host_max_pages: int = 0,
        max_in_flight: int = 1,
        recovery: float = 0.25,
        max_pages: int = 0,
        give_up: float = 0.0,
        order: str = "fifo",
        window: int = 0,
        active_hosts: int = 0,
        spill_age: float = 5.0,
        window_idle: float = 60.0,
        address_interval: float | None = None,
        address_max_in_flight: int = 0,
        intervals: HostIntervals | None = None,
        scope: CrawlScope | None = None,
        rules: RulesWatch | None = None,
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
        self.host_max_pages = host_max_pages
        self.max_in_flight = max_in_flight
        self.recovery = recovery
        self.max_pages = max_pages
        self.give_up_ms = int(give_up * 1000)  # a host down this long is given up (0: never)
        if order not in ("fifo", "importance"):
            raise ValueError("FRONTIER_ORDER is fifo or importance")
        self.ranked = order == "importance"  # new URLs in their hosts' ranked queues (OPIC)
        self._ranked_arg = "1" if self.ranked else ""  # (the scripts' word for it: POP, LOAD)
        self.window = window  # URLs of a host's queue in Redis; the rest spilled (0: none; spill.py)
        self.active_hosts = active_hosts  # hosts with a window at most (0: no limit)
        self.spill_age_ms = int(spill_age * 1000)  # a partial buffer is written out after this
        # a host due no sooner than this gives its window back while hosts wait for one (0: never)
        self.window_idle_ms = int(window_idle * 1000)
        # politeness per address (None: off, -1): a class's interval and cap of leases in flight
        self.address_interval_ms = -1 if address_interval is None else int(address_interval * 1000)
        self.address_max_in_flight = address_max_in_flight
        self.intervals = intervals or HostIntervals()
        self.scope = scope or CrawlScope()  # what is in the crawl (its rules: the watch's, below)
        self.rules = rules  # the crawl rules (CRAWL_RULES), read again when the file changes
        self._ruled = (EMPTY, self.scope)  # (the rules, the scope with them) as last asked
        self._push = redis.register_script(PUSH)
        self._pop = redis.register_script(POP)
        self._ack = redis.register_script(ACK)
        self._backoff = redis.register_script(BACKOFF)
        self._slot = redis.register_script(SLOT)
        self._end = redis.register_script(END)
        self._fail = redis.register_script(FAIL)
        self._promote = redis.register_script(PROMOTE)
        self._hold = redis.register_script(HOLD)
        self._credit = redis.register_script(CREDIT)
        self._spill = redis.register_script(SPILL)
        self._load = redis.register_script(LOAD)
        self._evict = redis.register_script(EVICT)
        self._resolve = redis.register_script(RESOLVE)
        self._generation = 0  # URL-seen generations known to this client; read on first push
        self._hosts: tuple[CrawlScope | None, dict] = (None, {})  # see _known_hosts
        self.last_acked = 0  # leases the last get() acknowledged
        # what the last get() found of a spill round's work, when it came back short: (its
        # now, POP's sum), read once by spill_due
        self._spill_work: tuple[int, int] | None = None

    @property
    def by_address(self) -> bool:
        """Whether politeness per address is on (FRONTIER_ADDRESS_POLITENESS)."""
        return self.address_interval_ms >= 0

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
            host_max_pages=settings.getint("FRONTIER_HOST_MAX_PAGES"),
            max_in_flight=settings.getint("FRONTIER_HOST_MAX_IN_FLIGHT"),
            recovery=settings.getfloat("HOST_SLOWDOWN_RECOVERY"),
            max_pages=settings.getint("CRAWL_MAX_PAGES"),
            give_up=settings.getfloat("HOST_GIVE_UP_AFTER"),
            order=settings.get("FRONTIER_ORDER"),
            window=settings.getint("FRONTIER_HOST_WINDOW"),
            address_interval=(
                settings.getfloat("FRONTIER_ADDRESS_INTERVAL")
                if settings.getbool("FRONTIER_ADDRESS_POLITENESS")
                else None
            ),
            address_max_in_flight=settings.getint("FRONTIER_ADDRESS_MAX_IN_FLIGHT"),
            active_hosts=settings.getint("FRONTIER_ACTIVE_HOSTS"),
            spill_age=settings.getfloat("FRONTIER_SPILL_AGE"),
            window_idle=settings.getfloat("FRONTIER_WINDOW_IDLE"),
            intervals=intervals_from_file(settings.get("FRONTIER_HOST_INTERVALS_FILE")),
            scope=CrawlScope.from_settings(settings, rules=EMPTY),
            rules=rules_from_settings(settings),
            shard=shard,
        )

    def current_rules(self):
        """The crawl rules as they stand (CRAWL_RULES, read again when the file changes;
        none without a file)."""
        return self.rules.current() if self.rules is not None else EMPTY

    def use_scope(self, scope: CrawlScope) -> None:
        """Hold what is offered to ``scope`` (a spider's, or the one the running workers
        published); the crawl rules of CRAWL_RULES, when set here, over its own."""
        self.scope = scope
        self._ruled = (EMPTY, scope)

    def current_scope(self) -> CrawlScope:
        """The scope every URL offered is held to, with the crawl rules as they stand."""
        if self.rules is None:
            return self.scope
        rules = self.current_rules()
        if self._ruled[0] is not rules:
            self._ruled = (rules, self.scope.with_rules(rules))
        return self._ruled[1]

    @property
    def shards(self) -> list[Frontier]:
        """The frontiers the crawl's queues are on: this one (a ShardedFrontier has several)."""
        return [self]

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
        ``invalid``, ``rejected`` (by the crawl rules) or ``trap:<name>``. Entries refused in Python still release the
        lease they replace."""
        return self.send(self.prepare(entries), now)

    def prepare(self, entries: list[Entry]) -> Prepared:
        """The Python half of put (trap guards, politeness keys, URL hashes,
        script arguments); no I/O but reading the filter generation once. Seed ingestion
        prepares the next batch while the previous one is being sent."""
        statuses: list[str | None] = [None] * len(entries)
        batch: list[tuple[int, Entry, str]] = []
        release: list[str] = []
        scope = self.current_scope()
        known = self._known_hosts(scope)
        plain = plain_authority
        for i, e in enumerate(entries):
            url = e.url
            # the scope's verdict (reasons.py); a follow-up (a retry, a redirect) was admitted already
            m = plain(url) if type(url) is str else None
            if m is not None:  # what its host decides, once a host (see _known_hosts)
                facts = known.get(m[0])
                if facts is None:
                    facts = known[m[0]] = self._host_facts(scope, url, m[1])
                host = facts[0]
                refused = (
                    None if e.follow_up else (facts[1] if e.outside else facts[2]) or scope.url_verdict(url, e.depth)
                )
            else:
                refused = None if e.follow_up else scope.verdict(url, e.depth, e.outside)
                if not refused:
                    try:
                        host = self.politeness_key(url)
                    except InvalidURL:
                        refused = INVALID
            if refused:
                statuses[i] = refused
                if e.replaces_lease:
                    release.append(e.replaces_lease)
            else:
                batch.append((i, e, host))
        if not self._generation:
            self._generation = self._read_generation()
        args = self._push_args(batch, self._generation, scope.rules) if batch else []
        return Prepared(statuses, batch, release, self._generation, args)

    def _known_hosts(self, scope: CrawlScope) -> dict:
        """What ``prepare`` learnt of the hosts it met under ``scope``, by the start of their
        URLs (``scheme://host[:port]``, plain: see crawler/urls.py url_authority): their
        politeness key and their scope's host verdicts (_host_facts). Forgotten when the
        scope changes, or when it holds KNOWN_HOSTS of them."""
        known = self._hosts
        if known[0] is not scope or len(known[1]) >= KNOWN_HOSTS:
            known = self._hosts = (scope, {})
        return known[1]

    def _host_facts(self, scope: CrawlScope, url: str, host: str) -> tuple:
        """(politeness key, host verdict held to the network guard, without it)."""
        return self.politeness_key(url), scope.host_verdict(host, True), scope.host_verdict(host, False)

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
                args = self._push_args(batch[done:], gen, self.current_rules())
        return statuses  # type: ignore[return-value]

    def promote(self, entries: list[Entry], now: int | None = None) -> list[str]:
        """Move URLs that are queued (seen, neither fetched nor in flight: the caller asked
        the UrlStore) to the head of their hosts' back queues, each fetched at its host's
        next turn and once (scripts.PROMOTE); ``promoted``, or ``seen`` for a URL in
        flight. One round trip."""
        if not entries:
            return []
        now = now_ms() if now is None else now
        args = [self.keys.prefix, now, now - PROMOTED_DAYS * 86_400_000, self.max_in_flight, self.host_interval_ms]
        args += [self.politeness_key(e.url).encode() + SEP.encode() + e.payload for e in entries]
        return [PROMOTED if r == 1 else SEEN for r in self._promote(keys=self._route, args=args)]

    def credit(self, credits: list[tuple[str, float]]) -> int:
        """FRONTIER_ORDER importance: URLs linked again, (URL, cash) each, gain that share of
        importance where they wait (scripts.CREDIT). Returns how many were waiting."""
        if not credits:
            return 0
        args = [self.keys.prefix]
        for url, cash in credits:
            try:
                args.append(f"{self.politeness_key(url)}{SEP}{url}{SEP}{cash:.9g}")
            except InvalidURL:
                continue
        return int(self._credit(keys=self._route, args=args)) if len(args) > 1 else 0

    def _push_args(self, batch, gen: int, rules=EMPTY) -> list:
        gens = self.layout.generations(gen)
        args: list = [
            self.keys.prefix,
            gen,
            gens[-1].capacity,
            self.host_max_pages,
            0,  # now: set when sent
            len(batch),
            self.max_in_flight,
            self.host_interval_ms,
            self.window,
            self.active_hosts,
            self.spill_age_ms,
            self.level(0),
            self.layout.kind,
            INBOX_SLICE,
        ]
        level = self.level
        buckets = tuple(g.buckets for g in gens)  # (each URL is sent its bucket in each: hashes_text)
        levels: dict[int, int] = {}  # level by priority, for this batch
        leases = []
        # an entry that is only checked and queued (a seed, a link: neither forced, a
        # follow-up, urgent nor replacing a lease; no rules, no ranked queues) has every
        # field but its level, hashes and host empty: it is sent as a plain entry, those
        # three and its payload after PLAIN (push.lua)
        plain = not self.ranked and rules.empty
        for _, e, host in batch:
            if plain and not (e.dont_filter or e.follow_up or e.urgent or e.replaces_lease):
                lv = levels.get(e.priority)
                if lv is None:
                    lv = levels[e.priority] = level(e.priority)
                args.append(f"{PLAIN}{lv}{SEP}{hashes_text(e.url, buckets)}{SEP}{host}{SEP}".encode() + e.payload)
                continue
            # an entry's fields, in the order push.lua reads them ('' for one not given)
            delayed = bool(e.not_before and e.follow_up)
            ranked = self.ranked and not e.urgent and not e.follow_up and not delayed
            quota, in_flight, priority = "", "", e.priority
            if not rules.empty:  # the host's entry in the crawl rules
                own = rules.overrides(host)
                quota = "" if own.max_pages is None else own.max_pages
                in_flight = own.in_flight or 0  # (0: none of its own, any before it forgotten)
                if own.priority is not None and not priority:
                    priority = own.priority
            lease = ""
            if e.replaces_lease:
                leases.append(e.replaces_lease)
                lease = len(leases)
            fields = (
                "" if e.dont_filter else 1,  # check
                1 if e.follow_up or e.urgent else "",  # back
                1 if e.urgent else "",  # urgent
                int(e.not_before) if delayed else "",  # retry_at
                quota,
                in_flight,
                1 if ranked else "",  # ranked
                f"{e.cash:.9g}" if ranked else "",  # cash
                level(priority),
                lease,
                "" if e.dont_filter else hashes_text(e.url, buckets),  # hashes
                host,
            )
            args.append(SEP.join(map(str, fields)).encode() + SEP.encode() + e.payload)
        return args + leases

    def _read_generation(self) -> int:
        """The crawl's URL-seen generation. A URL's bucket depends on the filter's layout
        (capacity, error rate, growth, the kind of its buckets), so the first client to push
        records its own (buckets of the kind the server keeps small: urlseen.kind_for) and
        every client uses the recorded one, whatever its settings say (said once)."""
        gen, recorded, filled = self.redis.hmget(self.keys.seen_meta, "gen", "layout", "n:0")
        if recorded is None:
            # (a crawl that pushed before layouts were recorded has string buckets already)
            kind = STRINGS if gen is not None or filled is not None else kind_for(self._intset_most())
            mine = self.layout.of_kind(kind).spelled()
            if self.redis.hsetnx(self.keys.seen_meta, "layout", mine):
                recorded = mine.encode()
            else:  # (another client's, just now)
                recorded = self.redis.hget(self.keys.seen_meta, "layout") or mine.encode()
        layout = SeenLayout.parse(recorded.decode())
        if layout.of_kind(self.layout.kind).spelled() != self.layout.spelled():
            logger.warning(
                "URL-seen of %s was laid out as capacity, error rate, growth %s; these"
                " settings' %s are not used for it",
                self.keys.prefix,
                layout.of_kind(STRINGS).spelled(),
                self.layout.of_kind(STRINGS).spelled(),
            )
        self.layout = layout
        return int(gen or 1)

    def _intset_most(self) -> int | None:
        """The server's set-max-intset-entries (None: it does not say)."""
        try:
            value = self.redis.config_get("set-max-intset-entries").get("set-max-intset-entries")
        except redis.ResponseError:  # (CONFIG refused: a managed server)
            return None
        return int(value) if value else None

    # -- hand out ----------------------------------------------------------------

    def get(
        self, n: int = 1, now: int | None = None, ack=(), landed=(), lookahead: int = 0, urgent_only: bool = False
    ) -> tuple[list[Lease], int | None]:
        """Lease up to ``n`` URLs from hosts due within ``lookahead`` ms, first
        acknowledging the leases in ``ack`` and landing those in ``landed`` (in the same
        round trip). Returns the leases (each with the time its host is due: its request
        must not leave before, and its host's interval) and, when fewer than ``n`` were handed out, the time (ms)
        the next host or delayed retry is due (None when nothing is queued, or when ``n``
        leases were handed out). A host has at most ``max_in_flight`` leases in flight
        (popped, neither landed nor ended); 0 lifts the limit. A landed lease prefixed
        ``+`` says its host answered (see scripts.POP: recovery); a landing is a lease
        id (it ended now) or a pair (lease id, the time in ms it ended). ``urgent_only``:
        only hosts with a submission waiting (see scripts.POP), and no next due time."""
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
                self.max_pages,
                int(urgent_only),
                self.window,
                self.active_hosts,
                self.address_interval_ms,
                self.address_max_in_flight,
                self._ranked_arg,
                len(ack),
                *ack,
                *_landings(landed, now),
            ],
        )
        next_due = int(out[0])
        self.last_acked = int(out[1])
        work = int(out[2])
        self._spill_work = (now, work) if work >= 0 else None  # (a full take read nothing)
        leases = [
            Lease(lease, lease.split(SEP.encode(), 3)[3], int(due), int(interval), float(cash), address.decode())
            for due, interval, cash, lease, address in zip(
                out[3::5], out[4::5], out[5::5], out[6::5], out[7::5], strict=True
            )
        ]
        return leases, (None if next_due < 0 else next_due)

    # -- addresses (addresses.py resolves them; RESOLVE records them for every worker) --------

    def resolve_claim(self, claim_ms: int, most: int, now: int | None = None) -> list[tuple[str, bool]]:
        """Up to ``most`` hosts whose address is to be looked up now (each claimed for
        ``claim_ms``): (host, whether it has an address already, expired) each."""
        now = now_ms() if now is None else now
        args = [self.keys.prefix, now, "claim", self.max_in_flight, self.host_interval_ms, claim_ms, most]
        out = self._resolve(keys=self._route, args=args)
        return [(host.decode(), known == b"1") for host, known in zip(out[::2], out[1::2], strict=True)]

    def resolve_commit(self, records, now: int | None = None) -> int:
        """Record hosts' addresses for every worker: (host, class, address, expiry ms, the
        class's own interval ms or None, its own cap or None) each; a host that waited for
        its address is due again. An address '' records nothing: the host is looked up again
        at the expiry."""
        now = now_ms() if now is None else now
        args = [self.keys.prefix, now, "commit", self.max_in_flight, self.host_interval_ms]
        for host, class_, address, expiry, interval, cap in records:
            args += [
                host,
                class_,
                address,
                int(expiry),
                "" if interval is None else interval,
                "" if cap is None else cap,
            ]
        return int(self._resolve(keys=self._route, args=args)) if records else 0

    # -- spill (spill.py moves the chunks; scripts SPILL and LOAD keep the queues whole) --------

    def spill_store(self, where: str | None) -> str | None:
        """The crawl's spill store as its first spilling client recorded it (``where``, if
        this is the first; None: only read, None if no client spilled yet)."""
        if where is not None:
            self.redis.setnx(self.keys.spill_store, where)
        recorded = self.redis.get(self.keys.spill_store)
        return recorded.decode() if recorded is not None else None

    def spill_due(self, now: int | None = None) -> tuple[bool, bool, bool]:
        """Whether each claim of a spill round may find work now, in one round trip rather
        than three script calls (most rounds find nothing): (buffers or the inbox due to be
        written out;
        windows to give back: hosts wait in 'dormant'; chunks to load: hosts in 'refill',
        or in 'dormant' while fewer than FRONTIER_ACTIVE_HOSTS hosts have a window). The
        claims' own first tests, read without claiming: False holds at ``now`` (what falls
        due after it waits for the next round), True may still find nothing (claims of
        other workers). When this client's last get() came back short at most WORK_FRESH_MS
        before ``now``, POP read the same tests then, and its answer is used (once) instead
        of a round trip: a worker's round follows its take."""
        now = now_ms() if now is None else now
        found, self._spill_work = self._spill_work, None
        if found is not None and 0 <= now - found[0] <= WORK_FRESH_MS:
            work = found[1]
            return bool(work & 1), bool(work & 2) and self.window_idle_ms > 0, bool(work & 4)
        k = self.keys
        p = self.redis.pipeline(transaction=False)
        p.zrangebyscore(k.spill, "-inf", now, start=0, num=1)
        p.get(k.inbox_due)
        p.zcount(k.dormant, "-inf", now)
        p.zrangebyscore(k.refill, "-inf", now, start=0, num=1)
        p.zcard(k.ready)
        buffers, inbox, dormant, refill, ready = p.execute()
        room = self.active_hosts <= 0 or ready < self.active_hosts
        writes = bool(buffers) or (inbox is not None and int(inbox) <= now)
        return writes, dormant > 0 and self.window_idle_ms > 0, bool(refill) or (dormant > 0 and room)

    def inbox_take(
        self, token: str, claim_ms: int, most: int, now: int | None = None, due: bool = False
    ) -> tuple[int, list[bytes]]:
        """Claim the inbox's first entries (up to ``most``; none while another worker's claim
        is live, nor, with ``due``, unless the inbox is due): (the first of the chunk ids they
        may use, the entries, ``<host>\x1f<entry>`` each). The caller writes each host's
        chunks under (host, first id + k), then ``inbox_put``."""
        now = now_ms() if now is None else now
        args = [self.keys.prefix, now, "take", token, self.window, claim_ms, most, "1" if due else ""]
        out = self._spill(keys=self._route, args=args)
        if not out:
            return 0, []
        first, count = int(out[0]), int(out[1])
        return first, self.redis.lrange(self.keys.inbox, 0, count - 1)  # (read by the claim: see SPILL)

    def inbox_put(self, token: str, count: int, first: int, hosts, now: int | None = None) -> list[bool]:
        """The chunks written of the ``count`` entries claimed, (host, chunks, URLs) each host:
        they leave the inbox for their hosts' lists of chunks. Returns, for each host, whether
        its chunks are listed (False: the claim was lost, and they are the caller's to delete)."""
        if not hosts:
            return []
        now = now_ms() if now is None else now
        args = [self.keys.prefix, now, "put", token, self.window, count, first, INBOX_SLICE, self.spill_age_ms]
        sizes = struct.pack(f">{2 * len(hosts)}I", *itertools.chain.from_iterable((c, n) for _, c, n in hosts))
        args += [self._ranked_arg, sizes, *(host for host, _, _ in hosts)]
        out = self._spill(keys=self._route, args=args)
        if isinstance(out, int):  # (every host's chunks listed)
            return [True] * len(hosts)
        return [bool(s) for s in out]

    def spill_claim(self, token: str, claim_ms: int, most: int, now: int | None = None) -> list[tuple]:
        """Claim up to ``most`` hosts' buffers that are due to be written out: (host, chunk
        id, entries) each, the chunk to write under (host, id) before ``spill_commit``."""
        now = now_ms() if now is None else now
        out = self._spill(keys=self._route, args=[self.keys.prefix, now, "claim", token, self.window, claim_ms, most])
        return _claimed_chunks(out)

    def spill_commit(self, token: str, chunks, now: int | None = None) -> set[int]:
        """The chunks written, (host, id, entries) each: they leave their buffers for their
        hosts' lists of chunks. Returns the ids committed (one missing: its claim was lost,
        and the chunk is the caller's to delete)."""
        if not chunks:
            return set()
        now = now_ms() if now is None else now
        args = [self.keys.prefix, now, "commit", token, self.window, self.spill_age_ms]
        for host, chunk, entries in chunks:
            args += [host, chunk, len(entries)]
        return {int(c) for c in self._spill(keys=self._route, args=args)}

    def load_claim(self, token: str, claim_ms: int, most: int, now: int | None = None) -> list[tuple[str, int]]:
        """Claim the oldest chunk of up to ``most`` hosts whose windows ran low, or all of a
        host's chunks when its URLs on disk fit in its window's room: (host, id) each, a
        host's one after another, oldest first."""
        now = now_ms() if now is None else now
        args = [self.keys.prefix, now, "claim", token, self.window, self.active_hosts, self._ranked_arg, claim_ms, most]
        out = self._load(keys=self._route, args=args)
        return [(out[i].decode(), int(out[i + 1])) for i in range(0, len(out), 2)]

    def evict_claim(self, token: str, claim_ms: int, most: int, now: int | None = None) -> list[tuple]:
        """While hosts wait on disk for a window, claim the windows of up to ``most`` hosts
        due furthest ahead (no sooner than FRONTIER_WINDOW_IDLE from now, nor than twice
        their own interval): (host, chunk id,
        entries) each, the chunk to write under (host, id) before ``evict_commit``."""
        if self.window <= 0 or self.window_idle_ms <= 0:
            return []
        now = now_ms() if now is None else now
        args = [self.keys.prefix, now, "claim", token, claim_ms, self.window_idle_ms, most, self.host_interval_ms]
        return _claimed_chunks(self._evict(keys=self._route, args=args))

    def evict_commit(self, token: str, chunks, now: int | None = None) -> set[int]:
        """The windows written, (host, id, entries) each: each becomes its host's oldest chunk
        if its window is still what was claimed. Returns the ids committed (one missing: the
        claim was lost or the window changed, and the chunk is the caller's to delete)."""
        if not chunks:
            return set()
        now = now_ms() if now is None else now
        args = [self.keys.prefix, now, "commit", token, self.level(0)]
        for host, chunk, _ in chunks:
            args += [host, chunk]
        return {int(c) for c in self._evict(keys=self._route, args=args)}

    def chunk_keys(self) -> list[tuple[str, int]]:
        """(host, chunk id) of every chunk the hosts' queues list (spill.py ``clear``)."""
        keys, start = [], len(self.keys.spilled(""))
        for key in self.redis.scan_iter(match=self.keys.pattern(NAMES["spilled"]), count=1000):
            host = key[start:].decode()
            keys += [(host, int(chunk)) for chunk in self.redis.lrange(key, 0, -1)]
        return keys

    def load(self, token: str, chunks, now: int | None = None) -> list[int]:
        """Put claimed chunks, (host, id, its entries ``uncompressed``: crawler/frontier/chunks.py)
        each, into their hosts' windows; for each: 1 loaded, 2 loaded before (the chunk may
        go), 0 the claim was lost (the chunk stays). (A chunk is one argument: the script
        reads its entries, as many as LOAD's arguments cost the client a URL each.)"""
        now = now_ms() if now is None else now
        args = [self.keys.prefix, now, "load", token, self.window, self.active_hosts, self._ranked_arg]
        args += [self.host_interval_ms, self.max_in_flight]
        for host, chunk, data in chunks:
            args += [host, chunk, data]
        return [int(r) for r in self._load(keys=self._route, args=args)]

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

    def deliver(self, now: int | None = None, at_once: bool = False) -> None:
        """Nothing is owed to one server (only a sharded frontier keeps outboxes)."""

    def owes(self) -> int:
        return 0

    def give_back(self, lease_ids) -> None:
        """Give leases back now: the next pop puts their URLs back in their queues."""
        if lease_ids:
            self.redis.zadd(self.keys.leases, {lease_id: 0 for lease_id in lease_ids}, xx=True)

    # -- politeness ----------------------------------------------------------------

    def clear(self) -> int:
        """Delete every key of this crawl (UNLINK: the server frees large keys' memory in
        the background, not within the call). Returns how many were deleted."""
        deleted = 0
        batch = []
        for key in self.redis.scan_iter(match=self.keys.pattern(), count=1000):
            batch.append(key)
            if len(batch) >= 500:
                deleted += self.redis.unlink(*batch)
                batch = []
        if batch:
            deleted += self.redis.unlink(*batch)
        self._generation = 0
        return deleted


def rules_from_settings(settings) -> RulesWatch | None:
    """The crawl rules of CRAWL_RULES, watched for changes (None: no file)."""
    path = settings.get("CRAWL_RULES")
    return RulesWatch(str(path), settings.getfloat("CRAWL_RULES_CHECK_INTERVAL")) if path else None


def _claimed_chunks(out) -> list[tuple[str, int, list[bytes]]]:
    """A SPILL or EVICT claim's reply, {host, id, count, entry..., host, ...}, as (host, chunk
    id, entries) each."""
    chunks, i = [], 0
    while i < len(out):
        host, chunk, count = out[i].decode(), int(out[i + 1]), int(out[i + 2])
        chunks.append((host, chunk, out[i + 3 : i + 3 + count]))
        i += 3 + count
    return chunks


def _landings(landed, now: int) -> list:
    """The landing arguments of POP and ACK: each landing is a lease id (its download
    ended now) or a pair (lease id, the time in ms it ended)."""
    args = []
    for landing in landed:
        lease, ended = (landing, now) if isinstance(landing, bytes | str) else landing
        args += [ended, lease]
    return args
