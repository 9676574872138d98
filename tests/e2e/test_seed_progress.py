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
# seeds held on disk (more than SEED_GROUP_URLS): while the input is read, then while pushed
READING = re.compile(
    r"^\d\d:\d\d:\d\d seeding: ([\d,]+) lines read, 0 added, [\d,]+ lines/s, (\d+)% of ([\d.]+) MB read, "
    r"about \d+ (?:s|min|h) left to read, ([\d,]+) URLs held on disk by host$"
)
PUSHING = re.compile(
    r"^\d\d:\d\d:\d\d seeding: ([\d,]+) lines read, ([\d,]+) added, [\d,]+ lines/s, pushing by host: "
    r"(\d+)% of ([\d,]+) URLs, about \d+ (?:s|min|h) left$"
)


def test_standard_input_has_no_size_and_no_eta(tmp_path, redis_url, crawl_name):
    """As read (all in Redis), a line without the input's share or time left; grouped by
    host (the default), those of the URLs held once the input is read, not of the input."""
    urls = "".join(f"http://in.example/{i}\n" for i in range(20_000)).encode()
    window = ("-s", "FRONTIER_HOST_WINDOW=0")
    proc = seed_command(
        "-", "--batch", "200", *interval(0.05), *window, crawl_name=crawl_name, redis_url=redis_url, input=urls
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.decode().splitlines()
    assert lines and all(
        re.fullmatch(r"\d\d:\d\d:\d\d seeding: [\d,]+ lines read, [\d,]+ added, [\d,]+ lines/s", line) for line in lines
    ), lines
    grouped = f"{crawl_name}-grouped"
    proc = seed_command("-", "--batch", "200", *interval(0.05), crawl_name=grouped, redis_url=redis_url, input=urls)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.decode().splitlines()
    matches = [PUSHING.match(line) for line in lines]
    assert lines and all(matches) and {m.group(4) for m in matches} == {"20,000"}, lines


def test_scrapy_seed_prints_a_line_every_interval_with_rate_and_time_left(tmp_path, redis_url, crawl_name):
    path = tmp_path / "seeds.txt"
    path.write_text("".join(f"http://h{i % 500}.example/page/{i}\n" for i in range(40_000)))
    window = ("-s", "FRONTIER_HOST_WINDOW=0")  # (pushed as read)
    proc = seed_command(path, "--batch", "500", *interval(0.1), *window, crawl_name=crawl_name, redis_url=redis_url)
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
    quiet = seed_command(path, "--no-progress", *interval(0.1), *window, crawl_name=crawl_name, redis_url=redis_url)
    assert quiet.returncode == 0 and quiet.stderr == b""


def test_seeds_held_on_disk_show_the_reading_then_the_pushing(tmp_path, redis_url, crawl_name):
    """More seeds than SEED_GROUP_URLS (the default windows): lines while the input goes to
    disk (its share read, time left to read, URLs held), then while they are pushed by host
    (the share of them pushed, time left)."""
    path = tmp_path / "seeds.txt"
    path.write_text("".join(f"http://h{i % 500}.example/page/{i}\n" for i in range(40_000)))
    group = ("-s", "SEED_GROUP_URLS=5000", "-s", f"SEED_SPOOL_DIR={tmp_path}")
    proc = seed_command(path, "--batch", "500", *interval(0.02), *group, crawl_name=crawl_name, redis_url=redis_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().startswith("added 40000, already seen 0")
    lines = proc.stderr.decode().splitlines()
    reading = [m for m in map(READING.match, lines) if m]
    pushing = [m for m in map(PUSHING.match, lines) if m]
    assert reading and len(pushing) >= 2 and len(reading) + len(pushing) == len(lines), lines
    assert lines.index(pushing[0].group(0)) == len(reading)  # the reading's lines first
    held = [int(m.group(4).replace(",", "")) for m in reading]
    assert held == sorted(held) and 5000 < held[0] and held[-1] <= 40_000
    assert {m.group(3) for m in reading} == {f"{os.path.getsize(path) / 1e6:.1f}"}
    added = [int(m.group(2).replace(",", "")) for m in pushing]
    shares = [int(m.group(3)) for m in pushing]
    assert added == sorted(added) and shares == sorted(shares) and shares[0] < 100, lines
    assert {m.group(1) for m in pushing} == {"40,000"} and {m.group(4) for m in pushing} == {"40,000"}
    assert [p.name for p in tmp_path.iterdir()] == ["seeds.txt"]  # the spool's files removed


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
