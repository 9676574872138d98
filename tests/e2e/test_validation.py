"""Settings are checked in one place before anything starts: the rules with plain values, then
every command of the project started with a bad setting: the end-to-end tests (commands and
workers as subprocesses) (the others: tests/unit/test_validation.py,
tests/integration/test_validation.py)."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from testing.workers import clean_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "command",
    [
        ["crawl", "broad"],
        ["seed", "-"],
        ["frontier"],
        ["urlstore", "get", "http://example.com/"],
        ["demo"],
        ["submit", "http://example.com/"],
    ],
)
def test_every_command_stops_at_once_with_one_line_and_exit_code_2(command, tmp_path):
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", *command, "-s", "FRONTIER_HOST_INTERVAL=abc", "-s", f"CRAWL_DIR={tmp_path}"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    took = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"{command[0]}: invalid setting FRONTIER_HOST_INTERVAL='abc': expected a number of seconds >= 0"
    ]
    assert proc.stdout == "" and took < 15, took
    assert not any(tmp_path.iterdir())  # nothing was created


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["-s", "FRONTIER_HOST_INTERVALL=5"],
            "crawl: invalid setting FRONTIER_HOST_INTERVALL='5': not a setting of this crawler; "
            "did you mean FRONTIER_HOST_INTERVAL?",
        ),
        (
            ["-a", "seedz=x.txt"],
            "crawl: unknown argument -a seedz=...: did you mean seeds? the broad spider takes seeds, "
            "allowed_domains, allowed_prefixes, follow",
        ),
    ],
)
def test_a_misspelled_name_stops_the_crawl_naming_the_right_one(args, line, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "broad", *args, "-s", f"CRAWL_DIR={tmp_path}"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [line], proc.stderr
    assert not any(tmp_path.iterdir())


def test_frontier_watch_takes_a_positive_number():
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "frontier", "--watch", "-5"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--watch takes a number of seconds above 0" in proc.stderr
