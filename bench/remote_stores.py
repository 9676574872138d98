"""What remote stores cost a crawl: two workers crawl the demo site with Toxiproxy between
them and Redis, Cassandra and S3, with latency or a fault on one of them, each run against
the 0 ms run (base).

    python -m bench.remote_stores                           # every scenario, some 15 minutes
    python -m bench.remote_stores --only base,cassandra-20,s3-20,redis-1,combined
    python -m bench.remote_stores --hosts 20 --pages 15 --blackhole 60 --pause 20

Needs scripts/cassandra.py's Cassandra and the SeaweedFS and Toxiproxy builds; it starts its
own of each on loopback (Cassandra's CQL on --cassandra-port), and a redis-server, keyspace
and bucket a run; every store is reached through Toxiproxy, in base too. Scenarios: base;
cassandra-5/-20/-50 and s3-5/-20/-50 (ms added to each answer); redis-1/-5; combined
(Cassandra and S3 20 ms, Redis 1 ms); s3-slow-put (2 s); s3-blackhole (--blackhole s) and
cassandra-pause (the node SIGSTOPped --pause s), from a fifth of the site fetched.
Figures of a run: pages/s (by the site's log) and the workers' CPU a page, against base's;
reactor stall p99 and max; the most pages a worker held unstored; pages fetched again;
records and pointers lost (testing/archived.py); whether the workers ended by themselves;
for a fault, the pages fetched meanwhile (bound: --unstored x workers + a host each).
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from bench.results import Results
from crawler.demo.site import Site
from testing.archived import check_archived
from testing.cassandra import CassandraNodes
from testing.servers import RedisServer
from testing.stores import S3Server, s3_archive_settings
from testing.toxiproxy import ToxiproxyServer
from testing.workers import clean_env, crawl_command, dumped_stats, start_worker, wait4

WORKERS = 2
REDIS_MS = (1, 5)
STORE_MS = (5, 20, 50)
SLOW_PUT_MS = 2000


@dataclass
class Scenario:
    name: str
    latency: dict = field(default_factory=dict)  # proxy name -> ms added to each answer
    fault: str = ""  # "blackhole" | "pause"


def scenarios() -> list[Scenario]:
    out = [Scenario("base")]
    out += [Scenario(f"cassandra-{ms}", {"cassandra": ms}) for ms in STORE_MS]
    out += [Scenario(f"s3-{ms}", {"s3": ms}) for ms in STORE_MS]
    out += [Scenario(f"redis-{ms}", {"redis": ms}) for ms in REDIS_MS]
    out.append(Scenario("combined", {"cassandra": 20, "s3": 20, "redis": 1}))
    out.append(Scenario("s3-slow-put", {"s3": SLOW_PUT_MS}))
    out.append(Scenario("s3-blackhole", fault="blackhole"))
    out.append(Scenario("cassandra-pause", fault="pause"))
    return out


class Bench:
    def __init__(self, args, work: Path):
        self.args, self.work = args, work
        self.cassandra = CassandraNodes(work / "cassandra", port=args.cassandra_port, storage_port=7450,
                                        jmx_port=7650, heap="768M")  # fmt: skip
        self.s3 = S3Server(work / "s3")
        self.toxiproxy = ToxiproxyServer(work / "toxiproxy")

    def start(self) -> None:
        t0 = time.monotonic()
        starting = self.cassandra.begin()
        self.toxiproxy.start()
        self.s3.start()
        self.cassandra.started(starting)
        print(f"Cassandra, SeaweedFS and Toxiproxy up in {time.monotonic() - t0:.0f} s", flush=True)
        client = self.toxiproxy.client
        self.proxies = {
            "cassandra": client.create("cassandra", f"127.0.0.1:{self.args.cassandra_port}"),
            "s3": client.create("s3", f"127.0.0.1:{self.s3.port}"),
        }
        for k, v in self.s3.credentials.items():
            os.environ[k] = v

    def close(self) -> None:
        pid = self.cassandra.pid()
        if pid:
            os.kill(pid, signal.SIGCONT)
        for stop in (self.toxiproxy.stop, lambda: self.s3.stop(kill=True), self.cassandra.close):
            try:
                stop()
            except Exception as exc:  # noqa: BLE001 - stop the others all the same
                print(f"(stopping: {exc})")

    def run(self, scenario: Scenario) -> dict:
        args = self.args
        name = f"remote-{scenario.name}-{uuid.uuid4().hex[:6]}"
        keyspace = "bench_" + uuid.uuid4().hex[:10]
        bucket = self.s3.new_bucket()
        run_dir = self.work / scenario.name
        run_dir.mkdir()
        site = Site(args.hosts, args.pages, args.site_delay).start()
        redis_server = RedisServer(run_dir / "redis").start()
        redis_proxy = self.toxiproxy.client.create(f"redis-{name}", f"127.0.0.1:{redis_server.port}")
        proxies = {**self.proxies, "redis": redis_proxy}
        for proxy_name, ms in scenario.latency.items():
            proxies[proxy_name].latency(ms)
        settings = {
            "CRAWL_NAME": name,
            "CRAWL_DIR": run_dir / "crawl",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": args.interval,
            "FRONTIER_IDLE_SECONDS": 3,
            "FRONTIER_MAX_UNSTORED": args.unstored,
            "ARCHIVE_MAX_SECONDS": 1,
            "ARCHIVE_S3_TIMEOUT": args.s3_timeout,
            "ARCHIVE_RETRY_MAX": args.s3_timeout,
            **s3_archive_settings(f"http://{proxies['s3'].address}", bucket),
            "URLSTORE_BACKEND": "cassandra",
            "CASSANDRA_HOSTS": "127.0.0.1",
            "CASSANDRA_PORT": proxies["cassandra"].port,
            "CASSANDRA_KEYSPACE": keyspace,
        }
        env = {**clean_env(), "REDIS_URL": f"redis://{redis_proxy.address}/0"}
        env.pop("CASSANDRA_HOSTS", None)
        seeds = run_dir / "seeds.txt"
        seeds.write_text("".join(url + "\n" for url in site.seeds))
        fault: dict = {}
        procs, logs = [], []
        started = time.monotonic()
        try:
            for n in range(WORKERS):
                logs.append(run_dir / f"worker-{n}.log")
                cmd = crawl_command(run_dir / f"pages-{n}.jsonl", seeds, {**settings, "LOG_FILE": logs[-1]})
                procs.append(start_worker(cmd, env, run_dir / f"out-{n}.txt"))
            if scenario.fault:
                injecting = threading.Thread(target=self.inject, args=(scenario.fault, site, proxies, fault))
                injecting.start()
            ended = {}

            def wait(n: int) -> None:
                ended[n] = (*wait4(procs[n], args.seconds - (time.monotonic() - started)), time.monotonic())

            waiting = [threading.Thread(target=wait, args=(n,)) for n in range(WORKERS)]
            for t in waiting:
                t.start()
            for t in waiting:
                t.join()
            if scenario.fault:
                injecting.join()
            direct = {**settings, "CASSANDRA_PORT": args.cassandra_port, "CASSANDRA_HOSTS": "127.0.0.1"}
            direct.update(s3_archive_settings(self.s3.endpoint, bucket))
            archived = check_archived(direct, site)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            if fault.get("paused") and not fault.get("resumed"):
                os.kill(self.cassandra.pid(), signal.SIGCONT)
            redis_proxy.delete()
            for proxy in self.proxies.values():
                proxy.clear()
            redis_server.kill()
            site.stop()
        return self.figures(scenario, site, procs, ended, logs, archived, fault, started)

    def inject(self, fault: str, site: Site, proxies: dict, out: dict) -> None:
        """The fault, once a fifth of the site's pages are answered; its start, its end and
        the pages answered meanwhile in ``out``."""
        total = len(site.expected_page_urls())
        deadline = time.monotonic() + self.args.seconds
        while len([h for h in site.page_hits() if h.status == 200]) < total // 5:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        before = len(site.page_hits())
        out["start"] = time.monotonic()
        if fault == "blackhole":
            proxies["s3"].blackhole()
            time.sleep(self.args.blackhole)
            out["during"] = len(site.page_hits()) - before
            proxies["s3"].clear()
        else:
            pid = self.cassandra.pid()
            os.kill(pid, signal.SIGSTOP)
            out["paused"] = True
            time.sleep(self.args.pause)
            out["during"] = len(site.page_hits()) - before
            os.kill(pid, signal.SIGCONT)
            out["resumed"] = True
        out["end"] = time.monotonic()

    def figures(self, scenario, site, procs, ended, logs, archived, fault, started) -> dict:
        ok = sorted(h.start for h in site.page_hits() if h.status == 200)
        rate = (len(ok) - 1) / max(ok[-1] - ok[0], 1e-9) if len(ok) > 1 else 0.0
        cpu = sum(usage.ru_utime + usage.ru_stime for _, (_, usage, _) in ended.items())
        stats = [dumped_stats(log.read_text(errors="replace")) if log.exists() else {} for log in logs]
        by_itself = all(code == 0 for code, _, _ in ended.values()) and all(
            when - started < self.args.seconds for _, _, when in ended.values()
        )
        out = {
            "pages": len(ok),
            "pages/s": rate,
            "CPU ms a page": 1000 * cpu / max(len(ok), 1),
            "stall p99 ms": max((s.get("reactor/stall_p99_ms", 0.0) for s in stats), default=0.0),
            "stall max ms": max((s.get("reactor/stall_max_ms", 0.0) for s in stats), default=0.0),
            "held at most": max((s.get("frontier/unstored_max", 0.0) for s in stats), default=0.0),
            "refetched": len(archived.refetched),
            "records lost": len(archived.lost_records),
            "pointers lost": len(archived.lost_pointers) + len(archived.bad_pointers),
            "ended by itself": 1.0 if by_itself else 0.0,
            "seconds": max(when for _, _, when in ended.values()) - started,
        }
        if "during" in fault:
            out["pages fetched during the fault"] = fault["during"]
            out["bound"] = self.args.unstored * WORKERS + len(site.hosts)
            out["ended after the fault, s"] = max(when for _, _, when in ended.values()) - fault["end"]
        if archived.lost:
            print(f"  lost, e.g.: {(archived.lost_records + archived.lost_pointers + archived.bad_pointers)[:3]}")
        return out


def report(results: Results, scenario: Scenario, got: dict, base: dict | None) -> None:
    line = (
        f"{scenario.name:16} {got['pages']:5} pages {got['pages/s']:6.1f}/s {got['CPU ms a page']:6.1f} ms CPU/page  "
        f"stall p99 {got['stall p99 ms']:4.0f} max {got['stall max ms']:5.0f} ms  held ≤{got['held at most']:4.0f}  "
        f"refetched {got['refetched']}  lost {got['records lost']}+{got['pointers lost']}  "
        f"{'ended by itself' if got['ended by itself'] else 'DID NOT END BY ITSELF'} in {got['seconds']:.0f} s"
    )
    if base and scenario.name != "base":
        ratio, cpu = got["pages/s"] / max(base["pages/s"], 1e-9), got["CPU ms a page"] / base["CPU ms a page"]
        line += f"  (pages/s x{ratio:.2f}, CPU/page x{cpu:.2f} of base)"
        results.add(f"{scenario.name}: pages/s against base", ratio, "x", baseline="base: pages/s")
        results.add(f"{scenario.name}: CPU a page against base", cpu, "x", baseline="base: CPU ms a page")
    if "pages fetched during the fault" in got:
        line += (
            f"\n{'':16} {got['pages fetched during the fault']} pages fetched during the fault (bound "
            f"{got['bound']}); the workers ended {got['ended after the fault, s']:.0f} s after it"
        )
        results.add(f"{scenario.name}: pages fetched during the fault", got["pages fetched during the fault"], "pages")
    print(line, flush=True)
    units = {"pages/s": "pages/s", "CPU ms a page": "ms", "stall p99 ms": "ms", "stall max ms": "ms"}
    units |= {"held at most": "pages", "refetched": "pages", "records lost": "records"}
    units |= {"pointers lost": "pointers", "ended by itself": "yes"}
    for key, unit in units.items():
        results.add(f"{scenario.name}: {key}", got[key], unit)


def interrupted(*_) -> None:
    raise KeyboardInterrupt


def main() -> int:
    names = [s.name for s in scenarios()]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help=f"scenarios, comma separated (base always runs): {', '.join(names)}")
    parser.add_argument("--hosts", type=int, default=40, help="hosts of the demo site (default 40)")
    parser.add_argument("--pages", type=int, default=25, help="pages a host (default 25: some 27 requests a host)")
    parser.add_argument("--seconds", type=float, default=300, help="a run's longest (SIGINT after; default 300)")
    parser.add_argument("--interval", type=float, default=0.25, help="FRONTIER_HOST_INTERVAL (default 0.25)")
    parser.add_argument("--site-delay", type=float, default=0.02, help="seconds every page answers late (0.02)")
    parser.add_argument("--unstored", type=int, default=100, help="FRONTIER_MAX_UNSTORED (default 100)")
    parser.add_argument("--s3-timeout", type=float, default=10, help="ARCHIVE_S3_TIMEOUT, ARCHIVE_RETRY_MAX (10)")
    parser.add_argument("--blackhole", type=float, default=120, help="seconds S3 is blackholed (default 120)")
    parser.add_argument("--pause", type=float, default=30, help="seconds Cassandra is SIGSTOPped (default 30)")
    parser.add_argument("--cassandra-port", type=int, default=9442, help="its own node's CQL port (default 9442)")
    args = parser.parse_args()
    chosen = {n.strip() for n in args.only.split(",") if n.strip()}
    if unknown := chosen - set(names):
        parser.error(f"no such scenario: {', '.join(sorted(unknown))}")
    todo = [s for s in scenarios() if not chosen or s.name in chosen or s.name == "base"]
    results = Results("remote_stores")
    work = Path(tempfile.mkdtemp(prefix="remote-stores-"))
    print(f"work directory {work}; scenarios: {', '.join(s.name for s in todo)}", flush=True)
    bench = Bench(args, work)
    signal.signal(signal.SIGTERM, interrupted)  # stopped: everything it started is stopped too
    base = None
    try:
        bench.start()
        for scenario in todo:
            got = bench.run(scenario)
            base = base or got
            report(results, scenario, got, base)
    finally:
        bench.close()
        if results.values:
            results.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
