"""Benchmark: the frontier's verbs on a big frontier, with the scripts as they are and as
they were at an earlier commit (``--base``, read with ``git show``), on the same state in
one private redis-server: POP, PROMOTE and a drop (``scrapy frontier drop``) with 100,000
leases held and 1,000,000 retries in the delayed set (docs/decisions/0053).

    python -m bench.frontier_scans                    # against the commit before the indexes
    python -m bench.frontier_scans --leases 10000 --delayed 100000   # a quick look

The state, made by the frontier's own verbs: the retries of 1,000 hosts due in a day, the
leases (one URL of 10 a host held), 10,000 URLs queued, 5,000 URLs queued for each dropped
host. Timed, call by call, the versions in turn: POP (10 URLs, acknowledging the call
before's), PROMOTE (10 delayed URLs), the drop of a host (the verb, and each script call
it makes). Figures: each one's p99 before and after, and Redis's memory of the state.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import redis

from bench.results import Results, git
from crawler.frontier import scripts
from crawler.frontier.frontier import Entry, Frontier
from testing.sampling import percentile
from testing.servers import RedisServer

T0 = 1_700_000_000_000  # the bench's clock (ms): every verb is given its time
DAY = 86_400_000
BATCH = 10_000


def base_commit() -> str:
    """The commit before the one that added the index of leases by URL."""
    out = git("log", "--reverse", "--format=%H", "-S", "K.leased", "--", "crawler/frontier/lua/").split()
    return f"{out[0]}~1" if out else "HEAD"


def scripts_at(commit: str) -> dict[str, str]:
    """Every script as Redis runs it, assembled from ``commit``'s files."""
    return {
        name: scripts.source(name, lambda path: git("show", f"{commit}:crawler/frontier/lua/{path}"))
        for name in scripts.NAMES
    }


def frontier(client, name: str, texts: dict[str, str] | None) -> Frontier:
    f = Frontier(client, name, host_interval=0, max_in_flight=0, lease_seconds=DAY / 1000, refill_batch=2_000)
    for script, text in (texts or {}).items():
        setattr(f, f"_{script}", client.register_script(text))
    return f


def build(f: Frontier, args) -> list[str]:
    """The state; returns the dropped hosts."""
    hosts = 1_000
    per = args.delayed // hosts
    retries = (f"http://d{h}.example/r{i}" for i in range(per) for h in range(hosts))
    _put(f, retries, dont_filter=True, follow_up=True, not_before=T0 + DAY)
    _put(f, (f"http://l{i % max(args.leases // 10, 1)}.example/{i}" for i in range(args.leases)))
    held = 0
    while held < args.leases:
        leases, _ = f.get(min(2_000, args.leases - held), now=T0)
        held += len(leases)
    _put(f, (f"http://p{i % 2_000}.example/{i}" for i in range(10_000)))
    dropped = [f"d{h}.example" for h in range(args.drops)]
    _put(f, (f"http://{h}/b{i}" for h in dropped for i in range(5_000)), dont_filter=True, follow_up=True)
    return dropped


def _put(f: Frontier, urls, **kwargs) -> None:
    batch = []
    for url in urls:
        batch.append(Entry(url=url, payload=url.encode(), **kwargs))
        if len(batch) == BATCH:
            f.put(batch, now=T0)
            batch = []
    if batch:
        f.put(batch, now=T0)


class Timings:
    """One version's frontier and the times of its calls, by verb (ms)."""

    def __init__(self, label: str, f: Frontier, dropped: list[str], per: int):
        self.label, self.f, self.dropped, self.per = label, f, dropped, per
        self.times: dict[str, list[float]] = {"POP": [], "PROMOTE": [], "drop": [], "drop, one script call": []}
        self.acks: list[bytes] = []
        self.queued = 0
        self.script = f._hold
        f._hold = self._hold  # (each of HOLD's calls timed: what the other workers wait for)

    def _hold(self, keys, args):
        start = time.perf_counter()
        out = self.script(keys=keys, args=args)
        self.times["drop, one script call"].append((time.perf_counter() - start) * 1000)
        return out

    def _timed(self, verb: str, fn) -> None:
        start = time.perf_counter()
        fn()
        self.times[verb].append((time.perf_counter() - start) * 1000)

    def pop(self, i: int) -> None:
        """10 URLs, acknowledging the 10 of the call before."""

        def call():
            leases, _ = self.f.get(10, now=T0 + 1 + i, ack=self.acks[-10:])
            self.acks.extend(lease.id for lease in leases)

        self._timed("POP", call)

    def promote(self, i: int) -> None:
        """10 URLs waiting in the delayed set, of 10 hosts."""
        urls = [f"http://d{h}.example/r{i % self.per}" for h in range(100, 110)]
        entries = [Entry(url=u, payload=u.encode()) for u in urls]
        self._timed("PROMOTE", lambda: self.f.promote(entries, now=T0 + 10_000 + i))

    def drop(self, host: str) -> None:
        self._timed("drop", lambda: self.f.drop(host, now=T0 + 20_000))


def prepare(client, texts, label: str, args, results: Results) -> Timings:
    """A version's state, in a crawl of its own (its own keys) in the one Redis."""
    before = client.info("memory")["used_memory"]
    f = frontier(client, label, texts)
    start = time.monotonic()
    dropped = build(f, args)
    memory = (client.info("memory")["used_memory"] - before) / 2**20
    print(
        f"{label}: built in {time.monotonic() - start:.0f} s: {client.zcard(f.keys.leases):,} leases, "
        f"{client.zcard(f.keys.delayed):,} delayed; its keys take {memory:,.0f} MiB of Redis's memory"
    )
    results.add(f"{label}: Redis memory of the state", memory, "MiB")
    return Timings(label, f, dropped, args.delayed // 1_000)


def measure(versions: list[Timings], args) -> None:
    """Each verb, the versions taking turns call by call (the machine's other work falls
    on both alike)."""
    for i in range(args.pops):
        for v in versions:
            v.pop(i)
    for i in range(args.promotes):
        for v in versions:
            v.promote(i)
    for v in versions:
        v.queued = sum(v.f.redis.llen(v.f.keys.back(host)) for host in v.dropped) + len(v.dropped) * v.per
    for host in versions[0].dropped:
        for v in versions:
            v.drop(host)
    for v in versions:
        assert v.f.redis.llen(v.f.keys.drops) == v.queued  # (every URL of the dropped hosts moved)


def report(v: Timings, results: Results) -> None:
    print(f"{v.label}:")
    for verb, times in v.times.items():
        p99 = percentile(times, 0.99)
        print(
            f"  {verb:22s} p99 {p99:9.2f} ms  p50 {percentile(times, 0.5):9.2f} ms  "
            f"max {max(times):9.2f} ms  ({len(times)} calls)"
        )
        results.add(f"{v.label}: {verb}, p99", p99, "ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=None, help="the commit to compare with (default: the one before the indexes)")
    parser.add_argument("--leases", type=int, default=100_000)
    parser.add_argument("--delayed", type=int, default=1_000_000)
    parser.add_argument("--pops", type=int, default=1_000)
    parser.add_argument("--promotes", type=int, default=40)
    parser.add_argument("--drops", type=int, default=3)
    args = parser.parse_args()
    base = args.base or base_commit()
    results = Results("frontier_scans")
    old = scripts_at(base)
    print(f"before: the scripts at {git('rev-parse', '--short', base).strip()} ({base}); after: as they are")
    with tempfile.TemporaryDirectory() as work, RedisServer(work) as server:
        client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=120)
        versions = [prepare(client, old, "before", args, results), prepare(client, None, "after", args, results)]
        measure(versions, args)
        for v in versions:
            report(v, results)
        client.flushall()
        client.close()
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
