"""Throughput of a crawl against stock Scrapy, on the same served documentation sites.

Setup (the sites of bench/doc_crawl.py: Debian's documentation trees on 127.0.0.2..):

    apt-get install -y python3-doc nodejs-doc rust-doc
    python -m bench.throughput                         # 45 s a run, interval 0.05 s
    python -m bench.throughput --seconds 30 --interval 0.1
    python -m bench.throughput --runs 2 --set FRONTIER_MAX_UNREAD=100

Sixteen runs, one after another on the same sites, each bounded by CLOSESPIDER_TIMEOUT
(--seconds) and killed if it has not ended --seconds + 60 s after its start:

1. stock Scrapy: ``scrapy runspider`` of a minimal CrawlSpider (a temp file, run in a
   fresh temp directory, outside this project) following every link under the sites'
   scopes; CONCURRENT_REQUESTS=32, no delay, ROBOTSTXT_OBEY off, no pipelines;
2. this crawler (``scrapy crawl broad``), one worker, the project's defaults (every
   pipeline), FRONTIER_HOST_INTERVAL=--interval, loopback allowed, scope as doc_crawl.py;
3. the same with the pipelines off but the links pipeline, which is what follows links
   (ITEM_PIPELINES_BASE={FollowLinksPipeline});
4. the same as 2 with two workers sharing one redis-server and one crawl name;
5. the same with three workers;
6., 7. one and three workers at FRONTIER_HOST_INTERVAL=--gap-interval (0.25 s): bound by
   politeness rather than by the CPU, so that the host-cycle gap shows the scheduling
   delay, not a saturated machine's queueing;
8., 9. with no politeness limit (interval 0, four requests in flight per host) on the
   many hosts of runs 14-16 (enough pages for both runs to the end), so that only the CPU
   bounds them: one worker with its processes pinned to one core (taskset), and two
   workers each pinned to its own core: how the pages/s grow with workers given the same
   CPU each (on this 2-core machine one unpinned worker can use both cores).
10., 11. the peer's scaling on this machine, the baseline for runs 9 / 8: stock Scrapy (as
run 1) pinned to one core, then two stock Scrapy processes, one per core, each crawling every
site on its own. On a virtual machine whose cores share caches, or a busy host, two processes
do less than twice the work of one; runs 11 / 10 show by how much.
12., 13. one and three workers at --interval on the three biggest sites only (BIG_SITES, a
thousand pages and more each): at the short interval, a crawl these workers have the CPU
for, so that the host-cycle gap shows the hand-out path at 0.05 s. (On all nine sites at
0.05 s the polite limit is some 170 pages/s, more than this machine reads with every
pipeline on: runs 2-5 are bound by the CPU, their workers lease no more while
FRONTIER_MAX_UNREAD pages wait to be read, and their gaps are that wait.)
14., 15., 16. many hosts: every site and --copies copies of each (bench/memory.py's copies,
127.0.K.x; 45 hosts by default, a polite limit near 900 pages/s), so that only the CPU bounds
the crawl: one worker, two workers, and one worker with PAGE_PROCESSES=2, unpinned. One
worker with its page process already uses most of this 2-core machine, so two workers can
add only what it leaves: runs 15 / 14 show it, and runs 9 / 8 show the scaling with the CPU
given to each worker.
``--runs 2,5`` picks runs.
Each run of this crawler has its own throwaway redis-server and crawl directory.

Figures, from the sites' own request log (arrival, end, host, path, status of every
request): pages answered 200 (robots.txt left out), pages/s between the first and the last
200 answer, CPU seconds of the run's processes (getrusage(RUSAGE_CHILDREN) deltas: page
processes included once reaped) and of its redis-server (where URL-seen, content seen and
scheduling run), and CPU ms per page; for this crawler's
runs the host-cycle gap (for consecutive requests to one host: start of the next minus end
of the previous minus the interval; p50/p90/p99 in ms, and the gaps below -10 ms, which
break the interval); the polite limit (sum over the hosts of 1 / (interval + the host's mean
answer time in this crawler's runs)), and each run's pages/s as a share of stock Scrapy's
and of the polite limit; /busy, the requests made against those the polite limit allows while
each host was being crawled (its first request to its last: a site whose pages ran out
early counts only while it had some); held, how often a worker leased nothing because
FRONTIER_MAX_UNREAD of its pages were still being read (bound by the CPU, not by politeness).
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
from pathlib import Path

from bench.results import Results
from testing.docsites import KILL_AFTER, DocServer, MirrorHandler, Site, mirrored_sites, run_commands
from testing.sampling import percentile
from testing.servers import RedisServer
from testing.workers import clean_env

ROOT = Path(__file__).resolve().parents[1]

BIG_SITES = ("python", "rust-std", "rust-unstable-book")  # a thousand pages and more each: busy to the end of a run
STAGE_RE = re.compile(r"'pagereader/ms/(\w+)': ([\d.]+)")
READ_PAGES_RE = re.compile(r"'pagereader/pages': (\d+)")
UNREAD_FULL_RE = re.compile(r"'frontier/unread_full': (\d+)")
NEGATIVE_GAP = -0.010  # seconds: a gap below this broke the host interval
LINKS_ONLY = '{"crawler.pipelines.links.FollowLinksPipeline": 150}'
EXTRA_SETTINGS: list[str] = []  # --set NAME=VALUE: given to every worker of this crawler

STOCK_SPIDER = '''\
"""Stock Scrapy: follow every link under the scopes, nothing else."""

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class StockSpider(CrawlSpider):
    name = "stock"
    start_urls = {seeds!r}
    rules = (Rule(LinkExtractor(allow_domains={hosts!r}, allow={allow!r}), follow=True),)
'''


# -- the sites, with a request log ---------------------------------------------------------

_log_lock = threading.Lock()
REQUESTS: list[tuple[float, float, str, str, int | str]] = []  # arrival, end, host, path, status


class LoggingHandler(MirrorHandler):
    """The sites' handler (a copy's pages marked as its own, bench/memory.py) recording every
    request: arrival, end, host, path, status."""

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


# -- the runs ------------------------------------------------------------------------------


def error_lines(lines: list[str]) -> Counter:
    """(ERROR message with URLs and numbers blanked, the exception that follows it) -> count;
    a traceback with no ERROR line before it counts as a message of its own."""
    errors: Counter = Counter()
    pending = None
    for line in lines:
        record = re.match(r"20\d\d-\d\d-\d\d ", line) is not None
        if " ERROR: " in line or (line.startswith("Traceback") and pending is None):
            if pending is not None:
                errors[(pending, "")] += 1
            pending = re.sub(r"https?://\S+|\d+", "#", line.split(" ERROR: ", 1)[-1])
        elif pending is not None and re.match(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b", line):
            errors[(pending, line)] += 1
            pending = None
        elif pending is not None and record:
            errors[(pending, "")] += 1
            pending = None
    if pending is not None:
        errors[(pending, "")] += 1
    return errors


def run_procs(cmds: list[tuple[list[str], Path, dict]], seconds: float, work: Path) -> tuple[list, list, object]:
    """Start every command (cmd, cwd, env; output to work/out-N.txt), wait for them or kill
    them at seconds + KILL_AFTER: ([(seconds, exit code or None)], [output paths], the
    children's rusage once they have ended: before a redis-server around them is reaped)."""
    outs = [work / f"out-{n}.txt" for n in range(len(cmds))]
    ended = run_commands([(*cmd, out) for cmd, out in zip(cmds, outs, strict=True)], seconds + KILL_AFTER)
    return [ended[n] for n in range(len(cmds))], outs, Usage(resource.getrusage(resource.RUSAGE_CHILDREN))


class Usage:
    """The children's rusage, and the CPU seconds of the run's redis-server (set after)."""

    def __init__(self, rusage):
        self.ru_utime, self.ru_stime = rusage.ru_utime, rusage.ru_stime
        self.redis_cpu = 0.0


def run_stock(sites: list[Site], seconds: float, work: Path, processes: int = 0) -> tuple[list, list, object]:
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
        if processes:
            cmd = ["taskset", "-c", str(n % (os.cpu_count() or 1)), *cmd]
        logs.append(work / f"scrapy-{n}.log")
        for name, value in {
            "CONCURRENT_REQUESTS": 32,
            "DOWNLOAD_DELAY": 0,
            "ROBOTSTXT_OBEY": False,
            "CLOSESPIDER_TIMEOUT": seconds,
            "LOG_FILE": logs[-1],
            "LOG_LEVEL": "INFO",
        }.items():
            cmd += ["-s", f"{name}={value}"]
        cmds.append((cmd, work, clean_env()))
    ended, outs, usage = run_procs(cmds, seconds, work)
    usage.redis_cpu = 0.0
    return ended, [*logs, *outs], usage


def run_crawler(
    sites: list[Site],
    workers: int,
    pipelines: bool,
    seconds: float,
    interval: float,
    work: Path,
    pin: bool = False,
    extra: dict | None = None,
) -> tuple[list, list, object]:
    """``pin``: worker n on core n, and no politeness limit (interval 0, four requests in
    flight per host): bound by the CPU only. ``extra``: more settings of this run."""
    seeds = work / "seeds.txt"
    seeds.write_text("".join(site.seed + "\n" for site in sites))
    with RedisServer(str(work)) as redis_server:
        env = clean_env()
        env["REDIS_URL"] = redis_server.url
        cmds = []
        for n in range(workers):
            cmd = [sys.executable, "-m", "scrapy", "crawl", "broad"]
            if pin:  # worker n (and its page process) on core n
                cmd = ["taskset", "-c", str(n % (os.cpu_count() or 1)), *cmd]
            cmd += ["-a", f"seeds={seeds}", "-a", "allowed_prefixes=" + ",".join(s.scope for s in sites)]
            settings = {
                "CRAWL_NAME": "throughput",
                "CRAWL_DIR": work / "crawl",
                "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
                "FRONTIER_HOST_INTERVAL": interval,
                "CLOSESPIDER_TIMEOUT": seconds,
                "LOG_FILE": work / f"worker-{n}.log",
            }
            if not pipelines:
                settings["ITEM_PIPELINES_BASE"] = LINKS_ONLY
            if pin:
                settings["FRONTIER_HOST_MAX_IN_FLIGHT"] = 4
            settings.update(extra or {})
            for name, value in settings.items():
                cmd += ["-s", f"{name}={value}"]
            for setting in EXTRA_SETTINGS:
                cmd += ["-s", setting]
            cmds.append((cmd, ROOT, env))
        ended, outs, usage = run_procs(cmds, seconds, work)
        usage.redis_cpu = redis_server.cpu_seconds()
    return ended, [work / f"worker-{n}.log" for n in range(workers)] + outs, usage


# -- the figures ---------------------------------------------------------------------------


class Run:
    def __init__(self, name: str, crawler: bool, interval: float = 0.0, sites: list[Site] = ()):
        self.name, self.crawler, self.interval = name, crawler, interval
        self.hosts = {s.host for s in sites}  # the hosts seeded
        self.held = 0  # times a worker leased nothing for FRONTIER_MAX_UNREAD pages unread (frontier/unread_full)
        self.requests: list = []
        self.cpu = (0.0, 0.0)
        self.sites_cpu = 0.0  # this process: the sites' threads, mostly
        self.redis_cpu = 0.0
        self.stages: dict[str, float] = {}  # page reading stage -> ms, summed over the workers
        self.read_pages = 0
        self.ended: list = []
        self.logs: list[Path] = []

    @property
    def pages(self) -> list:
        return [r for r in self.requests if r[4] == 200 and not r[3].startswith("/robots.txt")]

    @property
    def rate(self) -> float:
        ends = sorted(r[1] for r in self.pages)
        return (len(ends) - 1) / (ends[-1] - ends[0]) if len(ends) > 1 and ends[-1] > ends[0] else 0.0

    @property
    def span(self) -> float:
        ends = sorted(r[1] for r in self.pages)
        return ends[-1] - ends[0] if len(ends) > 1 else 0.0

    def by_host(self) -> dict[str, list]:
        """The run's requests by host, each host's in order of arrival."""
        by_host = defaultdict(list)
        for r in sorted(self.requests):
            by_host[r[2]].append(r)
        return by_host

    def gaps(self, interval: float) -> list[float]:
        gaps = []
        for reqs in self.by_host().values():
            gaps += [b[0] - a[1] - interval for a, b in zip(reqs, reqs[1:], strict=False)]
        return gaps

    def busy_share(self, answer: dict[str, list[float]]) -> float:
        """Requests made against those the polite limit allows while each host was being
        crawled (from its first request to its last): a host whose pages ran out early
        counts only while it had some."""
        made = allowed = 0.0
        for host, reqs in self.by_host().items():
            a = answer.get(host)
            if len(reqs) < 2 or not a:
                continue
            made += len(reqs) - 1
            allowed += (max(r[1] for r in reqs) - reqs[0][0]) / (self.interval + sum(a) / len(a))
        return made / allowed if allowed else float("nan")


def run_one(run: Run, fn, seconds: float) -> None:
    first = len(REQUESTS)
    print(f"\n== {run.name}: running ({seconds:g} s) ...", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    run.ended, run.logs, after = fn()
    own_after = resource.getrusage(resource.RUSAGE_SELF)
    run.sites_cpu = own_after.ru_utime + own_after.ru_stime - own.ru_utime - own.ru_stime
    run.redis_cpu = after.redis_cpu
    time.sleep(1.0)  # answers still being written
    with _log_lock:
        run.requests = REQUESTS[first:]
    run.cpu = (after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime)
    states = ", ".join(f"{t:.0f} s " + (f"exit {c}" if c is not None else "KILLED") for t, c in run.ended)
    statuses = Counter(r[4] for r in run.requests)
    print(
        f"   ended: {states}; requests {len(run.requests)} "
        f"({', '.join(f'{k}: {v}' for k, v in sorted(statuses.items(), key=str))})"
    )
    for log in run.logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        if log.name.startswith("worker-"):
            dump = text[text.rfind("Dumping Scrapy stats") :]
            for stage, ms in STAGE_RE.findall(dump):
                run.stages[stage] = run.stages.get(stage, 0.0) + float(ms)
            run.read_pages += sum(int(n) for n in READ_PAGES_RE.findall(dump))
            run.held += sum(int(n) for n in UNREAD_FULL_RE.findall(dump))
        errors = error_lines(text.splitlines())
        if errors:
            print(f"   {log.name}: {sum(errors.values())} errors")
            for (message, exception), n in errors.most_common(4):
                print(f"     {n} x {message[:160]}" + (f" / {exception[:160]}" if exception else ""))


def report(runs: list[Run], sites: list[Site], results: Results | None = None) -> None:
    """Print the runs' table; ``results``: record each run's pages/s, CPU a page and
    ratio to stock Scrapy there too."""
    # the polite limit: from this crawler's runs (one request at a time per host)
    answer: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        if run.crawler and run.interval > 0:  # (no limit: several in flight per host, no gaps)
            for r in run.requests:
                answer[r[2]].append(r[1] - r[0])

    def polite_at(interval: float, hosts: set[str]) -> float:
        return sum(1 / (interval + sum(a) / len(a)) for host, a in answer.items() if a and host in hosts)

    for interval, hosts in sorted({(run.interval, frozenset(run.hosts)) for run in runs if run.crawler}):
        print(
            f"\n== polite limit at interval {interval:g} s: {polite_at(interval, hosts):.1f} pages/s"
            f" over {len(hosts)} hosts"
        )
    for site in sites:
        a = answer.get(site.host, [])
        if a:
            print(f"   {site.name:20} {site.host:11} mean answer {1000 * sum(a) / len(a):6.1f} ms ({len(a)} requests)")
    stock = next((run.rate for run in runs if run.name.startswith("1 ")), 0.0)
    print(
        f"\n{'run':42} {'200s':>6} {'unique':>6} {'pages/s':>8} {'span s':>6} {'CPU s':>7} {'ms/page':>7}"
        f" {'/stock':>6} {'/polite':>7} {'/busy':>6} {'held':>5}   host-cycle gap ms p50/p90/p99, gaps < -10 ms"
    )
    for run in runs:
        pages = run.pages
        cpu = sum(run.cpu) + run.redis_cpu  # every process of the run, its redis-server included
        unique = len({(r[2], r[3]) for r in pages})
        per_page = 1000 * cpu / len(pages) if pages else float("nan")
        line = (
            f"{run.name:42} {len(pages):6} {unique:6} {run.rate:8.1f} {run.span:6.1f} {cpu:7.1f} {per_page:7.1f}"
            f" {run.rate / stock if stock else float('nan'):6.2f}"
            f" {run.rate / polite_at(run.interval, run.hosts) if run.crawler and answer else float('nan'):7.2f}"
            f" {run.busy_share(answer) if run.crawler and run.interval > 0 else float('nan'):6.2f}"
            f" {run.held if run.crawler else '':>5}"
        )
        if results is not None:
            results.add(f"{run.name}: pages/s", run.rate, "pages/s")
            results.add(f"{run.name}: CPU a page", per_page, "ms")
            if stock and run.crawler:
                results.add(f"{run.name}: against stock Scrapy", run.rate / stock, "x", "run 1, stock Scrapy")
        if run.crawler and run.interval > 0:  # (no limit: several in flight per host, no gaps)
            gaps = run.gaps(run.interval)
            negative = sum(1 for g in gaps if g < NEGATIVE_GAP)
            line += (
                f"   {1000 * percentile(gaps, 0.5):.1f}/{1000 * percentile(gaps, 0.9):.1f}"
                f"/{1000 * percentile(gaps, 0.99):.1f}, {negative} of {len(gaps)}"
            )
        print(line)
    print(
        "(200s: answers 200 but robots.txt; pages/s between the first and last 200 answer; CPU: user + system"
        " of the run's processes, its redis-server included (URL-seen, content seen and scheduling run there); /polite: pages/s against the polite limit of the run's"
        " hosts; /busy: requests against what the polite limit allows while each host was being crawled, its"
        " first request to its last; held: times a worker leased nothing because FRONTIER_MAX_UNREAD pages"
        " were still being read, i.e. the worker was bound by its CPU, not by politeness)"
    )
    rate = {run.name.split()[0]: run.rate for run in runs}
    if rate.get("8") and rate.get("9"):
        line = f"\n== scaling: runs 9 / 8 (this crawler, 2 workers / 1, 1 core each): {rate['9'] / rate['8']:.2f}x"
        if rate.get("10") and rate.get("11"):
            peer = rate["11"] / rate["10"]
            line += f"; runs 11 / 10 (stock Scrapy, 2 processes / 1, 1 core each): {peer:.2f}x"
            line += f"; the crawler's scaling is {rate['9'] / rate['8'] / peer:.2f} of stock Scrapy's"
        print(line)
    for a, b, what in (("15", "14", "2 workers / 1"), ("16", "14", "1 worker with 2 page processes / 1 with 1")):
        if rate.get(a) and rate.get(b):
            print(f"== runs {a} / {b} ({what}, many hosts, unpinned): {rate[a] / rate[b]:.2f}x")
    print(f"\n{'run':42} {'cores: run':>10} {'sites':>6} {'redis':>6}   page reading ms/page by stage")
    for run in runs:
        wall = max((t for t, _ in run.ended), default=0.0) or float("nan")
        line = f"{run.name:42} {sum(run.cpu) / wall:10.2f} {run.sites_cpu / wall:6.2f} {run.redis_cpu / wall:6.2f}"
        if run.read_pages:
            stages = ", ".join(f"{s} {ms / run.read_pages:.2f}" for s, ms in run.stages.items())
            line += f"   {stages} (total {sum(run.stages.values()) / run.read_pages:.2f}; {run.read_pages} pages)"
        print(line)
    print(
        "(cores: CPU seconds over the run's wall time (start to exit, start-up included), of the run's processes,"
        " of this process serving the sites, and of the run's redis-server; stages: the page workers' CPU, from"
        " the workers' stats)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=45, help="CLOSESPIDER_TIMEOUT of each run")
    parser.add_argument("--interval", type=float, default=0.05, help="FRONTIER_HOST_INTERVAL")
    parser.add_argument(
        "--gap-interval", type=float, default=0.25, help="FRONTIER_HOST_INTERVAL of the politeness-bound runs 6 and 7"
    )
    parser.add_argument(
        "--runs", default="1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", help="which runs, comma separated (default: all)"
    )
    parser.add_argument("--copies", type=int, default=4, help="copies of each site for the many-host runs 14-16")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, feeds, archives)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a setting of this crawler's workers"
    )
    args = parser.parse_args()
    EXTRA_SETTINGS.extend(args.set)
    runs: list[Run] = []
    with mirrored_sites(args.keep, args.copies, LoggingServer, "throughput-") as (every_site, work):
        print(f"{args.seconds:g} s a run, interval {args.interval:g} s; workdir {work}")
        sites = [s for s in every_site if not getattr(s, "mark", b"")]
        big = [s for s in sites if s.name in BIG_SITES]
        fast, slow = args.interval, args.gap_interval
        many = f"{len(every_site)} hosts"
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
                seeded = more[0] if more else sites
                extra = more[1] if len(more) > 1 else {}
                run = Run(name, True, interval, seeded)
                fn = partial(run_crawler, seeded, workers, pipelines, args.seconds, interval, run_dir, pin, extra)
            run_one(run, fn, args.seconds)
            runs.append(run)
        results = Results("throughput")
        report(runs, sites, results)
        results.write()


if __name__ == "__main__":
    main()
