"""Crawl workers and commands as subprocesses of a test or benchmark: their command, a
clean environment, their feed, log and output, ``scrapy serve`` as a process; every
one bounded in time."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from testing.servers import free_port

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
    ``-a NAME=VALUE`` for each of ``args`` and ``-s NAME=VALUE`` for each of ``settings``
    (a setting given as None left to the project's default)."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", "broad", "-o" if append else "-O", str(out)]
    if seeds is not None:
        cmd += ["-a", f"seeds={seeds}"]
    for name, value in (args or {}).items():
        cmd += ["-a", f"{name}={value}"]
    # the crawl's files (UrlStore, WARC archive, embedded Redis) beside its feed, and
    # archive batches closed after a second, unless the test says otherwise
    settings = {"CRAWL_DIR": out.parent / "crawl", "ARCHIVE_MAX_SECONDS": 1, **(settings or {})}
    for name, value in settings.items():
        if value is not None:
            cmd += ["-s", f"{name}={value}"]
    return cmd


_STAT = re.compile(r"'([\w/]+)': ([\d.]+)")
_ERROR_EXCEPTION = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


def dumped_stats(text: str) -> dict[str, float]:
    """The numeric stats of a worker's log's last stats dump (its closing stats; the whole
    log when it has none)."""
    return {name: float(value) for name, value in _STAT.findall(text[max(text.rfind("Dumping Scrapy stats"), 0) :])}


def error_lines(text: str) -> Counter:
    """A log's errors: (ERROR message with URLs and numbers blanked, the exception that
    follows it) -> count; a traceback with no ERROR line before it counts as a message of
    its own."""
    errors: Counter = Counter()
    pending = None
    for line in text.splitlines():
        if " ERROR: " in line or (line.startswith("Traceback") and pending is None):
            if pending is not None:
                errors[(pending, "")] += 1
            pending = re.sub(r"https?://\S+|\d+", "#", line.split(" ERROR: ", 1)[-1])
        elif pending is not None and _ERROR_EXCEPTION.match(line):
            errors[(pending, line)] += 1
            pending = None
        elif pending is not None and re.match(r"20\d\d-\d\d-\d\d ", line):
            errors[(pending, "")] += 1
            pending = None
    if pending is not None:
        errors[(pending, "")] += 1
    return errors


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


def until(condition, timeout: float, *workers: Worker) -> None:
    """Wait until ``condition()`` holds; AssertionError, with the workers' logs, when one of
    ``workers`` exits meanwhile or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not condition():
        for w in workers:
            code = w.proc.poll()
            assert code is None, f"worker {w.label} exited ({code})\n{w.tail()}"
        assert time.monotonic() < deadline, f"not within {timeout} s\n" + "\n".join(w.tail() for w in workers)
        time.sleep(0.1)


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


def crawl_demo_site(site, directory: Path, name: str, settings: dict, env: dict, timeout: float, feed: bool = True):
    """One worker crawls the demo site ``site`` (crawler/demo/site.py) from its seeds, with
    ``settings``, its feed ``directory/name.jsonl`` (none unless ``feed``), its log
    ``directory/name.log`` (its tail printed when it failed or pages are missing), waited for
    by wait4 (``timeout``). By the site's log: its page requests (robots.txt aside), the
    robots.txt ones, pages/s from the first page request's arrival to the last's, the pages
    of the site never requested, its exit code and its CPU ms a page."""
    seeds = directory / f"{name}-seeds.txt"
    seeds.write_text("\n".join(site.seeds) + "\n")
    cmd = crawl_command(directory / f"{name}.jsonl", seeds, {"LOG_FILE": directory / f"{name}.log", **settings})
    if not feed:  # a feed of base64 bodies is no part of a crawl
        del cmd[cmd.index("-O") : cmd.index("-O") + 2]
    before = len(site.hits())  # one site may serve several runs
    proc = start_worker(cmd, env, directory / f"{name}.out")
    try:
        status, usage = wait4(proc, timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    hits = site.hits()[before:]
    pages = [h for h in hits if not h.path.endswith("/robots.txt")]
    span = max(h.start for h in pages) - min(h.start for h in pages) if pages else 0.0
    missing = len(site.expected_fetches() - {h.key for h in pages})
    if missing or status:
        print(log_tail([directory / f"{name}.log"], 15, "  (no worker log)"))
    return {
        "pages": len(pages),
        "robots": len(hits) - len(pages),
        "span": span,
        "first_wall": min((h.wall for h in pages), default=0.0),
        "rate": len(pages) / span if span else 0.0,
        "missing": missing,
        "exit": status,
        "cpu": 1000 * (usage.ru_utime + usage.ru_stime) / max(len(pages), 1) if usage else 0.0,
    }


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

    def get(self, path: str, data: bytes | None = None, token: str | None = None, headers: dict | None = None):
        """(status, headers, body bytes) of a request (a POST with ``data``; ``headers``
        beside the JSON type); errors are answers too."""
        headers = {**({"Content-Type": "application/json"} if data is not None else {}), **(headers or {})}
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
        """Stop it (SIGTERM, then SIGKILL), and any process of its own left behind."""
        import psutil

        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            children = []
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for child in children:
            with contextlib.suppress(psutil.Error):
                child.kill()


def in_processes(target, arg_lists: list[tuple]) -> tuple[list, float, float]:
    """``target(*args, out)`` in a process of its own for each ``args`` of ``arg_lists``,
    each putting one value on ``out`` (a queue): the values in the order they came, and
    the ``time.monotonic()`` of the first start and of the last value."""
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=target, args=(*args, out)) for args in arg_lists]
    started = time.monotonic()
    for p in procs:
        p.start()
    values = [out.get() for _ in procs]
    ended = time.monotonic()
    for p in procs:
        p.join()
    return values, started, ended


def summed_in_processes(target, arg_lists: list[tuple]) -> tuple[int, float]:
    """``in_processes`` of processes that each put one number: their sum, and the seconds
    from the first start to the last number."""
    values, started, ended = in_processes(target, arg_lists)
    return sum(values), ended - started
