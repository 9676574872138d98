"""Seed files: reading (crawler.seeds.files.read_seeds), ingestion into a real Redis
(crawler.seeds.files.ingest) and the ``scrapy seed`` command, run as a subprocess."""

import gzip
import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crawler.commands.seed import ProgressLine
from crawler.frontier.frontier import Frontier
from crawler.seeds.files import MAX_LINE_BYTES, BadLine, SeedFileError, SeedLine, check_readable, read_seeds
from crawler.seeds.ingest import IngestReport, ingest
from testing.servers import free_port

ROOT = Path(__file__).resolve().parent.parent  # where scrapy.cfg is

SEEDS = """\
# seeds for the tests
http://a.example/1
https://A.Example/2?utm_source=x   5   # high priority, tracking parameter stripped

http://a.example/1                      # the same URL again
not a url
http://b.example/3  high
http://b.example/4  1  2
   # an indented comment
http://b.example/5#frag  -2
http://c.example/6\t0
"""


def items_of(path):
    return [tuple(i) for i in read_seeds(path)]


@pytest.fixture
def frontier(redis_client, crawl_name):
    return Frontier(redis_client, crawl_name, seen_capacity=10_000)


# -- read_seeds ----------------------------------------------------------------------------


def test_read_seeds_columns_comments_and_line_numbers(tmp_path):
    path = tmp_path / "seeds.txt"
    path.write_text(SEEDS)
    items = list(read_seeds(str(path)))
    src = str(path)
    assert [tuple(i) for i in items] == [
        (src, 2, "http://a.example/1", 0),
        (src, 3, "https://A.Example/2?utm_source=x", 5),
        (src, 5, "http://a.example/1", 0),
        (src, 6, "3 columns, expected URL [PRIORITY]"),  # "not a url"
        (src, 7, "bad priority 'high'"),
        (src, 8, "3 columns, expected URL [PRIORITY]"),
        (src, 10, "http://b.example/5#frag", -2),  # the fragment is the normalizer's business
        (src, 11, "http://c.example/6", 0),
    ]
    assert type(items[0]) is SeedLine and type(items[3]) is BadLine


def test_read_seeds_malformed_lines(tmp_path):
    path = tmp_path / "odd.txt"
    path.write_bytes(
        b"\xef\xbb\xbfhttp://bom.example/\r\n"  # BOM and CRLF
        b"http://x.example/\xff\n"  # not UTF-8
        + b"http://long.example/"
        + b"a" * MAX_LINE_BYTES
        + b"\n"  # overlong
        + b"http://p.example/ 1234567890\n"  # 10-digit priority
        + b"http://p.example/ +7\n"
        + b"http://last.example/"  # no newline at the end
    )
    src = str(path)
    assert items_of(path) == [
        (src, 1, "http://bom.example/", 0),
        (src, 2, "not valid UTF-8 (byte 0xff at offset 17)"),
        (src, 3, f"line longer than {MAX_LINE_BYTES} bytes"),
        (src, 4, "bad priority '1234567890'"),
        (src, 5, "http://p.example/", 7),
        (src, 6, "http://last.example/", 0),
    ]


def test_read_seeds_gzip_and_several_files_in_order(tmp_path):
    gz = tmp_path / "a.txt.gz"
    with gzip.open(gz, "wt") as f:
        f.write("http://gz.example/1 2\n# c\nhttp://gz.example/2\n")
    plain = tmp_path / "b.txt"
    plain.write_text("http://plain.example/\n")
    assert items_of([gz, plain]) == [
        (str(gz), 1, "http://gz.example/1", 2),
        (str(gz), 3, "http://gz.example/2", 0),
        (str(plain), 1, "http://plain.example/", 0),
    ]


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


def test_read_seeds_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(SeedFileError, match="nope.txt: No such file") as info:
        list(read_seeds(missing))
    assert info.value.path == str(missing)
    assert isinstance(info.value, OSError)


# -- ingest ----------------------------------------------------------------------------------


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


def test_summary_line():
    report = IngestReport(added=980, seen=15, invalid=5, lines=1000, elapsed=0.8)
    report.invalid_examples = [("seeds.txt:3", "bad priority 'x'"), ("seeds.txt:9", "not an http(s) URL: 'x'")]
    assert report.summary() == (
        "added 980, already seen 15, invalid 5 (first at seeds.txt:3, seeds.txt:9), refused 0, "
        "1000 lines in 0.8 s (1250 lines/s)"
    )


def test_progress_line_in_place_on_a_terminal_else_a_line_every_few_seconds():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, pipe = Tty(), io.StringIO()
    report = IngestReport(added=5, lines=10, elapsed=1.0)
    for stream in (tty, pipe):
        line = ProgressLine(stream, interval=0, every=0.2)
        line(report)  # on a pipe: before its first interval, nothing
        time.sleep(0.25)
        line(report)
        line(report)  # on a pipe: within the next interval, nothing
        line.clear()
    assert re.fullmatch(r"\d\d:\d\d:\d\d seeding: 10 lines read, 5 added, 10 lines/s\n", pipe.getvalue())
    assert tty.getvalue().startswith("\rseeding: 10 lines read, 5 added, 10 lines/s\r")
    assert tty.getvalue().endswith("\r")
    quiet = Tty()
    ProgressLine(quiet, enabled=False)(report)
    assert quiet.getvalue() == ""


# -- scrapy seed -----------------------------------------------------------------------------

SUMMARY = re.compile(
    r"^added (\d+), already seen (\d+), invalid (\d+)(?: \(first at [^)]*\))?, refused (\d+)"
    r"(?: \([^)]*\))?, (\d+) lines in [\d.]+ s \(\d+ lines/s\)$"
)


def scrapy_seed(*args, redis_url, input=None):
    env = dict(os.environ, REDIS_URL=redis_url)
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "seed", *map(str, args)],
        cwd=ROOT,
        env=env,
        input=input,
        capture_output=True,
        timeout=60,
    )


def test_command_reads_files_and_stdin(tmp_path, redis_url, redis_client, crawl_name):
    path = tmp_path / "seeds.txt"
    path.write_text(SEEDS)
    stdin = b"http://stdin.example/1  3\nhttp://a.example/1\nhttp://stdin.example/\xff\n"
    proc = scrapy_seed(path, "-", "-s", f"CRAWL_NAME={crawl_name}", redis_url=redis_url, input=stdin)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode().splitlines()
    assert len(out) == 1, out
    match = SUMMARY.match(out[0])
    assert match, out[0]
    # file: 4 added, 1 seen, 3 invalid; stdin: 1 added, 1 seen, 1 invalid (not UTF-8)
    assert tuple(int(g) for g in match.groups()) == (5, 2, 4, 0, 11)
    err = proc.stderr.decode()
    assert f"invalid: {path}:7: bad priority 'high'" in err
    assert "invalid: <stdin>:3: not valid UTF-8" in err
    assert "\r" not in err  # no progress line: stderr is not a terminal
    frontier = Frontier(redis_client, crawl_name)
    assert frontier.stats()["front_by_level"] == [2, 2, 1]  # priorities 5, 3 | 0, 0 | -2


def test_command_unreadable_file_exits_2_as_the_crawl_command_does(tmp_path, redis_url, crawl_name):
    proc = scrapy_seed(tmp_path / "missing.txt", "--crawl", crawl_name, redis_url=redis_url)
    assert proc.returncode == 2
    err = proc.stderr.decode().strip()
    assert err == f"seed: cannot read seed file {tmp_path / 'missing.txt'}: No such file or directory"
    assert proc.stdout == b""


def test_command_redis_unreachable_exits_1(tmp_path, crawl_name):
    path = tmp_path / "seeds.txt"
    path.write_text("http://a.example/\n")
    port = free_port()  # nobody listens there
    proc = scrapy_seed(path, "--crawl", crawl_name, "--no-progress", redis_url=f"redis://127.0.0.1:{port}/0")
    assert proc.returncode == 1
    err = proc.stderr.decode().strip()
    assert err.startswith(f"seed: cannot connect to Redis (redis://127.0.0.1:{port}/0):"), err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_command_refuses_seeds_the_network_guard_will_refuse_and_names_the_setting(
    tmp_path, redis_url, redis_client, crawl_name
):
    path = tmp_path / "seeds.txt"
    path.write_text("http://127.0.0.1:8765/\nhttp://localhost/x\nhttp://10.1.2.3/\nhttp://a.example/\n")
    proc = scrapy_seed(path, "--crawl", crawl_name, "--no-progress", redis_url=redis_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().startswith("added 1, already seen 0, invalid 0, refused 3 (network_guard 3), 4 lines")
    assert "NETWORK_GUARD_ALLOW" in proc.stderr.decode()
    assert Frontier(redis_client, crawl_name).stats()["queued"] == 1
    allowed = scrapy_seed(path, "--crawl", crawl_name, "--no-progress", "-s", "NETWORK_GUARD_ALLOW=127.0.0.0/8",
                          redis_url=redis_url)  # fmt: skip
    assert allowed.stdout.decode().startswith(
        "added 2, already seen 1, invalid 0, refused 1 (network_guard 1), 4 lines"
    )
