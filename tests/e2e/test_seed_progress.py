"""Seed ingestion shows its progress: how far the input has been read (bytes of the files
as stored, gzip included) and, from ``scrapy seed`` on a stream that is not a terminal, a
line every SEED_PROGRESS_INTERVAL seconds with the lines read, URLs added, rate and time
left.

Here: the end-to-end tests (commands and workers as subprocesses); the others of this
subject: tests/integration/test_seed_progress.py."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROGRESS = re.compile(
    r"^\d\d:\d\d:\d\d seeding: ([\d,]+) lines read, ([\d,]+) added, ([\d,]+) lines/s, (\d+)% of ([\d.]+) MB, "
    r"about (\d+) (s|min|h) left$"
)


def test_standard_input_has_no_size_and_no_eta(tmp_path, redis_url, crawl_name):
    urls = "".join(f"http://in.example/{i}\n" for i in range(20_000)).encode()
    proc = seed_command("-", "--batch", "200", *interval(0.05), crawl_name=crawl_name, redis_url=redis_url, input=urls)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.decode().splitlines()
    assert lines and all(
        re.fullmatch(r"\d\d:\d\d:\d\d seeding: [\d,]+ lines read, [\d,]+ added, [\d,]+ lines/s", line) for line in lines
    ), lines


def test_scrapy_seed_prints_a_line_every_interval_with_rate_and_time_left(tmp_path, redis_url, crawl_name):
    path = tmp_path / "seeds.txt"
    path.write_text("".join(f"http://h{i % 500}.example/page/{i}\n" for i in range(40_000)))
    proc = seed_command(path, "--batch", "500", *interval(0.1), crawl_name=crawl_name, redis_url=redis_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().startswith("added 40000, already seen 0")
    lines = proc.stderr.decode().splitlines()
    matches = [PROGRESS.match(line) for line in lines]
    assert len(lines) >= 2 and all(matches), lines
    read = [int(m.group(1).replace(",", "")) for m in matches]
    shares = [int(m.group(4)) for m in matches]
    assert read == sorted(read) and read[0] < read[-1] <= 40_000, read
    assert shares == sorted(shares) and shares[0] < 100, shares
    assert all(int(m.group(3).replace(",", "")) > 0 for m in matches)
    assert {m.group(5) for m in matches} == {f"{os.path.getsize(path) / 1e6:.1f}"}
    quiet = seed_command(path, "--no-progress", *interval(0.1), crawl_name=crawl_name, redis_url=redis_url)
    assert quiet.returncode == 0 and quiet.stderr == b""


def interval(seconds: float) -> list[str]:
    return ["-s", f"SEED_PROGRESS_INTERVAL={seconds}"]


def seed_command(*args, crawl_name, redis_url, input=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, REDIS_URL=redis_url)
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "seed", "--crawl", crawl_name, *map(str, args)],
        cwd=ROOT,
        env=env,
        input=input,
        capture_output=True,
        timeout=120,
    )
