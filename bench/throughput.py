"""Throughput of a crawl against stock Scrapy, on the documentation sites of testing/docsites.py
(``apt-get install -y python3-doc nodejs-doc rust-doc``).

    python -m bench.throughput                         # 16 runs of 45 s, interval 0.05 s
    python -m bench.throughput --runs 2,5 --seconds 30 --set FRONTIER_MAX_UNREAD=100

Each run ends by CLOSESPIDER_TIMEOUT (--seconds; killed 60 s later); this crawler's runs
have a redis-server of their own. Runs: 1 stock Scrapy (a CrawlSpider, 32 concurrent, no
delay, robots.txt and pipelines off); 2-5 this crawler, 1 worker with every pipeline, then
with the links pipeline only, then 2 and 3 workers; 6-7 1 and 3 workers at --gap-interval;
8-9 1 worker on 1 core and 2 workers on a core each, no politeness limit, on the many hosts;
10-11 stock Scrapy, 1 and 2 processes on a core each (the peer's scaling); 12-13 1 and 3
workers on the three biggest sites; 14-16 the many hosts (every site and --copies copies):
1 worker, 2 workers, 1 worker with PAGE_PROCESSES=2.

Figures, by the sites' request log: pages answered 200 (robots.txt aside), pages/s between
the first and the last, CPU ms a page (the run's processes and redis-server), pages/s against
run 1's and against the polite limit (sum over the hosts of 1 / (interval + mean answer));
/busy, requests against what that limit allows while each host was crawled; held, leases
refused for FRONTIER_MAX_UNREAD pages unread (bound by the CPU); the host-cycle gap (next
start - previous end - interval: p50/p90/p99, and the gaps below -10 ms); cores used, and
the page reading stages' CPU a page (the workers' stats).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import threading
import time
from collections import Counter, defaultdict
from functools import partial

from bench.results import Results
from testing.docsites import KILL_AFTER, DocServer, MirrorHandler, Site, crawl_sites, mirrored_sites, run_commands
from testing.sampling import percentile
from testing.workers import clean_env, dumped_stats, error_lines

BIG_SITES = ("python", "rust-std", "rust-unstable-book")  # a thousand pages and more each: busy to the end of a run
NEGATIVE_GAP = -0.010  # seconds: a gap below this broke the host interval
LINKS_ONLY = '{"crawler.pipelines.links.FollowLinksPipeline": 150}'
EXTRA_SETTINGS: dict = {}  # --set NAME=VALUE: given to every worker of this crawler

STOCK_SPIDER = '''\
"""Stock Scrapy: follow every link under the scopes, nothing else."""

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class StockSpider(CrawlSpider):
    name = "stock"
    start_urls = {seeds!r}
    rules = (Rule(LinkExtractor(allow_domains={hosts!r}, allow={allow!r}), follow=True),)
'''

_log_lock = threading.Lock()
REQUESTS: list[tuple[float, float, str, str, int | str]] = []  # arrival, end, host, path, status


class LoggingHandler(MirrorHandler):
    """The sites' handler recording every request: arrival, end, host, path, status."""

    def handle_one_request(self):
        self._arrival = time.monotonic()
        self._status: int | str = "-"
        super().handle_one_request()
        if getattr(self, "command", None) and self._status != "-":
            with _log_lock:
                REQUESTS.append((self._arrival, time.monotonic(), self.site.host, self.path, self._status))

    def parse_request(self):
        self._arrival = time.monotonic()  # the request line is in (not the idle wait before it)
        return super().parse_request()

    def log_request(self, code="-", size="-"):
        self._status = int(code) if str(code).isdigit() else str(code)
        super().log_request(code, size)


class LoggingServer(DocServer):
    def __init__(self, site: Site):
        super().__init__(site)
        self.RequestHandlerClass = partial(LoggingHandler, site=site)


def run_stock(sites: list[Site], seconds: float, work, processes: int = 0):
    """Stock Scrapy; ``processes`` > 0: that many, process n pinned to core n."""
    spider = work / "stock_spider.py"
    spider.write_text(
        STOCK_SPIDER.format(
            seeds=[s.seed for s in sites],
            hosts=sorted({f"{s.host}:{s.port}" for s in sites}),  # Scrapy matches the netloc
            allow=["^" + re.escape(s.scope) for s in sites],
        )
    )
    cmds, logs = [], []
    for n in range(max(processes, 1)):
        cmd = [sys.executable, "-m", "scrapy", "runspider", str(spider)]
        cmd = ["taskset", "-c", str(n % (os.cpu_count() or 1)), *cmd] if processes else cmd
        logs.append(work / f"scrapy-{n}.log")
        settings = {"CONCURRENT_REQUESTS": 32, "DOWNLOAD_DELAY": 0, "ROBOTSTXT_OBEY": False}
        for name, value in (
            settings | {"CLOSESPIDER_TIMEOUT": seconds, "LOG_FILE": logs[-1], "LOG_LEVEL": "INFO"}
        ).items():
            cmd += ["-s", f"{name}={value}"]
        cmds.append((cmd, work, clean_env(), work / f"scrapy-{n}.out"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    ended = run_commands(cmds, seconds + KILL_AFTER)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return ended, logs + [c[3] for c in cmds], cpu, 0.0


def run_crawler(sites, workers: int, pipelines: bool, seconds: float, interval: float, work, pin=False, extra=None):
    """``pin``: worker n on core n, and no politeness limit (interval 0, four requests in
    flight per host): bound by the CPU only. ``extra``: more settings of this run."""
    settings = {"CRAWL_NAME": "throughput", "FRONTIER_HOST_INTERVAL": interval, "CLOSESPIDER_TIMEOUT": seconds}
    settings |= {} if pipelines else {"ITEM_PIPELINES_BASE": LINKS_ONLY}
    settings |= {"FRONTIER_HOST_MAX_IN_FLIGHT": 4} if pin else {}
    settings |= (extra or {}) | EXTRA_SETTINGS
    ended, cpu, redis_cpu = crawl_sites(sites, workers, work, settings, seconds + KILL_AFTER, feed=False, pin=pin)
    logs = [work / f"worker-{n}.{ext}" for ext in ("log", "out") for n in range(workers)]
    return ended, logs, cpu, redis_cpu


class Run:
    def __init__(self, name: str, crawler: bool, interval: float = 0.0, sites: list[Site] = ()):
        self.name, self.crawler, self.interval = name, crawler, interval
        self.hosts = {s.host for s in sites}  # the hosts seeded
        self.held = 0  # leases refused for FRONTIER_MAX_UNREAD pages unread (frontier/unread_full)
        self.requests: list = []
        self.cpu = self.sites_cpu = self.redis_cpu = 0.0  # sites: this process (the sites' threads, mostly)
        self.stages: dict[str, float] = {}  # page reading stage -> ms, summed over the workers
        self.read_pages = 0
        self.ended: dict = {}

    @property
    def pages(self) -> list:
        return [r for r in self.requests if r[4] == 200 and not r[3].startswith("/robots.txt")]

    @property
    def span(self) -> float:
        ends = sorted(r[1] for r in self.pages)
        return ends[-1] - ends[0] if len(ends) > 1 else 0.0

    @property
    def rate(self) -> float:
        return (len(self.pages) - 1) / self.span if self.span else 0.0

    def by_host(self) -> dict[str, list]:
        """The run's requests by host, each host's in order of arrival."""
        by_host = defaultdict(list)
        for r in sorted(self.requests):
            by_host[r[2]].append(r)
        return by_host

    def gaps(self) -> list[float]:
        return [b[0] - a[1] - self.interval for reqs in self.by_host().values() for a, b in zip(reqs, reqs[1:])]

    def busy_share(self, answer: dict[str, list[float]]) -> float:
        """Requests made against those the polite limit allows while each host was being
        crawled (from its first request to its last)."""
        made = allowed = 0.0
        for host, reqs in self.by_host().items():
            if len(reqs) > 1 and (a := answer.get(host)):
                made += len(reqs) - 1
                allowed += (max(r[1] for r in reqs) - reqs[0][0]) / (self.interval + sum(a) / len(a))
        return made / allowed if allowed else float("nan")


def run_one(run: Run, fn, seconds: float) -> None:
    first = len(REQUESTS)
    print(f"\n== {run.name}: running ({seconds:g} s) ...", flush=True)
    own = resource.getrusage(resource.RUSAGE_SELF)
    run.ended, logs, run.cpu, run.redis_cpu = fn()
    own_after = resource.getrusage(resource.RUSAGE_SELF)
    run.sites_cpu = own_after.ru_utime + own_after.ru_stime - own.ru_utime - own.ru_stime
    time.sleep(1.0)  # answers still being written
    with _log_lock:
        run.requests = REQUESTS[first:]
    states = ", ".join(f"{t:.0f} s " + (f"exit {c}" if c is not None else "KILLED") for t, c in run.ended.values())
    statuses = sorted(Counter(r[4] for r in run.requests).items(), key=str)
    print(f"   ended: {states}; requests {len(run.requests)} ({', '.join(f'{k}: {v}' for k, v in statuses)})")
    for log in logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        if log.name.endswith(".log") and log.name.startswith("worker-"):
            stats = dumped_stats(text)
            for name, ms in stats.items():
                if name.startswith("pagereader/ms/"):
                    run.stages[name[14:]] = run.stages.get(name[14:], 0.0) + ms
            run.read_pages += int(stats.get("pagereader/pages", 0))
            run.held += int(stats.get("frontier/unread_full", 0))
        if errors := error_lines(text):
            print(f"   {log.name}: {sum(errors.values())} errors")
            for (message, exception), n in errors.most_common(4):
                print(f"     {n} x {message[:160]}" + (f" / {exception[:160]}" if exception else ""))


def report(runs: list[Run], sites: list[Site], results: Results) -> None:
    """Print the runs' table; record each run's pages/s, CPU a page and ratio to stock Scrapy."""
    answer: dict[str, list[float]] = defaultdict(list)  # the polite limit: from this crawler's polite runs
    for run in runs:
        if run.crawler and run.interval > 0:  # (no limit: several in flight per host, no gaps)
            for r in run.requests:
                answer[r[2]].append(r[1] - r[0])

    def polite_at(interval: float, hosts: set[str]) -> float:
        return sum(1 / (interval + sum(a) / len(a)) for host, a in answer.items() if a and host in hosts)

    for interval, hosts in sorted({(run.interval, frozenset(run.hosts)) for run in runs if run.crawler}):
        print(f"\n== polite limit at {interval:g} s: {polite_at(interval, hosts):.1f} pages/s over {len(hosts)} hosts")
    for site in sites:
        if a := answer.get(site.host, []):
            print(f"   {site.name:20} {site.host:11} mean answer {1000 * sum(a) / len(a):6.1f} ms ({len(a)} requests)")
    stock = next((run.rate for run in runs if run.name.startswith("1 ")), 0.0)
    print(
        f"\n{'run':42} {'200s':>6} {'unique':>6} {'pages/s':>8} {'span s':>6} {'CPU s':>7} {'ms/page':>7}"
        f" {'/stock':>6} {'/polite':>7} {'/busy':>6} {'held':>5}   host-cycle gap ms p50/p90/p99, gaps < -10 ms"
    )
    nan = float("nan")
    for run in runs:
        pages, cpu, polite = run.pages, run.cpu + run.redis_cpu, run.crawler and run.interval > 0
        per_page = 1000 * cpu / len(pages) if pages else nan
        line = (
            f"{run.name:42} {len(pages):6} {len({(r[2], r[3]) for r in pages}):6} {run.rate:8.1f} {run.span:6.1f}"
            f" {cpu:7.1f} {per_page:7.1f} {run.rate / stock if stock else nan:6.2f}"
            f" {run.rate / polite_at(run.interval, run.hosts) if run.crawler and answer else nan:7.2f}"
            f" {run.busy_share(answer) if polite else nan:6.2f} {run.held if run.crawler else '':>5}"
        )
        results.add(f"{run.name}: pages/s", run.rate, "pages/s")
        results.add(f"{run.name}: CPU a page", per_page, "ms")
        if stock and run.crawler:
            results.add(f"{run.name}: against stock Scrapy", run.rate / stock, "x", "run 1, stock Scrapy")
        if polite:
            gaps = run.gaps()
            line += "   " + "/".join(f"{1000 * percentile(gaps, q):.1f}" for q in (0.5, 0.9, 0.99))
            line += f", {sum(1 for g in gaps if g < NEGATIVE_GAP)} of {len(gaps)}"
        print(line)
    print(
        "(200s: answers 200 but robots.txt; CPU: the run's processes and its redis-server; /polite: against the"
        " polite limit of its hosts; /busy: requests against what that limit allows while each host was crawled;"
        " held: leases refused for FRONTIER_MAX_UNREAD pages unread, i.e. bound by the CPU)"
    )
    rate = {run.name.split()[0]: run.rate for run in runs}
    ratio = {}
    for a, b, what in (("9", "8", "this crawler, 2 workers / 1, 1 core each"), ("11", "10", "stock Scrapy, 2 / 1"),
                       ("15", "14", "2 workers / 1, many hosts"), ("16", "14", "2 page processes / 1, many hosts")):  # fmt: skip
        if rate.get(a) and rate.get(b):
            ratio[a] = rate[a] / rate[b]
            print(f"== runs {a} / {b} ({what}): {ratio[a]:.2f}x")
    if "9" in ratio and "11" in ratio:
        print(f"== the crawler's scaling is {ratio['9'] / ratio['11']:.2f} of stock Scrapy's")
    print(f"\n{'run':42} {'cores: run':>10} {'sites':>6} {'redis':>6}   page reading ms/page by stage")
    for run in runs:
        wall = max((t for t, _ in run.ended.values()), default=0.0) or nan
        line = f"{run.name:42} {run.cpu / wall:10.2f} {run.sites_cpu / wall:6.2f} {run.redis_cpu / wall:6.2f}"
        if n := run.read_pages:
            line += f"   {', '.join(f'{s} {ms / n:.2f}' for s, ms in run.stages.items())}"
            line += f" (total {sum(run.stages.values()) / n:.2f}; {n} pages)"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=45, help="CLOSESPIDER_TIMEOUT of each run")
    parser.add_argument("--interval", type=float, default=0.05, help="FRONTIER_HOST_INTERVAL")
    parser.add_argument(
        "--gap-interval", type=float, default=0.25, help="FRONTIER_HOST_INTERVAL of the politeness-bound runs 6 and 7"
    )
    parser.add_argument("--runs", default=",".join(map(str, range(1, 17))), help="which runs, comma separated")
    parser.add_argument("--copies", type=int, default=4, help="copies of each site for the many-host runs 14-16")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, feeds, archives)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a setting of this crawler's workers"
    )
    args = parser.parse_args()
    EXTRA_SETTINGS.update(s.split("=", 1) for s in args.set)
    runs: list[Run] = []
    with mirrored_sites(args.keep, args.copies, LoggingServer, "throughput-") as (every_site, work):
        print(f"{args.seconds:g} s a run, interval {args.interval:g} s; workdir {work}")
        sites = [s for s in every_site if not getattr(s, "mark", b"")]
        big = [s for s in sites if s.name in BIG_SITES]
        fast, slow, many = args.interval, args.gap_interval, f"{len(every_site)} hosts"
        plan = [  # name, (workers, pipelines, interval, pinned[, sites, settings]) or None/int for stock Scrapy
            ("1 stock Scrapy (CrawlSpider, 32 concurrent)", None),
            ("2 crawler, 1 worker, pipelines on", (1, True, fast, False)),
            ("3 crawler, 1 worker, pipelines off", (1, False, fast, False)),
            ("4 crawler, 2 workers, pipelines on", (2, True, fast, False)),
            ("5 crawler, 3 workers, pipelines on", (3, True, fast, False)),
            (f"6 crawler, 1 worker, interval {slow:g} s", (1, True, slow, False)),
            (f"7 crawler, 3 workers, interval {slow:g} s", (3, True, slow, False)),
            (f"8 crawler, 1 worker on 1 core, {many}", (1, True, 0.0, True, every_site)),
            (f"9 crawler, 2 workers, 1 core each, {many}", (2, True, 0.0, True, every_site)),
            ("10 stock Scrapy on 1 core", 1),
            ("11 stock Scrapy, 2 processes, 1 core each", 2),
            (f"12 crawler, 1 worker, {len(big)} big sites", (1, True, fast, False, big)),
            (f"13 crawler, 3 workers, {len(big)} big sites", (3, True, fast, False, big)),
            (f"14 crawler, 1 worker, {many}", (1, True, fast, False, every_site)),
            (f"15 crawler, 2 workers, {many}", (2, True, fast, False, every_site)),
            (
                f"16 crawler, 1 worker, {many}, 2 page processes",
                (1, True, fast, False, every_site, {"PAGE_PROCESSES": 2}),
            ),
        ]
        chosen = {int(n) for n in args.runs.split(",")}
        for n, (name, how) in enumerate(plan, 1):
            if n not in chosen:
                continue
            run_dir = work / f"run-{n}"
            run_dir.mkdir()
            if how is None or isinstance(how, int):
                run = Run(name, False, sites=sites)
                fn = partial(run_stock, sites, args.seconds, run_dir, how or 0)
            else:
                workers, pipelines, interval, pin, *more = how  # more: [the sites seeded[, settings]]
                seeded, extra = more[0] if more else sites, more[1] if len(more) > 1 else {}
                run = Run(name, True, interval, seeded)
                fn = partial(run_crawler, seeded, workers, pipelines, args.seconds, interval, run_dir, pin, extra)
            run_one(run, fn, args.seconds)
            runs.append(run)
        results = Results("throughput")
        report(runs, sites, results)
        results.write()


if __name__ == "__main__":
    main()
