"""Seeds held on disk sorted by host (crawler/seeds/spool.py): the unit tests (pure: files in
a temporary directory, no service). Through ingestion into a real frontier:
tests/integration/test_seeds.py."""

import os
import random
import resource
import signal
import zlib

import pytest

from crawler.seeds.files import SeedFileError, SeedLine
from crawler.seeds.ingest import IngestReport
from crawler.seeds.spool import HostSpool, SpoolError, parts_for


def _held(urls):
    return [(url, SeedLine("seeds.txt", i + 1, url, i % 3 - 1)) for i, url in enumerate(urls)]


def _runs(urls):
    """The hosts in the order their runs come (a host twice: its URLs were not together)."""
    runs = []
    for url in urls:
        host = url.split("/")[2]
        if not runs or runs[-1] != host:
            runs.append(host)
    return runs


def _spool_back(tmp_path, held, parts, block, size=7, split=False):
    spool = HostSpool(parts, block, str(tmp_path))
    for url, line in held:
        spool.add(url, line)
    assert spool.spooled == len(held)
    try:
        batches = list(spool.batches(size))
        assert (spool.files > parts) == split  # parts split again: more files made
    finally:
        spool.close()
    assert not os.path.exists(spool.where)  # its files go with it
    return batches


@pytest.mark.parametrize(("parts", "block"), [(3, 100), (2, 15)], ids=["parts-as-judged", "parts-split-again"])
def test_every_url_comes_back_once_host_by_host_each_hosts_in_the_order_read(tmp_path, parts, block):
    """Hosts interleaved in the input come back each in one run, its URLs in the order read,
    each with its line (source, number, priority); with parts judged too few (2 parts of some
    60 URLs for blocks of 15: standard input), a part is split again and it still holds."""
    rnd = random.Random(5)
    urls = [f"http://h{rnd.randrange(40)}.example/{i}" for i in range(120)]
    held = _held(urls)
    batches = _spool_back(tmp_path, held, parts, block, split=parts == 2)
    assert all(len(batch) == 7 for batch in batches[:-1]) and 0 < len(batches[-1]) <= 7
    back = [item for batch in batches for item in batch]
    assert sorted(back, key=lambda item: item[1].lineno) == held  # once each, lines intact
    got = [url for url, _ in back]
    hosts = _runs(got)
    assert len(hosts) == len(set(hosts)) == len({url.split("/")[2] for url in urls})  # each host's URLs in one run
    for host in hosts:
        assert [u for u in got if f"//{host}/" in u] == [u for u in urls if f"//{host}/" in u]


def test_a_part_a_few_hosts_fill_is_read_two_blocks_at_a_time(tmp_path):
    """One host holds most of the input: splitting its part again cannot shrink it, so it is
    read two blocks at a time (memory stays bounded), each grouped, its URLs in order."""

    def part(host, salt=b""):  # the part of a host: first of 2, then of the 20 of a split
        return zlib.crc32(salt + host.encode()) % 2, zlib.crc32(b"1:" + salt + host.encode()) % 20

    # a small host that shares the big one's part, and its part after the split too
    small = next(h for h in (f"s{k}.example" for k in range(10_000)) if part(h) == part("big.example"))
    urls = [f"http://big.example/{i}" if i % 10 else f"http://{small}/{i}" for i in range(100)]
    back = [url for batch in _spool_back(tmp_path, _held(urls), 2, 5, split=True) for url, _ in batch]
    assert sorted(back) == sorted(urls)
    for host in ("big.example", small):
        assert [u for u in back if f"//{host}/" in u] == [u for u in urls if f"//{host}/" in u]
    # the part read ten URLs at a time, each ten grouped: the two hosts take turns
    assert _runs(back) == [small, "big.example"] * 10


def test_parts_for_an_estimate():
    assert parts_for(1_000_000, 100_000) == 10
    assert parts_for(100, 100_000) == 2  # (at least two: more than a block came)
    assert parts_for(10**9, 100_000) == 64  # (at most so many files open; a part split again)


def test_a_spool_that_cannot_be_made_says_where_and_the_setting(tmp_path):
    missing = tmp_path / "no" / "such"
    with pytest.raises(SpoolError, match=r"cannot hold seeds on disk in .*no/such \(SEED_SPOOL_DIR\)") as caught:
        HostSpool(4, 10, str(missing))
    assert isinstance(caught.value, SeedFileError)  # (what the commands report and stop on)


def test_progress_while_reading_to_disk_then_while_pushing():
    report = IngestReport(lines=500_000, added=0, elapsed=10.0, bytes_read=30_000_000, bytes_total=60_000_000)
    report.spooled = 490_000
    assert report.progress_text() == (
        "500,000 lines read, 0 added, 50,000 lines/s, 50% of 60.0 MB read, about 10 s left to read, "
        "490,000 URLs held on disk by host"
    )
    report = IngestReport(lines=1_000_000, added=400_000, pushed=450_000, elapsed=30.0, spooled=900_000)
    report.push_started, report.held = 20.0, 900_000  # 450,000 of 900,000 pushed in 10 s: 10 s more
    assert report.eta == 10.0
    assert report.progress_text() == (
        "1,000,000 lines read, 400,000 added, 33,333 lines/s, pushing by host: 50% of 900,000 URLs, about 10 s left"
    )


def test_a_spool_that_cannot_open_its_parts_leaves_nothing(tmp_path):
    """Too few file descriptors for the parts (a worker's sockets hold many): SpoolError,
    and the temporary directory made for them is gone."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 8, hard))
    try:
        with pytest.raises(SpoolError, match="Too many open files"):
            HostSpool(40, 10, str(tmp_path))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert list(tmp_path.iterdir()) == []


def test_a_part_that_cannot_be_written_is_a_spool_error(tmp_path):
    """A file that may grow no more (RLIMIT_FSIZE, as a full disk: the write fails) while
    seeds are held: SpoolError saying where, raised from add or at the flush."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    before = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (EFBIG, not the signal's kill)
    spool = HostSpool(2, 10, str(tmp_path))
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 1024, hard))
    try:
        with pytest.raises(SpoolError, match=f"in {spool.where} .*File too large"):
            for url, line in _held([f"http://h{i}.example/{i}" for i in range(5000)]):
                spool.add(url, line)
            list(spool.batches(100))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, before)
        spool.close()
    assert list(tmp_path.iterdir()) == []
