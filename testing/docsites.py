"""Debian's documentation (python3-doc, nodejs-doc, rust-doc) served on loopback as nine
sites, one address each (127.0.0.2-10) on one port, counting their answers; copies of them
on 127.0.K.x whose pages are marked as copy K; and workers that crawl them as
subprocesses, each killed past its time. The benchmarks' real HTML
(``apt-get install -y python3-doc nodejs-doc rust-doc``)."""

from __future__ import annotations

import contextlib
import io
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from testing.servers import RedisServer
from testing.workers import ROOT, clean_env, read_pages

RUST = "/usr/share/doc/rust-doc/html"


# name, address, directory served, path prefix crawled (the scope), seed path
SITES = [
    ("python", "127.0.0.2", "/usr/share/doc/python3.11/html", "/", "/index.html"),
    ("node", "127.0.0.3", "/usr/share/doc/nodejs/api", "/", "/index.html"),
    ("rust-book", "127.0.0.4", RUST, "/book/", "/book/index.html"),
    ("rust-std", "127.0.0.5", RUST, "/std/", "/std/index.html"),
    ("rust-reference", "127.0.0.6", RUST, "/reference/", "/reference/index.html"),
    ("rust-by-example", "127.0.0.7", RUST, "/rust-by-example/", "/rust-by-example/index.html"),
    ("rust-nomicon", "127.0.0.8", RUST, "/nomicon/", "/nomicon/index.html"),
    ("rust-edition-guide", "127.0.0.9", RUST, "/edition-guide/", "/edition-guide/index.html"),
    ("rust-unstable-book", "127.0.0.10", RUST, "/unstable-book/", "/unstable-book/index.html"),
]


KILL_AFTER = 60.0  # seconds past --seconds before a worker still running is killed


class Site:
    def __init__(self, name: str, host: str, directory: str, prefix: str, seed: str):
        self.name, self.host, self.directory, self.prefix, self.seed_path = name, host, directory, prefix, seed
        self.url_host = host  # what its URLs name: its address, or a name a DNS server gives it
        self.port = 0
        self.server: DocServer | None = None
        self.answers: Counter = Counter()  # HTTP status -> requests answered
        self.busy = 0.0  # seconds spent answering GETs
        self.gets = 0
        self.arrivals: list[float] = []  # monotonic time of each GET's arrival

    @property
    def base(self) -> str:
        return f"http://{self.url_host}:{self.port}"

    @property
    def scope(self) -> str:
        return self.base + self.prefix

    @property
    def seed(self) -> str:
        return self.base + self.seed_path

    def file_of(self, url: str) -> Path | None:
        """The file on disk a URL of this site is answered from (a directory: its
        index.html; a missing file: its .gz), None when there is none."""
        path = Path(self.directory) / unquote(urlsplit(url).path).lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if path.is_file():
            return path
        gz = path.with_name(path.name + ".gz")
        return gz if gz.is_file() else None


class DocHandler(SimpleHTTPRequestHandler):
    """A doc tree's static files, quietly; ``.html`` as text/html; a missing file whose
    .gz exists is answered from the .gz with Content-Encoding: gzip. Connections are kept
    alive (HTTP/1.1), as web servers do."""

    protocol_version = "HTTP/1.1"
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".html": "text/html", ".htm": "text/html"}

    def __init__(self, *args, site: Site, **kwargs):
        self.site = site
        super().__init__(*args, directory=site.directory, **kwargs)

    def send_head(self):
        path = self.translate_path(self.path)
        if not self.path.split("?", 1)[0].endswith("/") and not os.path.exists(path) and os.path.isfile(path + ".gz"):
            f = open(path + ".gz", "rb")  # noqa: SIM115 (copyfile reads it, do_GET closes it)
            self.send_response(200)
            self.send_header("Content-Type", self.guess_type(path))
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            self.end_headers()
            return f
        return super().send_head()

    def do_GET(self):
        started = time.perf_counter()
        self.site.arrivals.append(time.monotonic())
        try:
            super().do_GET()
        finally:
            with _answers_lock:
                self.site.busy += time.perf_counter() - started
                self.site.gets += 1

    def log_request(self, code="-", size="-"):
        with _answers_lock:
            self.site.answers[int(code) if str(code).isdigit() else str(code)] += 1

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


_answers_lock = threading.Lock()


class DocServer(ThreadingHTTPServer):
    """Threads per request; a client gone mid-answer is counted, not printed."""

    daemon_threads = True
    handler = DocHandler

    def __init__(self, site: Site):
        self.site = site
        super().__init__((site.host, site.port), partial(self.handler, site=site))

    def handle_error(self, request, client_address):
        with _answers_lock:
            self.site.answers[type(sys.exc_info()[1]).__name__] += 1


def free_shared_port(hosts: list[str]) -> int:
    """A port free on every one of ``hosts``."""
    for _ in range(20):
        with socket.socket() as s:
            s.bind((hosts[0], 0))
            port = s.getsockname()[1]
        try:
            for host in hosts[1:]:
                with socket.socket() as s:
                    s.bind((host, port))
        except OSError:
            continue
        return port
    raise SystemExit("no port free on every loopback address")


def start_sites(sites: list[Site], server=None) -> None:
    """Serve every site (``server``: the server class, DocServer by default) on one port."""
    server = server or DocServer
    for attempt in range(5):
        port = free_shared_port([s.host for s in sites])
        try:
            for site in sites:
                site.port = port
                site.server = server(site)
                threading.Thread(target=site.server.serve_forever, daemon=True, name=f"site-{site.name}").start()
            return
        except OSError:  # the port was taken meanwhile: try another
            stop_sites(sites)
            if attempt == 4:
                raise


def stop_sites(sites: list[Site]) -> None:
    for site in sites:
        if site.server is not None:
            site.server.shutdown()
            site.server.server_close()
            site.server = None


def available_sites() -> list[Site]:
    sites, missing = [], set()
    for name, host, directory, prefix, seed in SITES:
        if os.path.isfile(os.path.join(directory, seed.lstrip("/"))):
            sites.append(Site(name, host, directory, prefix, seed))
        else:
            missing.add(name)
    if missing:
        print(f"not installed: {', '.join(sorted(missing))} (apt-get install -y python3-doc nodejs-doc rust-doc)")
    if not sites:
        raise SystemExit("no documentation installed: apt-get install -y python3-doc nodejs-doc rust-doc")
    return sites


def worker_commands(
    sites: list[Site], workers: int, work: Path, env: dict, settings: dict, feed: bool = True, pin: bool = False
) -> list:
    """The commands of ``workers`` workers crawling ``sites`` (each within its scope) from
    ``work``/seeds.txt, for run_commands: the project's defaults but loopback allowed, one
    crawl directory, a log each, a feed each unless not ``feed``, and ``settings``;
    ``pin``: worker n (its page processes too) on core n (taskset)."""
    cmds = []
    for n in range(workers):
        # every worker seeds (the frontier keeps each URL once), so that none finds
        # the frontier empty and closes before the first one has seeded it
        cmd = [sys.executable, "-m", "scrapy", "crawl", "broad"]
        if pin:
            cmd = ["taskset", "-c", str(n % (os.cpu_count() or 1)), *cmd]
        if feed:
            cmd += ["-O", str(work / f"pages-{n}.jsonl")]
        cmd += ["-a", f"seeds={work / 'seeds.txt'}", "-a", "allowed_prefixes=" + ",".join(s.scope for s in sites)]
        values = {
            "CRAWL_DIR": work / "crawl",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "LOG_FILE": work / f"worker-{n}.log",
            **settings,
        }
        for name, value in values.items():
            cmd += ["-s", f"{name}={value}"]
        cmds.append((cmd, ROOT, env, work / f"worker-{n}.out"))
    return cmds


def crawl_sites(
    sites: list[Site], workers: int, work: Path, settings: dict, limit: float, **options
) -> tuple[dict, float, float]:
    """``workers`` workers crawl ``sites`` from their seeds (worker_commands, with its
    ``options``) with a throwaway redis-server, each killed ``limit`` s after the start:
    (run_commands's answer, the workers' CPU seconds, their page processes included, and
    the redis-server's)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "seeds.txt").write_text("".join(site.seed + "\n" for site in sites))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with RedisServer(str(work)) as redis_server:
        env = {**clean_env(), "REDIS_URL": redis_server.url}
        ended = run_commands(worker_commands(sites, workers, work, env, settings, **options), limit)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # before redis-server ends
        redis_cpu = redis_server.cpu_seconds()
    return ended, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), redis_cpu


def read_feeds(work: Path, workers: int) -> list[dict]:
    """The Pages of the feeds of worker_commands's ``workers`` workers."""
    return [page for n in range(workers) for page in read_pages(work / f"pages-{n}.jsonl")]


def smallest_gap(sites: list[Site]) -> float:
    """The smallest time between two arrivals at one site (NaN for none)."""
    gaps = [b - a for s in sites for a, b in zip(sorted(s.arrivals), sorted(s.arrivals)[1:])]
    return min(gaps, default=float("nan"))


def run_commands(cmds: list[tuple[list[str], Path, dict, Path]], limit: float) -> dict[int, tuple[float, int | None]]:
    """Start every command (cmd, cwd, env, the file its output goes to) and wait for them,
    killing those still running ``limit`` seconds after the start: {index: (seconds after
    the start, exit code, or None when killed)}."""
    procs = []
    started = time.monotonic()
    try:
        for cmd, cwd, env, output in cmds:
            with open(output, "wb") as out:
                procs.append(
                    subprocess.Popen(
                        cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
                    )
                )
        return wait_or_kill(procs, started, limit)
    finally:
        wait_or_kill(procs, started, 0)  # a launch that failed: the others go too


def wait_or_kill(procs: list, started: float, limit: float) -> dict[int, tuple[float, int | None]]:
    """Wait for the processes until ``limit`` seconds after ``started``, then kill those
    still running: {index: (seconds after ``started``, exit code, or None when killed)}."""
    ended: dict[int, tuple[float, int | None]] = {}
    while len(ended) < len(procs) and time.monotonic() - started < limit:
        for n, p in enumerate(procs):
            if n not in ended and p.poll() is not None:
                ended[n] = (time.monotonic() - started, p.returncode)
        time.sleep(0.1)
    for n, p in enumerate(procs):
        if n not in ended:
            killed = p.poll() is None
            if killed:
                p.kill()
                p.wait()
            ended[n] = (time.monotonic() - started, None if killed else p.returncode)
    return ended


@contextlib.contextmanager
def served_sites(keep: bool, prefix: str, server=None):
    """The installed documentation sites served on loopback (``server``: see
    start_sites), and a work directory: (sites, work). On exit the sites stop and the
    directory goes, unless ``keep``."""
    sites = available_sites()
    with _serving(sites, server, keep, prefix) as work:
        print(f"sites on port {sites[0].port}: " + ", ".join(f"{s.name} {s.host}{s.prefix}" for s in sites))
        yield sites, work


@contextlib.contextmanager
def _serving(sites, server, keep: bool, prefix: str):
    """``sites`` served (``server``: see start_sites) while the block runs, with a work
    directory of its own, removed at the end unless ``keep``."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        start_sites(sites, server)
        yield work
    finally:
        stop_sites(sites)
        if keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


class MirrorHandler(DocHandler):
    """DocHandler whose HTML pages end with the site's mark (none for the first copy)."""

    def send_head(self):
        mark = getattr(self.site, "mark", b"")
        path = self.translate_path(self.path)
        if mark and self.path.split("?", 1)[0].endswith("/") and os.path.isdir(path):
            path = os.path.join(path, "index.html")
        if not mark or not path.endswith(".html") or not os.path.isfile(path):
            return super().send_head()
        with open(path, "rb") as f:
            body = f.read() + mark
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


class MirrorServer(DocServer):
    def __init__(self, site: Site):
        super().__init__(site)
        self.RequestHandlerClass = partial(MirrorHandler, site=site)


def mirrored(sites: list[Site], copies: int) -> list[Site]:
    """The sites and ``copies`` copies of each: copy K of the site on 127.0.0.x on
    127.0.K.x, its HTML pages marked as copy K."""
    out = list(sites)
    for k in range(1, copies + 1):
        for site in sites:
            host = site.host.replace(".0.", f".{k}.", 1)
            copy = Site(f"{site.name}-{k}", host, site.directory, site.prefix, site.seed_path)
            copy.mark = f"\n<!-- copy {k} -->\n".encode()
            out.append(copy)
    return out


@contextlib.contextmanager
def mirrored_sites(keep: bool, copies: int, server=None, prefix: str = "memory-"):
    """The installed documentation sites and their copies served on loopback (``server``:
    a server class whose handler is a MirrorHandler, MirrorServer by default), and a work
    directory: (sites, work), as bench/doc_crawl.py's served_sites."""
    sites = mirrored(available_sites(), copies)
    with _serving(sites, server or MirrorServer, keep, prefix) as work:
        originals = [s for s in sites if not getattr(s, "mark", b"")]
        print(
            f"{len(sites)} sites on port {sites[0].port}: "
            + ", ".join(f"{s.name} {s.host}{s.prefix}" for s in originals)
            + f", and {copies} copies of each on 127.0.1-{copies}.x"
        )
        yield sites, work
