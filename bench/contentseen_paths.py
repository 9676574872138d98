"""Benchmark: content seen on one Redis by its one script (``ContentIndex``, one round trip
a page) against the sharded algorithm on that Redis as its only shard
(``ShardedContentIndex``, up to three calls a page).

    python -m bench.contentseen_paths --pages 10000 --runs 3

Generated pages (a fifth near copies, a tenth exact copies), checked one at a time, each
path on a fresh redis-server. Figures: wall ms a check (p50, p99), round trips and Redis
CPU ms a check, and the pages where both gave the same verdict.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time

from bench.results import Results
from crawler.contentseen.fingerprints import body_digest, fingerprints_of, matches_for, word_bag, word_hashes
from crawler.contentseen.index import ContentIndex, ShardedContentIndex
from crawler.frontier.frontier import Frontier
from crawler.frontier.shards import ShardedFrontier
from testing.sampling import percentile
from testing.servers import RedisServer

NAME = "bench-contentseen"
PATHS = ("one script", "sharded, one shard")


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


def run(kind: str, prints, workdir: str) -> tuple[list, list[float], float, float]:
    """(verdicts, wall ms a check, round trips a check, Redis CPU ms a check)."""
    with RedisServer(f"{workdir}/{kind}") as server:
        client = server.client
        if kind == PATHS[0]:
            index = ContentIndex(client, Frontier(client, NAME).keys, matches_for(0.9), 4096)
        else:
            frontier = ShardedFrontier([Frontier(client, NAME, shard=0)], ["only"])
            index = ShardedContentIndex(frontier, matches_for(0.9), 4096)
        cpu0 = server.cpu_seconds()
        sent = [0]  # round trips: each command, and each pipeline sent
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
        verdicts, times = [], []
        for url, p in prints:
            start = time.perf_counter()
            verdict = index.check(p, url)
            times.append((time.perf_counter() - start) * 1000)
            verdicts.append(None if verdict is None else verdict[:2])
        calls, cpu = sent[0], server.cpu_seconds() - cpu0
    return verdicts, times, calls / len(prints), cpu * 1000 / len(prints)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=1, help="times each path checks the pages")
    args = parser.parse_args()
    results = Results("contentseen_paths", runs=args.runs)
    prints = [
        (url, fingerprints_of(body_digest(text.encode()), word_bag(word_hashes(text)), 100))
        for url, text in pages(args.pages)
    ]
    print(f"{args.pages} pages (a tenth exact copies, a fifth near copies), one at a time, one Redis")
    with tempfile.TemporaryDirectory() as workdir:
        for n in range(args.runs):
            verdicts = {}
            for kind in PATHS:
                verdicts[kind], times, calls, cpu = run(kind, prints, f"{workdir}/{n}")
                p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
                found = sum(v is not None for v in verdicts[kind])
                print(
                    f"  {kind:20s} wall p50 {p50:.3f} ms  p99 {p99:.3f} ms  round trips {calls:.2f} a page  "
                    f"Redis CPU {cpu:.3f} ms a page  ({found} copies found)"
                )
                results.add(f"{kind}: wall a check, p50", p50, "ms")
                results.add(f"{kind}: wall a check, p99", p99, "ms")
                results.add(f"{kind}: round trips a check", calls, "")
                results.add(f"{kind}: Redis CPU a check", cpu, "ms")
            same = sum(a == b for a, b in zip(*verdicts.values(), strict=True))
            print(f"the same verdict on {same} of {args.pages} pages")
            results.add("pages with the same verdict", same, "pages")
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
