"""Seed files: reading (crawler.seeds.files.read_seeds), ingestion into a real Redis
(crawler.seeds.files.ingest) and the ``scrapy seed`` command, run as a subprocess: the unit
tests (pure: no service, no process) (the others: tests/integration/test_seeds.py,
tests/e2e/test_seeds.py)."""

import gzip
import io
import re
import time

import pytest

from crawler.commands.seed import ProgressLine
from crawler.seeds import files
from crawler.seeds.files import MAX_LINE_BYTES, BadLine, SeedFileError, SeedLine, read_seeds
from crawler.seeds.ingest import IngestReport
from testing.seeds import SEEDS, items_of


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


@pytest.mark.parametrize("chunk", [None, 1, 7, MAX_LINE_BYTES - 1, MAX_LINE_BYTES + 1])
def test_read_seeds_malformed_lines(tmp_path, monkeypatch, chunk):
    # the same lines whatever the size of the reads they are cut out of
    if chunk is not None:
        monkeypatch.setattr(files, "READ_CHUNK", chunk)
    path = tmp_path / "odd.txt"
    path.write_bytes(
        b"\xef\xbb\xbfhttp://bom.example/\r\n"  # BOM and CRLF
        b"http://x.example/\xff\n"  # not UTF-8
        + b"http://long.example/"
        + b"a" * MAX_LINE_BYTES
        + b"\n"  # overlong
        + b"http://p.example/ 1234567890\n"  # 10-digit priority
        + b"http://p.example/ +7\n"
        + b"a" * (MAX_LINE_BYTES - 1)  # the longest line taken (a URL the normalizer refuses)
        + b"\n"
        + b"a" * MAX_LINE_BYTES  # one byte more
        + b"\n\n"
        + b"http://last.example/"  # no newline at the end
    )
    src = str(path)
    assert items_of(path) == [
        (src, 1, "http://bom.example/", 0),
        (src, 2, "not valid UTF-8 (byte 0xff at offset 17)"),
        (src, 3, f"line longer than {MAX_LINE_BYTES} bytes"),
        (src, 4, "bad priority '1234567890'"),
        (src, 5, "http://p.example/", 7),
        (src, 6, "a" * (MAX_LINE_BYTES - 1), 0),
        (src, 7, f"line longer than {MAX_LINE_BYTES} bytes"),
        (src, 9, "http://last.example/", 0),
    ]
    # a last line without a newline, too long
    path.write_bytes(b"http://a.example/\n" + b"b" * MAX_LINE_BYTES)
    assert items_of(path) == [(src, 1, "http://a.example/", 0), (src, 2, f"line longer than {MAX_LINE_BYTES} bytes")]


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


def test_read_seeds_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(SeedFileError, match="nope.txt: No such file") as info:
        list(read_seeds(missing))
    assert info.value.path == str(missing)
    assert isinstance(info.value, OSError)


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
