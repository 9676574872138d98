"""A crawl as a user runs it: many loopback hosts, some of them broken, several local
workers, default settings: how it ended, what it left and why, how polite it was by the
site's own arrival log, and its speed against the polite limit of the same run.

    python -m bench.broken_web                 # 200 hosts, 3 workers (a few minutes)
    python -m bench.broken_web --hosts 60 --workers 2
    python -m bench.broken_web --by-address    # with FRONTIER_ADDRESS_POLITENESS (its own figures)
    python -m bench.broken_web --active-hosts 40   # 40 windows for 200 hosts (its own figures)

The demo site (crawler/demo/site.py, framed pages, every fourth linking a near copy of
itself) with broken hosts: robots.txt answering 500/503, a page answering 503 for good or
500 twice, hosts answering 500 to everything, refusing connections, answering 429 for 20 s,
or 503 with Retry-After: 3600 (broken_site). The workers: ``scrapy crawl broad``, the
project's defaults but FRONTIER_HOST_INTERVAL 0.25 s, a throwaway redis-server; killed
after --timeout. Figures: the healthy pages fetched and when the workers ended, the closing
summary's deferred hosts and URLs, the smallest arrival gap per host and the gaps below the
interval - 10 ms, requests per always-failing URL, the planted near copies found and wrong
marks, the reactor's longest stall, and healthy pages/s against the polite limit (sum over
hosts of 1 / (interval + mean answer)).
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.results import Results
from crawler.demo.site import Site
from testing.docsites import wait_or_kill
from testing.sampling import arrival_gaps
from testing.servers import RedisServer
from testing.workers import clean_env, crawl_command, dumped_stats, read_pages, start_worker

INTERVAL = 0.25
SITE_DELAY = 0.02
TOLERANCE = 0.010


def broken_site(hosts: int, pages: int) -> tuple[Site, dict]:
    """The site, and what is broken where (host index sets)."""
    idx = list(range(1, hosts))  # host 0 serves the seed and stays healthy
    tenth, fifth = max(hosts // 10, 1), max(hosts // 5, 1)
    sizes = {"robots_5xx": tenth, "page_503": fifth, "page_500_twice": fifth, "all_500": 3, "refuse": 3}
    plan, at = {}, 0
    for key, n in (sizes | {"throttled_20s": 2, "retry_after_3600": 1}).items():
        plan[key], at = idx[at : at + n], at + n
    robots = {i: (500 if n % 2 else 503) for n, i in enumerate(plan["robots_5xx"])}
    fail_pages = {i: {"/p3.html": 503} for i in plan["page_503"]}
    fail_pages.update({i: {"/p4.html": [500, 500, None]} for i in plan["page_500_twice"]})
    fail_pages.update({i: {"/p2.html": (503, {"Retry-After": "3600"})} for i in plan["retry_after_3600"]})
    site = Site(hosts, pages, SITE_DELAY, robots=robots, fail_pages=fail_pages, fail_all=dict.fromkeys(plan["all_500"], 500),
                throttle_for=dict.fromkeys(plan["throttled_20s"], 20), refuse=plan["refuse"], framed=True)  # fmt: skip
    return site, plan


def run(hosts: int, pages: int, workers: int, timeout: float, by_address: bool = False, active_hosts: int = 0) -> dict:
    site, plan = broken_site(hosts, pages)
    site.start()
    work = Path(tempfile.mkdtemp(prefix="broken-web-"))
    seeds = work / "seeds.txt"
    seeds.write_text(site.seeds[0] + "\n")
    print(f"site: {hosts} hosts x {pages} pages on 127.0.0.2-{site.hosts[-1]}:{site.port}; workdir {work}")
    print("broken: " + ", ".join(f"{k} {len(v)}" for k, v in plan.items()))
    with RedisServer(str(work)) as redis_server:
        env = {**clean_env(), "REDIS_URL": redis_server.url}
        started = time.monotonic()
        procs = []
        for n in range(workers):
            settings = {"CRAWL_NAME": "broken-web", "FRONTIER_HOST_INTERVAL": INTERVAL, "ARCHIVE_MAX_SECONDS": None}
            settings |= {"NETWORK_GUARD_ALLOW": "127.0.0.0/8", "LOG_FILE": work / f"worker-{n}.log"}
            if active_hosts:  # fewer windows than hosts: the others wait on disk (decision 0055)
                settings["FRONTIER_ACTIVE_HOSTS"] = active_hosts
            if by_address:  # (each host on an address of its own: the class's interval the host's)
                settings |= {"FRONTIER_ADDRESS_POLITENESS": True, "FRONTIER_ADDRESS_INTERVAL": INTERVAL}
            cmd = crawl_command(work / f"pages-{n}.jsonl", seeds if n == 0 else None, settings, append=True)
            procs.append(start_worker(cmd, env, work / f"worker-{n}.out"))
        ended = wait_or_kill(procs, started, timeout)
    site.stop()
    return report(site, plan, started, ended, workers, work, timeout)


def report(site: Site, plan: dict, started: float, ended: dict, workers: int, work: Path, timeout: float) -> dict:
    """Print what the run showed; its headline figures, by name: (value, unit)."""
    figures: dict[str, tuple[float, str]] = {}
    hits = site.hits()
    broken = {i for key in ("robots_5xx", "all_500", "refuse", "retry_after_3600") for i in plan[key]}
    healthy_hosts = {site.hosts[i] for i in range(site.n_hosts) if i not in broken}
    planned = site.fetch_plan()
    always_failing = {(site.hosts[i], "/p3.html") for i in plan["page_503"]}
    healthy = {k for k in planned if k[0] in healthy_hosts and k not in always_failing}
    fetched_ok = {}
    for h in hits:
        if h.key in healthy and h.status is not None and h.status < 500 and h.status != 429 and h.key not in fetched_ok:
            fetched_ok[h.key] = h.start
    missing = healthy - set(fetched_ok)
    print()
    for n, (t, code) in ended.items():
        print(
            f"worker {n}: "
            + (
                f"exited by itself after {t:.0f} s, exit code {code}"
                if code is not None
                else f"still running after {timeout:.0f} s (killed)"
            )
        )
    if fetched_ok:
        times = sorted(t - started for t in fetched_ok.values())
        p95 = times[int(len(times) * 0.95) - 1]
        figures["healthy pages fetched"] = (len(fetched_ok) / len(healthy), "share")
        print(
            f"healthy pages: {len(fetched_ok)} of {len(healthy)} fetched; 95% by {p95:.0f} s, "
            f"the last at {times[-1]:.0f} s" + (f"; missing {sorted(missing)[:5]}" if missing else "")
        )
    if all(code == 0 for _, code in ended.values()):
        figures["the last worker ended by itself after"] = (max(t for t, _ in ended.values()), "s")
    summaries, stalls, moved = [], [], defaultdict(float)
    for n in range(workers):
        text = (work / f"worker-{n}.log").read_text(errors="replace")
        summaries += re.findall(r"Crawl summary.*?(?=\n20\d\d-|\Z)", text, re.S)
        stats = dumped_stats(text)
        stalls += [v for k, v in stats.items() if k == "reactor/stall_max_ms"]
        for key in ("frontier/spilled", "frontier/loaded", "frontier/evicted"):
            moved[key] += stats.get(key, 0)
    print(
        f"spill: {moved['frontier/spilled']:.0f} URLs written to disk from the inbox and buffers, {moved['frontier/evicted']:.0f}"
        f" from windows given back, {moved['frontier/loaded']:.0f} loaded back (the workers' counts)"
    )
    if stalls:  # (crawler/extensions/stalls.py)
        figures["reactor stall, the workers' longest"] = (max(stalls), "ms")
        print(f"reactor stalls: longest {max(stalls):.0f} ms (each worker's: {', '.join(f'{v:.0f}' for v in stalls)})")
    if summaries:
        print("the last worker's closing summary:")
        print("  " + summaries[-1].strip().replace("\n", "\n  "))

    # near copies: the planted ones, and nothing else
    pages = [p for n in range(workers) for p in read_pages(work / f"pages-{n}.jsonl")]
    copies = {site.url(h, c): site.url(h, o) for h in site.hosts for o, c in site.near_copies()}
    fetched_copies = {p["url"] for p in pages if p["url"] in copies and p.get("status") == 200}
    right = {p["url"] for p in pages if p["url"] in copies and p.get("near_duplicate_of") == copies[p["url"]]}
    wrong = [(p["url"], p["near_duplicate_of"]) for p in pages if p.get("near_duplicate_of") and p["url"] not in right]
    exact = sum(1 for p in pages if p.get("duplicate_of"))  # the same bytes: the pages every host serves alike
    print(
        f"near copies: {len(right)} of {len(fetched_copies)} fetched planted copies marked near their page; "
        f"other near marks (wrong): {len(wrong)}"
        + (f", e.g. {wrong[:3]}" if wrong else "")
        + f"; exact copies: {exact}"
    )

    # politeness, by the site's own arrival log
    gaps = arrival_gaps(hits)
    smallest = sorted(min(g) for g in gaps.values() if g)
    close = sum(1 for g in gaps.values() for x in g if x < INTERVAL - TOLERANCE)
    figures["smallest arrival gap at a host"] = (smallest[0], "s")
    figures["arrival gaps below the interval"] = (close, "gaps")
    print(
        f"politeness: {len(hits)} requests to {len(gaps)} hosts; smallest arrival gap per host: "
        f"min {smallest[0]:.3f} s, median {smallest[len(smallest) // 2]:.3f} s; "
        f"{close} gaps below {INTERVAL - TOLERANCE:.2f} s"
    )

    # retries of URLs that fail for good
    counts = defaultdict(int)
    for h in hits:
        counts[h.key] += 1
    failing = [site.hosts[i] for i in plan["page_503"]]
    per_url = [counts[(host, "/p3.html")] for host in failing if counts[(host, "/p3.html")]]
    if per_url:
        print(
            f"always-503 URLs: {len(per_url)}, requests each: max {max(per_url)}, mean {sum(per_url) / len(per_url):.2f}"
        )
    all500 = [n for (host, _), n in counts.items() if host in {site.hosts[i] for i in plan["all_500"]}]
    if all500:
        print(f"hosts answering 500 to everything: {len(all500)} URLs requested, {sum(all500)} requests in all")
    ra = [site.hosts[i] for i in plan["retry_after_3600"]]
    print(f"Retry-After 3600 hosts: {sum(counts[k] for k in counts if k[0] in ra)} page requests in all")

    # speed against the polite limit of this run
    durations = defaultdict(list)
    for h in hits:
        if h.end is not None:
            durations[h.host].append(h.end - h.start)
    limit = sum(1 / (INTERVAL + sum(d) / len(d)) for host, d in durations.items() if host in healthy_hosts)
    if fetched_ok:
        times = sorted(fetched_ok.values())
        bulk = times[: int(len(times) * 0.9)]
        rate = len(bulk) / max(bulk[-1] - times[0], 1e-9)
        print(
            f"speed: {rate:.1f} healthy pages/s over the first 90%; polite limit of the healthy hosts "
            f"{limit:.1f} pages/s; ratio {rate / limit:.2f}"
        )
        figures["healthy pages/s"] = (rate, "pages/s")
        figures["pages/s against the polite limit"] = (rate / limit, "x")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--pages", type=int, default=25)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--runs", type=int, default=1, help="crawls, one after the other (figures: median and spread)")
    parser.add_argument(
        "--by-address", action="store_true", help="FRONTIER_ADDRESS_POLITENESS on, its interval the host's"
    )
    parser.add_argument(
        "--active-hosts",
        type=int,
        default=0,
        help="FRONTIER_ACTIVE_HOSTS (hosts with a window at most; 0: the default)",
    )
    args = parser.parse_args()
    name = "broken_web_by_address" if args.by_address else "broken_web"
    results = Results("broken_web", runs=args.runs, file=name + ("_windows" if args.active_hosts else ""))
    for _ in range(args.runs):
        figures = run(args.hosts, args.pages, args.workers, args.timeout, args.by_address, args.active_hosts)
        for name, (value, unit) in figures.items():
            baseline = "the polite limit: hosts / (interval + response time)" if unit == "x" else None
            results.add(name, value, unit, baseline)
    results.write()


if __name__ == "__main__":
    main()
