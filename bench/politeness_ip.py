"""Benchmark: politeness per address (FRONTIER_ADDRESS_POLITENESS), the same crawls per host
and per address in one call, on loopback with a DNS server of its own (testing/dns.py).

    python -m bench.politeness_ip                   # both parts
    python -m bench.politeness_ip --names 100 --doc-seconds 30

1. Shared hosting: --names host names on 5 addresses (testing/sites.py's AddressSite, a
   page linking to 2 others a name), crawled by 2 workers per host (FRONTIER_HOST_INTERVAL
   1 s), then per address (FRONTIER_ADDRESS_INTERVAL --address-interval, a cap of --cap). By the
   site's arrival log, each address's request rate while it has work (from its first
   request to its last) against its limit, 1 / interval, and its smallest gap.
2. The documentation sites (testing/docsites.py: 9 sites, one address each), named through
   the DNS server, crawled by 2 workers for --doc-seconds per host and per address (the
   address interval the host's, so that it never binds): pages/s and the workers' CPU a page
   of both, and the DNS questions a name (one look-up a host a TTL, not one a URL).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path

from bench.results import Results
from testing.dns import Zone
from testing.docsites import KILL_AFTER, crawl_sites, read_feeds, served_sites, stop_sites
from testing.servers import RedisServer
from testing.sites import AddressSite
from testing.workers import clean_env, launch_worker, loopback_settings, seed_file

ADDRESSES = [f"127.0.0.{41 + i}" for i in range(5)]
HOST_INTERVAL = 1.0


def shared_hosting(args, by_address: bool, results: Results) -> None:
    mode = "per address" if by_address else "per host"
    names = {f"s{i:04d}.test": ADDRESSES[i % len(ADDRESSES)] for i in range(args.names)}
    with tempfile.TemporaryDirectory(prefix="politeness-ip-") as tmp, Zone(names, ttl=300) as zone:
        work = Path(tmp)
        with AddressSite(ADDRESSES, pages=2) as site, RedisServer(str(work)) as redis_server:
            seeds = seed_file(work, [site.url(name) for name in names])
            settings = loopback_settings(
                "politeness-ip",
                work / "w.log",
                FRONTIER_HOST_INTERVAL=HOST_INTERVAL,
                FRONTIER_ADDRESS_POLITENESS=by_address,
                FRONTIER_ADDRESS_INTERVAL=args.address_interval,
                FRONTIER_ADDRESS_MAX_IN_FLIGHT=args.cap,
                DNS_NAMESERVERS=zone.nameserver,
                CRAWL_DIR=work / "crawl",
            )
            env = {**clean_env(), "REDIS_URL": redis_server.url}
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            workers = [
                launch_worker(
                    work, f"w{n}", seeds if n == 0 else None, {**settings, "LOG_FILE": work / f"w{n}.log"}, env
                )
                for n in range(2)
            ]
            codes = [w.wait(args.limit) for w in workers]
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            hits = site.hits()
        asked = sum(zone.asked.values())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    pages = [h for h in hits if h.path != "/robots.txt"]
    by_address = defaultdict(list)
    for hit in hits:
        by_address[hit.address].append(hit.start)
    ratios, gaps, rates = [], [], []
    for starts in by_address.values():
        starts.sort()
        span = starts[-1] - starts[0]
        rate = (len(starts) - 1) / span if span > 0 else 0.0
        rates.append(rate)
        ratios.append(rate * args.address_interval)
        gaps.append(min(b - a for a, b in pairwise(starts)))
    all_gaps = sorted(b - a for starts in by_address.values() for a, b in pairwise(starts))
    quartiles = statistics.quantiles(all_gaps, n=4) if len(all_gaps) > 1 else [0, 0, 0]
    print(f"  gaps at an address: quartiles {', '.join(f'{1000 * q:.0f}' for q in quartiles)} ms")
    below = sum(
        1 for starts in by_address.values() for a, b in pairwise(starts) if b - a < args.address_interval - 0.010
    )
    print(
        f"{mode}: workers exited {codes}; {len(pages)} of {3 * len(names)} pages, {len(hits)} requests; "
        f"DNS questions {asked}; CPU {1000 * cpu / max(len(pages), 1):.1f} ms a page"
    )
    print(
        f"  an address's rate while it has work: {min(rates):.2f}-{max(rates):.2f} requests/s "
        f"({min(ratios):.2f}-{max(ratios):.2f} of 1/{args.address_interval:g} s); smallest gap {min(gaps) * 1000:.0f} ms; "
        f"{below} gaps below the address interval"
    )
    results.add(f"shared hosting, {mode}: pages fetched", len(pages), "pages")
    results.add(f"shared hosting, {mode}: an address's rate, median", statistics.median(rates), "requests/s")
    results.add(f"shared hosting, {mode}: an address's rate against 1/interval, lowest", min(ratios), "x")
    results.add(f"shared hosting, {mode}: gaps below the address interval", below, "gaps")


def documentation(args, by_address: bool, results: Results) -> tuple[float, float]:
    mode = "per address" if by_address else "per host"
    with served_sites(False, "politeness-ip-") as (sites, work):
        names = {}
        for site in sites:
            site.url_host = f"{site.name}.docs.test"
            names[site.url_host] = site.host
        with Zone(names, ttl=300) as zone:
            settings = {
                "CRAWL_NAME": "politeness-ip-docs",
                "FRONTIER_HOST_INTERVAL": args.interval,
                "CLOSESPIDER_TIMEOUT": args.doc_seconds,
                "FRONTIER_ADDRESS_POLITENESS": by_address,
                "FRONTIER_ADDRESS_INTERVAL": args.interval,
                "DNS_NAMESERVERS": zone.nameserver,
            }
            started = time.monotonic()
            ended, cpu, _ = crawl_sites(sites, 2, work, settings, args.doc_seconds + KILL_AFTER)
            took = time.monotonic() - started
            stop_sites(sites)
            asked = Counter(zone.asked)
        ok = [p for p in read_feeds(work, 2) if p.get("status") == 200]
    times = sorted(p["fetched_at"] for p in ok if p.get("fetched_at"))
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    rate, per_page = len(ok) / max(span, 1e-9), 1000 * cpu / max(len(ok), 1)
    most = max(asked.values()) if asked else 0
    print(
        f"documentation, {mode}: {len(ok)} pages in {span:.0f} s: {rate:.1f} pages/s, CPU {per_page:.1f} ms a page; "
        f"DNS questions: {sum(asked.values())} ({most} at most for a name; the workers ran {took:.0f} s)"
    )
    results.add(f"documentation, {mode}: pages/s", rate, "pages/s")
    results.add(f"documentation, {mode}: workers' CPU a page", per_page, "ms")
    if by_address:
        results.add("documentation, per address: DNS questions a name, most", most, "questions")
    return rate, per_page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", type=int, default=100)
    parser.add_argument("--address-interval", type=float, default=1.0, help="FRONTIER_ADDRESS_INTERVAL (its default)")
    parser.add_argument("--cap", type=int, default=1, help="FRONTIER_ADDRESS_MAX_IN_FLIGHT of the shared hosting crawl")
    parser.add_argument("--limit", type=float, default=300, help="seconds before a shared-hosting worker is killed")
    parser.add_argument("--interval", type=float, default=0.05, help="the documentation crawl's FRONTIER_HOST_INTERVAL")
    parser.add_argument("--doc-seconds", type=float, default=45)
    parser.add_argument("--parts", default="1,2")
    args = parser.parse_args()
    results = Results("politeness_ip")
    parts = set(args.parts.split(","))
    if "1" in parts:
        shared_hosting(args, False, results)
        shared_hosting(args, True, results)
    if "2" in parts:
        host_rate, host_cpu = documentation(args, False, results)
        address_rate, address_cpu = documentation(args, True, results)
        print(
            f"per address against per host: pages/s x{address_rate / host_rate:.3f}, CPU a page x{address_cpu / host_cpu:.3f}"
        )
        results.add(
            "documentation: pages/s per address / per host",
            address_rate / host_rate,
            "x",
            baseline="documentation, per host: pages/s",
        )
        results.add(
            "documentation: CPU a page per address / per host",
            address_cpu / host_cpu,
            "x",
            baseline="documentation, per host: workers' CPU a page",
        )
    results.write()


if __name__ == "__main__":
    main()
