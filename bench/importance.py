"""Important pages first: FRONTIER_ORDER importance (OPIC) beside fifo, on the documentation
sites, with a page budget of a tenth of their pages.

    apt-get install -y python3-doc nodejs-doc rust-doc
    python -m bench.importance --runs 2 --share 0.1

Each site's in-links are counted offline from its files; its most-linked pages are the top
``--share``. Each order crawls each site alone with CRAWL_MAX_PAGES = ``--share`` of its
pages. Figures: the share of the most-linked pages fetched; the smallest gap between two
requests to one host; the workers' CPU a page (a crawl of ``--cpu-pages`` less one of a
page); the Redis bytes a queued URL.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from urllib.parse import urljoin

import lxml.html

from bench.results import Results
from crawler.frontier import codec
from crawler.frontier.frontier import Entry, Frontier
from crawler.urls import InvalidURL, normalize_url
from testing.docsites import Site, crawl_sites, read_feeds, served_sites, smallest_gap
from testing.servers import RedisServer

LIMIT = 120.0  # seconds after its start a worker still running is killed
ORDERS = ("fifo", "importance")


def in_links(sites: list[Site]) -> dict[str, int]:
    """Every page of every site's scope -> the distinct pages of its scope that link to it."""
    pages: dict[str, Path] = {}
    for site in sites:
        for path in (Path(site.directory) / site.prefix.lstrip("/")).rglob("*.html"):
            pages[normalize_url(f"{site.base}/{path.relative_to(site.directory).as_posix()}")] = path
    counts = dict.fromkeys(pages, 0)
    for url, path in pages.items():
        try:
            hrefs = lxml.html.fromstring(path.read_bytes()).xpath("//a/@href")
        except (ValueError, lxml.etree.ParserError):
            continue
        targets = set()
        for href in hrefs:
            try:
                target = normalize_url(urljoin(url, href.strip())).split("#", 1)[0]
            except (InvalidURL, ValueError):
                continue
            target += "index.html" if target.endswith("/") else ""
            if target in counts and target != url:
                targets.add(target)
        for target in targets:
            counts[target] += 1
    return counts


def crawl(sites: list[Site], order: str, budget: int, args, work: Path) -> dict:
    for site in sites:
        site.arrivals.clear()
    settings = {"CRAWL_NAME": "importance", "FRONTIER_HOST_INTERVAL": args.interval}
    settings |= {"FRONTIER_ORDER": order, "CRAWL_MAX_PAGES": budget}
    ended, cpu, _ = crawl_sites(sites, args.workers, work, settings, LIMIT)
    fetched = {
        (p.get("final_url") or p["url"]).split("#", 1)[0]
        for p in read_feeds(work, args.workers)
        if p.get("status") == 200
    }
    fetched = {u + "index.html" if u.endswith("/") else u for u in fetched}
    return {"fetched": fetched, "exits": [c for _, c in ended.values()], "cpu": cpu, "gap": smallest_gap(sites)}


def memory_per_url(order: str, n: int, work: Path) -> float:
    """Redis bytes a queued URL takes with ``order`` (its URL-seen fingerprint included): ``n``
    links of 100 hosts, with a depth and a referer, put into an empty frontier."""
    with RedisServer(str(work / f"memory-{order}")) as server:
        f = Frontier(server.client, "memory", order=order, seen_capacity=2 * n)
        f.put([Entry(url="http://warm.example/", payload=b"http://warm.example/")])
        before = server.client.info("memory")["used_memory"]
        referer = "https://docs.example.org/3/library/functions.html"
        for start in range(0, n, 1000):
            urls = [f"https://host{i % 100}.example.org/3/library/page-{i}.html" for i in range(start, start + 1000)]
            f.put([Entry(url=u, payload=codec.encode_link(u, 2, referer), depth=2, cash=0.01) for u in urls])
        return (server.client.info("memory")["used_memory"] - before) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--interval", type=float, default=0.1, help="FRONTIER_HOST_INTERVAL")
    parser.add_argument("--share", type=float, default=0.1, help="the budget and the most-linked set, of each site")
    parser.add_argument("--runs", type=int, default=1, help="crawls of each order and site")
    parser.add_argument("--memory-urls", type=int, default=100_000, help="URLs queued for the memory figure")
    parser.add_argument("--cpu-pages", type=int, default=2000, help="the budget of the CPU crawls (all sites)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    results = Results("importance", runs=args.runs)
    with served_sites(args.keep, "importance-") as (sites, work):
        began = time.monotonic()
        counts = in_links(sites)
        print(
            f"{len(counts)} pages in scope, {sum(counts.values())} in-links (counted in {time.monotonic() - began:.0f} s); "
            f"each site crawled alone with CRAWL_MAX_PAGES = {args.share:.0%} of its pages"
        )
        hits = {(o, r): 0 for o in ORDERS for r in range(args.runs)}
        gap = dict.fromkeys(ORDERS, float("inf"))
        tops = 0
        for site in sites:
            mine = {u: n for u, n in counts.items() if u.startswith(site.scope)}
            top = set(sorted(mine, key=lambda u: (-mine[u], u))[: max(1, round(args.share * len(mine)))])
            tops += len(top)
            line = [f"{site.name}: {len(mine)} pages, the {len(top)} most linked have >= {min(mine[u] for u in top)}"]
            for run in range(args.runs):
                for order in ORDERS:  # in turn: the machine's drift falls on both
                    budget = max(1, round(args.share * len(mine)))
                    r = crawl([site], order, budget, args, work / f"{site.name}-{order}-{run}")
                    hits[order, run] += len(r["fetched"] & top)
                    gap[order] = min(gap[order], r["gap"])
                    line.append(f"{order} {len(r['fetched'] & top)} ({len(r['fetched'])} fetched, exits {r['exits']})")
            print("  " + "; ".join(line), flush=True)
        for run in range(args.runs):
            share = {o: hits[o, run] / max(tops, 1) for o in ORDERS}
            print(
                f"most-linked pages fetched: fifo {share['fifo']:.1%}, importance {share['importance']:.1%} (goal x1.2)"
            )
            for order in ORDERS:
                results.add(f"most-linked pages fetched, {order}", 100 * share[order], "%")
            results.add(
                "most-linked share, importance / fifo",
                share["importance"] / max(share["fifo"], 1e-9),
                "x",
                baseline="fifo",
            )
        cpu = {}
        for order in ORDERS:
            small = crawl(sites, order, 1, args, work / f"cpu-{order}-1")
            big = crawl(sites, order, args.cpu_pages, args, work / f"cpu-{order}-n")
            cpu[order] = (big["cpu"] - small["cpu"]) / max(len(big["fetched"]) - len(small["fetched"]), 1)
            gap[order] = min(gap[order], big["gap"])
            print(
                f"CPU, {order}: {len(big['fetched'])} pages: {1000 * cpu[order]:.2f} ms a page; exits {big['exits']}",
                flush=True,
            )
            results.add(f"workers' CPU a page, {order}", 1000 * cpu[order], "ms")
        results.add("CPU a page, importance / fifo", cpu["importance"] / max(cpu["fifo"], 1e-9), "x", baseline="fifo")
        for order in ORDERS:
            results.add(f"smallest gap between two requests to a host, {order}", gap[order], "s")
            print(f"smallest gap per host, {order}: {gap[order]:.3f} s (interval {args.interval:g} s)")
        memory = {order: memory_per_url(order, args.memory_urls, work) for order in ORDERS}
        for order in ORDERS:
            results.add(f"Redis bytes a queued URL, {order}", memory[order], "bytes")
        results.add(
            "Redis bytes a queued URL, importance / fifo", memory["importance"] / memory["fifo"], "x", baseline="fifo"
        )
        print(f"Redis bytes a queued URL: fifo {memory['fifo']:.0f}, importance {memory['importance']:.0f}")
    results.write()


if __name__ == "__main__":
    main()
