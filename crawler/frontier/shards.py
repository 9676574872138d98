"""A frontier over several Redis servers (REDIS_URLS): each host lives on one of them.

Hosts are spread by consistent hashing (``HashRing``: each server owns many points of a
ring, a host belongs to the first point after its hash), so adding a server moves about
1/N of the hosts and no host moves between the servers that stay. Everything a host's
politeness needs (its back queue, due time, leases, back-off, limiter, robots.txt) is on
its server, and every script touches one server's keys: politeness holds exactly, as on
one Redis, because all workers agree where a host lives. URL-seen is split the same
way: a URL is tested and recorded on its host's server.

``ShardedFrontier`` has the verbs of ``Frontier``: a put goes to each URL's host's shard
(a redirect follow-up whose lease is on another shard acknowledges it there after the
push), a get asks the shards in turn for what is due, carrying each shard's
acknowledgements and landings, and the numbers are summed over the shards. Content seen
is spread by the same ring (crawler/pipelines/contentseen.py): each of its records (a body
digest, an LSH bucket, a page's sketch) lives on the shard its name hashes to
(``content_shard``), its calls pass the same down-shard guard (``on_shard``).
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import re
import time
from dataclasses import dataclass, replace
from functools import partial
from urllib.parse import urlsplit

import redis

from crawler.frontier.frontier import Entry, Frontier, Lease
from crawler.frontier.keys import SEP, SHARD
from crawler.frontier.shard_outboxes import ShardOutboxes
from crawler.frontier.steering import budget_spent
from crawler.frontier.words import DEFERRED, FINISHED, PAUSED, RUNNING, WAITING
from crawler.urls import InvalidURL

logger = logging.getLogger(__name__)

POINTS = 160  # ring points per server: the hosts' spread is within a few percent of even
DOWN_WAIT_MIN, DOWN_WAIT_MAX = 0.5, 8.0  # seconds before a server that was down is tried again (doubling)
# a server whose call timed out (it hangs) waits this many times the call's time, up to HUNG_WAIT_MAX seconds: the worker, held for the while at
# each try, spends at most about a tenth of its time on a server that hangs
HUNG_WAIT_FACTOR, HUNG_WAIT_MAX = 10, 60.0
# the errors of a server that answers but takes no write (maxmemory reached, a replica after a
# failover, a failed snapshot, too few replicas) or no call for now (busy running a script),
# at the start of the message or, raised inside a script, after its line ("Error running
# script ...: @user_script:832: -OOM ..."): waited out as a server away
REFUSING_WRITES = re.compile(r"(?:^|: -)(?:OOM|READONLY|MISCONF|NOREPLICAS|MASTERDOWN|BUSY) ")
# redis-py's own classes for some of them, whose messages have lost their code (Redis 7's
# OOM inside a script: "command not allowed when used memory > 'maxmemory'. script: ...")
REFUSING_CLASSES = (
    redis.exceptions.ReadOnlyError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.MasterDownError,
)


# what a server away or hanging raises (through ``ShardedFrontier._on``, one that refuses
# writes too): a round over the shards passes it over and goes on with the others
AWAY = (redis.ConnectionError, redis.TimeoutError)


def refuses_writes(exc: redis.ResponseError) -> bool:
    """Whether ``exc`` says the server takes no write now (REFUSING_CLASSES,
    REFUSING_WRITES), not that the call was wrong."""
    return isinstance(exc, REFUSING_CLASSES) or REFUSING_WRITES.search(str(exc)) is not None


def _point(text: str) -> int:
    return int.from_bytes(hashlib.md5(text.encode()).digest()[:8], "big")


class HashRing:
    """Consistent hashing of keys onto ``names`` (pure): ``index(key)`` is the position in
    ``names`` of the server that owns ``key``."""

    def __init__(self, names: list[str], points: int = POINTS):
        if not names:
            raise ValueError("a hash ring needs at least one server")
        ring = sorted((_point(f"{name}#{i}"), n) for n, name in enumerate(names) for i in range(points))
        self._points = [p for p, _ in ring]
        self._owners = [n for _, n in ring]

    def index(self, key: str) -> int:
        at = bisect.bisect(self._points, _point(key)) % len(self._points)
        return self._owners[at]


def server_name(url: str) -> str:
    """A server's name on the ring: its URL without credentials (a new password does not
    move hosts)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port or 6379}{parts.path or '/0'}"


def _lease_host(lease) -> str:
    """The host of a lease id (``seq SEP attempt SEP host SEP payload``; a landing may
    carry a ``+`` first)."""
    text = lease.decode(errors="replace") if isinstance(lease, bytes) else str(lease)
    return text.lstrip("+").split(SEP, 3)[2]


@dataclass
class ShardedPrepared:
    statuses: list
    parts: list  # (shard, the indexes of its entries, its Prepared or None if away, its entries)
    moved: list  # follow-ups' leases held on another shard than their URL


class ShardedFrontier:
    def __init__(self, shards: list[Frontier], names: list[str]):
        self.shards = shards
        self.ring = HashRing(names)
        first = shards[0]
        # what belongs to the crawl as a whole, and the settings every shard shares
        self.redis, self.keys = first.redis, first.keys
        self.intervals, self.rules = first.intervals, first.rules
        self.max_in_flight, self.lease_ms = first.max_in_flight, first.lease_ms
        self.give_up_ms, self.ranked = first.give_up_ms, first.ranked
        # FRONTIER_ADDRESS_POLITENESS: each shard keeps its classes' budgets
        self.by_address, self.address_interval_ms = first.by_address, first.address_interval_ms
        # the page budget is the crawl's, not a shard's: get() spends it over them all
        self.max_pages = first.max_pages
        for shard in shards:
            shard.max_pages = 0
        self.last_acked = 0
        self._turn = 0
        # one outbox a server (shard_outboxes.py): what a server that is away is owed; and,
        # while it is down, when to try it again and the wait
        self.outboxes = ShardOutboxes(len(shards))
        self._down: dict[int, tuple[float, float]] = {}
        self._epochs: dict[int, int | None] = {}  # each server's epoch as last read

    def current_rules(self):
        """The crawl rules as they stand (the same on every shard)."""
        return self.shards[0].current_rules()

    @property
    def scope(self):
        return self.shards[0].scope

    def current_scope(self):
        return self.shards[0].current_scope()

    def use_scope(self, scope) -> None:
        for shard in self.shards:
            shard.use_scope(scope)

    @classmethod
    def from_settings(cls, settings, clients: list, urls: list[str]) -> ShardedFrontier:
        from scrapy.utils.misc import load_object

        kind = load_object(settings.get("FRONTIER_CLASS"))
        shards = [kind.from_settings(settings, client, shares=len(clients)) for client in clients]
        return cls(shards, [server_name(u) for u in urls])

    @classmethod
    def in_cluster(cls, settings, client, count: int) -> ShardedFrontier:
        """``count`` shards of the crawl on one Redis Cluster: each its own hash tag
        (``{NAME#k}``), so that the cluster spreads them over its masters."""
        from scrapy.utils.misc import load_object

        kind = load_object(settings.get("FRONTIER_CLASS"))
        name = settings.get("CRAWL_NAME")
        shards = [kind.from_settings(settings, client, shard=k, shares=count) for k in range(count)]
        return cls(shards, [f"{name}{SHARD}{k}" for k in range(count)])

    # -- where things live ----------------------------------------------------------

    def shard_for(self, host: str) -> Frontier:
        return self.shards[self.ring.index(host)]

    def _by_shard(self, leases) -> dict[int, list]:
        out: dict[int, list] = {}
        for lease in leases:
            landing = lease if isinstance(lease, bytes | str) else lease[0]
            out.setdefault(self.ring.index(_lease_host(landing)), []).append(lease)
        return out

    def politeness_key(self, url: str) -> str:
        return self.shards[0].politeness_key(url)

    def level(self, priority: int) -> int:
        return self.shards[0].level(priority)

    # -- admit ----------------------------------------------------------------------

    def put(self, entries: list[Entry], now: int | None = None) -> list[str]:
        return self.send(self.prepare(entries), now)

    def prepare(self, entries: list[Entry]) -> ShardedPrepared:
        groups: dict[int, list[int]] = {}
        moved = []
        entries = list(entries)
        for i, e in enumerate(entries):
            try:
                shard = self.ring.index(self.politeness_key(e.url))
            except InvalidURL:
                shard = 0  # refused there, as invalid
            if e.replaces_lease and self.ring.index(_lease_host(e.replaces_lease)) != shard:
                moved.append(e.replaces_lease)
                entries[i] = replace(e, replaces_lease=b"")
            groups.setdefault(shard, []).append(i)
        parts = []
        for s, idx in groups.items():
            part = [entries[i] for i in idx]
            try:  # (a shard's first prepare reads its URL-seen layout from its server)
                prepared = self._on(s, lambda s=s, part=part: self.shards[s].prepare(part), reaches=False)
            except AWAY:
                prepared = None  # (its server is away: the part waits in the outbox, as sent)
            parts.append((s, idx, prepared, part))
        return ShardedPrepared([None] * len(entries), parts, moved)

    def send(self, prepared: ShardedPrepared, now: int | None = None) -> list[str]:
        """Each server's part in one call; a server that is away (or still owed pushes) keeps
        its part in its outbox, each of its entries ``deferred``, and the others' go on."""
        self.deliver(now)
        for s, indexes, part, entries in prepared.parts:
            if part is None or s in self.outboxes.pushes:  # (away, or after what it is owed already)
                statuses = self._owe_pushes(s, entries)
            else:
                try:
                    statuses = self._on(s, lambda s=s, part=part: self.shards[s].send(part, now))
                except AWAY:
                    statuses = self._owe_pushes(s, entries)
            for i, status in zip(indexes, statuses, strict=True):
                prepared.statuses[i] = status
        if prepared.moved:  # a follow-up's lease on another shard ends once the follow-up is queued
            self.ack(*prepared.moved, now=now)
        return prepared.statuses

    def _owe_pushes(self, s: int, entries: list[Entry]) -> list[str]:
        self.outboxes.owe_pushes(s, entries)
        return [DEFERRED] * len(entries)

    def deliver(self, now: int | None = None, at_once: bool = False) -> None:
        """Deliver the pushes owed to each server that is due for another try (``at_once``:
        to each, those waiting out a failure too: a worker's last try as it closes), one call
        a server (its acknowledgements waiting for them go with the next call that acks)."""
        if at_once:
            self._down.clear()
        for s in list(self.outboxes.pushes):
            entries = self.outboxes.pushes[s]
            try:
                self._on(s, lambda s=s, entries=entries: self.shards[s].put(entries, now))
            except AWAY:
                continue
            self.outboxes.delivered_pushes(s)

    def _owed_with(self, acks, landed, now: int | None) -> tuple[dict[int, list], dict[int, list]]:
        """Each server's acknowledgements and landings to send now: these, after what it was
        owed (an ack after the pushes owed when it was made: the pushes due go first)."""
        self.deliver(now)
        by_acks, by_lands = self._by_shard(self.outboxes.acks_to_send(acks)), self._by_shard(landed)
        for s, (owed_acks, owed_lands) in self.outboxes.take_owed().items():
            by_acks.setdefault(s, [])[:0] = owed_acks
            by_lands.setdefault(s, [])[:0] = owed_lands
        return by_acks, by_lands

    def owes(self) -> int:
        """Pushes and acknowledgements the servers that are away are owed."""
        return self.outboxes.count()

    def promote(self, entries: list[Entry], now: int | None = None) -> list[str]:
        out: list[str | None] = [None] * len(entries)
        groups: dict[int, list[int]] = {}
        for i, e in enumerate(entries):
            groups.setdefault(self.ring.index(self.politeness_key(e.url)), []).append(i)
        for s, indexes in groups.items():
            part = [entries[i] for i in indexes]
            statuses = self._on(s, lambda s=s, part=part: self.shards[s].promote(part, now))
            for i, status in zip(indexes, statuses, strict=True):
                out[i] = status
        return out  # type: ignore[return-value]

    def credit(self, credits: list[tuple[str, float]]) -> int:
        groups: dict[int, list] = {}
        for url, cash in credits:
            try:
                groups.setdefault(self.ring.index(self.politeness_key(url)), []).append((url, cash))
            except InvalidURL:
                continue
        return sum(self._on(s, lambda s=s, part=part: self.shards[s].credit(part)) for s, part in groups.items())

    # -- hand out -------------------------------------------------------------------

    def get(self, n: int = 1, now: int | None = None, ack=(), landed=(), lookahead: int = 0, urgent_only: bool = False):
        """Lease up to ``n`` URLs, asking the shards in turn (a different one first each
        call); each shard's acknowledgements and landings ride on its call. The next due
        time, when fewer than ``n`` were handed out, is the earliest over the shards.
        A shard that is down is passed over (what it was sent is kept for its next call),
        so the crawl goes on with the others' hosts; when all are down the error is raised."""
        if self.max_pages:  # (read before the pops: workers popping together may pass it by a pop each)
            budget = self.budget()
            n = max(min(n, self.max_pages - budget["done"] - budget["leased"]), 0)
        acks, lands = self._owed_with(ack, landed, now)
        leases: list[Lease] = []
        dues = []
        self.last_acked = 0
        count = len(self.shards)
        order = [(self._turn + i) % count for i in range(count)]
        self._turn = (self._turn + 1) % count
        failed: list[Exception] = []
        for s in order:
            want = n - len(leases)
            shard = self.shards[s]
            a, la = acks.get(s, []), lands.get(s, [])
            try:
                if want <= 0:
                    if a or la:
                        self.last_acked += self._on(s, lambda: shard.ack(*a, landed=la, now=now))  # noqa: B023
                    continue
                get = partial(shard.get, want, now, ack=a, landed=la, lookahead=lookahead, urgent_only=urgent_only)
                got, due = self._on(s, get)
            except redis.RedisError as exc:  # (the leases of the servers asked before are kept)
                self.outboxes.owe(s, a, la)
                failed.append(exc)
                continue
            self.last_acked += shard.last_acked
            leases += got
            if due is not None:
                dues.append(due)
        if len(failed) == count:
            raise failed[0]
        return leases, (min(dues) if dues and len(leases) < n else None)

    def _went_down(self, s: int, exc: Exception, took: float = 0.0) -> None:
        """Server ``s`` failed a call (``exc``; ``took``: seconds it hung before it timed
        out): it is passed over until its wait is over (DOWN_WAIT_MIN doubling to
        DOWN_WAIT_MAX, or HUNG_WAIT_FACTOR times ``took``)."""
        before = self._down.get(s)
        wait = min(2 * before[1], DOWN_WAIT_MAX) if before else DOWN_WAIT_MIN
        wait = max(wait, min(HUNG_WAIT_FACTOR * took, HUNG_WAIT_MAX))
        first = before is None
        self._down[s] = (time.monotonic() + wait, wait)
        if first:
            logger.warning(
                "Redis server %d of %d unreachable or refusing writes (%s: %s): its hosts wait, the others' go on",
                s + 1,
                len(self.shards),
                type(exc).__name__,
                exc,
            )

    def _came_back(self, s: int) -> None:
        if self._down.pop(s, None) is not None:  # (calls come from several threads: content seen)
            logger.info("Redis server %d of %d reachable again", s + 1, len(self.shards))

    @staticmethod
    def _each(calls) -> list:
        """Run each shard's call (functions of no argument): one that fails does not keep
        the others from theirs; its error is raised after them all."""
        results, error = [], None
        for call in calls:
            try:
                results.append(call())
            except redis.RedisError as exc:
                error = error or exc
        if error is not None:
            raise error
        return results

    def ack(self, *lease_ids, landed=(), now: int | None = None) -> int:
        """Acknowledge (after the pushes owed when they were made: shard_outboxes.py) and land;
        what a server that is away cannot take waits for its next call. The number acked now."""
        acks, lands = self._owed_with(lease_ids, landed, now)
        acked, error = 0, None
        for s in set(acks) | set(lands):
            a, la = acks.get(s, []), lands.get(s, [])
            try:
                acked += self._on(s, lambda s=s, a=a, la=la: self.shards[s].ack(*a, landed=la, now=now))
            except redis.RedisError as exc:  # (kept for its next call, whatever the error)
                self.outboxes.owe(s, a, la)
                if not isinstance(exc, AWAY):
                    error = error or exc
        if error is not None:  # (raised once the other servers had theirs: an error not of an outage)
            raise error
        return acked

    def renew(self, lease_ids, now: int | None = None) -> None:
        """Renew these leases, and those whose acknowledgements wait for pushes owed to a
        server that is away (their pages are handled: they must not expire meanwhile)."""
        waiting = [lease for _, ids in self.outboxes.held_acks for lease in ids]
        shards = self._by_shard([*lease_ids, *waiting]).items()
        self._each([lambda s=s, ls=ls: self._on(s, lambda: self.shards[s].renew(ls, now)) for s, ls in shards])

    def give_back(self, lease_ids) -> None:
        shards = self._by_shard(lease_ids).items()
        self._each([lambda s=s, ls=ls: self._on(s, lambda: self.shards[s].give_back(ls)) for s, ls in shards])

    def epoch(self, create: bool = False):
        """Each shard's epoch: a shard that lost its keys changes the whole (None when
        any has none). A server that is away counts with its epoch as last read (it is read
        again when it answers: one that lost its keys is seen then), so that the renewals of
        the others' leases go on; one never read raises."""
        epochs = []
        for s, shard in enumerate(self.shards):
            try:
                self._epochs[s] = self._on(s, lambda shard=shard: shard.epoch(create))
            except AWAY:
                if s not in self._epochs:
                    raise
            epochs.append(self._epochs[s])
        return None if None in epochs else tuple(epochs)

    # -- steering: the crawl on every shard, a host on its own ---------------------------

    def pause(self, host: str | None = None, now: int | None = None) -> bool:
        return self._steer("pause", host, now)

    def resume(self, host: str | None = None, now: int | None = None) -> bool:
        return self._steer("resume", host, now)

    def _steer(self, verb: str, host: str | None, now: int | None) -> bool:
        """``verb`` on the host's shard, or (no host) on every shard: True if any changed."""
        if host:
            return self._on_host(host, verb, now)
        return any(self._each([lambda shard=shard: getattr(shard, verb)(None, now) for shard in self.shards]))

    def drop(self, host: str, now: int | None = None) -> bool:
        return self._on_host(host, "drop", now)

    def paused(self) -> dict:
        parts = self._every("paused")
        crawl = [p["crawl"] for p in parts if p["crawl"]]
        return {
            "crawl": min(crawl) if crawl else None,
            "hosts": {h: t for p in parts for h, t in p["hosts"].items()},
            "dropped": {h: v for p in parts for h, v in p["dropped"].items()},
        }

    def budget(self) -> dict:
        """Summed over the shards that answer (one down spends nothing meanwhile)."""
        parts = []
        for s, shard in enumerate(self.shards):
            try:
                parts.append(self._on(s, shard.budget))
            except AWAY:
                continue
        done, leased = sum(p["done"] for p in parts), sum(p["leased"] for p in parts)
        return {
            "max": self.max_pages,
            "done": done,
            "leased": leased,
            "spent": budget_spent(self.max_pages, done, leased),
        }

    # -- politeness: the host's shard -------------------------------------------------

    def _on(self, s: int, call, reaches: bool = True):
        """``call()`` on shard ``s``, unless it is down and not yet due for another try
        (then ConnectionError at once: a refused server costs seconds of retries).
        ``reaches=False``: a call that may not reach the server (a prepare, once its URL-seen
        layout is read), whose success does not say the server is back."""
        down = self._down.get(s)
        if down is not None and time.monotonic() < down[0]:
            raise redis.ConnectionError(f"Redis server {s + 1} of {len(self.shards)} is down")
        started = time.monotonic()
        try:
            result = call()
        except AWAY as exc:
            # (a call that timed out: the server hangs, and held the worker that long)
            hung = isinstance(exc, redis.TimeoutError)
            self._went_down(s, exc, time.monotonic() - started if hung else 0.0)
            raise
        except redis.ResponseError as exc:
            if not refuses_writes(exc):
                raise
            # (a server that answers but takes no write: waited out as one away, its part
            # owed, the others' going on)
            self._went_down(s, exc)
            raise redis.ConnectionError(f"Redis server {s + 1} of {len(self.shards)} refuses writes: {exc}") from exc
        if reaches:
            self._came_back(s)
        return result

    def _every(self, verb: str, *args) -> list:
        """``verb(*args)`` of every shard, through the down-shard guard (a server known to be
        down or hanging raises at once, not after its timeout); the first error raised."""
        return [self._on(s, lambda shard=shard: getattr(shard, verb)(*args)) for s, shard in enumerate(self.shards)]

    def on_shard(self, s: int, call):
        """``call()`` on shard ``s`` through the down-shard guard (``_on``): for a
        component that spreads its own records over the shards (content seen)."""
        return self._on(s, call)

    def content_shard(self, name: str) -> int:
        """The shard holding the content-seen record named ``name`` (a body digest, an LSH
        bucket, a page number: contentseen.py names them), by the hosts' ring."""
        return self.ring.index(name)

    def _on_host(self, host: str, verb: str, *args, **kwargs):
        s = self.ring.index(host)
        return self._on(s, lambda: getattr(self.shards[s], verb)(host, *args, **kwargs))

    def slot(self, host: str, *args, **kwargs) -> int:
        return self._on_host(host, "slot", *args, **kwargs)

    def end(self, host: str, *args, **kwargs) -> None:
        self._on_host(host, "end", *args, **kwargs)

    def blocked_until(self, host: str) -> int:
        return self._on_host(host, "blocked_until")

    def fail(self, host: str, *args, **kwargs):
        return self._on_host(host, "fail", *args, **kwargs)

    def block_until(self, host: str, **kwargs) -> float:
        return self._on_host(host, "block_until", **kwargs)

    def interval_override(self, host: str) -> float | None:
        return self.shards[0].interval_override(host)  # (the same rules on every shard)

    def set_delay(self, host: str, seconds: float | None, client=None) -> None:
        self._on_host(host, "set_delay", seconds, client)

    # -- numbers: summed over the shards (the oldest lease and the busiest hosts: over all) --

    def stats(self) -> dict:
        parts = self._every("stats")
        out: dict = {}
        for name, value in parts[0].items():
            values = [p[name] for p in parts]
            if name == "oldest_lease_age":
                ages = [v for v in values if v is not None]
                out[name] = max(ages) if ages else None
            elif name in ("lease_seconds", "paused"):  # (a setting; a pause is on every shard)
                out[name] = value
            elif isinstance(value, int):
                out[name] = sum(values)
            elif name == "front_by_level":
                out[name] = [sum(level) for level in zip(*values, strict=True)]
            else:  # the URL-seen reports
                out[name] = {
                    "generations": sum(v["generations"] for v in values),
                    "shard_generations": [v["generations"] for v in values],
                    "urls": sum(v["urls"] for v in values),
                    "bytes": sum(v["bytes"] for v in values),
                    "fill": [f for v in values for f in v["fill"]],
                    "false_positive_rate": max(v["false_positive_rate"] for v in values),
                    "kind": " and ".join(sorted({v["kind"] for v in values})),
                }
        out["shards"] = len(self.shards)
        return out

    def outlook(self, max_wait: float, now: int | None = None) -> dict:
        parts = self._every("outlook", max_wait, now)
        states = {p["state"] for p in parts}
        dues = [p["next_due"] for p in parts if p["next_due"] is not None]
        leased = sum(p["leased"] for p in parts)
        spent = self.budget()["spent"] if self.max_pages else False
        if spent and not leased:
            state = FINISHED
        else:
            state = next((s for s in (PAUSED, RUNNING, WAITING) if s in states), FINISHED)
        paused = [p["paused_at"] for p in parts if p["paused_at"]]
        return {
            "state": state,
            "queued": sum(p["queued"] for p in parts),
            "leased": leased,
            "next_due": min(dues) if dues else None,
            "budget_spent": spent,
            "max_pages": self.max_pages,
            "paused_at": min(paused) if paused else None,
        }

    def deferred(self, max_wait: float = 0.0, now: int | None = None, limit: int = 10_000) -> dict:
        out: dict[str, dict] = {}
        for part in self._every("deferred", max_wait, now, limit):
            for reason, r in part.items():
                mine = out.setdefault(reason, {"hosts": 0, "urls": 0, "due": r["due"], "examples": []})
                mine["hosts"] += r["hosts"]
                mine["urls"] += r["urls"]
                mine["due"] = None if r["due"] is None else min(mine["due"], r["due"])
                mine["examples"] = (mine["examples"] + r["examples"])[:3]
        return out

    def busiest(self, n: int = 10, limit: int = 10_000, now: int | None = None) -> dict:
        parts = self._every("busiest", n, limit, now)
        hosts = sorted((h for p in parts for h in p["hosts"]), key=lambda h: (-h["queued"], h["host"]))
        return {
            "hosts": hosts[:n],
            "looked_at": sum(p["looked_at"] for p in parts),
            "complete": all(p["complete"] for p in parts),
        }

    def busiest_addresses(self, n: int = 10, limit: int = 10_000) -> dict:
        # (each shard keeps its own budget for a class: its figures are each shard's, side by side)
        parts = self._every("busiest_addresses", n, limit)
        classes = sorted((c for p in parts for c in p["classes"]), key=lambda c: (-c["queued"], c["class"]))
        return {
            "classes": classes[:n],
            "looked_at": sum(p["looked_at"] for p in parts),
            "complete": all(p["complete"] for p in parts),
        }

    def slowed(self, limit: int = 5) -> list[tuple[str, float]]:
        hosts = [h for part in self._every("slowed", limit) for h in part]
        return sorted(hosts, key=lambda hf: -hf[1])[:limit]

    def clear(self) -> int:
        return sum(shard.clear() for shard in self.shards)
