"""Moving queued URLs between Redis and the spill store (FRONTIER_HOST_WINDOW > 0; decision
0055). Redis keeps each host's window, the scripts SPILL and LOAD keep every host's queue
whole and in order (window, chunks, buffer), and a ``Spill`` does the disk's half, with
blocking I/O: run it off the reactor.

- ``drain(now)``: claim a slice of the crawl's inbox (new URLs of every host, as PUSH
  admitted them: decision 0061), write each host's as chunks, put them in their hosts'
  lists. A worker that dies between the write and the put leaves its claim to expire; the
  next claim writes the same URLs as new chunks, and the first ones are never listed.
- ``spill(now)``: claim the hosts' buffers that are due (full, or older than
  FRONTIER_SPILL_AGE), write each as a chunk, commit. A worker that dies between the write
  and the commit leaves its claim to expire; the next claim writes a new chunk, and the
  first one is never listed, never read.
- ``refill(now)``: claim the oldest chunk of hosts whose windows ran low (all of a host's
  chunks when its URLs on disk fit in its window), read them, load them into the window
  (each only if it is still the oldest and the claim still ours), then delete them.
  A worker that dies before the load leaves the chunk listed: the next claim loads it; one
  that dies after it leaves a chunk that is no longer listed, never read again.
- ``evict(now)``: while hosts wait on disk for a window, write out the windows of hosts due
  furthest ahead (FRONTIER_WINDOW_IDLE or later) as their oldest chunks, committed only if
  each window is still what was written.
- ``round(now)``: the four, each on the shards where the frontier's ``spill_due`` says a
  claim may find work, until nothing is due or ``most`` chunks were moved; a spill not yet
  bound (``bind``: its store checked against the one the crawl recorded) is bound first.
- ``clear()``: every chunk of the crawl, for ``scrapy frontier clear``.

``PusherRounds``: a pusher's rounds (``scrapy seed``'s: they write out and load nothing), in a
thread of their own beside its pushes, or for a large input in a process of their own
(rounds_process.py).

``frontier``: a Frontier or a ShardedFrontier (its ``shards``, each with its own chunks).
"""

from __future__ import annotations

import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from crawler.exceptions import StoreRefused
from crawler.frontier.chunks import EMPTY, count_of, pack, uncompressed
from crawler.frontier.frontier import INBOX_SLICE
from crawler.frontier.rounds_process import Reply, RoundsProcess
from crawler.frontier.shards import AWAY
from crawler.frontier.words import now_ms

logger = logging.getLogger(__name__)

SPILL_REFUSED = "spill_refused"  # a worker's close reason: its spill store is not the crawl's (exit code 1)
# what a crawl whose first process keeps every queued URL in Redis records as its spill store
NO_SPILL = "no spill store (every queued URL in Redis: FRONTIER_HOST_WINDOW=0)"
CLAIM_MS = 60_000  # a claim a worker does not commit in this time passes to another
HOSTS_A_CALL = 256  # hosts a claim takes at most
# URLs pushed between two of a pusher's rounds (PusherRounds): a round after each batch of
# 2,000 cost 1,000,000 seeds over 50,000 hosts, held on disk, some 8 of their 31 s, a round
# after four of them 5 (BENCHMARKS)
ROUND_URLS = 8000


class Spill:
    def __init__(self, frontier, chunks, stats=None, token: str | None = None):
        self.frontier = frontier
        self.shards = frontier.shards
        # each shard's calls through the sharded frontier's guard: a server away or hanging
        # is passed over (its claims expire), the other shards' work goes on
        self._guarded = frontier.on_shard
        self.chunks = chunks
        self.stats = stats  # Scrapy's stats collector (None: not counted)
        self.token = token or uuid.uuid4().hex[:16]
        self.bound = False  # the store checked against the crawl's on every shard (bind); a round binds first
        self._checked: set[int] = set()  # the shards where it was (a server away is checked later)

    def beside(self) -> Spill:
        """A spill of the same frontier, store and stats with a token of its own, for rounds
        run beside this one's in the same process (a spider's seed ingestion beside its
        worker's upkeep): a claim is its token's, so the two never take the same inbox slice
        (with one token, the second take claimed the slice again, and the first one's chunks
        were written in vain). Its store is this spill's: closing it is this spill's owner's."""
        return Spill(self.frontier, self.chunks, self.stats)

    def bind(self) -> None:
        """Record this spill store as the crawl's, or check that it is the one recorded: a
        worker whose chunks went to a file another worker cannot open would leave that
        worker's hosts waiting for chunks it cannot read. StoreRefused if another is. A shard
        whose server is away is checked at a later round, and gets no claim until then."""
        for i, shard in enumerate(self.shards):
            try:
                self._on(shard, lambda shard=shard: _check_store([shard], self.chunks.where))
            except AWAY:
                continue
            self._checked.add(i)
        self.bound = len(self._checked) == len(self.shards)

    def _inc(self, key: str, count: int) -> None:
        if self.stats is not None and count:
            self.stats.inc_value(key, count)

    def _on(self, shard, call):
        """``call()`` for ``shard`` through the guard (AWAY when its server is away)."""
        return self._guarded(self.shards.index(shard), call)

    def _claims(self, claim, now: int | None, shards=None, since: float | None = None, most: int | None = None):
        """(shard, its time, what ``claim(shard)(token, claim time, most, now=)`` claimed;
        ``most``: HOSTS_A_CALL unless given) for each shard (of ``shards``, default all)
        where it claimed something. A claim is made at ``now`` and, in a round begun at
        ``since`` (time.monotonic()), the time gone by since: one made late in a long round (chunks written to a slow store) is not
        expired as it is made, for the other workers. (Its commit or load goes at ``now``.)"""
        most = HOSTS_A_CALL if most is None else most
        for shard in self.shards if shards is None else shards:
            t = now_ms() if now is None else now
            at = t if since is None or now is None else t + int((time.monotonic() - since) * 1000)
            try:
                claimed = self._on(shard, lambda shard=shard, at=at: claim(shard)(self.token, CLAIM_MS, most, now=at))
            except AWAY:
                continue
            if claimed:
                yield shard, t, claimed

    def _write_out(self, claim, commit, now: int | None, shards=None, since: float | None = None) -> int:
        """Claim on each shard (``claim(shard)``), write the chunks claimed, commit them
        (``commit(shard)``) and delete those not committed (claims that expired: another
        worker writes those URLs; windows that changed meanwhile); URLs written."""
        urls = 0
        for shard, t, claimed in self._claims(claim, now, shards, since):
            crawl = shard.keys.prefix
            self.chunks.write(crawl, [(host, chunk, pack(entries)) for host, chunk, entries in claimed])
            try:
                committed = self._on(
                    shard, lambda shard=shard, claimed=claimed, t=t: commit(shard)(self.token, claimed, now=t)
                )
            except AWAY:  # (its claim expires: another worker writes those URLs; these chunks are never read)
                continue
            lost = [(host, chunk) for host, chunk, _ in claimed if chunk not in committed]
            if lost:
                self.chunks.delete(crawl, lost)
            urls += sum(len(entries) for _, chunk, entries in claimed if chunk in committed)
        return urls

    def drain(self, now: int | None = None, shards=None, since: float | None = None) -> int:
        """Write out a slice of the inbox on each shard (of ``shards``): its entries grouped
        by host, each host's as chunks of a window each, put in their hosts' lists; URLs
        written. A worker that dies between the write and the put leaves its claim to expire:
        the next claim takes the same entries with new ids, and those chunks are never
        listed. (``since``: see ``_claims``.)"""
        return self._drain(now, shards, since)[0]

    def _drain(self, now: int | None, shards, since: float | None = None, due: bool = False) -> tuple[int, list]:
        """``drain`` (``due``: only an inbox that is due): (URLs written, the shards whose
        slice was whole: INBOX_SLICE entries, the inbox may be due again)."""
        urls, full = 0, []
        takes = self._claims(lambda shard: partial(shard.inbox_take, due=due), now, shards, since, most=INBOX_SLICE)
        for shard, t, (first, entries) in takes:
            if not entries:
                continue
            count = len(entries)
            if count >= INBOX_SLICE:
                full.append(shard)
            hosts: dict[bytes, list[bytes]] = {}
            for e in entries:
                host, _, entry = e.partition(b"\x1f")
                q = hosts.get(host)
                if q is None:
                    hosts[host] = [entry]
                else:
                    q.append(entry)
            size = shard.window
            chunks, listed = [], []
            for host, q in hosts.items():
                name, n = host.decode(), len(q)
                if n <= size:  # (most hosts of a slice)
                    chunks.append((name, first, pack(q)))
                    listed.append((name, 1, n))
                    continue
                parts = range(0, n, size)
                chunks += [(name, first + k, pack(q[start : start + size])) for k, start in enumerate(parts)]
                listed.append((name, len(parts), n))
            chunks.sort(key=_store_order)  # (appended at the end of the store's key: chunks.py)
            crawl = shard.keys.prefix
            self.chunks.write(crawl, chunks)
            try:
                kept = self._on(
                    shard,
                    lambda shard=shard, count=count, first=first, listed=listed, t=t: shard.inbox_put(
                        self.token, count, first, listed, now=t
                    ),
                )
            except AWAY:  # (its claim expires: another worker writes those URLs; these chunks are never read)
                continue
            lost = {host for (host, _, _), ok in zip(listed, kept, strict=True) if not ok}
            if lost:
                self.chunks.delete(crawl, [(host, chunk) for host, chunk, _ in chunks if host in lost])
            urls += sum(n for (_, _, n), ok in zip(listed, kept, strict=True) if ok)
        self._inc("frontier/spilled", urls)
        return urls, full

    def spill(self, now: int | None = None, shards=None, since: float | None = None) -> int:
        """Write out one claim's worth of buffers on each shard (of ``shards``); URLs written.
        (``since``: see ``_claims``.)"""
        urls = self._write_out(lambda shard: shard.spill_claim, lambda shard: shard.spill_commit, now, shards, since)
        self._inc("frontier/spilled", urls)
        return urls

    def refill(self, now: int | None = None, shards=None) -> int:
        """Load one claim's worth of chunks on each shard (of ``shards``) into their hosts'
        windows; URLs loaded."""
        return self._refill(now, shards)[0]

    def _refill(self, now: int | None, shards, since: float | None = None) -> tuple[int, list]:
        """``refill``: (URLs loaded, the shards whose claim took HOSTS_A_CALL hosts: those
        most likely to have more due now)."""
        urls, full = 0, []
        for shard, t, claimed in self._claims(lambda shard: shard.load_claim, now, shards, since):
            if len({host for host, _ in claimed}) >= HOSTS_A_CALL:
                full.append(shard)
            crawl = shard.keys.prefix
            read = []
            for (host, chunk), body in zip(claimed, self.chunks.read(crawl, claimed), strict=True):
                if body is None:
                    # (never so but for a store that lost data: said, counted, and passed over)
                    self._inc("frontier/spill_chunks_lost", 1)
                    logger.error("Chunk %d of %s is missing from the spill store: its URLs are lost", chunk, host)
                    read.append((host, chunk, EMPTY))
                else:
                    read.append((host, chunk, uncompressed(body)))
            try:
                statuses = self._on(shard, lambda shard=shard, read=read, t=t: shard.load(self.token, read, now=t))
            except AWAY:  # (its claim expires: another worker, or the next round, loads those chunks)
                continue
            done = [(host, chunk) for (host, chunk, _), status in zip(read, statuses, strict=True) if status]
            urls += sum(count_of(data) for (_, _, data), status in zip(read, statuses, strict=True) if status == 1)
            if done:
                self.chunks.delete(crawl, done)
        self._inc("frontier/loaded", urls)
        return urls, full

    def evict(self, now: int | None = None, shards=None, since: float | None = None) -> int:
        """Write out the windows of hosts due furthest ahead while hosts wait on disk for a
        window (one claim on each shard, of ``shards``); URLs written. (``since``: see
        ``_claims``.)"""
        urls = self._write_out(lambda shard: shard.evict_claim, lambda shard: shard.evict_commit, now, shards, since)
        self._inc("frontier/evicted", urls)
        return urls

    def round(self, now: int | None = None, most: int = 100_000, loads: bool = True) -> tuple[int, int]:
        """Drain, spill, give idle windows back (``evict``) and refill until nothing more is
        due (or ``most`` URLs each way): (URLs written out, URLs loaded); without ``loads``
        (a pusher's round: ``scrapy seed``), only the writes, the workers' rounds loading
        what they need. The store is checked first if
        it was not yet (Redis away when the process started). A claim is sent only to the
        shards whose ``spill_due`` says it may find work (one round trip a shard: most
        rounds find nothing); what was written out may be due to load at once (a window run
        low, a host given room), so a round that wrote gives windows back and loads on every
        shard. Loads go on while a shard's claim takes HOSTS_A_CALL hosts; the hosts a claim
        passed over (no chunk left, another worker's live claim) or that a load left low
        again, and what fell due after ``spill_due`` read the time, are the next round's."""
        if not self.bound:
            self.bind()
        since = time.monotonic()  # (each claim at its own time: a long round's last claims expire in time)
        checked = [shard for i, shard in enumerate(self.shards) if i in self._checked]
        due = [(shard, self._due(shard, now)) for shard in checked]
        buffers = [shard for shard, (spill, _, _) in due if spill]
        written, inboxes = 0, buffers
        while inboxes and written < most:  # (after a whole slice, the rest if due: PUSH's rule)
            urls, inboxes = self._drain(now, inboxes, since, due=inboxes is not buffers)
            written += urls
        written += _until_done(lambda: self.spill(now, buffers, since), most) if buffers else 0
        if not loads:
            return written, 0
        # (what was written may have left hosts waiting on disk: a window to give back)
        windows = checked if written else [shard for shard, (_, evict, _) in due if evict]
        written += self.evict(now, windows, since) if windows else 0
        chunks = checked if written else [shard for shard, (_, _, load) in due if load]
        loaded = 0
        while chunks and loaded < most:  # (a shard whose claim took fewer hosts is done this round)
            urls, chunks = self._refill(now, chunks, since)
            loaded += urls
            if not urls:
                break
        return written, loaded

    def _due(self, shard, now: int | None) -> tuple:
        """``shard.spill_due(now)``; nothing due on a shard whose server is away."""
        try:
            return self._on(shard, lambda: shard.spill_due(now))
        except AWAY:
            return False, False, False

    def where(self) -> tuple:
        """Each shard's key prefix and its Redis server's run_id (None where its client
        cannot name one: a cluster's): what a spill made again elsewhere (a pusher's rounds'
        process) must match to stand for this one."""
        out = []
        for shard in self.shards:
            try:
                run_id = shard.redis.info("server").get("run_id")
            except Exception:
                run_id = None
            out.append((shard.keys.prefix, run_id if isinstance(run_id, str) else None))
        return tuple(out)

    def clear(self) -> int:
        """Delete every chunk of the crawl's queues (before their keys go). Returns how many."""
        deleted = 0
        for shard in self.shards:
            deleted += self.chunks.clear(shard.keys.prefix, shard.chunk_keys())
        return deleted

    def close(self) -> None:
        self.chunks.close()


class PusherRounds:
    """The spill's rounds of a pusher (``scrapy seed``, a spider's seed ingestion beside its
    worker's own rounds, the scale benchmark): rounds that write out and load nothing (loading
    windows is the workers'), each beside the pushes: ``pushed(n)`` counts the URLs pushed, and
    once ``every`` came since the last round began, begins the next (``Spill.round(loads=
    False)``: the inbox written out a slice at a time when it is due; what is left at the end,
    less than a slice or two, waits for the workers' rounds), unless one is running; a pusher
    ``behind`` URLs ahead of the round running (the inbox grows in Redis by what it pushes)
    waits for it. A round's error is raised at the next ``pushed`` that looks at it, or at
    ``close``, which waits for the round running and runs the last (``last=False``: only
    waits, and raises nothing: a pusher stopping on an error of its own).

    The rounds run in a thread of their own, whose store connection ``close`` lets go of
    (``release``). With ``remake`` (a picklable callable that makes the crawl's spill again:
    crawler/services.py's ``spill_remake``), a large input's rounds go to a process of their
    own (rounds_process.py), which takes them over once it has made its spill: the rounds'
    CPU no longer shares the pusher's interpreter lock. It is started at the first round
    when ``coming`` (the URLs the pusher will push in all, when it knows: a field it may set
    later) is ``process_from`` or more, else once ``process_from`` URLs were pushed (0: never;
    SEED_ROUNDS_PROCESS_FROM for ``scrapy seed``). Until it
    is ready, and if it cannot start or ends, the rounds run in the thread;
    ``process_rounds`` counts those it ran."""

    def __init__(
        self,
        spill: Spill,
        every: int = ROUND_URLS,
        behind: int = INBOX_SLICE,
        remake=None,
        coming: int | None = None,
        process_from: int = 0,
    ):
        self.spill, self.every, self.behind, self.remake = spill, every, behind, remake
        self.coming, self.process_from = coming, process_from
        self.process_rounds = 0  # rounds run in the process
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spill-round")
        self._running = None  # the round running: a Future, or the process's Reply
        self._unwritten = 0  # URLs pushed since the last round began
        self._pushed = 0  # URLs pushed in all
        self._threaded = False  # a round ran in the thread: its store connection to let go of
        self.process: RoundsProcess | None = None  # the rounds' process, once started
        self._started = False  # (a process is tried once)

    def pushed(self, urls: int) -> None:
        self._unwritten += urls
        self._pushed += urls
        if self._unwritten < self.every:
            return
        if self._running is not None:
            if not self._running.done() and self._unwritten < self.behind:
                return  # (the next push looks again)
            self._result(self._running)  # (waits when behind; raises the round's error)
        self._unwritten = 0
        self._running = self._begin()

    def _begin(self):
        """The next round, begun: in the process when it is ready, else in the thread."""
        wanted = self.remake is not None and self.process_from > 0 and not self._started
        if wanted and max(self.coming or 0, self._pushed) >= self.process_from:
            self._started = True
            self.process = RoundsProcess.start(self.remake, self.spill.where())
        if self.process is not None and self.process.ready():
            if not self.process_rounds:
                logger.info("The spill's rounds run in a process of their own (pid %d)", self.process.pid)
            self.process_rounds += 1
            return self.process.round()
        self._threaded = True
        return self._pool.submit(self.spill.round, loads=False)

    def _result(self, running):
        """The round's result (its error raised), waited for; the process's URLs written are
        counted in the spill's stats (a thread's round counts its own)."""
        result = running.result()
        if isinstance(running, Reply) and self.spill.stats is not None and result[0]:
            self.spill.stats.inc_value("frontier/spilled", result[0])
        return result

    def close(self, last: bool = True) -> None:
        try:
            running = self._running
            if running is not None:
                if not last:
                    running.exception()  # (waited for, its error dropped)
                    return
                self._result(running)
            if last and self._unwritten:
                self._unwritten = 0
                self._running = self._begin()
                self._result(self._running)
        finally:
            self._running = None
            if self.process is not None:
                self.process.stop()
            if self._threaded:  # (the rounds' thread lets go of the store: its connection)
                self._threaded = False
                self._pool.submit(self.spill.chunks.release)
            self._pool.shutdown(wait=True)


def bind_spill(frontier, spill: Spill | None) -> None:
    """Check a process's spill against the crawl's (``Spill.bind``); a process without one
    (FRONTIER_HOST_WINDOW=0) records that the crawl keeps every queued URL in Redis, or is
    refused on a crawl that spills: its pushes would bypass the windows, and the URLs on disk
    would wait for loads it never asks for. StoreRefused if the two disagree."""
    if spill is not None:
        spill.bind()
    else:
        _check_store(frontier.shards, NO_SPILL)


def _check_store(shards, where: str) -> None:
    """Record ``where`` (a spill store, or NO_SPILL) as the crawl's on each shard, or check it
    against the one recorded first: StoreRefused, saying why, if another was."""
    for shard in shards:
        recorded = shard.spill_store(where)
        if recorded == where:
            continue
        crawl = shard.keys.crawl_name
        if recorded == NO_SPILL:
            raise StoreRefused(
                f"crawl {crawl!r} keeps every queued URL in Redis (FRONTIER_HOST_WINDOW=0), and this"
                f" process would spill them to {where}: run it with FRONTIER_HOST_WINDOW=0, as the"
                " crawl's other processes"
            )
        if where == NO_SPILL:
            raise StoreRefused(
                f"crawl {crawl!r} spills its queued URLs to {recorded}, and this process keeps every"
                " queued URL in Redis (FRONTIER_HOST_WINDOW=0): run it with the window"
                " (FRONTIER_HOST_WINDOW) and the spill store of the crawl's other workers"
            )
        raise StoreRefused(
            f"crawl {crawl!r} spills its queued URLs to {recorded}, and this process's spill store"
            f" is {where}: run every worker and `scrapy seed` of the crawl with the same CRAWL_DIR"
            " on one machine, or with URLSTORE_BACKEND=cassandra for workers on several, or"
            " FRONTIER_HOST_WINDOW=0 (every queued URL in Redis) on all of them"
        )


def _store_order(chunk: tuple) -> tuple:
    """A chunk (host, id, body) by its key in the spill store: id, then host."""
    return chunk[1], chunk[0]


def _until_done(step, most: int) -> int:
    """``step()`` again while it moves URLs, until ``most``: the URLs moved."""
    moved = 0
    while moved < most:
        n = step()
        moved += n
        if not n:
            break
    return moved
