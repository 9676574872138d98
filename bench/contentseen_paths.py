"""Benchmark: content seen on one Redis, by its one script (``ContentIndex``: CONTENT_SEEN,
one round trip a page) against the sharded algorithm run on that one Redis as its only
shard (``ShardedContentIndex``: look up, fetch the candidates, record: up to three calls
a page). Would one algorithm for both cost nothing measurable?

    python -m bench.contentseen_paths                 # 3,000 pages
    python -m bench.contentseen_paths --pages 10000

The pages: generated texts of 300 words from a 5,000-word vocabulary, a fifth of them
near copies of an earlier page (3% of the words changed) and a tenth exact copies, so
that both paths find copies and index new pages. Each path gets a fresh private
redis-server on loopback and checks the same pages in the same order, one at a time, as
a worker does. Printed for each: wall ms a check (p50, p99), round trips a check and
Redis CPU ms a check (INFO), and whether both gave the same verdicts.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time

from crawler.contentseen.fingerprints import body_digest, fingerprints_of, matches_for, word_bag, word_hashes
from crawler.contentseen.index import ContentIndex, ShardedContentIndex
from crawler.frontier.frontier import Frontier
from crawler.frontier.shards import ShardedFrontier
from testing.sampling import percentile
from testing.servers import RedisServer

NAME = "bench-contentseen"


def pages(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """(url, text) of ``n`` pages, with near and exact copies of earlier ones."""
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(5000)]
    out: list[tuple[str, str]] = []
    for i in range(n):
        roll = rng.random()
        if out and roll < 0.1:
            text = rng.choice(out)[1]
        elif out and roll < 0.3:
            words = rng.choice(out)[1].split()
            for j in rng.sample(range(len(words)), len(words) * 3 // 100):
                words[j] = rng.choice(vocabulary)
            text = " ".join(words)
        else:
            text = " ".join(rng.choice(vocabulary) for _ in range(300))
        out.append((f"http://h{i % 50}.example/p{i}", text))
    return out


def count_round_trips(client) -> list[int]:
    """Count the client's round trips from now on: each command, and each pipeline sent."""
    sent = [0]
    command, pipeline = client.execute_command, client.pipeline

    def counted_command(*args, **kwargs):
        sent[0] += 1
        return command(*args, **kwargs)

    def counted_pipeline(*args, **kwargs):
        p = pipeline(*args, **kwargs)
        execute = p.execute

        def counted_execute(*a, **k):
            sent[0] += 1
            return execute(*a, **k)

        p.execute = counted_execute
        return p

    client.execute_command, client.pipeline = counted_command, counted_pipeline
    return sent


def redis_cpu(client) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def run(kind: str, prints, workdir: str) -> tuple[list, list[float], float, float]:
    with RedisServer(f"{workdir}/{kind}") as server:
        client = server.client
        need = matches_for(0.9)
        if kind == "one script":
            index = ContentIndex(client, Frontier(client, NAME).keys, need, 4096)
        else:
            index = ShardedContentIndex(ShardedFrontier([Frontier(client, NAME, shard=0)], ["only"]), need, 4096)
        cpu0 = redis_cpu(client)
        sent = count_round_trips(client)
        verdicts, times = [], []
        for url, p in prints:
            start = time.perf_counter()
            verdict = index.check(p, url)
            times.append((time.perf_counter() - start) * 1000)
            verdicts.append(None if verdict is None else verdict[:2])
        calls = sent[0]
        cpu1 = redis_cpu(client)
    n = len(prints)
    return verdicts, times, calls / n, (cpu1 - cpu0) * 1000 / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=3000)
    args = parser.parse_args()
    prints = []
    for url, text in pages(args.pages):
        prints.append((url, fingerprints_of(body_digest(text.encode()), word_bag(word_hashes(text)), 100)))
    print(f"{args.pages} pages (a tenth exact copies, a fifth near copies), one at a time, one Redis")
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        for kind in ("one script", "sharded, one shard"):
            verdicts, times, calls, cpu = run(kind, prints, workdir)
            results[kind] = verdicts
            found = sum(v is not None for v in verdicts)
            print(
                f"  {kind:20s} wall p50 {percentile(times, 0.5):.3f} ms  p99 {percentile(times, 0.99):.3f} ms  "
                f"round trips {calls:.2f} a page  Redis CPU {cpu:.3f} ms a page  ({found} copies found)"
            )
    same = sum(a == b for a, b in zip(*results.values(), strict=True))
    print(f"the same verdict on {same} of {args.pages} pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
