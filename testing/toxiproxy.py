"""Toxiproxy between the workers and a store, for the fault tests and bench/remote_stores.py:
the server of scripts/toxiproxy.py on a free loopback port, and a small client of its HTTP
API (v2.5.0): a proxy is a loopback listen port in front of an upstream (``create``), and
its toxics add latency, a blackhole, a slow link or a slow close, each on one direction of
the connection (``downstream``: what the store answers; ``upstream``: what the worker
sends), until removed; a proxy disabled refuses connections and closes those it had.

(PyPI's toxiproxy-python, the one client there, had its last release in 2019; these are
the few calls the tests need, on urllib.)"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

from testing.servers import free_port
from testing.services import require_service
from testing.workers import ROOT

SCRIPT = ROOT / "scripts" / "toxiproxy.py"


class ToxiproxyError(Exception):
    pass


class Toxiproxy:
    """A client of the API at ``url`` (http://127.0.0.1:PORT)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def call(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            raise ToxiproxyError(f"{method} {path}: {exc.code} {exc.read().decode(errors='replace')}") from None
        return json.loads(text) if text.strip() else None

    def version(self) -> str:
        with urllib.request.urlopen(self.url + "/version", timeout=10) as response:
            return response.read().decode().strip()

    def create(self, name: str, upstream: str, listen: str = "127.0.0.1:0") -> Proxy:
        """A proxy listening on ``listen`` (by default a free loopback port) in front of
        ``upstream`` (host:port)."""
        made = self.call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})
        return Proxy(self, made)

    def proxies(self) -> dict[str, Proxy]:
        return {name: Proxy(self, p) for name, p in (self.call("GET", "/proxies") or {}).items()}

    def reset(self) -> None:
        """Every proxy enabled again, every toxic removed."""
        self.call("POST", "/reset")


class Proxy:
    def __init__(self, client: Toxiproxy, state: dict):
        self.client = client
        self.name = state["name"]
        self.upstream = state["upstream"]
        self.listen = state["listen"]
        self.host, port = self.listen.rsplit(":", 1)
        self.port = int(port)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def toxics(self) -> list[dict]:
        return self.client.call("GET", f"/proxies/{self.name}/toxics") or []

    def add(self, kind: str, stream: str = "downstream", name: str | None = None, toxicity: float = 1.0, **attributes):
        """A toxic of ``kind`` (latency, bandwidth, slow_close, timeout, reset_peer,
        slicer, limit_data) on ``stream``: its name."""
        name = name or f"{kind}_{stream}"
        body = {"name": name, "type": kind, "stream": stream, "toxicity": toxicity, "attributes": attributes}
        self.client.call("POST", f"/proxies/{self.name}/toxics", body)
        return name

    def remove(self, name: str) -> None:
        self.client.call("DELETE", f"/proxies/{self.name}/toxics/{name}")

    def clear(self) -> None:
        for toxic in self.toxics():
            self.remove(toxic["name"])

    def latency(self, ms: float, jitter: float = 0, stream: str = "downstream") -> str:
        """Every chunk of ``stream`` delayed ``ms`` (on downstream: each answer, so each
        round trip, ``ms`` later)."""
        return self.add("latency", stream, latency=int(ms), jitter=int(jitter))

    def blackhole(self) -> list[str]:
        """Nothing goes through either way and no connection is closed (a timeout toxic of
        0 on both streams): the bytes sent meanwhile are dropped, new connections are
        accepted and hang; a client waits for its own timeouts."""
        return [self.add("timeout", stream, timeout=0) for stream in ("upstream", "downstream")]

    def bandwidth(self, kb_per_s: int, stream: str = "downstream") -> str:
        return self.add("bandwidth", stream, rate=int(kb_per_s))

    def slow_close(self, ms: float, stream: str = "downstream") -> str:
        return self.add("slow_close", stream, delay=int(ms))

    @contextlib.contextmanager
    def toxic(self, kind: str, stream: str = "downstream", **attributes):
        """``with proxy.toxic("latency", latency=20):`` the toxic while in the block."""
        name = self.add(kind, stream, **attributes)
        try:
            yield name
        finally:
            self.remove(name)

    def enable(self, enabled: bool = True) -> None:
        self.client.call("POST", f"/proxies/{self.name}", {"enabled": enabled})

    def disable(self) -> None:
        """Connections refused, and the open ones closed."""
        self.enable(False)

    def delete(self) -> None:
        self.client.call("DELETE", f"/proxies/{self.name}")


class ToxiproxyServer:
    """scripts/toxiproxy.py's server in ``directory`` with its API on a free loopback port."""

    def __init__(self, directory):
        self.dir = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = Toxiproxy(self.url)

    def _script(self, *args: str, timeout: float = 300) -> str:
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
        if proc.returncode != 0:
            raise RuntimeError(f"toxiproxy.py {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def start(self) -> ToxiproxyServer:
        self._script("start", str(self.dir), "--port", str(self.port))
        return self

    def stop(self) -> None:
        self._script("stop", str(self.dir))

    def proxy(self, name: str, upstream: str) -> Proxy:
        return self.client.create(name, upstream)

    def __enter__(self) -> ToxiproxyServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def toxiproxy_built() -> bool:
    code = "import sys; sys.path.insert(0, 'scripts'); import toxiproxy; print(toxiproxy.SERVER.exists())"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
    return done.stdout.strip() == "True"


def new_toxiproxy(directory) -> ToxiproxyServer:
    """A started ToxiproxyServer in ``directory`` (skipped, or failed in CI, without a build)."""
    if not toxiproxy_built():
        require_service(
            "toxiproxy", "no Toxiproxy build: `python scripts/toxiproxy.py build` (Go, half a minute, once)"
        )
    return ToxiproxyServer(directory).start()
