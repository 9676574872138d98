"""Benchmark: our Redis frontier against stock scrapy-redis, and URL-seen's bytes per URL
as it grows past its capacity, on a redis-server of the run's own, one thread.

    python -m bench.frontier                       # N=100,000; both parts
    python -m bench.frontier --n 20000 --runs 3 --only versus
    python -m bench.frontier --only memory --seen-capacity 5000

Head to head, on N Scrapy requests of N hosts: push (ours: ``normalize_url`` +
``codec.encode`` + ``put`` of one entry, or ``put`` of 1,000; theirs: ``request_seen`` and
``queue.push``) and pop (ours: ``get(n)`` + ``codec.decode``, acks on the next get, n = 1,
16; theirs: ``queue.pop()``), in alternating chunks of 500, at most ``--phase-seconds`` a
side. Figures: requests/s of each and ours / theirs, Redis time a request, memory a request
of the seen keys and of the queue. URL-seen growth: a frontier of capacity C
(``--seen-capacity``, the default error rate) takes distinct URLs up to 100 C: bytes of its seen keys
a URL at 0.5 ... 100 C (target <= 5), the new URLs it took for seen so far (false positives:
the estimated rate, est. FPR, bounds their share) and Redis CPU a put, beside pybloom-live's
ScalableBloomFilter; bounded by ``--seen-seconds``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass

from pybloom_live import ScalableBloomFilter
from scrapy import Request, Spider
from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.queue import PriorityQueue

from bench.results import Results
from crawler.config.settings import BY_NAME
from crawler.frontier import codec
from crawler.frontier.frontier import Entry, Frontier
from crawler.urls import normalize_url
from testing.servers import RedisServer

PUSH_BATCH, CHUNK = 1000, 500
ERROR_RATE = BY_NAME["FRONTIER_SEEN_ERROR_RATE"].default
QUEUE_KINDS = (b"fq", b"bq", b"ready", b"hnext", b"hpages")
SEEN_TARGET = 5.0  # bytes per seen URL, from 0.5 to 100 x the capacity
SEEN_POINTS = (0.5, 1, 2, 5, 10, 25, 50, 100)


class BenchSpider(Spider):
    name = "bench"


def make_requests(n: int) -> list[Request]:
    return [
        Request(f"https://www.site{i}.com/articles/0/item-{i}.html", meta={"depth": 1}, headers={"Referer": "/"})
        for i in range(n)
    ]


def new_frontier(r, name: str, capacity: int) -> Frontier:
    return Frontier(r, name, host_interval=1.0, lease_seconds=600.0, seen_capacity=capacity, seen_error_rate=ERROR_RATE)


@dataclass
class Tally:
    count: int = 0
    seconds: float = 0.0
    usec: int = 0  # the server's time (INFO commandstats)

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    @property
    def us(self) -> float:
        return self.usec / self.count if self.count else 0.0


def server_usec(r) -> int:
    return sum(v["usec"] for k, v in r.info("commandstats").items() if k != "cmdstat_info")


def timed(r, tally: Tally, work) -> int:
    usec, t0 = server_usec(r), time.perf_counter()
    done = work()
    tally.seconds += time.perf_counter() - t0
    tally.usec += server_usec(r) - usec
    tally.count += done
    return done


def head_to_head(r, ours, theirs, rounds: int, seconds: float) -> tuple[Tally, Tally]:
    """Chunk i of the work on each side, alternating which goes first, until ``rounds``,
    ``seconds`` a side or a side with nothing left."""
    a, b = Tally(), Tally()
    deadline = time.perf_counter() + 2 * seconds
    for i in range(max(1, rounds)):
        order = [(b, theirs), (a, ours)]
        for tally, step in order if i % 2 == 0 else order[::-1]:
            if not timed(r, tally, lambda step=step, i=i: step(i)):
                return a, b
        if time.perf_counter() > deadline:
            break
    return a, b


def entry_of(request: Request, spider) -> Entry:
    """What the scheduler's enqueue_request makes of a request."""
    return Entry(
        url=normalize_url(request.url),
        payload=codec.encode(request, spider),
        priority=request.priority,
        depth=request.meta.get("depth", 0),
    )


def ours_getter(f: Frontier, spider, n: int, pending: list):
    def step(i: int) -> int:
        done = 0
        while done < CHUNK:
            leases, _ = f.get(n, ack=list(pending))
            pending.clear()
            if not leases:
                break
            for lease in leases:
                codec.decode(lease.payload, spider)
            pending.extend(lease.id for lease in leases)
            done += len(leases)
        return done

    return step


def theirs_pop(q: PriorityQueue, i: int) -> int:
    for done in range(CHUNK):
        if q.pop() is None:
            return done
    return CHUNK


def memory_usage(r, keys) -> int:
    p = r.pipeline(transaction=False)
    for key in keys:
        p.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
    return sum(v or 0 for v in p.execute())


def versus(r, n: int, seconds: float) -> dict:
    """One run of the head-to-head rows on an empty server: {row: (ours, theirs)} and the memory."""
    r.flushall()
    spider, requests = BenchSpider(), make_requests(n)
    warm = new_frontier(r, "warm", 1000)  # (the scripts loaded)
    warm.put([entry_of(req, spider) for req in make_requests(300)])
    ours_getter(warm, spider, 16, [])(0)
    warm.clear()
    f = new_frontier(r, "bench", n)
    q, df = PriorityQueue(r, spider, "theirs:requests"), RFPDupeFilter(r, "theirs:dupefilter")

    def chunk(i):
        return requests[i * CHUNK : (i + 1) * CHUNK]

    def ours_push(i):
        for req in chunk(i):
            f.put([entry_of(req, spider)])
        return len(chunk(i))

    def theirs_push(i):
        for req in chunk(i):
            if not df.request_seen(req):
                q.push(req)
        return len(chunk(i))

    rows = {"push, per request": head_to_head(r, ours_push, theirs_push, n // 2 // CHUNK, seconds)}
    rest = requests[rows["push, per request"][0].count :]
    batched = Tally()
    for i in range(0, len(rest), PUSH_BATCH):
        timed(r, batched, lambda i=i: len(f.put([entry_of(req, spider) for req in rest[i : i + PUSH_BATCH]])))
    for i in range(0, len(rest), PUSH_BATCH):  # theirs, untimed: the same N stored
        p = r.pipeline(transaction=False)
        for req in rest[i : i + PUSH_BATCH]:
            p.sadd(df.key, df.request_fingerprint(req))
            p.execute_command("ZADD", q.key, -req.priority, q._encode_request(req))
        p.execute()
    rows[f"push, put({PUSH_BATCH})"] = (batched, rows["push, per request"][1])
    ours_keys = {"seen": [], "queue": []}
    for key in r.scan_iter(match=f.keys.pattern(), count=1000):
        kind = key[len(f.keys.prefix) :].split(b":", 1)[0]
        if kind == b"seen" or kind in QUEUE_KINDS:
            ours_keys["seen" if kind == b"seen" else "queue"].append(key)
    memory = {
        "seen": (memory_usage(r, ours_keys["seen"]) / n, r.memory_usage(df.key, samples=0) / n),
        "queue": (memory_usage(r, ours_keys["queue"]) / n, r.memory_usage(q.key, samples=0) / n),
    }
    for size in (1, 16):
        pending: list = []
        rows[f"get({size}), acks on the next get"] = head_to_head(
            r, ours_getter(f, spider, size, pending), lambda i: theirs_pop(q, i), n // 4 // CHUNK, seconds
        )
        f.ack(*pending)
    return {"rows": rows, "memory": memory}


def seen_growth(server: RedisServer, capacity: int, seconds: float) -> list[dict]:
    """URL-seen from 0.5 to 100 x its capacity, beside pybloom-live's scalable filter."""
    r = server.client
    r.flushall()
    f = new_frontier(r, "seen", capacity)
    bloom = ScalableBloomFilter(capacity, ERROR_RATE, mode=ScalableBloomFilter.SMALL_SET_GROWTH)
    rows, done, wrong, deadline = [], 0, 0, time.perf_counter() + seconds
    for point in SEEN_POINTS:
        target, since = int(point * capacity), done
        cpu0, t0 = server.cpu_seconds(), time.perf_counter()
        while done < target and time.perf_counter() < deadline:
            urls = [
                f"https://www.site{i % 50_000}.com/articles/{i}" for i in range(done, min(done + PUSH_BATCH, target))
            ]
            statuses = f.put([Entry(url=u, payload=b"x") for u in urls])
            added = statuses.count("added")
            assert added + statuses.count("seen") == len(urls), set(statuses)
            wrong += len(urls) - added  # (every URL is new: a false positive, within the error rate)
            done += len(urls)
        if done < target:
            break
        took, cpu = time.perf_counter() - t0, server.cpu_seconds() - cpu0
        for i in range(since, done):  # the baseline, untimed
            bloom.add(f"https://www.site{i % 50_000}.com/articles/{i}")
        keys = [k for k in r.scan_iter(match=f.keys.pattern(), count=5000) if b":seen:" in k and b":meta" not in k]
        report = f.stats()["seen"]
        rows.append(
            {
                "point": point,
                "urls": done,
                "bytes": memory_usage(r, keys) / done,
                "generations": report["generations"],
                "fpr": report["false_positive_rate"],
                "wrong": wrong,
                "rate": (done - since) / took,
                "cpu_us": 1e6 * cpu / (done - since),
                "bloom": sum(len(b.bitarray) // 8 for b in bloom.filters) / done,
            }
        )
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="requests (and hosts)")
    ap.add_argument("--phase-seconds", type=float, default=10.0, help="time a side in each head-to-head phase")
    ap.add_argument("--runs", type=int, default=1, help="head-to-head runs")
    ap.add_argument("--only", choices=("versus", "memory"), help="one part: the head-to-head rows or URL-seen's growth")
    ap.add_argument("--seen-capacity", type=int, default=20_000, help="URL-seen capacity of the growth rows")
    ap.add_argument("--seen-seconds", type=float, default=300.0, help="bound of the growth rows")
    args = ap.parse_args(argv)
    results = Results("frontier", runs=args.runs)
    with tempfile.TemporaryDirectory(prefix="bench-frontier-") as tmp, RedisServer(tmp, socket_timeout=60) as server:
        r = server.client
        print(f"Redis {r.info('server')['redis_version']} of the run's own; N = {args.n:,} requests of as many hosts")
        for run in range(args.runs if args.only != "memory" else 0):
            got = versus(r, args.n, args.phase_seconds)
            print(
                f"\nrun {run + 1}: {'':30}{'ours req/s':>11}{'us/req':>8}{'scrapy-redis':>13}{'us/req':>8}{'ratio':>7}"
            )
            for label, (ours, theirs) in got["rows"].items():
                ratio = ours.rate / theirs.rate if theirs.rate else 0.0
                print(f"{label:37}{ours.rate:11,.0f}{ours.us:8.1f}{theirs.rate:13,.0f}{theirs.us:8.1f}{ratio:7.2f}")
                results.add(f"ours: {label}", ours.rate, "req/s")
                results.add(f"scrapy-redis: {label}", theirs.rate, "req/s")
                results.add(f"ours / scrapy-redis: {label}", ratio, "x", baseline=f"scrapy-redis: {label}")
                results.add(f"ours: {label}, Redis time", ours.us, "us/req")
            for kind, (ours, theirs) in got["memory"].items():
                print(f"memory, {kind}: ours {ours:.2f}, scrapy-redis {theirs:.2f} bytes a request")
                results.add(f"ours: memory, {kind}", ours, "bytes/req")
                results.add(f"scrapy-redis: memory, {kind}", theirs, "bytes/req")
                results.add(f"ours / scrapy-redis: memory, {kind}", ours / theirs, "x", f"scrapy-redis: memory, {kind}")
        if args.only != "versus":
            rows = seen_growth(server, args.seen_capacity, args.seen_seconds)
            print(f"\nURL-seen, capacity C = {args.seen_capacity:,}, error {ERROR_RATE:g}, put({PUSH_BATCH})")
            heads = ("x C", "B/URL", "gens", "est. FPR", "wrongly seen", "put/s", "Redis us", "Bloom B/URL")
            print("".join(f"{h:>13}" for h in heads))
            for row in rows:
                x = f"{row['point']:g} C"
                print(
                    f"{x:>13}{row['bytes']:13.2f}{row['generations']:13}{row['fpr']:13.1e}{row['wrong']:13}"
                    f"{row['rate']:13,.0f}{row['cpu_us']:13.1f}{row['bloom']:13.2f}"
                )
                results.add(f"URL-seen at {x}", row["bytes"], "bytes/URL")
                results.add(f"pybloom-live at {x}", row["bloom"], "bytes/URL")
                results.add(f"URL-seen at {x}: Redis CPU a URL put", row["cpu_us"], "us")
                results.add(f"URL-seen at {x}: new URLs taken for seen so far", row["wrong"], "URLs")
            worst = max((row["bytes"] for row in rows), default=0.0)
            reached = rows[-1]["point"] if rows else 0
            ok = worst <= SEEN_TARGET and reached == SEEN_POINTS[-1]
            print(
                f"target <= {SEEN_TARGET:g} bytes a URL up to 100 C: worst {worst:.2f} up to {reached:g} C: {'met' if ok else 'MISSED'}"
            )
    results.write()
    return 0


if __name__ == "__main__":
    main()
