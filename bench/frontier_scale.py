"""Benchmark: the frontier at scale, on a redis-server of its own: push --urls URLs over
--hosts hosts (host sizes from a Zipf law, paths of words), then hand them all out with two
POP loops (processes, 64 URLs a pop, acknowledged with the next pop, no politeness wait).

    python -m bench.frontier_scale                                # 1,000,000 URLs, 10,000 hosts
    python -m bench.frontier_scale --urls 10000000 --hosts 100000 --orders fifo,importance

Figures per order (FRONTIER_ORDER fifo, importance): Redis bytes a queued URL at the peak
(used_memory after the push, less before it), URLs/s pushed (batches of 1,000, one client)
and handed out (both loops), and whether every URL came out once.
"""

from __future__ import annotations

import argparse
import itertools
import random
import tempfile
import time
from pathlib import Path

from bench.results import Results
from crawler.frontier.codec import encode_url
from crawler.frontier.frontier import Entry, Frontier
from testing.frontiers import hand_out_all
from testing.servers import RedisServer
from testing.workers import summed_in_processes

WORDS = "news article blog products item category page docs about 2024 en wiki guide help shop".split()
BATCH, POP, LOOPS = 1000, 64, 2


def urls(n: int, hosts: int, seed: int = 1):
    """``n`` URLs over ``hosts`` hosts whose sizes follow a Zipf law (s = 1)."""
    rnd = random.Random(seed)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(hosts)))
    for i, h in enumerate(rnd.choices(range(hosts), cum_weights=weights, k=n)):
        path = "/".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 4)))
        yield f"https://www.site{h}.example/{path}/{i}.html"


def frontier(url: str, order: str, capacity: int) -> Frontier:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=120)
    return Frontier(client, "bench-scale", host_interval=0.0, max_in_flight=0, seen_capacity=capacity, order=order)


def pop_loop(url: str, order: str, capacity: int, out) -> None:
    out.put(hand_out_all(frontier(url, order, capacity), POP))


def run(server: RedisServer, order: str, args) -> dict:
    server.client.flushall()
    before = server.client.info("memory")["used_memory"]
    f = frontier(server.url, order, args.urls)
    t, pushed = time.perf_counter(), 0
    batch = []
    for u in urls(args.urls, args.hosts):
        batch.append(Entry(url=u, payload=encode_url(u), depth=1, cash=0.01))
        if len(batch) == BATCH:
            pushed += f.put(batch).count("added")
            batch = []
    if batch:
        pushed += f.put(batch).count("added")
    push_s = time.perf_counter() - t
    peak = server.client.info("memory")["used_memory"] - before
    got, pop_s = summed_in_processes(pop_loop, [(server.url, order, args.urls)] * LOOPS)
    return {
        "pushed": pushed,
        "push": pushed / push_s,
        "got": got,
        "pop": got / pop_s,
        "bytes": peak / pushed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--orders", default="fifo,importance", help="FRONTIER_ORDER values, comma-separated")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    results = Results("frontier_scale", runs=args.runs)
    print(f"{args.urls:,} URLs over {args.hosts:,} hosts (Zipf), {LOOPS} POP loops of {POP}")
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp) / "redis", socket_timeout=120) as server:
        for order in args.orders.split(","):
            for _ in range(args.runs):
                r = run(server, order, args)
                once = "every URL once" if r["got"] == r["pushed"] else f"MISMATCH: {r['got']:,} of {r['pushed']:,}"
                print(
                    f"{order:>10}: {r['bytes']:.1f} Redis bytes a queued URL; pushed {r['push']:,.0f} URLs/s, "
                    f"handed out {r['pop']:,.0f} URLs/s; {once}",
                    flush=True,
                )
                name = f"all in Redis, {order}, {args.urls:,} URLs"
                results.add(f"{name}: Redis memory a queued URL", r["bytes"], "bytes")
                results.add(f"{name}: pushed", r["push"], "URLs/s")
                results.add(f"{name}: handed out", r["pop"], "URLs/s")
    results.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
