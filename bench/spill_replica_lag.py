"""A replica that missed the spill store's writes: chunks of the frontier's spill store on a
three-node Cassandra cluster of its own (replication factor 3, so chunks are written at
LOCAL_QUORUM and read at LOCAL_ONE, the defaults at that factor). Hinted hand-off is turned off,
node 3 stopped, --chunks chunks written (nodes 1 and 2 take them), node 3 started again: it
holds none of them. Through node 3 alone, a read at LOCAL_ONE finds chunks missing (the
baseline: what the spill's load read before a chunk read as missing was read again);
``CassandraChunks.read`` reads those again at LOCAL_QUORUM (crawler/urlstore/cassandra_chunks.py,
the store's sure_reads) and must return every one, as written.

    python -m bench.spill_replica_lag                 # about 3 minutes on 2 cores
    python -m bench.spill_replica_lag --chunks 1000

Needs scripts/cassandra.py's Cassandra (Java); nodes on 127.0.0.1-3 on ports of their own.
Figures: chunks missing at LOCAL_ONE through node 3, chunks ``CassandraChunks.read`` returns
through node 3 as written; exit code 1 when one of those is missing or differs, or when no
read at LOCAL_ONE missed one (the fault did not take).
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from pathlib import Path

from bench.results import Results
from crawler.frontier.chunks import pack
from crawler.urlstore.cassandra import CassandraUrlStore
from crawler.urlstore.cassandra_chunks import CassandraChunks
from crawler.urlstore.cassandra_cluster import schema_statements
from testing.cassandra import CassandraNodes

CRAWL = "crawl:{bench-replica-lag}:"


def pinned_store(host: str, port: int, keyspace: str):
    """(cluster, a CassandraUrlStore whose every request goes to ``host`` alone)."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]))
    cluster = Cluster([host], port=port, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    store = CassandraUrlStore(
        cluster.connect(), keyspace, write_consistency="LOCAL_QUORUM", read_consistency="LOCAL_ONE", cluster=cluster
    )
    return cluster, store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--port", type=int, default=9282, help="the nodes' CQL port")
    parser.add_argument("--storage-port", type=int, default=7320)
    parser.add_argument("--jmx-port", type=int, default=7580, help="node 1's; node K: + 100 (K - 1)")
    args = parser.parse_args()
    results = Results("spill_replica_lag")
    keyspace = "lag_" + uuid.uuid4().hex[:10]
    written = [
        (f"www.site{h}.example", h + 1, pack([f"https://www.site{h}.example/p/{i}".encode() for i in range(8)]))
        for h in range(args.chunks)
    ]
    keys = [(host, chunk) for host, chunk, _ in written]
    with tempfile.TemporaryDirectory() as tmp:
        nodes = CassandraNodes(Path(tmp) / "cassandra", 3, args.port, args.storage_port, args.jmx_port, "512M")
        try:
            print(f"three nodes up in {nodes.start():.0f} s", flush=True)
            for node in (1, 2, 3):  # (a node down during a write gets no hint: it misses the write)
                nodes.nodetool("disablehandoff", node=node, timeout=120)
            cluster = nodes.cluster()
            session = cluster.connect()
            for statement in schema_statements(keyspace, replication_factor=3):
                session.execute(statement)
            cluster.shutdown()
            cluster, store = pinned_store("127.0.0.1", args.port, keyspace)
            nodes.stop(3)
            CassandraChunks(store).write(CRAWL, written)  # (LOCAL_QUORUM: nodes 1 and 2)
            cluster.shutdown()
            print(
                f"{args.chunks} chunks written with node 3 down; node 3 up again in {nodes.start(3):.0f} s", flush=True
            )
            cluster, store = pinned_store("127.0.0.3", args.port, keyspace)
            chunks = CassandraChunks(store)
            at_one = chunks._bodies(CRAWL, keys, chunks.reads)
            missed = sum(body is None for body in at_one)
            got = chunks.read(CRAWL, keys)
            right = sum(body == want for body, (_, _, want) in zip(got, written, strict=True))
            cluster.shutdown()
        finally:
            nodes.close()
    print(
        f"through node 3: {missed} of {args.chunks} chunks missing at LOCAL_ONE; CassandraChunks.read: {right} as written"
    )
    results.add("chunks missing at LOCAL_ONE through the replica that missed their writes", missed, "chunks")
    results.add("chunks CassandraChunks.read returns through that replica, as written", right, "chunks")
    results.add("chunks written", args.chunks, "chunks")
    results.write()
    failed = []
    if missed == 0:
        failed.append("no chunk read as missing at LOCAL_ONE: the fault did not take")
    if right != args.chunks:
        failed.append(f"{args.chunks - right} chunks missing or different from CassandraChunks.read")
    for line in failed:
        print("FAILED:", line)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
