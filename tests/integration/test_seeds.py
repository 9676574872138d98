"""Seed files: reading (crawler.seeds.files.read_seeds), ingestion into a real Redis
(crawler.seeds.files.ingest) and the ``scrapy seed`` command, run as a subprocess.

Here: the tests on real services in this process (Redis, Cassandra, S3, page processes); the
others of this subject: tests/unit/test_seeds.py, tests/e2e/test_seeds.py."""

import gzip

import pytest

from crawler.frontier.frontier import Frontier
from crawler.seeds.files import SeedFileError, check_readable
from crawler.seeds.ingest import ingest
from testing.seeds import SEEDS, items_of


@pytest.fixture
def frontier(redis_client, crawl_name):
    return Frontier(redis_client, crawl_name, seen_capacity=10_000)


def test_a_url_in_place_of_a_file_is_a_seed_itself(tmp_path, frontier):
    """``-a seeds=https://a.example/,/path/seeds.txt``: URLs and files mixed, in order; a
    URL is never opened as a file."""
    plain = tmp_path / "b.txt"
    plain.write_text("http://plain.example/\n")
    sources = ["https://a.example/x", str(plain), "HTTP://c.example/"]
    check_readable(sources)
    assert items_of(sources) == [
        ("<argument>", 1, "https://a.example/x", 0),
        (str(plain), 1, "http://plain.example/", 0),
        ("<argument>", 3, "HTTP://c.example/", 0),
    ]
    report = ingest(frontier, sources)
    assert (report.added, report.invalid, report.lines) == (3, 0, 3)
    with pytest.raises(SeedFileError, match="ftp:"):  # not a URL it takes: a file name
        check_readable(["ftp://d.example/"])


def test_ingest_counts_and_invalid_line_numbers(tmp_path, frontier):
    path = tmp_path / "seeds.txt"
    path.write_text(SEEDS)
    calls = []
    report = ingest(frontier, path, batch_size=2, progress=lambda r: calls.append((r.lines, r.added + r.seen)))
    src = str(path)
    assert (report.added, report.seen, report.invalid, report.refused, report.lines) == (4, 1, 3, 0, 8)
    assert report.lines == report.added + report.seen + report.invalid + report.refused
    assert [where for where, _ in report.invalid_examples] == [f"{src}:6", f"{src}:7", f"{src}:8"]
    assert "bad priority" in report.invalid_examples[1][1]
    # one progress call per batch of 2 pushed entries, with running numbers
    assert [pushed for _, pushed in calls] == [2, 4, 5]
    assert [lines for lines, _ in calls] == sorted(lines for lines, _ in calls)
    assert frontier.stats()["queued"] == 4


def test_duplicates_are_seen_and_reingesting_adds_nothing(tmp_path, frontier):
    path = tmp_path / "dups.txt"
    # the same URL in one batch, across batches, and spelled differently
    path.write_text("http://d.example/1\nhttp://d.example/1\nhttp://d.example/2\nHTTP://D.EXAMPLE:80/1#x\n")
    first = ingest(frontier, path, batch_size=3)
    assert (first.added, first.seen, first.invalid) == (2, 2, 0)
    again = ingest(frontier, path)
    assert (again.added, again.seen, again.invalid, again.lines) == (0, 4, 0, 4)
    assert frontier.stats()["queued"] == 2


def test_priorities_land_in_their_front_queue(tmp_path, frontier):
    # 3 levels: priority >= 1 -> level 0, 0 -> level 1, <= -1 -> level 2
    path = tmp_path / "prio.txt"
    path.write_text("http://p.example/hi 3\nhttp://p.example/hi2 1\nhttp://p.example/mid\nhttp://p.example/lo -5\n")
    report = ingest(frontier, path)
    assert report.added == 4
    assert frontier.stats()["front_by_level"] == [2, 1, 1]


def test_malformed_line_in_the_middle_does_not_stop_ingestion(tmp_path, frontier):
    lines = [b"http://m.example/%d" % i for i in range(50)]
    lines[20] = b"http://m.example/20 1 2 3"
    lines[30] = b"http://m.example/\xfe"
    path = tmp_path / "mid.txt"
    path.write_bytes(b"\n".join(lines))
    report = ingest(frontier, path, batch_size=7)
    assert (report.added, report.invalid, report.lines) == (48, 2, 50)
    assert [w for w, _ in report.invalid_examples] == [f"{path}:21", f"{path}:31"]
    assert frontier.stats()["queued"] == 48


def test_refused_urls_are_counted_by_reason(tmp_path, frontier):
    path = tmp_path / "trap.txt"
    path.write_text("http://t.example/" + "x" * 3000 + "\nhttp://t.example/ok\n")
    report = ingest(frontier, path)
    assert (report.added, report.refused, dict(report.refused_by)) == (1, 1, {"trap:url_length": 1})
    assert "refused 1 (trap:url_length 1)" in report.summary()


def test_gzip_input_and_strip_params(tmp_path, frontier, redis_client):
    path = tmp_path / "seeds.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("http://g.example/?utm_source=a&b=1\nhttp://g.example/?b=1\nhttp://g.example/?keep=1\n")
    report = ingest(frontier, path, strip_params=("keep",))
    # utm_source is kept with an explicit list; keep= is stripped, so line 3 is /
    assert (report.added, report.seen) == (3, 0)
    front = [v.split(b"\x1f", 1)[1] for v in redis_client.lrange(frontier.keys.front(1), 0, -1)]
    assert front == [b"http://g.example/?b=1&utm_source=a", b"http://g.example/?b=1", b"http://g.example/"]


def test_unreadable_file_is_reported_before_anything_is_pushed(tmp_path, frontier):
    good = tmp_path / "good.txt"
    good.write_text("http://ok.example/\n")
    with pytest.raises(SeedFileError) as info:
        ingest(frontier, [good, tmp_path / "missing.txt"])
    assert info.value.path == str(tmp_path / "missing.txt")
    assert frontier.stats()["queued"] == 0


def test_truncated_gzip_keeps_what_was_read(tmp_path, frontier):
    data = gzip.compress(b"".join(b"http://z.example/%d\n" % i for i in range(2000)))
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(SeedFileError, match="cut.txt.gz: truncated") as info:
        ingest(frontier, path, batch_size=100)
    report = info.value.report
    assert 0 < report.added == report.lines < 2000
    assert frontier.stats()["queued"] == report.added


def test_a_file_that_breaks_while_seeds_are_held_on_disk_pushes_what_was_read(tmp_path, redis_url, crawl_name):
    """Seeds held on disk (more than SEED_GROUP_URLS) when a later file turns out truncated:
    what was read before it is pushed, by host, and the spool's files are removed."""
    import redis

    from crawler.frontier.chunks import SqliteChunks
    from crawler.frontier.spill import Spill

    first = tmp_path / "first.txt"
    first.write_text("".join(f"http://h{i % 9}.example/{i}\n" for i in range(300)))
    data = gzip.compress(b"".join(b"http://z.example/%d\n" % i for i in range(2000)))
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(data[: len(data) // 2])
    frontier = Frontier(redis.Redis.from_url(redis_url), crawl_name, host_interval=0.0, window=4)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    spool = tmp_path / "spool"
    spool.mkdir()
    with pytest.raises(SeedFileError, match="cut.txt.gz: truncated") as info:
        ingest(frontier, [first, cut], batch_size=50, spill=spill, group_urls=100, spool_dir=str(spool))
    report = info.value.report
    assert 300 < report.added == report.lines == report.spooled < 2300
    assert frontier.stats()["queued"] == report.added
    assert list(spool.iterdir()) == []
    spill.clear()
    spill.close()


@pytest.mark.parametrize("on_disk", [False, True])
def test_an_ingestion_whose_crawl_stops_stops_within_a_batch(tmp_path, redis_url, crawl_name, on_disk):
    """``stop`` set (the crawl seeding from ``-a seeds=`` stops): the ingestion stops at its
    next thousand lines read or batch pushed, with the report of what it pushed, and the
    seeds it held on disk removed (it read and pushed the whole input, the worker waiting
    for it at its close)."""
    import threading

    import redis

    from crawler.frontier.chunks import SqliteChunks
    from crawler.frontier.spill import Spill
    from crawler.seeds.ingest import IngestStopped

    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://h{i % 50}.example/{i}\n" for i in range(20_000)))
    frontier = Frontier(redis.Redis.from_url(redis_url), crawl_name, host_interval=0.0, window=4)
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite"))) if on_disk else None
    spool = tmp_path / "spool"
    spool.mkdir()
    stop = threading.Event()

    def progress(report):  # (the crawl stops after the first batch pushed, or 5,000 lines on disk)
        if report.added or report.spooled >= 5000:
            stop.set()

    options = {"spill": spill, "group_urls": 1000, "spool_dir": str(spool)} if on_disk else {}
    with pytest.raises(IngestStopped) as info:
        ingest(frontier, seeds, batch_size=500, progress=progress, stop=stop, **options)
    report = info.value.report
    assert report.lines < 20_000 and report.added < 2_000
    assert frontier.stats()["queued"] == report.added
    assert list(spool.iterdir()) == []
    if spill is not None:
        spill.clear()
        spill.close()


def test_batches_go_in_order_and_none_after_a_failed_one(tmp_path, frontier):
    """Two batches in flight at most, sent in the order read; when one fails (Redis gone),
    the error comes out of ingest and no batch after it is sent."""
    import redis

    path = tmp_path / "seeds.txt"
    path.write_text("".join(f"http://h{i % 7}.example/{i}\n" for i in range(100)))
    sent = []

    class Failing:
        prepare = staticmethod(frontier.prepare)

        @staticmethod
        def send(prepared):
            n = len(sent)
            sent.append([e.url for _, e, _ in prepared.batch])
            if n == 2:
                raise redis.ConnectionError("Redis went away")
            return frontier.send(prepared)

    with pytest.raises(redis.ConnectionError):
        ingest(Failing, path, batch_size=10)
    assert [urls[0] for urls in sent] == ["http://h0.example/0", "http://h3.example/10", "http://h6.example/20"]
    assert frontier.stats()["queued"] == 20  # the two batches before the failed one

    report = ingest(frontier, path, batch_size=10)  # again, all of it
    assert (report.added, report.seen, report.lines) == (80, 20, 100)


@pytest.mark.parametrize("block", [100, 12], ids=["in-memory", "on-disk"])
def test_with_a_spill_seeds_go_grouped_by_host_each_hosts_in_the_order_read(tmp_path, redis_url, crawl_name, block):
    """With windows, seeds are pushed once the input is read, host by host (a host's work in
    the push paid once a batch, its URLs to disk in whole chunks), each host's in the order
    read: held in memory up to SEED_GROUP_URLS, more held on disk (crawler/seeds/spool.py,
    its files removed after); they come out so past the windows and the disk. Without a
    spill, in the order read."""
    import redis

    from crawler.frontier.chunks import SqliteChunks
    from crawler.frontier.spill import Spill
    from testing.frontiers import urls_through_spill

    path = tmp_path / "seeds.txt"
    lines = [f"http://{h}.example/{i}" for i in range(10) for h in "abcdef"]  # hosts interleaved
    path.write_text("\n".join([*lines, "http://a.example/0", "not a url"]) + "\n")
    frontier = Frontier(
        redis.Redis.from_url(redis_url), crawl_name, host_interval=0.0, max_in_flight=0, window=3, spill_age=1.0
    )
    spill = Spill(frontier, SqliteChunks(str(tmp_path / "spill.sqlite")))
    sent = []

    class Seen:  # the real frontier, each batch's URLs noted as it is sent
        prepare = staticmethod(frontier.prepare)

        @staticmethod
        def send(prepared):
            sent.append([e.url for _, e, _ in prepared.batch])
            return frontier.send(prepared)

    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    calls = []
    report = ingest(
        Seen,
        path,
        batch_size=5,
        spill=spill,
        group_urls=block,
        spool_dir=str(spool_dir),
        progress=lambda r: calls.append((r.lines, r.spooled, r.pushed, r.push_started is not None)),
    )
    assert (report.added, report.seen, report.invalid, report.lines) == (60, 1, 1, 62)
    assert [len(batch) for batch in sent] == [5] * 12 + [1]  # every batch full but the last
    got = [url for batch in sent for url in batch]
    runs = [url.split("/")[2] for i, url in enumerate(got) if i == 0 or url.split("/")[2] != got[i - 1].split("/")[2]]
    assert sorted(runs) == [f"{h}.example" for h in "abcdef"]  # each host's URLs together
    for h in "abcdef":
        mine = [f"http://{h}.example/{i}" for i in range(10)] + (["http://a.example/0"] if h == "a" else [])
        assert [u for u in got if f"//{h}." in u] == mine  # in the order read
    assert list(spool_dir.iterdir()) == []  # the spool's files are gone
    pushing = [(lines, pushed) for lines, _, pushed, _ in calls if pushed]
    if block == 12:  # progress while the URLs go to disk (every batch's worth), then as pushed
        reading = [(lines, spooled) for lines, spooled, pushed, _ in calls if not pushed]
        assert reading == [(15, 15), (20, 20), (25, 25), (30, 30), (35, 35), (40, 40), (45, 45), (50, 50),
                           (55, 55), (60, 60)]  # fmt: skip
        assert report.spooled == 61 and report.push_started is not None
        assert all(started == bool(pushed) for _, _, pushed, started in calls)
    else:
        assert report.spooled == 0 and all(started for *_, started in calls)  # (none while reading)
    assert pushing == [(62, 5 * n) for n in range(1, 13)] + [(62, 61)]
    assert report.pushed == report.held == 61

    got = urls_through_spill(frontier, spill)  # everything handed out: windows of 3, the rest through the disk
    for h in "abcdef":
        assert [u for u in got if f"//{h}." in u] == [f"http://{h}.example/{i}" for i in range(10)]

    sent.clear()
    frontier.clear()
    ingest(Seen, path, batch_size=5, group_urls=12)  # no spill: no windows to spare work in
    assert [url for batch in sent for url in batch] == [*lines, "http://a.example/0"]
