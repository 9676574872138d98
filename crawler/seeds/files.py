"""Seed files into the frontier: ``read_seeds`` parses, ``ingest`` pushes.

Seed file format (UTF-8, one seed a line)::

    # a whole-line comment
    https://example.com/            # a trailing comment (after whitespace)
    https://example.org/news   5    # optional second column: Scrapy priority
    https://example.net/old   -1    # (higher is sooner, default 0)

* Blank lines and comment lines are skipped; they are not counted anywhere.
* ``#`` starts a comment only at the start of a field: ``http://a/#top`` keeps its
  fragment (the normalizer drops it), ``http://a/ #top`` is the URL and a comment.
* A file whose name ends in ``.gz`` is read through gzip; ``-`` is standard input.
* A source that starts with ``http://`` or ``https://`` is not a file but a seed URL
  itself (``-a seeds=https://example.com/,https://example.org/``), at priority 0.
* Every source, standard input included, is read as bytes and decoded line by line
  as UTF-8. A line that is not valid UTF-8 is *malformed* rather than decoded with
  U+FFFD replacement characters, which would admit a URL that is not the one in
  the file. Other malformed lines: a priority that is not an integer (at most 9
  digits), more than two columns, a line longer than ``MAX_LINE_BYTES``.

``read_seeds(paths)`` is pure reading (no Redis): a generator of ``SeedLine`` and,
for malformed lines, ``BadLine`` values, one file open at a time, one line in memory
at a time.

``ingest(frontier, paths, ...)`` normalizes each URL with ``crawler.urls``, pushes
``Entry`` batches with ``Frontier.put`` and returns an ``IngestReport``:

``added``     new URLs queued
``seen``      already in the URL-seen filter (an earlier run, another worker, or an
              earlier line of the same input)
``invalid``   malformed lines and URLs the normalizer (or the frontier) refused
``refused``   refused by a trap guard (``trap:<name>``) or the per-host limit
              (``host_full``); ``refused_by`` counts each status
``lines``     seed lines read (lines that are not blank or a comment); once ingest
              returns, ``lines == added + seen + invalid + refused``
``bytes_read`` / ``bytes_total``  how far the input has been read, in bytes of the files
              as stored (a ``.gz`` file's compressed bytes), and their total size (None
              when standard input is read): ``fraction`` and ``eta`` (seconds left at the
              rate so far) follow from them; ``progress_text()`` says it in one line

Malformed lines never stop ingestion. Files that cannot be read do:

* before anything is pushed, every named file is opened (and a ``.gz`` file's
  header read); the first that fails raises ``SeedFileError`` naming the path, and
  the frontier is untouched;
* a read error later (a truncated or corrupt ``.gz``, an I/O error) raises
  ``SeedFileError`` as well; what was read before it has been pushed, and
  ``exc.report`` holds the report up to there.

Speed: the Redis call of one batch (``put``'s Lua script, PUSH) runs in a helper
thread while the next batch is read and normalized, so Redis time overlaps Python
time; at most two batches are in memory. Larger batches cost fewer round trips but
hold Redis (the script is atomic) for longer, blocking the crawl's workers meanwhile
(about 50 us per URL on a small machine: 0.1 s for 2000 URLs).
"""

from __future__ import annotations

import gzip
import os
import re
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, NamedTuple

from crawler.frontier.codec import encode_url
from crawler.frontier.frontier import Entry
from crawler.frontier.words import ADDED, SEEN
from crawler.urls import DEFAULT_STRIP_PARAMS, InvalidURL, normalize_url

__all__ = [
    "MAX_LINE_BYTES",
    "BadLine",
    "Every",
    "InputPosition",
    "IngestReport",
    "SeedFileError",
    "SeedLine",
    "check_readable",
    "ingest",
    "read_seeds",
]

STDIN = "-"
STDIN_SOURCE = "<stdin>"
ARGUMENT_SOURCE = "<argument>"  # the source of a seed URL given in place of a file
MAX_LINE_BYTES = 64 * 1024  # longer lines are malformed (and never held in memory)
MAX_INVALID_EXAMPLES = 10
_REASON_CHARS = 120
_PRIORITY_RE = re.compile(r"[+-]?[0-9]{1,9}")

PathArg = str | os.PathLike


class SeedLine(NamedTuple):
    """A well-formed seed line (the URL is not normalized yet)."""

    source: str  # the path as given, "<stdin>", or "<argument>" for a seed URL given as a source
    lineno: int  # 1-based physical line number
    url: str
    priority: int


class BadLine(NamedTuple):
    """A malformed seed line: counted as invalid, never pushed."""

    source: str
    lineno: int
    reason: str


class SeedFileError(OSError):
    """A seed file (or standard input) could not be opened or read.

    ``path`` is the file as given ("<stdin>" for ``-``), ``reason`` says why, and
    ``report`` (set by ``ingest``) is what had been ingested before the failure.
    """

    def __init__(self, path: str, reason: str):
        super().__init__(f"cannot read seed file {path}: {reason}")
        self.path = path
        self.reason = reason
        self.report: IngestReport | None = None

    def __str__(self) -> str:
        return self.args[0]


# -- reading ---------------------------------------------------------------------------


def _as_paths(paths: PathArg | Iterable[PathArg]) -> list[str]:
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    return [os.fsdecode(p) for p in paths]


def _source(path: str) -> str:
    return STDIN_SOURCE if path == STDIN else path


def is_seed_url(path: str) -> bool:
    """Whether a seed source is a URL given in place of a file."""
    return path[:8].lower().startswith(("http://", "https://"))


def _error_reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if isinstance(exc, EOFError):
        return f"truncated compressed data ({exc})" if str(exc) else "truncated compressed data"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _open(path: str) -> IO[bytes]:
    """Open a seed source for binary reading; raises SeedFileError."""
    if path == STDIN:
        stdin = getattr(sys.stdin, "buffer", None)
        if stdin is None:
            raise SeedFileError(STDIN_SOURCE, "no standard input")
        return stdin
    try:
        if path.lower().endswith(".gz"):
            return gzip.open(path, "rb")
        return open(path, "rb")
    except OSError as exc:
        raise SeedFileError(path, _error_reason(exc)) from exc


def check_readable(paths: PathArg | Iterable[PathArg]) -> None:
    """Raise SeedFileError for the first of ``paths`` that cannot be opened (or, for
    ``.gz``, whose gzip header cannot be read). Standard input is not checked."""
    for path in _as_paths(paths):
        if path == STDIN or is_seed_url(path):
            continue
        f = _open(path)
        try:
            if isinstance(f, gzip.GzipFile):
                f.peek(1)
        except (OSError, EOFError, zlib.error) as exc:
            raise SeedFileError(path, _error_reason(exc)) from exc
        finally:
            f.close()


def _bad_utf8(exc: UnicodeDecodeError) -> str:
    return f"not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"


class InputPosition:
    """How far the reading of seed sources has come, in bytes of the files as stored (a
    ``.gz`` file's compressed bytes: its underlying file's position), and their total
    size (``total``: None when standard input is among them). Read in the reading
    thread (``read_seeds`` moves it from file to file)."""

    def __init__(self, paths: list[str]):
        self.total: int | None = None
        if STDIN not in paths:
            try:
                self.total = sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
            except OSError:  # (an unreadable file stops the reading anyway)
                self.total = None
        self._done = 0  # bytes of the files read to their end
        self._file: IO[bytes] | None = None

    def enter(self, f: IO[bytes]) -> None:
        raw = getattr(f, "fileobj", None) if isinstance(f, gzip.GzipFile) else f
        self._file = raw if raw is not None and raw.seekable() else None

    def leave(self) -> None:
        self._done += self._where()
        self._file = None

    def read(self) -> int:
        """Bytes read so far."""
        return self._done + self._where()

    def _where(self) -> int:
        try:
            return self._file.tell() if self._file is not None else 0
        except (OSError, ValueError):  # closed, or not a regular file
            return 0


def read_seeds(
    paths: PathArg | Iterable[PathArg], position: InputPosition | None = None
) -> Iterator[SeedLine | BadLine]:
    """Yield a ``SeedLine`` per seed line and a ``BadLine`` per malformed line of
    ``paths`` (a path, or an iterable of paths; ``-`` is standard input; a URL is a
    seed itself, its ``lineno`` its place among ``paths``), in order.

    Files are opened one at a time, when reached; a file that cannot be opened or
    read raises ``SeedFileError`` with its path. ``position`` follows the reading.
    """
    for n, path in enumerate(_as_paths(paths), 1):
        if is_seed_url(path):
            yield SeedLine(ARGUMENT_SOURCE, n, path, 0)
            continue
        source = _source(path)
        f = _open(path)
        if position is not None and path != STDIN:
            position.enter(f)
        try:
            yield from _read_stream(f, source)
            if position is not None and path != STDIN:
                position.leave()
        finally:
            if path != STDIN:
                f.close()


def _read_stream(f: IO[bytes], source: str) -> Iterator[SeedLine | BadLine]:
    readline = f.readline
    limit = MAX_LINE_BYTES
    valid_priority = _PRIORITY_RE.fullmatch
    lineno = 0
    while True:
        try:
            raw = readline(limit)
        except (OSError, EOFError, zlib.error) as exc:
            raise SeedFileError(source, _error_reason(exc)) from exc
        if not raw:
            return
        lineno += 1
        if len(raw) == limit and raw[-1:] != b"\n":
            # skip the rest of an overlong line without holding it
            try:
                while (more := readline(limit)) and more[-1:] != b"\n":
                    pass
            except (OSError, EOFError, zlib.error) as exc:
                raise SeedFileError(source, _error_reason(exc)) from exc
            yield BadLine(source, lineno, f"line longer than {limit} bytes")
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield BadLine(source, lineno, _bad_utf8(exc))
            continue
        if lineno == 1 and line.startswith("\ufeff"):  # byte order mark
            line = line[1:]
        fields = line.split()
        if not fields or fields[0][0] == "#":
            continue
        n = len(fields)
        if n > 1:
            for i in range(1, n):
                if fields[i][0] == "#":
                    n = i
                    break
        if n == 1:
            yield SeedLine(source, lineno, fields[0], 0)
        elif n == 2:
            if valid_priority(fields[1]):
                yield SeedLine(source, lineno, fields[0], int(fields[1]))
            else:
                yield BadLine(source, lineno, f"bad priority {_short(fields[1], 30)}")
        else:
            yield BadLine(source, lineno, f"{n} columns, expected URL [PRIORITY]")


def _short(text: str, chars: int = _REASON_CHARS) -> str:
    text = repr(text)
    return text if len(text) <= chars else text[: chars - 3] + "..."


# -- ingesting -------------------------------------------------------------------------


@dataclass
class IngestReport:
    added: int = 0
    seen: int = 0
    invalid: int = 0
    refused: int = 0
    lines: int = 0
    #: the first MAX_INVALID_EXAMPLES invalid lines: ("source:lineno", reason)
    invalid_examples: list[tuple[str, str]] = field(default_factory=list)
    #: refusals by frontier status ("trap:url_length", "host_full" ...)
    refused_by: Counter = field(default_factory=Counter)
    elapsed: float = 0.0  # seconds
    bytes_read: int = 0  # of the input as stored (see InputPosition)
    bytes_total: int | None = None  # None: unknown (standard input)

    @property
    def rate(self) -> float:
        """Lines per second."""
        return self.lines / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def fraction(self) -> float | None:
        """The share of the input read (None when its size is unknown)."""
        if not self.bytes_total:
            return None
        return min(self.bytes_read / self.bytes_total, 1.0)

    @property
    def eta(self) -> float | None:
        """Seconds left at the rate so far (None when the input's size is unknown)."""
        fraction = self.fraction
        if fraction is None or not fraction or self.elapsed <= 0:
            return None
        return self.elapsed * (1 - fraction) / fraction

    def progress_text(self) -> str:
        """One line of progress: ``120,000 lines read, 118,500 added, 24,000 lines/s,
        35% of 12.1 MB, about 9 s left`` (without size and ETA when the size is unknown)."""
        text = f"{self.lines:,} lines read, {self.added:,} added, {self.rate:,.0f} lines/s"
        if self.fraction is not None:
            text += f", {100 * self.fraction:.0f}% of {_megabytes(self.bytes_total)}, about {_duration(self.eta)} left"
        return text

    def add_invalid(self, source: str, lineno: int, reason: str) -> None:
        self.invalid += 1
        if len(self.invalid_examples) < MAX_INVALID_EXAMPLES:
            self.invalid_examples.append((f"{source}:{lineno}", _clip(reason)))

    def summary(self) -> str:
        """One line, e.g. ``added 980, already seen 15, invalid 5 (first at
        seeds.txt:3, seeds.txt:9), refused 0, 1000 lines in 0.8 s (1250 lines/s)``."""
        invalid = f"invalid {self.invalid}"
        if self.invalid_examples:
            invalid += " (first at " + ", ".join(where for where, _ in self.invalid_examples[:3]) + ")"
        refused = f"refused {self.refused}"
        if self.refused_by:
            refused += " (" + ", ".join(f"{k} {v}" for k, v in self.refused_by.most_common()) + ")"
        return (
            f"added {self.added}, already seen {self.seen}, {invalid}, {refused}, "
            f"{self.lines} lines in {self.elapsed:.1f} s ({self.rate:.0f} lines/s)"
        )


def _megabytes(n: int | None) -> str:
    return f"{(n or 0) / 1e6:.1f} MB"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = round(seconds)
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Every:
    """A ``progress`` function for ``ingest``: hands the running report to ``emit`` at
    most every ``interval`` seconds (the first one ``interval`` seconds after the start;
    0: never)."""

    def __init__(self, emit: Callable[[IngestReport], object], interval: float):
        self.emit = emit
        self.interval = interval
        self._next = time.monotonic() + interval

    def __call__(self, report: IngestReport) -> None:
        now = time.monotonic()
        if self.interval > 0 and now >= self._next:
            self._next = now + self.interval
            self.emit(report)


def _clip(reason: str) -> str:
    return reason if len(reason) <= _REASON_CHARS else reason[: _REASON_CHARS - 3] + "..."


def ingest(
    frontier,
    paths: PathArg | Iterable[PathArg],
    *,
    batch_size: int = 2000,
    strip_params: Iterable[str] | None = None,
    sort_query: bool = True,
    progress: Callable[[IngestReport], object] | None = None,
    refuse: Callable[[str], str | None] | None = None,
) -> IngestReport:
    """Read, normalize and push the seeds of ``paths`` into ``frontier``.

    ``refuse(url)``: a status (counted as refused, e.g. ``network_guard``) for a URL no
    fetch would take, or None.

    ``strip_params=None`` strips the normalizer's built-in list of tracking and
    session parameters (``()`` keeps every parameter); ``sort_query`` as in
    ``normalize_url``. Entries are pushed ``batch_size`` at a time at depth 0.
    ``progress(report)`` is called after each batch is pushed, with the running
    report (``lines`` counts lines read so far, ``bytes_read`` the input read). Raises ``SeedFileError`` (see the
    module docstring) and lets Redis errors through.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    paths = _as_paths(paths)
    check_readable(paths)
    strip = DEFAULT_STRIP_PARAMS if strip_params is None else tuple(strip_params)
    position = InputPosition(paths)
    report = IngestReport(bytes_total=position.total)
    started = time.perf_counter()
    prepare, send = frontier.prepare, frontier.send  # prepared here, sent by the pool
    pending: tuple[Future, list[tuple[str, int]]] | None = None

    def collect() -> None:
        # wait for the batch in flight and count its statuses
        nonlocal pending
        if pending is None:
            return
        future, where = pending
        pending = None
        statuses = future.result()
        _count(report, statuses, where)
        report.elapsed = time.perf_counter() - started
        report.bytes_read = position.read()
        if progress is not None:
            progress(report)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="seed-push") as pool:
        entries: list[Entry] = []
        where: list[tuple[str, int]] = []
        try:
            for item in read_seeds(paths, position):
                report.lines += 1
                if type(item) is BadLine:
                    report.add_invalid(*item)
                    continue
                try:
                    url = normalize_url(item.url, strip_params=strip, sort_query=sort_query)
                except InvalidURL as exc:
                    report.add_invalid(item.source, item.lineno, str(exc))
                    continue
                refusal = refuse(url) if refuse is not None else None
                if refusal:
                    report.refused += 1
                    report.refused_by[refusal] += 1
                    continue
                entries.append(Entry(url=url, payload=encode_url(url), priority=item.priority, depth=0))
                where.append((item.source, item.lineno))
                if len(entries) >= batch_size:
                    prepared = prepare(entries)  # while the previous batch is being sent
                    collect()
                    pending = (pool.submit(send, prepared), where)
                    entries, where = [], []
            collect()
            if entries:
                pending = (pool.submit(send, prepare(entries)), where)
                collect()
        except SeedFileError as exc:
            try:  # push what was read before the error
                collect()
                if entries:
                    pending = (pool.submit(send, prepare(entries)), where)
                    collect()
            finally:
                report.elapsed = time.perf_counter() - started
                exc.report = report
            raise
        finally:
            if pending is not None:  # an error: let the batch in flight finish first
                pending[0].cancel()
                pending[0].exception()
    report.elapsed = time.perf_counter() - started
    report.bytes_read = position.read()
    return report


def _count(report: IngestReport, statuses: list[str], where: list[tuple[str, int]]) -> None:
    counts = Counter(statuses)
    report.added += counts.pop(ADDED, 0)
    report.seen += counts.pop(SEEN, 0)
    if not counts:
        return
    for status, n in counts.items():
        if status == "invalid":  # the frontier found no usable host
            for (source, lineno), s in zip(where, statuses):
                if s == status:
                    report.add_invalid(source, lineno, "refused by the frontier: no usable host")
        else:  # "trap:<name>", "host_full", or anything new
            report.refused += n
            report.refused_by[status] += n
