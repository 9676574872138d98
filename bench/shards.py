"""Benchmark: the frontier on one Redis server against three (REDIS_URLS) and a three-master
Redis Cluster (16 shards) (crawler/frontier/shards.py), on throwaway redis-servers.

    python -m bench.shards                      # 200,000 URLs of 2,000 hosts, 2 clients
    python -m bench.shards --urls 50000 --clients 1 --runs 3

``--clients`` processes (a frontier each, host interval 0) put ``--urls`` URLs in batches
of 500, then get them back 64 at a time, acknowledging with the next get. Figures per
layout: URLs/s put and got, Redis CPU ms per 1,000 URLs over all the servers and on the
busiest (what sharding divides), and memory a URL.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

import redis
from redis.cluster import RedisCluster

from bench.results import Results
from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.shards import ShardedFrontier, server_name
from testing.frontiers import hand_out_all
from testing.servers import RedisServer, start_cluster
from testing.workers import summed_in_processes

NAME, BATCH, GET, CLUSTER_SHARDS = "bench-shards", 500, 64, 16


def frontier(urls: list[str], capacity: int, cluster: bool):
    def make(client, **shard):
        return Frontier(client, NAME, host_interval=0.0, max_in_flight=0, seen_capacity=capacity, **shard)

    if cluster:
        client = RedisCluster.from_url(urls[0])
        shards = [make(client, shard=k) for k in range(CLUSTER_SHARDS)]
        return ShardedFrontier(shards, [f"{NAME}#{k}" for k in range(CLUSTER_SHARDS)])
    shards = [make(redis.Redis.from_url(u, socket_timeout=60)) for u in urls]
    return shards[0] if len(shards) == 1 else ShardedFrontier(shards, [server_name(u) for u in urls])


def put(f, part: list[str], out) -> None:
    for i in range(0, len(part), BATCH):
        f.put([Entry(url=u, payload=u.encode()) for u in part[i : i + BATCH]])
    out.put(len(part))


def get(f, out) -> None:
    out.put(hand_out_all(f, GET))


def client(work, urls: list[str], capacity: int, cluster: bool, *args) -> None:
    """``work`` on a frontier of its own; its last argument: the queue of the count."""
    work(frontier(urls, capacity, cluster), *args)


def phase(work, parts: list, urls: list[str], capacity: int, cluster: bool) -> tuple[int, float]:
    """``work`` in one process a client (each with its frontier): (URLs done, seconds)."""
    return summed_in_processes(client, [(work, urls, capacity, cluster, *p) for p in parts])


def run(servers: list[RedisServer], args, cluster: bool = False) -> dict:
    for s in servers:
        s.client.flushall()
    urls = [servers[0].url] if cluster else [s.url for s in servers]
    capacity = args.urls // (CLUSTER_SHARDS if cluster else len(servers))
    every = [f"http://h{i % args.hosts}.example/page/{i}" for i in range(args.urls)]
    cpu0 = [s.cpu_seconds() for s in servers]
    put_n, put_s = phase(put, [(every[c :: args.clients],) for c in range(args.clients)], urls, capacity, cluster)
    cpu1 = [s.cpu_seconds() for s in servers]
    memory = sum(s.client.info("memory")["used_memory"] for s in servers)
    got, get_s = phase(get, [() for _ in range(args.clients)], urls, capacity, cluster)
    cpu2 = [s.cpu_seconds() for s in servers]
    per_k = 1e6 / args.urls  # CPU seconds -> ms per 1,000 URLs
    put_cpu = [(b - a) * per_k for a, b in zip(cpu0, cpu1, strict=True)]
    get_cpu = [(b - a) * per_k for a, b in zip(cpu1, cpu2, strict=True)]
    return {
        "put": put_n / put_s,
        "got": got / get_s,
        "complete": got == args.urls,
        "put_cpu": sum(put_cpu),
        "put_busiest": max(put_cpu),
        "get_cpu": sum(get_cpu),
        "get_busiest": max(get_cpu),
        "bytes": memory / args.urls,
    }


LAYOUTS = ("1 server", "3 servers", "3-master cluster")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=200_000)
    parser.add_argument("--hosts", type=int, default=2_000)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    results = Results("shards", runs=args.runs)
    print(f"{args.urls} URLs of {args.hosts} hosts, {args.clients} client processes, {args.runs} run(s)")
    print(
        f"{'':>17} {'put URLs/s':>11} {'got URLs/s':>11} {'all got':>7}"
        f" {'put: Redis CPU ms/1000 (all, busiest)':>38} {'get: (all, busiest)':>20} {'bytes/URL':>9}"
    )
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        servers = [stack.enter_context(RedisServer(Path(tmp) / f"r{i}", socket_timeout=60)) for i in range(3)]
        nodes = start_cluster(Path(tmp) / "cluster")
        for node in nodes:
            stack.callback(node.kill)
        for _ in range(args.runs):
            rows = dict(zip(LAYOUTS, (run(servers[:1], args), run(servers, args), run(nodes, args, True)), strict=True))
            for layout, r in rows.items():
                print(
                    f"{layout:>17} {r['put']:11.0f} {r['got']:11.0f} {'yes' if r['complete'] else 'NO':>7}"
                    f" {r['put_cpu']:28.1f} {r['put_busiest']:9.1f} {r['get_cpu']:10.1f} {r['get_busiest']:9.1f}"
                    f" {r['bytes']:9.1f}"
                )
            one = rows["1 server"]
            results.add("1 server: put", one["put"], "URLs/s")
            results.add("1 server: got", one["got"], "URLs/s")
            for layout, r in rows.items():
                if layout != "1 server":
                    results.add(f"{layout}: put / 1 server's", r["put"] / one["put"], "x", baseline="1 server: put")
                    results.add(f"{layout}: got / 1 server's", r["got"] / one["got"], "x", baseline="1 server: got")
                for step in ("put", "get"):
                    results.add(f"{layout}: busiest server's Redis CPU, {step}", r[f"{step}_busiest"], "ms/1000 URLs")
                results.add(f"{layout}: Redis memory", r["bytes"], "bytes/URL")
            if not all(r["complete"] for r in rows.values()):
                print("NOT every URL was got back")
    results.write()


if __name__ == "__main__":
    main()
