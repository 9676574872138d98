"""Benchmark: our Redis frontier against stock scrapy-redis, side by side.

Both sides run in this one process, single-threaded, against the same Redis, on the
same pre-built Scrapy requests (``https://www.site<h>.com/articles/...`` with ``depth``
meta and a ``Referer`` header, as links extracted by a spider reach the scheduler).
Both sides do the work a crawl does per request: ours normalizes the URL (``normalize_url``,
as the scheduler's ``enqueue_request`` does) and scrapy-redis computes its request
fingerprint (which canonicalizes the URL); the URLs are generated in normal form, so
neither changes them.

Ours (crawler.frontier.frontier.Frontier, host interval 1 s, leases on):
  push     per request: ``codec.encode`` + ``Frontier.push`` (one round trip each, as
           the scheduler does); batched: ``put`` of 1000 (seed ingestion)
  pop      ``get(n)`` + ``codec.decode`` + ``ack(lease)`` per request (the scheduler
           acknowledges pages one at a time), n=1 and n=16; extra: one ``ack`` of the
           whole batch
  memory   ``MEMORY USAGE key SAMPLES 0`` of the ``seen:*`` keys per URL added (URL-seen
           capacity N, error 1e-6; and capacity N/4, grown), and of the queue keys
           (fq:*, bq:*, ready, hnext, hpages) per queued request, after push, before pop
Stock scrapy-redis (PriorityQueue + RFPDupeFilter, constructed directly):
  push     ``dupefilter.request_seen(req)``, then ``queue.push(req)`` if unseen
           (what scrapy_redis.scheduler.Scheduler.enqueue_request does)
  pop      ``queue.pop()`` (MULTI ZRANGE ZREMRANGEBYRANK EXEC, and decoding)
  memory   the dupefilter set and the queue zset, per request

Fairness: the head-to-head rows run both sides in alternating chunks (theirs, ours,
ours, theirs, ...) so that load from other processes on the machine hits both alike.
Every phase is bounded in time (``--phase-seconds`` per side per head-to-head phase,
10 s; and the whole run at 14 x that + 25 s), so a default run takes under 3 minutes
however slow or busy the machine is; rates are over the requests done in time. Memory is measured at N requests on both sides (the rest is pushed
in batches, untimed for scrapy-redis).

Column "us" is Redis server time per request: INFO commandstats deltas of the
top-level commands (EVALSHA for ours, SADD/ZADD/MULTI/EXEC for scrapy-redis; commands
run inside a script or transaction are included in those). Other clients running the
same commands at the same time are included too: when more calls were counted than
this process made, the figure is scaled down and marked ``~``.

Keys are created under unique prefixes (``crawl:{bench-<pid>-<rand>-x}:`` and
``bench:<pid>-<rand>:``) and deleted at the end, also on errors and Ctrl-C.

Sharded rows (after the rows above in a default run; ``--only shards`` runs them alone):
our frontier on 1 redis-server against 3 (REDIS_URLS: a ShardedFrontier, hosts spread by
consistent hashing, crawler/frontier/shards.py). Each side has its own fresh private
redis-servers, started for the run (testing/servers.py, through bench/shards.py) and killed
at the end; each shard is built by ``new_frontier`` as above, sized for N / servers URLs.
Same requests, same push and pop as ours above, the two sides in alternating chunks:
push per request (up to N/2), put(1000) of the rest, get(1) + ack of up to half of what
was queued, get(16) + ack of the rest (acks riding on the next get). Per row: URLs/s of
each side and 3/1, and Redis CPU per URL from INFO cpu deltas (user + system, around each
chunk; the bench's own few INFO calls per chunk included) on the busiest server, and
summed over the three. With one client on a machine of few cores, the client bounds the
rate and shares the cores with the servers, so URLs/s shows what sharding costs one
worker; the busiest server's CPU per URL is what sharding divides (3/1 of 0.33: an even
split) and what bounds many workers. Each phase is bounded at ``--phase-seconds`` for the
two sides together: the rows add under a minute at the defaults (4 phases, plus starting
the servers), beside the bound of the rows above.

URL-seen growth rows (after the sharded rows; ``--only memory`` runs them alone): one
frontier with FRONTIER_SEEN_CAPACITY C (``--seen-capacity``, 20,000) and error 1e-6 takes
distinct URLs with put(1000) up to 100 x C; at 0.5, 1, 2, 5, 10, 25, 50 and 100 x C it
reports the ``MEMORY USAGE`` of its ``seen:*`` keys per URL (target <= 5 bytes), its
generations, the estimated false-positive rate, and the put rate and Redis CPU per URL
(INFO cpu deltas) since the last point. Beside it, the baseline measured in the same run:
pybloom-live's ScalableBloomFilter (initial capacity C, error 1e-6, growth 2, in this
process) given the same URLs, its bit arrays' bytes per URL. Bounded by ``--seen-seconds``
(300): the rows stop at the last point reached.

    python -m bench.frontier                  # N=100,000 over N hosts
    python -m bench.frontier --quick          # N=20,000
    python -m bench.frontier --only shards    # the sharded rows alone (no --redis-url needed)
    python -m bench.frontier --only memory    # the URL-seen growth rows alone
    python -m bench.frontier --n 50000 --hosts 50000 --redis-url redis://host:6379/1
    python -m bench.frontier --quick --profile    # + cProfile of our client side

It exits 0 whatever the PASS/FAIL lines say: it is a report.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import platform
import pstats
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field

import redis
import scrapy
import scrapy_redis
from scrapy import Request, Spider
from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.queue import PriorityQueue

from bench import shards as shards_bench
from crawler.frontier import codec
from crawler.frontier.frontier import Entry, Frontier
from crawler.urls import normalize_url

PUSH_BATCH = 1000
CHUNK = 500  # requests per alternating chunk in head-to-head phases
ERROR_RATE = 1e-6
OURS_TOP = ("evalsha", "eval")
THEIRS_TOP = ("sadd", "zadd", "multi", "exec")
QUEUE_KEY_KINDS = ("fq", "bq", "ready", "hnext", "hpages")
SEEN_TARGET = 5.0  # bytes per seen URL, from 0.5x to 100x the capacity
SEEN_POINTS = (0.5, 1, 2, 5, 10, 25, 50, 100)  # URLs, in multiples of the capacity
INF = float("inf")


class BenchSpider(Spider):
    name = "bench"

    def parse(self, response):
        pass


# -- inputs -------------------------------------------------------------------------


def make_requests(n: int, hosts: int) -> list[Request]:
    """n requests spread round-robin over `hosts` hosts, URLs already normalized."""
    out = []
    for i in range(n):
        h = i % hosts
        site = f"https://www.site{h}.com"
        url = f"{site}/articles/{i // hosts}/item-{i}.html"
        out.append(Request(url, meta={"depth": 1}, headers={"Referer": site + "/"}))
    return out


def check_normal_form(requests: list[Request]) -> str:
    sample = requests[:: max(1, len(requests) // 200)]
    same = sum(normalize_url(r.url) == r.url for r in sample)
    return f"{same}/{len(sample)} sampled URLs unchanged by normalize_url"


# -- measurement --------------------------------------------------------------------


@dataclass
class Result:
    count: int = 0  # requests handled
    seconds: float = 0.0
    calls: int = 0  # top-level Redis calls this process made
    note: str = ""
    commands: dict = field(default_factory=dict)  # name -> [calls, usec] (all clients)
    top: tuple = ()

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0

    def server_us(self) -> tuple[float, bool]:
        """Server microseconds per request, and whether it was scaled (shared Redis)."""
        calls = sum(self.commands.get(c, (0, 0))[0] for c in self.top)
        usec = sum(self.commands.get(c, (0, 0))[1] for c in self.top)
        if not self.count or not calls:
            return 0.0, False
        shared = calls > self.calls * 1.02 + 5
        if shared:
            usec *= self.calls / calls
        return usec / self.count, shared

    def add(self, other: Result) -> None:
        self.count += other.count
        self.seconds += other.seconds
        self.calls += other.calls
        self.top = other.top
        for name, (c, u) in other.commands.items():
            acc = self.commands.setdefault(name, [0, 0])
            acc[0] += c
            acc[1] += u


class Meter:
    """Wall time plus INFO commandstats deltas around one piece of work."""

    def __init__(self, r: redis.Redis, top: tuple[str, ...]):
        self.r, self.top = r, top

    def _stats(self) -> dict:
        return {k.removeprefix("cmdstat_"): v for k, v in self.r.info("commandstats").items()}

    def __enter__(self) -> Result:
        self.result = Result(top=self.top)
        self.before = self._stats()
        self.t0 = time.perf_counter()
        return self.result

    def __exit__(self, *exc):
        self.result.seconds = time.perf_counter() - self.t0
        for name, v in self._stats().items():
            b = self.before.get(name, {})
            calls = v.get("calls", 0) - b.get("calls", 0)
            if calls and name != "info":
                self.result.commands[name] = [calls, v.get("usec", 0) - b.get("usec", 0)]
        return False


def memory_usage(r: redis.Redis, keys: list) -> int:
    total = 0
    for i in range(0, len(keys), 1000):
        p = r.pipeline(transaction=False)
        for key in keys[i : i + 1000]:
            p.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
        total += sum(v or 0 for v in p.execute())
    return total


def frontier_memory(f: Frontier) -> dict:
    """Bytes of this crawl's keys by kind: seen (seen:*), queue, other."""
    prefix = f.keys.prefix.encode()
    groups: dict[str, list] = {"seen": [], "queue": [], "other": []}
    for key in f.redis.scan_iter(match=f.keys.pattern(), count=1000):
        kind = key[len(prefix) :].split(b":", 1)[0].decode()
        group = "seen" if kind == "seen" else "queue" if kind in QUEUE_KEY_KINDS else "other"
        groups[group].append(key)
    return {k: memory_usage(f.redis, v) for k, v in groups.items()}


# -- our frontier -------------------------------------------------------------------


def new_frontier(r, run_id: str, tag: str, capacity: int, interval: float, created: list) -> Frontier:
    f = Frontier(
        r,
        f"bench-{run_id}-{tag}",
        host_interval=interval,
        lease_seconds=600.0,  # no lease expires during the run
        seen_capacity=capacity,
        seen_error_rate=ERROR_RATE,
        host_max_pages=0,
    )
    created.append(f)
    return f


def entry_of(request: Request, spider) -> Entry:
    """What the scheduler's enqueue_request makes of a request: its URL normalized (as
    scrapy-redis canonicalizes it for its fingerprint), its payload encoded."""
    return Entry(
        url=normalize_url(request.url),
        payload=codec.encode(request, spider),
        priority=request.priority,
        depth=request.meta.get("depth", 0),
    )


def ours_push(f: Frontier, requests, spider, batch: int, deadline: float = INF) -> Result:
    """Push one by one (batch 1) or with put(batch), until done or `deadline`."""
    with Meter(f.redis, OURS_TOP) as res:
        added = done = 0
        if batch == 1:
            for req in requests:
                added += f.put([entry_of(req, spider)])[0] == "added"
                done += 1
                if not done & 127 and time.perf_counter() > deadline:
                    break
            res.calls = done
        else:
            for i in range(0, len(requests), batch):
                chunk = requests[i : i + batch]
                added += f.put([entry_of(req, spider) for req in chunk]).count("added")
                done += len(chunk)
                res.calls += 1
                if time.perf_counter() > deadline:
                    break
        res.count = done
    if done < len(requests):
        res.note = f"time bound at {done:,}"
    if added != done:
        res.note = "; ".join(x for x in (res.note, f"{done - added} not added") if x)
    return res


def ours_pop(f: Frontier, spider, n: int, limit: int = 1 << 62, deadline: float = INF, batch_ack=False) -> Result:
    """get(n) + decode + ack, until `limit` requests, an empty frontier or `deadline`.

    As the scheduler does, the acknowledgements of one pop ride on the next pop (one
    round trip for both); the last ones are sent with ack(). With batch_ack the batch is
    acknowledged at once with a separate ack() call instead."""
    with Meter(f.redis, OURS_TOP) as res:
        done = 0
        pending: list[str] = []
        while done < limit:
            leases, next_due = f.get(n, ack=pending)
            pending = []
            res.calls += 1
            if not leases:
                res.note = "empty" if next_due is None else "stopped: hosts not due (raise --hosts)"
                break
            for lease in leases:
                codec.decode(lease.payload, spider)
            ids = [lease.id for lease in leases]
            if batch_ack:
                f.ack(*ids)
                res.calls += 1
            else:
                pending = ids
            done += len(leases)
            if time.perf_counter() > deadline:
                break
        if pending:
            f.ack(*pending)
            res.calls += 1
        res.count = done
    return res


# -- stock scrapy-redis -------------------------------------------------------------


def theirs_push(df: RFPDupeFilter, q: PriorityQueue, requests) -> Result:
    """scrapy_redis.scheduler.Scheduler.enqueue_request, request by request."""
    with Meter(df.server, THEIRS_TOP) as res:
        for req in requests:
            res.calls += 1
            if req.dont_filter or not df.request_seen(req):
                q.push(req)
                res.calls += 1
        res.count = len(requests)
    return res


def theirs_fill(df: RFPDupeFilter, q: PriorityQueue, requests, deadline: float) -> int:
    """Untimed: store the same fingerprints and encoded requests theirs_push would,
    pipelined, so that memory is measured at N. Returns how many were stored."""
    done = 0
    for i in range(0, len(requests), 1000):
        p = df.server.pipeline(transaction=False)
        for req in requests[i : i + 1000]:
            p.sadd(df.key, df.request_fingerprint(req))
            p.execute_command("ZADD", q.key, -req.priority, q._encode_request(req))
            done += 1
        p.execute()
        if time.perf_counter() > deadline:
            break
    return done


def theirs_pop(q: PriorityQueue, limit: int) -> Result:
    with Meter(q.server, THEIRS_TOP) as res:
        done = 0
        while done < limit:
            res.calls += 2  # MULTI, EXEC
            if q.pop() is None:
                res.note = "empty"
                break
            done += 1
        res.count = done
    return res


def head_to_head(ours_step, theirs_step, deadline: float, max_rounds: int) -> tuple[Result, Result]:
    """Alternate chunks of work between the two sides (theirs, ours, ours, theirs, ...)
    until `deadline`, `max_rounds` or either side runs out; each step returns a Result."""
    ours, theirs = Result(), Result()
    stop = False
    for i in range(max_rounds):
        order = ((theirs, theirs_step), (ours, ours_step))
        for acc, step in order if i % 2 == 0 else order[::-1]:
            res = step(i)
            acc.add(res)
            if res.note:
                acc.note = res.note
            stop = stop or not res.count or res.note == "empty" or "not due" in res.note
        if stop or time.perf_counter() > deadline:
            break
    return ours, theirs


# -- the benchmark ------------------------------------------------------------------


class Bench:
    def __init__(self, args):
        self.n = args.n or (20_000 if args.quick else 100_000)
        self.hosts = max(1, min(args.hosts or self.n, self.n))
        self.few_hosts = min(1000, self.n)
        self.n_few = min(self.n, 20_000)
        self.t = args.phase_seconds or (5.0 if args.quick else 10.0)  # per side, head-to-head
        self.t_extra = self.t / 3  # each phase of the 1000-host run
        self.t_fill = 3 * self.t  # bound of fixed-work phases (fills, batched pushes)
        self.end = time.perf_counter() + 14 * self.t + 25  # overall bound (165 s at the defaults)
        self.url = args.redis_url
        self.r = redis.Redis.from_url(args.redis_url, socket_timeout=60)
        self.spider = BenchSpider()
        self.run_id = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.created: list[Frontier] = []
        self.theirs_keys: list[str] = []
        self.R: dict[str, Result] = {}
        self.mem: dict[str, dict] = {}

    def within(self, seconds: float) -> float:
        return min(time.perf_counter() + seconds, self.end)

    def run(self, profile: bool) -> str:
        r, spider, R, mem, n = self.r, self.spider, self.R, self.mem, self.n
        requests = make_requests(n, self.hosts)
        few = make_requests(self.n_few, self.few_hosts)
        self.normal_note = check_normal_form(requests)
        self.payload_sizes = (
            len(codec.encode(requests[0], spider)),
            len(PriorityQueue(r, spider, "unused")._encode_request(requests[0])),
        )
        gc.collect()
        gc.freeze()  # the request lists are long-lived: keep them out of GC passes

        with Meter(r, ("ping",)) as self.ping:  # round-trip floor of this client
            for _ in range(2000):
                r.ping()
            self.ping.count = 2000

        # warm-up (script load, hash functions) on a throw-away crawl
        f = new_frontier(r, self.run_id, "warm", 1000, 1.0, self.created)
        ours_push(f, make_requests(300, 300), spider, 1)
        ours_pop(f, spider, 16)
        f.clear()

        qkey, dkey = f"bench:{self.run_id}:requests", f"bench:{self.run_id}:dupefilter"
        self.theirs_keys += [qkey, dkey]
        q, df = PriorityQueue(r, spider, qkey), RFPDupeFilter(r, dkey)
        fa = new_frontier(r, self.run_id, "a", n, 1.0, self.created)

        # push, per request, head to head: chunk i of the requests on both sides
        def chunk(i):
            return requests[i * CHUNK : (i + 1) * CHUNK]

        rounds = max(1, min(n // 2, n - 1) // CHUNK)  # at most half of N this way
        R["push1"], R["theirs_push"] = head_to_head(
            lambda i: ours_push(fa, chunk(i), spider, 1),
            lambda i: theirs_push(df, q, chunk(i)),
            self.within(2 * self.t),
            rounds,
        )
        k = R["push1"].count
        R["pushb"] = ours_push(fa, requests[k:], spider, PUSH_BATCH, self.within(self.t_fill))
        theirs_n = k + theirs_fill(df, q, requests[k:], self.within(self.t_fill))
        ours_n = k + R["pushb"].count
        mem["theirs"] = {"seen": r.memory_usage(dkey, samples=0), "queue": r.memory_usage(qkey, samples=0)}
        mem["theirs"]["count"] = theirs_n
        mem["ours"] = dict(frontier_memory(fa), count=ours_n)
        gc.collect()

        # pops, head to head; each pair consumes part of both queues
        # pops, head to head; each pair consumes part of both queues (a quarter of the
        # scrapy-redis queue is left for the 1000-host run below)
        per_phase = max(CHUNK, min(ours_n, theirs_n) // 4)
        for key, n_pop, batch_ack, t in (("pop1", 1, False, 2), ("pop16", 16, False, 2), ("pop16b", 16, True, 1)):
            R[key], R["theirs_" + key] = head_to_head(
                lambda i, n_pop=n_pop, batch_ack=batch_ack: ours_pop(fa, spider, n_pop, CHUNK, batch_ack=batch_ack),
                lambda i: theirs_pop(q, CHUNK),
                self.within(t * self.t),
                max(1, per_phase // CHUNK),
            )
        fa.clear()

        # URL-seen capacity N/4, so that the filter grows
        fc = new_frontier(r, self.run_id, "c", max(n // 4, 1), 1.0, self.created)
        R["pushc"] = ours_push(fc, requests, spider, PUSH_BATCH, self.within(self.t_fill))
        mem["ours_grown"] = dict(frontier_memory(fc), count=R["pushc"].count)
        self.generations = fc._read_generation()
        fc.clear()

        # 1000 hosts, interval 0, head to head again (scrapy-redis pushes the same
        # requests into fresh keys, and pops what is left of its queue)
        fd = new_frontier(r, self.run_id, "d", self.n_few, 0.0, self.created)
        qkey2, dkey2 = f"bench:{self.run_id}:requests2", f"bench:{self.run_id}:dupefilter2"
        self.theirs_keys += [qkey2, dkey2]
        q2, df2 = PriorityQueue(r, spider, qkey2), RFPDupeFilter(r, dkey2)

        def few_chunk(i):
            return few[i * CHUNK : (i + 1) * CHUNK]

        R["few_push1"], R["theirs_few_push1"] = head_to_head(
            lambda i: ours_push(fd, few_chunk(i), spider, 1),
            lambda i: theirs_push(df2, q2, few_chunk(i)),
            self.within(2 * self.t_extra),
            max(1, (self.n_few // 2) // CHUNK),
        )
        r.delete(qkey2, dkey2)
        k = R["few_push1"].count
        R["few_pushb"] = ours_push(fd, few[k:], spider, PUSH_BATCH, self.within(self.t_fill))
        mem["few"] = dict(frontier_memory(fd), count=k + R["few_pushb"].count)
        per_phase = max(CHUNK, min(mem["few"]["count"], ours_n - per_phase * 3) // 3)
        for key, n_pop, batch_ack in (("few_pop1", 1, False), ("few_pop16", 16, False), ("few_pop16b", 16, True)):
            R[key], R["theirs_" + key] = head_to_head(
                lambda i, n_pop=n_pop, batch_ack=batch_ack: ours_pop(fd, spider, n_pop, CHUNK, batch_ack=batch_ack),
                lambda i: theirs_pop(q, CHUNK),
                self.within(2 * self.t_extra),
                max(1, per_phase // CHUNK),
            )
        fd.clear()
        r.delete(qkey, dkey)

        if profile:
            return profile_ours(r, self.run_id, spider, requests[: min(n, 10_000)], self.created)
        return ""

    def cleanup(self) -> None:
        for f in self.created:
            f.clear()
        if self.theirs_keys:
            self.r.delete(*self.theirs_keys)

    def report(self, elapsed: float) -> None:
        R, mem = self.R, self.mem
        info = self.r.info("server")
        print("Frontier benchmark: ours vs stock scrapy-redis (one process, one thread, same Redis)")
        print(
            f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
            f"Python {platform.python_version()}, Scrapy {scrapy.__version__}, scrapy-redis {scrapy_redis.__version__}, "
            f"redis-py {redis.__version__} "
            f"(hiredis {redis.utils.HIREDIS_AVAILABLE}); Redis {info.get('redis_version')} at {self.url}"
        )
        print(
            f"N={self.n:,} requests over {self.hosts:,} hosts; head-to-head phases ~{2 * self.t:.0f} s each, "
            f"alternating chunks of {CHUNK}; PING round trips {self.ping.rate:,.0f}/s"
        )
        print(
            f"URLs: {self.normal_note}; payload bytes: ours {self.payload_sizes[0]}, "
            f"scrapy-redis {self.payload_sizes[1]}"
        )
        print()
        w = (40, 9, 8, 14, 8, 7)

        def line(*cells):
            print(f"{cells[0]:<{w[0]}}" + "".join(f"{c:>{x}}" for c, x in zip(cells[1:6], w[1:])) + "".join(cells[6:]))

        def us(res: Result) -> str:
            value, scaled = res.server_us()
            return "-" if not res.count else ("~" if scaled else "") + f"{value:.0f}"

        def row(label, ours: Result, theirs: Result, mark=""):
            ratio = f"{ours.rate / theirs.rate:.2f}" if ours.count and theirs.rate else "-"
            notes = "; ".join(x for x in (mark, ours.note) if x)
            line(label, f"{ours.rate:,.0f}", us(ours), f"{theirs.rate:,.0f}", us(theirs), ratio, "  " + notes)

        line("", "ours", "", "scrapy-redis", "", "")
        line("throughput (one client)", "req/s", "us/req", "req/s", "us/req", "ratio")
        tp = R["theirs_push"]
        row("push, per request", R["push1"], tp, "target >= 1.0")
        row("push, put(1000)", R["pushb"], tp, "extra")
        row("get(1), acks on next pop", R["pop1"], R["theirs_pop1"], "target >= 0.8")
        row("get(16), acks on next pop", R["pop16"], R["theirs_pop16"], "target >= 0.8")
        row("get(16) + separate ack()", R["pop16b"], R["theirs_pop16b"], "extra")
        fh = self.few_hosts
        row(f"{fh} hosts, interval 0: push", R["few_push1"], R["theirs_few_push1"])
        row(f"{fh} hosts, interval 0: put", R["few_pushb"], R["theirs_few_push1"], "extra")
        row(f"{fh} hosts, interval 0: get(1)+ack", R["few_pop1"], R["theirs_few_pop1"])
        row(f"{fh} hosts, interval 0: get(16)+ack", R["few_pop16"], R["theirs_few_pop16"])
        row(f"{fh} hosts, interval 0: get(16)+ack(16)", R["few_pop16b"], R["theirs_few_pop16b"], "extra")
        timed = [(R[k].count, R["theirs_" + k].count) for k in ("pop1", "pop16", "pop16b")]
        print(
            f"(requests timed, ours / scrapy-redis: push {R['push1'].count:,} / {tp.count:,}; pops "
            + ", ".join(f"{o:,} / {t:,}" for o, t in timed)
            + ")"
        )
        print()

        def per(m: dict, kind: str) -> float:
            return (m[kind] or 0) / m["count"] if m["count"] else 0.0

        seen_o, seen_t = per(mem["ours"], "seen"), per(mem["theirs"], "seen")
        q_o, q_t = per(mem["ours"], "queue"), per(mem["theirs"], "queue")
        g, fm = mem["ours_grown"], mem["few"]
        line("memory, bytes per request", "ours", "", "scrapy-redis", "", "ratio")
        line("seen URL (capacity N, 1e-6)", f"{seen_o:.2f}", "", f"{seen_t:.2f}", "", f"{seen_o / seen_t:.3f}")
        line(
            "seen URL (capacity N/4, grown)",
            f"{per(g, 'seen'):.2f}",
            "",
            "",
            "",
            "",
            f"  {self.generations} generations",
        )
        line("queued request", f"{q_o:.1f}", "", f"{q_t:.1f}", "", f"{q_o / q_t:.3f}")
        line(f"queued request, {fh} hosts", f"{per(fm, 'queue'):.1f}", "", "", "", "", f"  {fm['count']:,} requests")
        print(f"(over N = {mem['ours']['count']:,} / {mem['theirs']['count']:,} requests)")
        print()

        def ratio(a: Result, b: Result) -> float:
            return a.rate / b.rate if b.rate else 0.0

        push_ratio = ratio(R["push1"], tp)
        pop_ratio = ratio(R["pop1"], R["theirs_pop1"])
        pop16_ratio = ratio(R["pop16"], R["theirs_pop16"])
        print("targets")
        print(f"  push ours/theirs, per request      {push_ratio:6.2f}  >= 1.0  {verdict(push_ratio >= 1.0)}")
        print(f"  pop  ours/theirs, pop(1), acks on pop {pop_ratio:6.2f}  >= 0.8  {verdict(pop_ratio >= 0.8)}")
        print(f"  pop  ours/theirs, pop(16), acks on pop{pop16_ratio:6.2f}  >= 0.8  {verdict(pop16_ratio >= 0.8)}")
        print(f"  bytes per seen URL, ours           {seen_o:6.2f}  <= 5    {verdict(seen_o <= SEEN_TARGET)}")
        print()
        print(
            "us/req: Redis server time per request from INFO commandstats (~: scaled, other clients\n"
            "ran the same commands). ours get = get(n) + codec.decode, the acks of each pop riding on\n"
            "the next pop as the scheduler sends them (1 round trip per pop); scrapy-redis pop =\n"
            "queue.pop(), 1 round trip, nothing to acknowledge."
        )
        print(f"elapsed {elapsed:.0f} s")


# -- sharded: the frontier on one redis-server against three ------------------------

SHARD_COUNTS = (1, 3)
SHARD_ROWS = (  # phase, row label, short name
    ("push1", "push, per request", "push"),
    ("pushb", f"push, put({PUSH_BATCH})", "put"),
    ("pop1", "get(1), acks on next pop", "get(1)"),
    ("pop16", "get(16), acks on next pop", "get(16)"),
)


@dataclass
class ShardSide:
    """Our frontier over ``servers`` (one: a Frontier; several: a ShardedFrontier), and the
    Redis CPU seconds each server spent per phase (INFO cpu deltas around each step)."""

    servers: list
    frontier: object
    cpu: dict = field(default_factory=dict)  # phase -> CPU seconds per server
    results: dict = field(default_factory=dict)  # phase -> Result

    def step(self, phase: str, work) -> Result:
        before = shards_bench.cpu_seconds(self.servers)
        res = work(self.frontier)
        spent = shards_bench.cpu_spent(before, shards_bench.cpu_seconds(self.servers))
        total = self.cpu.setdefault(phase, [0.0] * len(spent))
        self.cpu[phase] = [a + b for a, b in zip(total, spent, strict=True)]
        return res

    def cpu_us(self, phase: str) -> tuple[float, float]:
        """Redis CPU microseconds per URL in ``phase``: the busiest server's, and all of them."""
        count, spent = self.results[phase].count, self.cpu.get(phase, [0.0])
        return (max(spent) * 1e6 / count, sum(spent) * 1e6 / count) if count else (0.0, 0.0)


def shard_side(bench: Bench, servers, requests) -> ShardSide:
    """The side's frontier, each shard built by new_frontier as in the head-to-head rows
    (host interval 1 s, sized for N / servers URLs), after a warm-up crawl (script load on
    every server)."""
    count, urls = len(servers), [server.url for server in servers]

    def frontier(tag: str, capacity: int):
        tag = f"{tag}{count}"
        return shards_bench.frontier_over(
            urls, lambda client: new_frontier(client, bench.run_id, tag, max(1, capacity // count), 1.0, [])
        )

    warm = frontier("shards-warm", 1000)
    ours_push(warm, make_requests(300, 300), bench.spider, 1)
    ours_pop(warm, bench.spider, 16)
    warm.clear()
    return ShardSide(servers, frontier("shards", len(requests)))


def sharded_phases(bench: Bench, one: ShardSide, three: ShardSide, requests, seconds: float) -> None:
    """The head-to-head rows' push and pop, 1 server against 3 in alternating chunks
    (head_to_head): push per request up to N/2, put(1000) of the rest, get(1) of up to
    half of what was queued, get(16) of the rest; each phase at most ``seconds`` per side."""
    spider, n = bench.spider, len(requests)

    def phase(key: str, work, rounds: int) -> int:
        three.results[key], one.results[key] = head_to_head(
            lambda i: three.step(key, lambda f: work(f, i)),
            lambda i: one.step(key, lambda f: work(f, i)),
            time.perf_counter() + 2 * seconds,
            max(1, rounds),
        )
        return min(one.results[key].count, three.results[key].count)

    k = phase("push1", lambda f, i: ours_push(f, requests[i * CHUNK : (i + 1) * CHUNK], spider, 1), n // 2 // CHUNK)
    rest = requests[k:]
    queued = k + phase(
        "pushb",
        lambda f, i: ours_push(f, rest[i * PUSH_BATCH : (i + 1) * PUSH_BATCH], spider, PUSH_BATCH),
        -(-len(rest) // PUSH_BATCH),
    )
    phase("pop1", lambda f, i: ours_pop(f, spider, 1, CHUNK), queued // 2 // CHUNK)
    phase("pop16", lambda f, i: ours_pop(f, spider, 16, CHUNK), queued // CHUNK + 1)


def run_sharded(bench: Bench) -> tuple[dict[int, ShardSide], str]:
    """The sharded rows on fresh private redis-servers (testing/servers.py, through
    bench/shards.py): one for the 1-server side, three for the other, killed at the end.
    Also the servers' Redis version."""
    requests = make_requests(bench.n, bench.hosts)
    with tempfile.TemporaryDirectory(prefix="bench-frontier-") as tmp:
        servers = shards_bench.start_servers(tmp, sum(SHARD_COUNTS))
        try:
            version = servers[0].client.info("server").get("redis_version")
            one, three = shard_side(bench, servers[:1], requests), shard_side(bench, servers[1:], requests)
            sharded_phases(bench, one, three, requests, bench.t / 2)
        finally:
            shards_bench.stop_servers(servers)
    return dict(zip(SHARD_COUNTS, (one, three), strict=True)), version


def report_sharded(bench: Bench, sides: dict[int, ShardSide], version: str, elapsed: float) -> None:
    one, three = (sides[c] for c in SHARD_COUNTS)
    print(
        "Sharded frontier: ours on 1 and on 3 private redis-servers (REDIS_URLS, hosts by consistent hashing), "
        "one process, one thread"
    )
    print(
        f"Redis {version}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; N={bench.n:,} requests "
        f"over {bench.hosts:,} hosts, host interval 1 s; 1 and 3 servers in alternating chunks, "
        f"phases ~{bench.t:.0f} s each"
    )
    print()
    w = (28, 9, 8, 11, 8, 7, 9, 8)

    def line(*cells):
        text = f"{cells[0]:<{w[0]}}" + "".join(f"{c:>{x}}" for c, x in zip(cells[1:8], w[1:])) + "".join(cells[8:])
        print(text.rstrip())

    line("", "1 server", "", "3 servers", "", "", "3 / 1", "")
    line("", "URLs/s", "us/URL", "URLs/s", "busiest", "all", "URLs/s", "busiest")
    for key, label, _ in SHARD_ROWS:
        a, b = one.results[key], three.results[key]
        (a_us, _), (b_us, b_all) = one.cpu_us(key), three.cpu_us(key)
        rate = f"{b.rate / a.rate:.2f}" if a.rate and b.count else "-"
        cpu = f"{b_us / a_us:.2f}" if a_us and b.count else "-"
        notes = "; ".join(
            f"{c} server{'s' * (c > 1)}: {sides[c].results[key].note}"
            for c in SHARD_COUNTS
            if sides[c].results[key].note not in ("", "empty")
        )
        line(
            label,
            f"{a.rate:,.0f}",
            f"{a_us:.1f}",
            f"{b.rate:,.0f}",
            f"{b_us:.1f}",
            f"{b_all:.1f}",
            rate,
            cpu,
            f"  {notes}" if notes else "",
        )
    timed = ", ".join(f"{short} {one.results[k].count:,} / {three.results[k].count:,}" for k, _, short in SHARD_ROWS)
    print(f"(URLs timed, 1 / 3 servers: {timed})")
    print()
    print(
        "us/URL: Redis CPU per URL from INFO cpu deltas (user + system), on the busiest server and\n"
        "summed over the servers (all). One client process: where the client and the servers share\n"
        "few cores the client bounds the rate, so URLs/s is what sharding costs one worker; the\n"
        "busiest server's CPU per URL is what bounds many workers (3 / 1 of it: 0.33 is an even split)."
    )
    print(f"elapsed {elapsed:.0f} s")


# -- URL-seen growth: bytes per URL from 0.5x to 100x the capacity --------------------


def redis_cpu(r: redis.Redis) -> float:
    """The server's CPU seconds so far (user + system)."""
    info = r.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def seen_growth(bench: Bench, capacity: int, seconds: float) -> list[dict]:
    """Put distinct URLs into a fresh frontier (capacity ``capacity``) and, at each of
    SEEN_POINTS, measure its seen:* keys, its report, and the put rate since the last
    point; the same URLs go into pybloom-live's ScalableBloomFilter (the baseline)."""
    from pybloom_live import ScalableBloomFilter

    r = bench.r
    f = new_frontier(r, bench.run_id, "seen", capacity, 1.0, bench.created)
    bloom = ScalableBloomFilter(
        initial_capacity=capacity, error_rate=ERROR_RATE, mode=ScalableBloomFilter.SMALL_SET_GROWTH
    )
    rows, done, deadline = [], 0, time.perf_counter() + seconds
    try:
        for point in SEEN_POINTS:
            target = int(point * capacity)
            cpu0, t0 = redis_cpu(r), time.perf_counter()
            while done < target and time.perf_counter() < deadline:
                urls = [
                    f"https://www.site{i % 50_000}.com/articles/{i}"
                    for i in range(done, min(done + PUSH_BATCH, target))
                ]
                statuses = f.put([Entry(url=u, payload=b"x") for u in urls])
                assert statuses.count("added") == len(urls), "a fresh URL was taken for seen"
                done += len(urls)
            if done < target:
                break
            elapsed, cpu = time.perf_counter() - t0, redis_cpu(r) - cpu0
            put = done - (rows[-1]["urls"] if rows else 0)
            for i in range(rows[-1]["urls"] if rows else 0, done):  # the baseline, untimed
                bloom.add(f"https://www.site{i % 50_000}.com/articles/{i}")
            keys = [
                k
                for k in r.scan_iter(match=f.keys.pattern(), count=5000)
                if b":seen:" in k and not k.endswith(b":meta")
            ]
            report = f.stats()["seen"]
            rows.append(
                {
                    "point": point,
                    "urls": done,
                    "bytes": memory_usage(r, keys) / done,
                    "keys": len(keys),
                    "generations": report["generations"],
                    "fpr": report["false_positive_rate"],
                    "rate": put / elapsed if elapsed else 0.0,
                    "cpu_us": 1e6 * cpu / put if put else 0.0,
                    "bloom": sum(len(b.bitarray) // 8 for b in bloom.filters) / done,
                    "bloom_filters": len(bloom.filters),
                }
            )
    finally:
        f.clear()
    return rows


def report_seen_growth(rows: list[dict], capacity: int, elapsed: float) -> None:
    print(f"URL-seen from 0.5x to 100x the capacity (C = {capacity:,}, error 1e-6, one client, put({PUSH_BATCH}))")
    head = ("x C", "URLs", "B/URL", "gens", "keys", "est. FPR", "put/s", "Redis us", "Bloom B/URL", "ratio")
    print("".join(f"{h:>12}" for h in head))
    for row in rows:
        cells = (
            f"{row['point']:g}",
            f"{row['urls']:,}",
            f"{row['bytes']:.2f}",
            str(row["generations"]),
            f"{row['keys']:,}",
            f"{row['fpr']:.1e}",
            f"{row['rate']:,.0f}",
            f"{row['cpu_us']:.1f}",
            f"{row['bloom']:.2f} ({row['bloom_filters']})",
            f"{row['bytes'] / row['bloom']:.2f}",
        )
        print("".join(f"{c:>12}" for c in cells))
    worst = max((row["bytes"] for row in rows), default=0.0)
    reached = rows[-1]["point"] if rows else 0
    print(
        "Bloom: pybloom-live's ScalableBloomFilter given the same URLs (bytes of its bit arrays; its filters in\n"
        "brackets); Redis us: Redis CPU per URL put since the last point (INFO cpu, user + system)."
    )
    print(
        f"target: <= {SEEN_TARGET:g} bytes per URL from 0.5x to 100x: worst {worst:.2f} up to {reached:g}x  "
        f"{verdict(worst <= SEEN_TARGET and reached == SEEN_POINTS[-1])}"
    )
    print(f"elapsed {elapsed:.0f} s")


def main_seen_growth(bench: Bench, capacity: int, seconds: float) -> None:
    t0 = time.perf_counter()
    try:
        rows = seen_growth(bench, capacity, seconds)
    finally:
        bench.cleanup()
    report_seen_growth(rows, capacity, time.perf_counter() - t0)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def profile_ours(r, run_id, spider, requests, created) -> str:
    """cProfile of our per-request push and pop(1) + ack (client side), with the
    commands run inside the scripts (INFO commandstats, all clients)."""
    f = new_frontier(r, run_id, "prof", len(requests), 1.0, created)
    out = io.StringIO()
    for title, fn in (
        ("push (per request)", lambda: ours_push(f, requests, spider, 1)),
        ("get(1) + decode + ack", lambda: ours_pop(f, spider, 1)),
    ):
        prof = cProfile.Profile()
        prof.enable()
        res = fn()
        prof.disable()
        out.write(f"\n--- cProfile, ours, {title}: {res.count:,} requests, {res.rate:,.0f} req/s under profiler\n")
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(15)
        out.write("Redis commandstats deltas (the inner commands are included in evalsha):\n")
        for name, (calls, usec) in sorted(res.commands.items(), key=lambda x: -x[1][1])[:14]:
            out.write(
                f"  {name:<16}{calls:>9,} calls{usec:>11,} us{usec / max(res.count, 1):>8.2f} us/req"
                f"{usec / calls:>8.2f} us/call\n"
            )
    f.clear()
    return out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=None, help="requests (default 100,000)")
    ap.add_argument("--hosts", type=int, default=None, help="hosts (default: N)")
    ap.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--quick", action="store_true", help="N=20,000 and shorter phases")
    ap.add_argument("--phase-seconds", type=float, default=None, help="time per side per head-to-head phase")
    ap.add_argument("--profile", action="store_true", help="also cProfile our client side (10,000 requests)")
    ap.add_argument(
        "--only",
        choices=("shards", "memory"),
        help="run only this part: shards = the sharded rows (private redis-servers, no --redis-url); "
        "memory = the URL-seen growth rows",
    )
    ap.add_argument("--seen-capacity", type=int, default=20_000, help="URL-seen capacity of the growth rows")
    ap.add_argument("--seen-seconds", type=float, default=300.0, help="bound of the URL-seen growth rows")
    args = ap.parse_args(argv)
    if args.n is not None and args.n < 2:
        ap.error("--n must be at least 2")
    if args.only and args.profile:
        ap.error("--profile profiles the head-to-head rows: not with --only")

    bench = Bench(args)
    prof_text = ""
    if args.only == "memory":
        main_seen_growth(bench, args.seen_capacity, args.seen_seconds)
        return 0
    if args.only != "shards":
        t0 = time.perf_counter()
        bench.r.ping()
        try:
            prof_text = bench.run(args.profile)
        finally:
            bench.cleanup()
        bench.report(time.perf_counter() - t0)
        print()
    main_sharded(bench)
    if args.only != "shards":
        print()
        main_seen_growth(bench, args.seen_capacity, args.seen_seconds)
    if prof_text:
        print(prof_text)
    return 0


def main_sharded(bench: Bench) -> None:
    t0 = time.perf_counter()
    try:
        sides, version = run_sharded(bench)
    except (OSError, RuntimeError, redis.RedisError) as exc:  # no redis-server binary, a server died...
        print(f"Sharded frontier: not measured ({type(exc).__name__}: {exc})")
        return
    report_sharded(bench, sides, version, time.perf_counter() - t0)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
    sys.exit(0)
