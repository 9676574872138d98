"""Benchmark: the frontier on one Redis server against three (REDIS_URLS) and a three-master
Redis Cluster (REDIS_CLUSTER_URL, 16 shards) (crawler/frontier/shards.py).

Throwaway redis-servers on 127.0.0.1 (testing/servers.py). For 1 and then 3 servers, then the cluster,
``--clients`` processes (each its own frontier, as workers are) first put ``--urls`` URLs
of ``--hosts`` hosts in batches of 500 (seed ingestion), then get them back 64 at a time,
acknowledging each batch with the next get (as the scheduler does), until none is left
(host interval 0, no in-flight limit: the frontier's own speed, not politeness).

Figures per row: URLs/s put and got (wall time of the phase, all clients), Redis CPU ms
per 1,000 URLs summed over the servers and on the busiest server (INFO cpu deltas: what
sharding divides), and the servers' memory per URL after the puts. On a 2-core machine
the clients and the servers share the cores, so the rates show the cost of sharding more
than its gain; the busiest server's CPU per URL is what bounds a crawl on bigger machines.

    python -m bench.shards                      # 200,000 URLs of 2,000 hosts, 2 clients
    python -m bench.shards --urls 50000 --clients 1
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from pathlib import Path

import redis

from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.shards import ShardedFrontier, server_name
from testing.servers import RedisServer, start_cluster

ROOT = Path(__file__).resolve().parents[1]

NAME = "bench-shards"
BATCH = 500
GET = 64


CLUSTER_SHARDS = 16


def _frontier(urls: list[str], capacity: int):
    if urls[0].startswith("cluster+"):
        from redis.cluster import RedisCluster

        client = RedisCluster.from_url(urls[0].removeprefix("cluster+"))
        shards = [
            Frontier(client, NAME, host_interval=0.0, max_in_flight=0, seen_capacity=capacity, shard=k)
            for k in range(CLUSTER_SHARDS)
        ]
        return ShardedFrontier(shards, [f"{NAME}#{k}" for k in range(CLUSTER_SHARDS)])
    return frontier_over(
        urls, lambda client: Frontier(client, NAME, host_interval=0.0, max_in_flight=0, seen_capacity=capacity)
    )


def frontier_over(urls: list[str], make) -> Frontier | ShardedFrontier:
    """The frontier on the Redis servers at ``urls``, ``make(client)`` building the
    Frontier on each: that Frontier for one server, a ShardedFrontier over several (hosts
    spread by consistent hashing on their names, as REDIS_URLS does)."""
    shards = [make(redis.Redis.from_url(u, socket_timeout=60)) for u in urls]
    return shards[0] if len(shards) == 1 else ShardedFrontier(shards, [server_name(u) for u in urls])


def start_servers(directory, count: int = 3) -> list[RedisServer]:
    """``count`` fresh redis-servers on 127.0.0.1, nothing persisted, data under
    ``directory``; if one fails to start, those already started are killed."""
    servers: list[RedisServer] = []
    try:
        for i in range(count):
            servers.append(RedisServer(Path(directory) / f"r{i}", socket_timeout=60).start())
    except BaseException:
        stop_servers(servers)
        raise
    return servers


def stop_servers(servers: list[RedisServer]) -> None:
    for s in servers:
        s.kill()


def cpu_seconds(servers: list[RedisServer]) -> list[float]:
    """Each server's CPU seconds so far (INFO cpu, user + system)."""
    return [s.cpu_seconds() for s in servers]


def cpu_spent(before: list[float], after: list[float]) -> list[float]:
    """Each server's CPU seconds between two ``cpu_seconds`` readings."""
    return [b - a for a, b in zip(before, after, strict=True)]


def _put(urls: list[str], capacity: int, part: list[str], out) -> None:
    f = _frontier(urls, capacity)
    for i in range(0, len(part), BATCH):
        f.put([Entry(url=u, payload=u.encode()) for u in part[i : i + BATCH]])
    out.put(len(part))


def _get(urls: list[str], capacity: int, out) -> None:
    f = _frontier(urls, capacity)
    got, acks, empty = 0, [], 0
    while empty < 3:
        leases, _ = f.get(GET, ack=acks)
        acks = [lease.id for lease in leases]
        got += len(leases)
        empty = 0 if leases else empty + 1
    f.ack(*acks)
    out.put(got)


def _phase(target, args_of, clients: int) -> tuple[int, float]:
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=target, args=(*args_of(c), out)) for c in range(clients)]
    started = time.perf_counter()
    for p in procs:
        p.start()
    done = sum(out.get() for _ in procs)
    for p in procs:
        p.join()
    return done, time.perf_counter() - started


def run(servers: list[RedisServer], count: int, args, cluster: bool = False) -> dict:
    for s in servers:
        s.client.flushall()
    urls = [f"cluster+{servers[0].url}"] if cluster else [s.url for s in servers[:count]]
    all_urls = [f"http://h{i % args.hosts}.example/page/{i}" for i in range(args.urls)]
    parts = [all_urls[c :: args.clients] for c in range(args.clients)]
    cpu0 = cpu_seconds(servers[:count])
    capacity = args.urls // (CLUSTER_SHARDS if cluster else count)
    put, put_s = _phase(_put, lambda c: (urls, capacity, parts[c]), args.clients)
    cpu1 = cpu_seconds(servers[:count])
    memory = sum(s.client.info("memory")["used_memory"] for s in servers[:count])
    got, get_s = _phase(_get, lambda c: (urls, capacity), args.clients)
    cpu2 = cpu_seconds(servers[:count])
    put_cpu, get_cpu = cpu_spent(cpu0, cpu1), cpu_spent(cpu1, cpu2)
    per_k = 1000 / args.urls * 1000
    return {
        "servers": f"{count}{' (cluster)' if cluster else ''}",
        "put": put / put_s,
        "got": got / get_s,
        "complete": got == args.urls,
        "put_cpu": sum(put_cpu) * per_k,
        "put_busiest": max(put_cpu) * per_k,
        "get_cpu": sum(get_cpu) * per_k,
        "get_busiest": max(get_cpu) * per_k,
        "bytes": memory / args.urls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=200_000)
    parser.add_argument("--hosts", type=int, default=2_000)
    parser.add_argument("--clients", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        servers = start_servers(tmp, 3)
        try:
            print(f"{args.urls} URLs of {args.hosts} hosts, {args.clients} client processes")
            rows = [run(servers, count, args) for count in (1, 3)]
        finally:
            stop_servers(servers)
        nodes = start_cluster(Path(tmp) / "cluster")
        try:
            rows.append(run(nodes, 3, args, cluster=True))
        finally:
            for node in nodes:
                node.kill()
    print(
        f"\n{'servers':>11} {'put URLs/s':>11} {'got URLs/s':>11} {'all got':>7}"
        f" {'put: Redis CPU ms/1000 (all, busiest)':>38} {'get: (all, busiest)':>20} {'bytes/URL':>9}"
    )
    for r in rows:
        print(
            f"{r['servers']:>11} {r['put']:11.0f} {r['got']:11.0f} {'yes' if r['complete'] else 'NO':>7}"
            f" {r['put_cpu']:28.1f} {r['put_busiest']:9.1f} {r['get_cpu']:10.1f} {r['get_busiest']:9.1f}"
            f" {r['bytes']:9.1f}"
        )
    one = rows[0]
    for other in rows[1:]:
        print(
            f"{other['servers']} / 1: put {other['put'] / one['put']:.2f}x, get {other['got'] / one['got']:.2f}x; "
            f"the busiest server's Redis CPU per URL {other['put_busiest'] / one['put_busiest']:.2f}x (put), "
            f"{other['get_busiest'] / one['get_busiest']:.2f}x (get)"
        )


if __name__ == "__main__":
    main()
