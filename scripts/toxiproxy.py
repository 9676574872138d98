#!/usr/bin/env python3
"""Toxiproxy on loopback, between the workers and their stores, for the fault tests and
bench/remote_stores.py: latency, a blackhole, a slow link or a proxy switched off, on the
way to Redis, Cassandra or S3.

    python scripts/toxiproxy.py start DIR [--port 8474]
    python scripts/toxiproxy.py stop DIR
    python scripts/toxiproxy.py status DIR
    python scripts/toxiproxy.py build

``start`` runs Toxiproxy's server with its HTTP API on 127.0.0.1:PORT (its pid and log in
DIR), waits until the API answers and prints ``export TOXIPROXY_URL=http://127.0.0.1:PORT``:
``eval "$(python scripts/toxiproxy.py start DIR)"``. It starts with no proxy: the proxies
(a loopback listen port in front of an upstream) and their toxics are made through the
API, by testing/toxiproxy.py's client. ``stop`` ends it (SIGTERM); its proxies go with it.

Where Toxiproxy comes from: the Go module proxy (github.com/Shopify/toxiproxy/v2 at
VERSION, Apache-2.0), its server (cmd/server) built once with the machine's Go into
CRAWLER_SERVICES_CACHE/toxiproxy-VERSION/toxiproxy-server (some 30 s) and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import urllib.request
from pathlib import Path

from service import (
    CACHE,
    ServiceError,
    fail,
    go_module,
    read_pid,
    require,
    run_quietly,
    saved_ports,
    spawn,
    stop,
    wait_until,
)

MODULE = "github.com/Shopify/toxiproxy/v2"
VERSION = os.environ.get("TOXIPROXY_VERSION", "v2.5.0")
HOME = CACHE / f"toxiproxy-{VERSION}"
SERVER = HOME / "toxiproxy-server"


def build() -> Path:
    """The server binary, built from the Go module proxy the first time."""
    if SERVER.exists():
        return SERVER
    go_module(MODULE, VERSION, HOME, "Toxiproxy")
    go = require("go", "Toxiproxy is built with Go")
    # its go.mod has no replace directive: ``go install`` builds it as a main module, with
    # the versions its go.sum names
    bin_dir = HOME / "bin.part"
    shutil.rmtree(bin_dir, ignore_errors=True)
    env = {**os.environ, "GOFLAGS": "-buildvcs=false", "GOWORK": "off", "GOBIN": str(bin_dir)}
    run_quietly(
        [go, "install", "-trimpath", "-ldflags=-s -w", f"{MODULE}/cmd/server@{VERSION}"],
        f"building Toxiproxy {VERSION} (cmd/server)",
        cwd=HOME,
        env=env,
    )
    (bin_dir / "server").rename(SERVER)
    shutil.rmtree(bin_dir, ignore_errors=True)
    return SERVER


def api(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def ready(port: int) -> bool:
    """The API answers its version."""
    try:
        with urllib.request.urlopen(api(port) + "/version", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def start(root: Path, port: int, timeout: float) -> None:
    server = build()
    root.mkdir(parents=True, exist_ok=True)
    pid_file, log = root / "toxiproxy.pid", root / "toxiproxy.log"
    running = read_pid(pid_file)
    if running is not None:
        saved = saved_ports(root / "port.json")["port"]
        if saved != port:
            raise ServiceError(f"already running in {root} on port {saved} (pid {running})")
    else:
        (root / "port.json").write_text(json.dumps({"port": port}))
        spawn([str(server), "-host", "127.0.0.1", "-port", str(port)], pid_file, log, cwd=root)
    waited = wait_until(lambda: ready(port), pid_file, timeout, "Toxiproxy", log)
    print(f"Toxiproxy's API on 127.0.0.1:{port} (started in {waited:.1f} s)", file=sys.stderr)
    print(f"export TOXIPROXY_URL={api(port)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("start", help="start the server in DIR; print its API's URL as a shell line")
    p.add_argument("dir", type=Path)
    p.add_argument("--port", type=int, default=8474, help="its HTTP API's port (default 8474)")
    p.add_argument("--timeout", type=float, default=30.0)
    sub.add_parser("stop", help="stop the server in DIR").add_argument("dir", type=Path)
    sub.add_parser("status", help="whether it answers").add_argument("dir", type=Path)
    sub.add_parser("build", help="build Toxiproxy only")
    args = parser.parse_args(argv)
    try:
        if args.verb == "build":
            print(build())
        elif args.verb == "start":
            start(args.dir, args.port, args.timeout)
        elif args.verb == "stop":
            was = stop(args.dir / "toxiproxy.pid", grace=10.0)
            print(f"Toxiproxy: {'stopped' if was else 'not running'}", file=sys.stderr)
        elif args.verb == "status":
            port = saved_ports(args.dir / "port.json")["port"]
            up = ready(port)
            pid = read_pid(args.dir / "toxiproxy.pid")
            print(f"127.0.0.1:{port}  pid {pid or '-'}  {'answers' if up else 'down'}")
            return 0 if up else 3
    except ServiceError as exc:
        return fail("toxiproxy", exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
