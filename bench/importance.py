"""Important pages first: FRONTIER_ORDER importance (OPIC) beside fifo, on real documentation
sites, with a page budget of a tenth of their pages.

Setup (Debian's documentation packages, as bench/doc_crawl.py serves them):

    apt-get install -y python3-doc nodejs-doc rust-doc
    python -m bench.importance                      # 2 workers, interval 0.1 s
    python -m bench.importance --runs 2 --share 0.1

The in-links of every page are counted offline from the files on disk: every HTML file of a
site's scope is parsed (lxml), its ``<a href>`` resolved and normalized as the crawler does
(crawler/urls.py), and a link counts when it lands on another page of the same scope that
exists on disk; one per source page. A site's most-linked pages are the top ``--share`` of its
pages (ties broken by URL). Then each order crawls each site alone from its seed with
CRAWL_MAX_PAGES = ``--share`` of its pages (alone: with all the sites at once, each host's
polite rate, not the order, decides how much of each is fetched), 2 workers, the project's
defaults otherwise (a throwaway redis-server each crawl), and the figure is the share of the
most-linked pages among the pages fetched (status 200), over all the sites. Beside it: the
smallest gap between two requests to one host in the sites' own arrival log (politeness), and
the workers' CPU per page (their page processes included): a crawl of all the sites of
``--cpu-pages`` pages less one of a single page (the workers' start), for each order. Nothing
leaves 127.0.0.0/8; every worker is killed 120 s after its start.
"""

from __future__ import annotations

import argparse
import json
import resource
import threading
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urljoin

import lxml.html

from crawler.frontier import codec
from crawler.frontier.frontier import Entry, Frontier
from crawler.urls import InvalidURL, normalize_url
from testing.docsites import DocHandler, DocServer, Site, run_commands, served_sites, worker_commands
from testing.servers import RedisServer
from testing.workers import clean_env

LIMIT = 120.0  # seconds after its start a worker still running is killed


class TimedHandler(DocHandler):
    """DocHandler that notes each GET's arrival (host, monotonic time)."""

    def do_GET(self):
        with _arrivals_lock:
            ARRIVALS.append((self.site.host, time.monotonic()))
        super().do_GET()


ARRIVALS: list[tuple[str, float]] = []
_arrivals_lock = threading.Lock()


class TimedServer(DocServer):
    handler = TimedHandler


# -- the link graph, offline -------------------------------------------------------------


def page_url(site: Site, path: Path) -> str:
    """The normalized URL a file of the site is served at (index.html: its directory's)."""
    rel = path.relative_to(site.directory).as_posix()
    return normalize_url(f"{site.base}/{rel}")


def in_links(sites: list[Site]) -> dict[str, int]:
    """Every page of every site's scope -> the distinct pages of its scope that link to it."""
    pages: dict[str, Path] = {}
    for site in sites:
        root = Path(site.directory) / site.prefix.lstrip("/")
        for path in root.rglob("*.html"):
            pages[page_url(site, path)] = path
    counts = dict.fromkeys(pages, 0)
    for url, path in pages.items():
        try:
            tree = lxml.html.fromstring(path.read_bytes())
        except (ValueError, lxml.etree.ParserError):
            continue
        targets = set()
        for href in tree.xpath("//a/@href"):
            try:
                target = normalize_url(urljoin(url, href.strip()))
            except (InvalidURL, ValueError):
                continue
            target = target.split("#", 1)[0]
            if target.endswith("/"):
                target += "index.html"
            if target in counts and target != url:
                targets.add(target)
        for target in targets:
            counts[target] += 1
    return counts


def most_linked(counts: dict[str, int], share: float) -> set[str]:
    ranked = sorted(counts, key=lambda u: (-counts[u], u))
    return set(ranked[: max(1, round(share * len(ranked)))])


# -- one crawl ---------------------------------------------------------------------------


def crawl(sites: list[Site], order: str, budget: int, interval: float, work: Path, workers: int) -> dict:
    work.mkdir(parents=True)
    seeds = work / "seeds.txt"
    seeds.write_text("".join(site.seed + "\n" for site in sites))
    with _arrivals_lock:
        ARRIVALS.clear()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with RedisServer(str(work)) as redis_server:
        env = {**clean_env(), "REDIS_URL": redis_server.url}
        settings = {
            "CRAWL_NAME": "importance",
            "FRONTIER_HOST_INTERVAL": interval,
            "FRONTIER_ORDER": order,
            "CRAWL_MAX_PAGES": budget,
        }
        cmds = worker_commands(sites, workers, work, env, settings)
        started = time.monotonic()
        ended = run_commands(cmds, LIMIT)
        seconds = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    fetched = set()
    for n in range(workers):
        path = work / f"pages-{n}.jsonl"
        if path.exists():
            for line in path.read_text().splitlines():
                page = json.loads(line)
                if page.get("status") == 200:
                    fetched.add((page.get("final_url") or page["url"]).split("#", 1)[0])
    fetched = {u + "index.html" if u.endswith("/") else u for u in fetched}
    with _arrivals_lock:
        arrivals = list(ARRIVALS)
    by_host = defaultdict(list)
    for host, at in arrivals:
        by_host[host].append(at)
    gaps = [b - a for times in by_host.values() for a, b in zip(sorted(times), sorted(times)[1:])]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "fetched": fetched,
        "exits": [code for _, code in ended.values()],
        "seconds": seconds,
        "cpu": cpu,
        "min_gap": min(gaps) if gaps else float("nan"),
        "requests": len(arrivals),
    }


def memory_per_url(order: str, n: int, work: Path) -> float:
    """Redis bytes a queued URL takes with ``order`` (its URL-seen fingerprint included): ``n``
    links of 100 hosts (payloads with a depth and a referer, as a page's links are) put into an
    empty frontier of its own."""
    with RedisServer(str(work / f"memory-{order}")) as server:
        client = server.client
        f = Frontier(client, "memory", order=order, seen_capacity=2 * n)
        f.put([Entry(url="http://warm.example/", payload=b"http://warm.example/")])
        before = client.info("memory")["used_memory"]
        referer = "https://docs.example.org/3/library/functions.html"
        for start in range(0, n, 1000):
            urls = [f"https://host{i % 100}.example.org/3/library/page-{i}.html" for i in range(start, start + 1000)]
            f.put([Entry(url=u, payload=codec.encode_link(u, 2, referer), depth=2, cash=0.01) for u in urls])
        after = client.info("memory")["used_memory"]
    return (after - before) / n


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
    with served_sites(args.keep, "importance-", server=TimedServer) as (sites, work):
        began = time.monotonic()
        counts = in_links(sites)
        print(
            f"{len(counts)} pages in scope, {sum(counts.values())} in-links (counted in {time.monotonic() - began:.0f} s); "
            f"each site crawled alone with CRAWL_MAX_PAGES = {args.share:.0%} of its pages; {args.workers} workers, "
            f"interval {args.interval:g} s"
        )
        totals = {o: {"hits": 0, "top": 0, "pages": 0, "cpu": 0.0, "gap": float("inf")} for o in ("fifo", "importance")}
        for site in sites:
            mine = {u: n for u, n in counts.items() if u.startswith(site.scope)}
            top = most_linked(mine, args.share)
            budget = max(1, round(args.share * len(mine)))
            line = [f"{site.name}: {len(mine)} pages, the {len(top)} most linked have >= {min(mine[u] for u in top)}"]
            for run in range(args.runs):
                for order in ("fifo", "importance"):  # (in turn: the machine's drift falls on both)
                    r = crawl([site], order, budget, args.interval, work / f"{site.name}-{order}-{run}", args.workers)
                    hits = len(r["fetched"] & top)
                    t = totals[order]
                    t["hits"] += hits
                    t["top"] += len(top)
                    t["pages"] += len(r["fetched"])
                    t["cpu"] += r["cpu"]
                    t["gap"] = min(t["gap"], r["min_gap"])
                    line.append(f"{order} {hits}/{len(top)} ({len(r['fetched'])} fetched, exits {r['exits']})")
            print("  " + "; ".join(line), flush=True)
        share = {o: t["hits"] / max(t["top"], 1) for o, t in totals.items()}
        # CPU per page: a crawl of every site at once of --cpu-pages pages, less one of a single
        # page (the workers' start), for each order
        cpu = {}
        for order in ("fifo", "importance"):
            small = crawl(sites, order, 1, args.interval, work / f"cpu-{order}-1", args.workers)
            big = crawl(sites, order, args.cpu_pages, args.interval, work / f"cpu-{order}-n", args.workers)
            pages = len(big["fetched"]) - len(small["fetched"])
            cpu[order] = (big["cpu"] - small["cpu"]) / max(pages, 1)
            totals[order]["gap"] = min(totals[order]["gap"], big["min_gap"])
            print(
                f"  CPU, {order}: {len(big['fetched'])} pages {big['cpu']:.1f} s, 1 page {small['cpu']:.1f} s: "
                f"{1000 * cpu[order]:.2f} ms a page; exits {big['exits']}",
                flush=True,
            )
        memory = {order: memory_per_url(order, args.memory_urls, work) for order in ("fifo", "importance")}
        print(
            f"Redis bytes a queued URL ({args.memory_urls} links of 100 hosts, URL-seen included): fifo "
            f"{memory['fifo']:.0f}, importance {memory['importance']:.0f}: ratio {memory['importance'] / memory['fifo']:.2f}"
        )
        print(
            f"most-linked pages fetched within the budget: fifo {share['fifo']:.1%}, importance "
            f"{share['importance']:.1%}: ratio {share['importance'] / max(share['fifo'], 1e-9):.2f} (goal >= 1.2)"
        )
        print(
            f"CPU per page: fifo {1000 * cpu['fifo']:.2f} ms, importance {1000 * cpu['importance']:.2f} ms: "
            f"ratio {cpu['importance'] / max(cpu['fifo'], 1e-9):.3f} (goal <= 1.05); smallest gap "
            f"per host: fifo {totals['fifo']['gap']:.3f} s, importance {totals['importance']['gap']:.3f} s "
            f"(interval {args.interval:g} s)"
        )


if __name__ == "__main__":
    main()
