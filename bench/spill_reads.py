"""Benchmark: a refill's reads of the spill store's chunks on Cassandra, with Toxiproxy between
the reader and the node adding latency to each answer (a remote store): --chunks chunks of
--window URLs each (one a host, as a refill claims them) read one call a chunk, as the refill
read them before, and all in one call (``CassandraChunks.read``: side by side, at most
CASSANDRA_MAX_IN_FLIGHT at a time), --runs times each at each --latencies value.

    python -m bench.spill_reads                              # 256 chunks; 0, 5 and 20 ms
    python -m bench.spill_reads --chunks 64 --latencies 0,50

Needs scripts/cassandra.py's Cassandra and the Toxiproxy build; it starts its own of each on
loopback (a node of 768 MB heap on --port) and a keyspace. Figures, for each latency: chunks a
second read one call a chunk and in one call, and their ratio (the baseline: one call a chunk,
in the same run).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from scrapy.settings import Settings

from bench.results import Results
from crawler.frontier.chunks import pack, unpack
from crawler.urlstore.backends import urlstore_from_settings
from crawler.urlstore.cassandra_chunks import CassandraChunks
from testing.cassandra import CassandraNodes
from testing.services import project_settings
from testing.toxiproxy import ToxiproxyServer

CRAWL = "crawl:{bench-spill-reads}:"


def chunk_bodies(chunks: int, window: int) -> list[tuple[str, int, bytes]]:
    return [
        (
            f"www.site{h}.example",
            h + 1,
            pack([f"https://www.site{h}.example/a/b/{i}.html".encode() for i in range(window)]),
        )
        for h in range(chunks)
    ]


def timed(read, keys: list[tuple[str, int]], runs: int) -> list[float]:
    """The seconds of each of ``runs`` calls of ``read(keys)``."""
    seconds = []
    for _ in range(runs):
        t = time.perf_counter()
        read(keys)
        seconds.append(time.perf_counter() - t)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=256, help="chunks a refill reads (a claim: 256 hosts at most)")
    parser.add_argument("--window", type=int, default=32, help="URLs a chunk")
    parser.add_argument("--latencies", default="0,5,20", help="ms Toxiproxy adds to each answer, comma-separated")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--port", type=int, default=9462, help="the node's CQL port")
    args = parser.parse_args()
    results = Results("spill_reads", runs=args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        node = CassandraNodes(work / "cassandra", port=args.port, storage_port=7470, jmx_port=7670, heap="768M")
        toxiproxy = ToxiproxyServer(work / "toxiproxy")
        starting = node.begin()
        toxiproxy.start()
        try:
            node.started(starting)
            proxy = toxiproxy.client.create("cassandra", f"127.0.0.1:{args.port}")
            settings = project_settings(
                URLSTORE_BACKEND="cassandra",
                CASSANDRA_HOSTS="127.0.0.1",
                CASSANDRA_PORT=proxy.port,
                CASSANDRA_KEYSPACE="bench_" + uuid.uuid4().hex[:10],
            )
            store = urlstore_from_settings(Settings(settings))
            chunks = CassandraChunks(store, owned=True)
            written = chunk_bodies(args.chunks, args.window)
            chunks.write(CRAWL, written)
            keys = [(host, chunk) for host, chunk, _ in written]
            got = chunks.read(CRAWL, keys)
            assert [unpack(b) for b in got] == [unpack(body) for _, _, body in written], "chunks read back differ"

            def one_by_one(keys):
                return [chunks.read(CRAWL, [key])[0] for key in keys]

            def at_once(keys):
                return chunks.read(CRAWL, keys)

            for ms in (int(v) for v in args.latencies.split(",")):
                proxy.clear()
                if ms:
                    proxy.latency(ms)
                timed(at_once, keys, 1)  # (warm: connections, prepared statements)
                label = f"{args.chunks} chunks, {ms} ms added"
                for _ in range(args.runs):  # (the two side by side in time: a run each)
                    [serial] = timed(one_by_one, keys, 1)
                    [side] = timed(at_once, keys, 1)
                    results.add(f"{label}: read one call a chunk", args.chunks / serial, "chunks/s")
                    results.add(f"{label}: read in one call", args.chunks / side, "chunks/s")
                    results.add(
                        f"{label}: in one call / one call a chunk",
                        serial / side,
                        "x",
                        baseline=f"{label}: read one call a chunk",
                    )
                    print(
                        f"{ms} ms: {args.chunks / serial:,.0f} chunks/s one call a chunk, {args.chunks / side:,.0f}"
                        f" in one call ({serial / side:.1f}x)",
                        flush=True,
                    )
            chunks.close()
        finally:
            toxiproxy.stop()
            node.close()
    results.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
