"""A large seed file read in two processes (crawler/seeds/split_read.py), through ``ingest``
into a real Redis with a spill: what is pushed, in what order, and what is counted are those
of the same file read in one process; a second process that fails, dies or hangs leaves
nothing lost. The pure parts: tests/unit/test_seed_split_read.py."""

import logging
import multiprocessing
import os
import signal
import threading
import time

import pytest
import redis

from crawler.frontier.chunks import SqliteChunks
from crawler.frontier.frontier import Frontier
from crawler.frontier.spill import Spill
from crawler.seeds import split_read
from crawler.seeds.ingest import IngestStopped, ingest
from crawler.seeds.spool import SpoolError

HOSTS = "abcdefghi"
# lineno: a malformed line, or a URL the normalizer refuses
BAD = {10: "not a url", 2500: "http://x.example/ 1 2", 3700: "ftp://z.example/x", 3900: "http://y.example/ high"}
LINES = 4000 - 2  # seed lines (a comment and a blank line aside)
GOOD = LINES - len(BAD)


def _seed_file(path):
    """4,000 lines over nine hosts, interleaved, priorities mixed, a malformed line in each
    half (a comment and a blank line too); about 120 kB, the second process's part from the
    middle of what is left once the first 100 URLs are held."""
    lines = []
    for n in range(1, 4001):
        if n in BAD:
            lines.append(BAD[n])
        elif n == 20:
            lines.append("# a comment")
        elif n == 3000:
            lines.append("")
        else:
            lines.append(f"http://{HOSTS[n % 9]}.example/page/{n}/{'x' * (n % 17)}  {n % 3 - 1}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _ingest(tmp_path, redis_url, crawl, path, group=100, **options):
    """ingest ``path`` into a new crawl with windows of 3 and a spill, each batch's URLs noted
    as sent: (report, [(url, priority)] in the order sent, the spool directory)."""
    frontier = Frontier(redis.Redis.from_url(redis_url), crawl, host_interval=0.0, max_in_flight=0, window=3)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / f"{crawl}.sqlite")))
    sent = []

    class Seen:  # the real frontier, each batch's URLs noted as it is sent
        prepare = staticmethod(frontier.prepare)

        @staticmethod
        def send(prepared):
            sent.extend((e.url, e.priority) for _, e, _ in prepared.batch)
            return frontier.send(prepared)

    spool = tmp_path / f"spool-{crawl}"
    spool.mkdir()
    try:
        report = ingest(Seen, path, batch_size=50, spill=spill, group_urls=group, spool_dir=str(spool), **options)
    finally:
        spill.close()
        frontier.clear()
    return report, sent, spool


def test_a_large_file_read_in_two_processes_is_pushed_as_if_read_in_one(tmp_path, redis_url, crawl_name):
    path = _seed_file(tmp_path / "seeds.txt")
    one, sent_one, _ = _ingest(tmp_path, redis_url, crawl_name, path, split_from=0)
    two, sent_two, spool = _ingest(tmp_path, redis_url, crawl_name + "-2", path, split_from=1)

    assert one.lines_beside == 0 and 1000 < two.lines_beside < 2000  # about half of what was left
    assert sent_two == sent_one  # the same URLs, priorities, and order: host by host, each's as read
    assert len(sent_one) == GOOD and len({url for url, _ in sent_one}) == GOOD
    hosts = [url.split("/")[2] for url, _ in sent_two]
    runs = [h for i, h in enumerate(hosts) if i == 0 or h != hosts[i - 1]]
    assert len(runs) <= 2 * len(HOSTS)  # (each part's hosts together: a host at most once a part)
    for report in (one, two):
        assert (report.lines, report.added, report.invalid, report.pushed) == (LINES, GOOD, len(BAD), GOOD)
    # the second half's malformed line numbered as in the file
    assert two.invalid_examples == one.invalid_examples
    assert [where for where, _ in two.invalid_examples] == [f"{path}:{n}" for n in BAD]
    assert two.bytes_read == two.bytes_total == os.path.getsize(path)
    assert list(spool.iterdir()) == []  # both processes' files are gone
    assert multiprocessing.active_children() == []


def test_a_second_process_that_fails_leaves_the_rest_read_here(tmp_path, redis_url, crawl_name, monkeypatch, caplog):
    """Its spool cannot be made (the fault injected: a full disk in the second process only,
    whose HostSpool raises): the ingesting process reads the rest itself, said in the log."""
    path = _seed_file(tmp_path / "seeds.txt")
    _, sent_one, _ = _ingest(tmp_path, redis_url, crawl_name, path, split_from=0)
    parent = os.getpid()

    class FullDisk(split_read.HostSpool):
        def __init__(self, *args):
            if os.getpid() != parent:
                raise SpoolError("/spool", OSError(28, "No space left on device"))
            super().__init__(*args)

    monkeypatch.setattr(split_read, "HostSpool", FullDisk)
    with caplog.at_level(logging.WARNING, logger=split_read.__name__):
        report, sent, spool = _ingest(tmp_path, redis_url, crawl_name + "-2", path, split_from=1)
    assert report.lines_beside == 0 and (report.lines, report.added, report.invalid) == (LINES, GOOD, len(BAD))
    assert sent == sent_one
    assert "No space left on device" in caplog.text and "it is read here" in caplog.text
    assert list(spool.iterdir()) == []


def test_a_second_process_that_dies_leaves_the_rest_read_here(tmp_path, redis_url, crawl_name, monkeypatch):
    """Killed (SIGKILL) as it starts: its pipe closes, the rest is read here."""
    path = _seed_file(tmp_path / "seeds.txt")
    _, sent_one, _ = _ingest(tmp_path, redis_url, crawl_name, path, split_from=0)
    parent = os.getpid()

    def killed(f, cut):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(split_read, "_lines_before", killed)
    report, sent, _ = _ingest(tmp_path, redis_url, crawl_name + "-2", path, split_from=1)
    assert report.lines_beside == 0 and (report.lines, report.added, report.invalid) == (LINES, GOOD, len(BAD))
    assert sent == sent_one


def test_stopping_while_the_second_process_is_waited_for_stops_it(tmp_path, redis_url, crawl_name, monkeypatch):
    """The second process hangs; the stop (the crawl that seeds stopped, an interrupt) comes
    while the ingesting process waits for it at the cut: IngestStopped within a wait step,
    the process killed, nothing pushed (the same command again adds it all)."""
    path = _seed_file(tmp_path / "seeds.txt")
    parent = os.getpid()

    def hangs(f, cut):
        if os.getpid() != parent:
            time.sleep(60)

    monkeypatch.setattr(split_read, "_lines_before", hangs)
    stop = threading.Event()
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(IngestStopped) as info:
            _ingest(tmp_path, redis_url, crawl_name, path, split_from=1, stop=stop)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 10
    assert info.value.report.pushed == 0
    assert multiprocessing.active_children() == []


def _many(path, lines):
    path.write_text("".join(f"http://{HOSTS[n % 9]}.example/{n}\n" for n in range(1, lines + 1)))
    return path


def test_a_file_that_looks_larger_than_a_block_goes_to_disk_early_and_its_second_half_beside(
    tmp_path, redis_url, crawl_name
):
    """A file that may be read in two halves is judged once 10,000 URLs are held
    (SPLIT_JUDGED_AT), not when the block is full: 25,000 lines against a block of 20,000
    go to disk then, and the second process reads half of the rest; 15,000 lines fit in
    the block and stay in memory, read by one process."""
    path = _many(tmp_path / "seeds.txt", 25_000)
    one, sent_one, _ = _ingest(tmp_path, redis_url, crawl_name, path, split_from=0, group=20_000)
    said = []  # (lines, URLs on disk) of each progress report while the input is read
    progress = lambda r: said.append((r.lines, r.spooled)) if r.push_started is None else None  # noqa: E731
    two, sent_two, _ = _ingest(
        tmp_path, redis_url, crawl_name + "-2", path, split_from=1, group=20_000, progress=progress
    )
    assert sent_two == sent_one and two.added == one.added == 25_000
    assert one.spooled == 25_000 and two.spooled == 25_000
    assert 6_000 < two.lines_beside < 8_000  # (half of what was left after some 10,000; 2,500 if judged at 20,000)
    # while reading, the lines read and the URLs on disk are both processes' (no line invalid here)
    assert said and all(lines == spooled for lines, spooled in said)

    small = _many(tmp_path / "small.txt", 15_000)
    report, sent, _ = _ingest(tmp_path, redis_url, crawl_name + "-3", small, split_from=1, group=20_000)
    assert report.spooled == 0 and report.lines_beside == 0 and report.added == 15_000
    hosts = [url.split("/")[2] for url, _ in sent]
    assert len([h for i, h in enumerate(hosts) if i == 0 or h != hosts[i - 1]]) == len(HOSTS)  # host by host
