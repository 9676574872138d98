"""Reading what a `scrapy crawl` worker subprocess left behind: its feed and its logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
    out: Path, seeds: Path | None = None, settings: dict | None = None, append: bool = False
) -> list[str]:
    """``scrapy crawl broad`` writing its Pages to ``out`` (``-O``, or ``-o`` with
    ``append``, as a resumed crawl is run), seeding ``seeds`` when given, with
    ``-s NAME=VALUE`` for each of ``settings``."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", "broad", "-o" if append else "-O", str(out)]
    if seeds is not None:
        cmd += ["-a", f"seeds={seeds}"]
    # the crawl's files (UrlStore, WARC archive, embedded Redis) beside its feed, and
    # archive batches closed after a second, unless the test says otherwise
    settings = {"CRAWL_DIR": out.parent / "crawl", "ARCHIVE_MAX_SECONDS": 1, **(settings or {})}
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    return cmd
