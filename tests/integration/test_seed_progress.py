"""Seed ingestion shows its progress: how far the input has been read (bytes of the files as
stored, gzip included) and, from ``scrapy seed`` on a stream that is not a terminal, a line
every SEED_PROGRESS_INTERVAL seconds with the lines read, URLs added, rate and time left:
the tests on real services in this process (Redis, Cassandra, S3, page processes) (the
others: tests/e2e/test_seed_progress.py)."""

import gc
import gzip
import os

import pytest

from crawler.frontier.frontier import Frontier
from crawler.seeds.ingest import YOUNG_PASS_EVERY, ingest


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


def test_ingest_passes_the_young_generation_rarely_and_gives_the_thresholds_back(tmp_path, frontier):
    # (each line makes a dozen objects, none in a cycle: at Python's pace of 700 allocations
    # the collector's full passes took about a third of the reading's CPU)
    path = tmp_path / "seeds.txt"
    path.write_text("".join(f"http://a.example/{i}\n" for i in range(1500)))
    before = gc.get_threshold()
    during = []
    report = ingest(frontier, path, batch_size=500, progress=lambda r: during.append(gc.get_threshold()))
    assert report.added == 1500 and during
    assert all(t == (max(before[0], YOUNG_PASS_EVERY), *before[1:]) for t in during), (before, during)
    assert gc.get_threshold() == before
    with pytest.raises(ZeroDivisionError):  # (an error from the progress function: given back too)
        ingest(frontier, path, batch_size=500, progress=lambda r: 1 / 0)
    assert gc.get_threshold() == before
