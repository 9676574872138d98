"""Seed ingestion shows its progress: how far the input has been read (bytes of the files
as stored, gzip included) and, from ``scrapy seed`` on a stream that is not a terminal, a
line every SEED_PROGRESS_INTERVAL seconds with the lines read, URLs added, rate and time
left."""

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.frontier.frontier import Frontier
from crawler.seeds.ingest import ingest

ROOT = Path(__file__).resolve().parent.parent

PROGRESS = re.compile(
    r"^\d\d:\d\d:\d\d seeding: ([\d,]+) lines read, ([\d,]+) added, ([\d,]+) lines/s, (\d+)% of ([\d.]+) MB, "
    r"about (\d+) (s|min|h) left$"
)


@pytest.fixture
def frontier(redis_client, crawl_name):
    return Frontier(redis_client, crawl_name)


def test_ingest_follows_the_bytes_read_of_plain_and_gzip_files(tmp_path, frontier):
    plain, packed = tmp_path / "a.txt", tmp_path / "b.txt.gz"
    plain.write_text("".join(f"http://a.example/{i}\n" for i in range(3000)))
    packed.write_bytes(gzip.compress("".join(f"http://b.example/{i}\n" for i in range(3000)).encode()))
    total = os.path.getsize(plain) + os.path.getsize(packed)
    seen = []
    report = ingest(frontier, [plain, packed], batch_size=500, progress=lambda r: seen.append(r.bytes_read))
    assert report.added == 6000 and report.bytes_total == total
    assert report.bytes_read == total and report.fraction == 1.0 and report.eta == 0
    assert seen == sorted(seen) and seen[0] < os.path.getsize(plain) < seen[-1], seen  # moved through both
    assert "100% of 0.1 MB, about 0 s left" in report.progress_text()


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
