"""What scripts/cassandra.py and scripts/s3server.py share: a server process started in the
background with its pid file and log, waited for until its port answers, stopped with
SIGTERM (SIGKILL after a grace time, or at once for a fault test), and one clear line
with a non-zero exit for anything that keeps it from running.

Downloads and builds are kept under CRAWLER_SERVICES_CACHE (default
~/.cache/crawler-services) and reused by every later start.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(os.environ.get("CRAWLER_SERVICES_CACHE") or Path.home() / ".cache" / "crawler-services")


class ServiceError(Exception):
    """Something that keeps a service from running: printed as one line, exit code 1."""


def fail(name: str, exc: ServiceError) -> int:
    print(f"{name}: {exc}", file=sys.stderr)
    return 1


def require(program: str, hint: str) -> str:
    """The path of ``program`` on PATH, or ServiceError naming how to get it."""
    from shutil import which

    path = which(program)
    if path is None:
        raise ServiceError(f"no {program} on PATH ({hint})")
    return path


def run_quietly(cmd: list[str], what: str, cwd: Path | None = None, env: dict | None = None) -> None:
    """Run a download or build step; its failure is ServiceError with its last line."""
    print(f"{what} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        raise ServiceError(f"{what} failed (exit {proc.returncode}): {lines[-1] if lines else 'no output'}")
    print(f"{what}: done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)


def go_module(module: str, version: str, home: Path, what: str) -> Path:
    """The source of ``module@version`` from the Go module proxy (``go mod download``, into
    Go's module cache, read-only), for building ``what`` in ``home``."""
    go = require("go", f"{what} is built from the Go module proxy with Go")
    home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True, cwd=home
    )
    try:
        return Path(json.loads(proc.stdout)["Dir"])
    except (ValueError, KeyError) as exc:
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        raise ServiceError(f"go mod download {module}@{version} failed: {lines[-1] if lines else exc}") from exc


def saved_ports(path: Path) -> dict:
    """The ports a server saved in ``path`` when it started (its folder's ``*.json``);
    ServiceError when no server was started there."""
    if not path.exists():
        raise ServiceError(f"no server was started in {path.parent}")
    return json.loads(path.read_text())


def read_pid(path: Path) -> int | None:
    """The pid in ``path`` while that process lives: any of its threads is not a zombie
    (a killed JVM's first thread is a zombie while the others still hold its sockets)."""
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            return pid
    return None


def spawn(cmd: list[str], pid_file: Path, log: Path, env: dict | None = None, cwd: Path | None = None) -> int:
    """Start ``cmd`` in its own session (it outlives this script), output to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether a TCP connection to host:port is accepted."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(check, pid_file: Path, timeout: float, what: str, log: Path) -> float:
    """Poll ``check()`` until it is true; ServiceError when the process dies or time runs
    out (with the last line of its log). Returns the seconds waited."""
    started = time.monotonic()
    while not check():
        if read_pid(pid_file) is None:
            raise ServiceError(f"{what} exited while starting; last log line: {last_line(log)} ({log})")
        if time.monotonic() - started > timeout:
            raise ServiceError(f"{what} did not answer within {timeout:.0f} s; last log line: {last_line(log)} ({log})")
        time.sleep(0.25)
    return time.monotonic() - started


def last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


def stop(pid_file: Path, kill: bool = False, grace: float = 60.0) -> bool:
    """Stop the process of ``pid_file``: SIGKILL at once with ``kill``, else SIGTERM and
    SIGKILL after ``grace`` seconds. False when it was not running."""
    pid = read_pid(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
    deadline = time.monotonic() + (10.0 if kill else grace)
    while read_pid(pid_file) is not None:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10.0
        time.sleep(0.1)
    pid_file.unlink(missing_ok=True)
    return True


def pause(pid_file: Path, resume: bool = False) -> bool:
    """SIGSTOP (or SIGCONT) the process of ``pid_file``: a server that hangs."""
    pid = read_pid(pid_file)
    if pid is None:
        return False
    os.kill(pid, signal.SIGCONT if resume else signal.SIGSTOP)
    return True
