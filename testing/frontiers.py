"""The frontier seen from a test: ``RecordingFrontier`` (a worker's Frontier logging each
hand-out, ``-s FRONTIER_CLASS=testing.frontiers.RecordingFrontier -s E2E_POP_LOG=FILE``),
its log read back, and frontiers drained by one or several workers.

``RecordingFrontier`` (for the workers, ``-s FRONTIER_CLASS=testing.frontiers.RecordingFrontier
-s E2E_POP_LOG=FILE``) is the crawl's own Frontier that also appends every hand-out to
FILE as a JSON line ``{"now": ms, "urls": [...], "due": [ms, ...]}``: ``now`` is the clock
value the pop script ran with, and each URL's ``due`` the time its request may leave (later
than ``now`` for a host handed out within FRONTIER_LOOKAHEAD of its due time), so a test
can check the frontier's politeness exactly, apart from the network and scheduling latency
between that time and the request reaching the site."""

from __future__ import annotations

import json
import threading

from crawler.frontier import codec
from crawler.frontier.frontier import Frontier
from crawler.frontier.words import now_ms


class RecordingFrontier(Frontier):
    """The crawl's Frontier, logging each hand-out (get) to the E2E_POP_LOG file."""

    pop_log: str = ""

    @classmethod
    def from_settings(cls, settings, redis, shard=None):
        frontier = super().from_settings(settings, redis, shard)
        frontier.pop_log = settings.get("E2E_POP_LOG", "")
        return frontier

    def get(self, n=1, now=None, *args, **kwargs):
        now = now_ms() if now is None else now
        leases, next_due = super().get(n, now, *args, **kwargs)
        if leases and self.pop_log:
            urls = [payload_url(lease.payload) for lease in leases]
            line = json.dumps({"now": now, "urls": urls, "due": [max(now, lease.due) for lease in leases]})
            with open(self.pop_log, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        return leases, next_due


def payload_url(payload: bytes) -> str:
    """The URL of a frontier payload (crawler/frontier/codec.py formats)."""
    if payload[:1] == codec.WHOLE:
        return json.loads(payload[1:])["url"]
    return payload.decode().split("\x1f", 1)[0]


def read_pop_log(path) -> list[tuple[float, str]]:
    """(the time its request may leave, in seconds since the epoch, url) of each hand-out
    of a RecordingFrontier log."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:  # torn last line of a killed worker
                    continue
                out += [(due / 1000, url) for due, url in zip(record["due"], record["urls"], strict=True)]
    except FileNotFoundError:
        pass
    return out


def drain(frontier, now: int | None = None) -> list[bytes]:
    """Lease and acknowledge everything a frontier hands out now (or at ``now``, ms; one URL
    of a host at a time, each acknowledged as it comes): the payloads, in order."""
    out = []
    while True:
        leases, _ = frontier.get(10, now=now)
        if not leases:
            return out
        out += [lease.payload for lease in leases]
        frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=now)


def leases_through_spill(frontier, spill, now: int | None = None) -> list:
    """Every lease handed out at ``now``, a pop of 5 at a time, the spill's round
    (crawler/frontier/spill.py) before each pop, each acknowledged and landed, until three
    pops in a row get nothing."""
    out, empty = [], 0
    while empty < 3:
        spill.round(now)
        leases, _ = frontier.get(5, now=now)
        frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases], now=now)
        out += leases
        empty = 0 if leases else empty + 1
    return out


def urls_through_spill(frontier, spill, now: int | None = None) -> list[str]:
    """The URLs of everything handed out (``leases_through_spill``), in order."""
    return [payload_url(lease.payload) for lease in leases_through_spill(frontier, spill, now)]


def hand_out_all(frontier, n: int, spill=None) -> int:
    """Lease what ``frontier`` hands out, ``n`` a pop, each pop acknowledging the previous
    one's leases (as a worker's pops carry its acks), until three pops in a row get
    nothing: how many were leased. ``spill``: the crawl's Spill (crawler/frontier/spill.py),
    whose round runs before a pop whenever the last one got fewer than ``n``."""
    got, acks, empty, short = 0, [], 0, True
    while empty < 3:
        if spill is not None and short:
            spill.round()
        leases, _ = frontier.get(n, ack=acks)
        short = len(leases) < n
        acks = [lease.id for lease in leases]
        got += len(leases)
        empty = 0 if leases else empty + 1
    frontier.ack(*acks)
    return got


def drain_concurrently(make, workers: int = 4) -> list[str]:
    """URLs handed out to ``workers`` threads, each with its own frontier from ``make``,
    getting three at a time and acknowledging them, until nothing is queued."""
    got, lock = [], threading.Lock()

    def worker():
        g = make(host_interval=0.0)
        while True:
            leases, _ = g.get(3)
            if not leases:
                if g.stats()["queued"] == 0:
                    return
                continue
            with lock:
                got.extend(lease.payload.decode() for lease in leases)
            g.ack(*(lease.id for lease in leases))

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return got
