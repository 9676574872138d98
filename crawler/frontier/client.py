"""What one worker holds of the crawl's frontier, in one object: the URLs it offered and has
not sent yet, the leases it holds, the acknowledgements and landings it owes, and the calls
waiting out a Redis outage (its outbox). Every component of the worker that talks to the
frontier's queues goes through it: the scheduler (crawler/scheduler/scheduler.py, a Scrapy
adapter over it), the links pipeline (``offer_links``), the lease middleware (by way of the
scheduler's ``ack`` and ``give_back``).

Its clock is injected (``clock``: Twisted's IReactorTime, the reactor by default, a
``task.Clock`` in tests): every time it reads and every call it schedules goes through it,
and every frontier verb gets its ``now`` from it.

- **Offers** of one reactor turn are pushed together (``offer``: a page's 100 links in one
  PUSH call, PUSH_CHUNK entries a call); a URL this worker pushed before (added or seen) is
  not sent again (FRONTIER_SEEN_CACHE of them, the older half forgotten when full); with
  FRONTIER_ORDER importance a link sent before goes as a credit of importance only.
- **Leases** (``take``) come with the acknowledgements and landings owed, in the same
  round trip; an acknowledgement (``ack``) waits for the next take, or ACK_DELAY; a landing
  (``landed``) rides on the next take, and at the latest on one made when its host is due
  again less the lookahead (``on_landing_due``). A page's links are always sent before its
  acknowledgement. Leases held are renewed (``renew``) until acknowledged, given back, or
  held longer than FRONTIER_LEASE_MAX_HOLD.
- **The spill** (FRONTIER_HOST_WINDOW; ``spill``, crawler/frontier/spill.py) and **the
  hosts' addresses** (FRONTIER_ADDRESS_POLITENESS; ``addresses``, crawler/frontier/
  addresses.py): after a take, one round at a time runs off the reactor (``in_thread``), at
  once when the take came back short, else at most every SPILL_EVERY seconds: buffers
  written out, low windows refilled from disk, hosts' addresses looked up; a round that
  loaded URLs or recorded addresses says so (``on_added``: hosts may be due). The address
  each lease came with is kept (``address_of``: the resolver connects to it).
- **Outages**: a push or an acknowledgement that fails waits in the outbox, in order, and
  is delivered once Redis answers (crawler/frontier/outbox.py); landings, renewals and
  credits are not kept (landings ride on the next take, renewals come again, a credit is
  not worth keeping).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

import redis
from twisted.internet import reactor, threads

from crawler.exceptions import StoreRefused
from crawler.frontier import codec
from crawler.frontier.codec import SEP
from crawler.frontier.frontier import Entry
from crawler.frontier.hosts import key_host
from crawler.frontier.outbox import ACK, PUSH, Outbox
from crawler.frontier.words import ADDED, SEEN, put_stat

logger = logging.getLogger(__name__)

PUSH_CHUNK = 256  # entries a PUSH call takes (Redis runs a call of 256 links in some 5 ms)
ACK_DELAY = 0.25  # seconds an acknowledgement may wait for a take to carry it
SPILL_EVERY = 0.5  # seconds between two spill rounds after takes that leased all they asked for
RECORDED_MOST = 100_000  # hosts' addresses kept (address_of), the oldest forgotten first


def _nothing(*args) -> None:
    return None


def lookahead(settings) -> float:
    """Seconds ahead a host due is handed out already (FRONTIER_LOOKAHEAD): the rate limiter
    holds each request until its host is due; without the limiter nothing would, so none."""
    return settings.getfloat("FRONTIER_LOOKAHEAD") if settings.getbool("RATE_LIMITER_ENABLED") else 0.0


class FrontierClient:
    @classmethod
    def from_settings(
        cls, settings, frontier, stats, clock=None, spill=None, in_thread=None, addresses=None, **callbacks
    ) -> FrontierClient:
        """The client of ``frontier`` with the worker's settings (``callbacks``: on_added,
        on_landing_due, on_up, on_refused, on_store_refused)."""
        return cls(
            frontier,
            stats,
            clock,
            spill=spill,
            addresses=addresses,
            in_thread=in_thread,
            seen_cache=settings.getint("FRONTIER_SEEN_CACHE"),
            lease_max_hold=settings.getfloat("FRONTIER_LEASE_MAX_HOLD"),
            lookahead=lookahead(settings),
            **callbacks,
        )

    def __init__(
        self,
        frontier,
        stats,
        clock=None,
        *,
        seen_cache: int = 0,
        lease_max_hold: float = 900.0,
        lookahead: float = 0.0,
        on_added: Callable[[], None] = _nothing,
        on_landing_due: Callable[[], None] = _nothing,
        on_up: Callable[[], None] = _nothing,
        on_refused: Callable[[Exception], None] = _nothing,
        on_store_refused: Callable[[Exception], None] = _nothing,
        spill=None,
        addresses=None,
        in_thread=None,
    ):
        self.frontier = frontier
        self.spill = spill  # the crawl's Spill (FRONTIER_HOST_WINDOW), None without one
        self.addresses = addresses  # the crawl's HostAddresses (FRONTIER_ADDRESS_POLITENESS), None without
        self._recorded: dict[str, str] = {}  # host name -> the address its last lease came with
        self.in_thread = in_thread or threads.deferToThread  # how a spill round runs off the reactor
        self._moving = False  # a spill round is running
        self._moved_at = float("-inf")  # when the last one started
        self.stats = stats
        self.clock = clock if clock is not None else reactor
        self.seen_cache = seen_cache  # FRONTIER_SEEN_CACHE: URLs pushed before, not sent again
        self.lease_max_hold = lease_max_hold  # FRONTIER_LEASE_MAX_HOLD
        self.lookahead = lookahead  # seconds: a landing is due with the take that leases its host's next URL
        self.on_added = on_added  # a push added URLs: a host may be due now
        self.on_landing_due = on_landing_due  # a landing must reach the frontier now: take
        # the crawl's spill store is another than this worker's (checked at the first round
        # when Redis was away at start): the worker must stop
        self.on_store_refused = on_store_refused
        self.outbox = Outbox(frontier, stats, self.clock, on_up=on_up, on_refused=on_refused)
        self.held: dict[bytes, tuple[float, float]] = {}  # lease -> (when taken, its host's interval in s)
        self._pushes: list[Entry] = []  # offered this turn, not sent yet
        self._credits: list[tuple[str, float]] = []  # FRONTIER_ORDER importance: sent with the pushes
        self._known: dict[str, None] = {}  # URLs pushed and found added or seen (insertion order)
        self._acks: list[bytes] = []  # owed, riding on the next take
        self._landed: list[tuple[bytes, int]] = []  # (lease, ms its download ended), owed likewise
        self._push_call = None
        self._ack_call = None
        self._land_call = None
        self.land_at = 0.0  # when the next landing must reach the frontier (on_landing_due)

    def now(self) -> float:
        """The client's time, in seconds since the epoch."""
        return self.clock.seconds()

    def _now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    @property
    def down(self) -> bool:
        """Redis did not answer the last call (an outage the outbox waits out)."""
        return self.outbox.down_since is not None

    @property
    def pending(self) -> bool:
        """Offers not sent yet, or calls waiting in the outbox (or, sharded, for a server
        that is away)."""
        return bool(self._pushes or self.outbox or self.frontier.owes())

    def _inc(self, key: str, count: int = 1) -> None:
        self.stats.inc_value(key, count)

    # -- offers ----------------------------------------------------------------------------

    def offer(self, entries: list[Entry]) -> None:
        """Queue entries for the push sent at the end of this reactor turn (for the outbox
        while Redis is away)."""
        if self.outbox:
            for entry in entries:
                self.outbox.defer(PUSH, entry)
            return
        self._pushes.extend(entries)
        self._push_later()

    def offer_links(self, urls: list[str], depth: int, referer: str, cash: float = 0.0) -> None:
        """Offer a page's followed links: normalized http(s) URLs, each what the scheduler
        would push for a plain request of the spider's default callback at ``depth`` with
        ``referer``, without a Request built for each (a page's hundreds of links would cost
        most of a worker's time that way). ``cash``: the page's importance (FRONTIER_ORDER
        importance), shared equally among them; a link this worker pushed before goes as a
        credit of its share only."""
        valid = [url for url in urls if url.startswith(("http://", "https://"))]
        if len(valid) < len(urls):
            self._inc("frontier/invalid", len(urls) - len(valid))
        share = cash / len(valid) if valid else 0.0
        entries, credits = [], []
        known = self._known if share > 0 and self.frontier.ranked else ()
        for url in valid:
            if url in known:  # sent before: only its share of importance goes (credit)
                credits.append((url, share))
                continue
            entries.append(Entry(url=url, payload=codec.encode_link(url, depth, referer), depth=depth, cash=share))
        self.offer(entries)
        if credits:
            self._inc("frontier/seen", len(credits))
            self._credits += credits
            self._push_later()

    def _push_later(self) -> None:
        if self._push_call is None or not self._push_call.active():
            self._push_call = self.clock.callLater(0, self.flush_pushes, False)

    def flush_pushes(self, everything: bool = True) -> None:
        """Send the offers waiting, PUSH_CHUNK entries a call; unless ``everything``, one
        call now and the rest in the next reactor turns, so that a page of thousands of
        links does not hold up the reactor (and the hosts due) for tens of ms. The turn's
        credits go in one call first; while Redis is away they are dropped."""
        if self._credits:
            credits, self._credits = self._credits, []
            if not self.outbox:
                try:
                    self.frontier.credit(credits)
                except redis.RedisError as exc:
                    self.outbox.redis_down(exc)
        while self._pushes:
            entries, self._pushes = self._pushes[:PUSH_CHUNK], self._pushes[PUSH_CHUNK:]
            self._push(entries)
            if self._pushes and not everything:
                self._push_later()
                return

    def _push(self, entries: list[Entry]) -> None:
        """Push entries in one call. URLs pushed before are seen for good (the URL-seen
        filter never forgets): counted as seen, not sent again (a site's menu links)."""
        known = self._known
        fresh = [e for e in entries if e.url not in known or e.dont_filter or e.follow_up]
        if len(fresh) < len(entries):
            self._inc("frontier/seen", len(entries) - len(fresh))
        if not fresh:
            return
        if self.outbox:
            for entry in fresh:
                self.outbox.defer(PUSH, entry)
            return
        try:
            statuses = self.frontier.put(fresh, now=self._now_ms())
        except redis.RedisError as exc:  # pushes are idempotent: all of them again later
            self.outbox.redis_down(exc)
            for entry in fresh:
                self.outbox.defer(PUSH, entry)
            return
        for entry, status in zip(fresh, statuses, strict=True):
            self._inc(put_stat(status))
            if status in (ADDED, SEEN) and not entry.dont_filter and self.seen_cache > 0:
                known[entry.url] = None
        if len(known) > self.seen_cache:  # forget the older half
            for url in list(itertools.islice(known, len(known) // 2)):
                del known[url]
        if ADDED in statuses:
            self.on_added()

    # -- leases ----------------------------------------------------------------------------

    def take(self, n: int, lookahead_ms: int = 0, urgent_only: bool = False):
        """Lease up to ``n`` URLs (Frontier.get), carrying the acknowledgements and landings
        owed (not when ``urgent_only``: those wait for a take that may lease their hosts'
        next URLs). (leases, next due in ms or None); None while Redis does not answer
        (what was owed is owed still; the outbox says when to try again)."""
        if urgent_only:
            acks, landed = [], []
        else:
            # the offers go first (all of them when acks ride along: a page's links before its ack)
            self.flush_pushes(everything=bool(self._acks))
            acks, self._acks = self._acks, []
            landed, self._landed = self._landed, []
        now = self.now()
        try:
            leases, next_due = self.frontier.get(
                n, now=int(now * 1000), ack=acks, landed=landed, lookahead=lookahead_ms, urgent_only=urgent_only
            )
        except redis.RedisError as exc:
            self._acks[:0] = acks  # acks and landings are idempotent: sent again later
            self._landed[:0] = landed
            self.outbox.redis_down(exc)
            return None
        if self.outbox:
            self.outbox.retry_soon()
        elif self.down:
            self.outbox.redis_up()
        if self.frontier.last_acked:
            self._inc("frontier/acked", self.frontier.last_acked)
        for lease in leases:
            self.held[lease.id] = (now, lease.interval / 1000)
        if leases:
            self._inc("frontier/leased", len(leases))
        for lease in leases:
            if lease.address:
                self._record(lease)
        if (self.spill is not None or self.addresses is not None) and not urgent_only:
            self._move(now, short=len(leases) < n)
        return leases, next_due

    def _record(self, lease) -> None:
        name = key_host(lease.id.split(SEP.encode(), 3)[2].decode())
        if len(self._recorded) >= RECORDED_MOST and name not in self._recorded:
            del self._recorded[next(iter(self._recorded))]  # (the oldest)
        self._recorded[name] = lease.address

    def address_of(self, name: str) -> str | None:
        """The address the frontier recorded for host ``name`` when it last handed this
        worker one of its URLs (FRONTIER_ADDRESS_POLITENESS), else None."""
        return self._recorded.get(name)

    def _move(self, now: float, short: bool) -> None:
        """A round off the reactor, unless one is running (see the module's docstring)."""
        if self._moving or (not short and now - self._moved_at < SPILL_EVERY):
            return
        self._moving, self._moved_at = True, now
        d = self.in_thread(self.upkeep, self._now_ms())
        d.addCallbacks(self._moved, self._move_failed)

    def upkeep(self, now: int) -> bool:
        """The spill's round and the addresses' (in a thread): whether hosts may be due."""
        due = False
        if self.spill is not None:
            due = self.spill.round(now)[1] > 0  # URLs loaded into windows
        if self.addresses is not None:
            due = self.addresses.round(now)[0] > 0 or due  # hosts given their address
        return due

    def _moved(self, due: bool) -> None:
        self._moving = False
        if due:
            self.on_added()

    def _move_failed(self, failure) -> None:
        self._moving = False
        if failure.check(StoreRefused):
            self.on_store_refused(failure.value)
            return
        self._inc("frontier/spill_errors")
        logger.warning("Spill or address round failed (tried again after the next take): %s", failure.getErrorMessage())

    def forget(self, lease) -> None:
        """The lease is no longer this worker's to renew or give back (taken over by a
        follow-up, or done with)."""
        self.held.pop(lease, None)

    def ack(self, lease) -> None:
        """The lease's page is handled: release it for good (with the next take, or
        ACK_DELAY), after every offer made before it."""
        self.forget(lease)
        self.flush_pushes()  # the page's links before its ack
        if self.outbox:
            self.outbox.defer(ACK, lease)
            return
        self._acks.append(lease)
        if self._ack_call is None or not self._ack_call.active():
            self._ack_call = self.clock.callLater(ACK_DELAY, self.flush_acks)

    def give_back(self, lease) -> None:
        """The lease's page could not be stored: its URL goes back to its queue now (handed
        out again at its host's next turn), not at the lease's expiry."""
        self.forget(lease)
        self._inc("frontier/lease/given_back")
        try:
            self.frontier.give_back([lease])
        except redis.RedisError as exc:  # then it expires and comes back all the same
            self.outbox.redis_down(exc)

    def landed(self, lease, answered: bool) -> None:
        """The lease's download ended now (``answered``: with an HTTP answer that is no
        failure): its host is due again its interval after now (and its address class its
        own, FRONTIER_ADDRESS_POLITENESS), which the frontier must know by then, less the
        lookahead, so that the take that carries the landing can lease the next URL too;
        any take before carries it."""
        if lease not in self.held:
            return
        ended = self.now()
        self._landed.append((b"+" + lease if answered else lease, int(ended * 1000)))
        due_in = self.held[lease][1]
        if self.addresses is not None:
            due_in = min(due_in, max(self.frontier.address_interval_ms, 0) / 1000)
        self._land_by(ended + due_in - self.lookahead)

    @property
    def owes_landings(self) -> bool:
        return bool(self._landed)

    def _land_by(self, at: float) -> None:
        call = self._land_call
        if call is not None and call.active():
            if self.land_at <= at:
                return
            call.cancel()
        self.land_at = at
        self._land_call = self.clock.callLater(max(at - self.now(), 0), self.on_landing_due)

    def flush_acks(self) -> None:
        """Send what is owed now, in one call (after the offers waiting)."""
        self.flush_pushes()
        acks, self._acks = self._acks, []
        landed, self._landed = self._landed, []
        if not acks and not landed:
            return
        if self.outbox:  # the acks wait their turn; the landings ride on the next take
            for lease in acks:
                self.outbox.defer(ACK, lease)
            self._landed[:0] = landed
            return
        try:
            self._inc("frontier/acked", self.frontier.ack(*acks, landed=landed, now=self._now_ms()))
        except redis.RedisError as exc:  # (landings are idempotent: they ride on the next take)
            self.outbox.redis_down(exc)
            self._landed[:0] = landed
            for lease in acks:
                self.outbox.defer(ACK, lease)

    def renew(self) -> list[bytes]:
        """Renew the leases held; those held longer than FRONTIER_LEASE_MAX_HOLD are let go
        (they expire and are fetched again): returned."""
        if not self.held and not self.frontier.owes():
            return []
        cutoff = self.now() - self.lease_max_hold
        gone = [lease for lease, (since, _) in self.held.items() if since < cutoff]
        for lease in gone:
            self.forget(lease)
            self._inc("frontier/lease/given_up")
        if self.held or self.frontier.owes():  # (sharded: with the leases whose acks wait)
            try:
                self.frontier.renew(list(self.held), now=self._now_ms())
            except redis.RedisError as exc:  # the next renewal comes well before expiry
                self.outbox.redis_down(exc)
        return gone

    # -- the end ---------------------------------------------------------------------------

    def close(self) -> None:
        """Deliver what is owed and waiting (once; what Redis does not take now is lost, and
        its leases expire), and give back the leases still held: their pages were not
        handled, and are fetched again at their hosts' next turns."""
        self.outbox.stop()
        for call in (self._ack_call, self._push_call, self._land_call):
            if call is not None and call.active():
                call.cancel()
        self.flush_acks()
        if self.outbox and not self.outbox.drain():
            logger.error(
                "Redis unreachable at close: %d pushes/acks not delivered; their pages' leases "
                "expire and the pages are fetched again",
                len(self.outbox),
            )
        if self.frontier.owes():
            try:
                # (a server back within its wait since its last failure is tried all the same)
                self.frontier.deliver(self._now_ms(), at_once=True)
                self.frontier.ack(now=self._now_ms())  # (acks that waited for those pushes)
            except redis.RedisError:
                pass
        if self.frontier.owes():
            logger.error(
                "A Redis server unreachable at close: %d pushes/acks owed to it not delivered; their "
                "pages' leases expire and the pages are fetched again",
                self.frontier.owes(),
            )
        unfinished = list(self.held)
        if unfinished:
            try:
                self.frontier.give_back(unfinished)
                logger.info("Gave back %d leased URLs not handled", len(unfinished))
            except redis.RedisError as exc:
                logger.warning("Could not give back %d leases (they expire instead): %s", len(unfinished), exc)
        self.held.clear()
