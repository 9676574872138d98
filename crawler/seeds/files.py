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

Speed: the Redis calls (``put``'s Lua script, PUSH) run in a helper thread, one batch
after the other in the order read, while the next batch is read, normalized and prepared,
so Redis time overlaps Python time; up to two batches wait for Redis or are being sent
(the next is sent the moment the one before it is answered), so at most three batches
are in memory. Larger batches cost fewer round trips but hold Redis (the script is
atomic) for longer, blocking the crawl's workers meanwhile (10 to 20 us per URL on a
small machine: 20 to 40 ms for 2000 URLs).
"""

from __future__ import annotations

import gzip
import os
import re
import sys
import zlib
from collections.abc import Iterable, Iterator
from typing import IO, NamedTuple

__all__ = [
    "MAX_LINE_BYTES",
    "BadLine",
    "InputPosition",
    "SeedFileError",
    "SeedLine",
    "check_readable",
    "read_seeds",
    "read_stream",
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
        self.report = None  # the IngestReport so far (crawler/seeds/ingest.py)

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


def is_gzip(path: str) -> bool:
    """Whether a seed file is read through gzip (its name ends in ``.gz``)."""
    return path.lower().endswith(".gz")


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
        if is_gzip(path):
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
        self.elsewhere = 0  # bytes read by another process (the tail of a SplitRead's file)

    def enter(self, f: IO[bytes]) -> None:
        raw = getattr(f, "fileobj", None) if isinstance(f, gzip.GzipFile) else f
        self._file = raw if raw is not None and raw.seekable() else None

    def leave(self) -> None:
        self._done += self._where()
        self._file = None

    def read(self) -> int:
        """Bytes read so far."""
        return self._done + self._where() + self.elsewhere

    def _where(self) -> int:
        try:
            return self._file.tell() if self._file is not None else 0
        except (OSError, ValueError):  # closed, or not a regular file
            return 0


def read_seeds(
    paths: PathArg | Iterable[PathArg], position: InputPosition | None = None, split=None
) -> Iterator[SeedLine | BadLine]:
    """Yield a ``SeedLine`` per seed line and a ``BadLine`` per malformed line of
    ``paths`` (a path, or an iterable of paths; ``-`` is standard input; a URL is a
    seed itself, its ``lineno`` its place among ``paths``), in order.

    Files are opened one at a time, when reached; a file that cannot be opened or
    read raises ``SeedFileError`` with its path. ``position`` follows the reading.
    ``split``: a SplitRead (crawler/seeds/split_read.py), which may have the tail of its
    file read by another process: this reading then ends where that tail starts.
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
            yield from read_stream(f if split is None else split.head(path, f), source)
            if position is not None and path != STDIN:
                position.leave()
        finally:
            if path != STDIN:
                f.close()


READ_CHUNK = 16 * 1024  # bytes read at a time (lines are cut out of them)


def read_stream(f: IO[bytes], source: str, lineno: int = 0) -> Iterator[SeedLine | BadLine]:
    """The seed lines and malformed lines of ``f`` (``source``: the file as named), read
    from where it is; ``lineno``: the lines of the file before that point."""
    # reads a chunk at a time (read1: what is there, at most one read below, so that a
    # pipe's lines come as they are written and what precedes a read error is kept);
    # a line is cut at b"\n" only; one of MAX_LINE_BYTES or more (its newline aside) is
    # malformed and never held whole: its start is dropped once it is that long
    read = getattr(f, "read1", None) or f.read
    limit = MAX_LINE_BYTES
    valid_priority = _PRIORITY_RE.fullmatch
    new = tuple.__new__  # new(SeedLine, fields): a SeedLine without its __new__'s frame
    rest = b""  # the start of the line not ended yet
    overlong = False  # that line is past the limit already (rest dropped)
    while True:
        try:
            data = read(READ_CHUNK)
        except (OSError, EOFError, zlib.error) as exc:
            raise SeedFileError(source, _error_reason(exc)) from exc
        if data:
            lines = data.split(b"\n")
            if rest:
                lines[0] = rest + lines[0]
            rest = lines.pop()
        else:  # the end: a last line without a newline
            if not rest and not overlong:
                return
            lines, rest = [rest], b""
        for raw in lines:
            lineno += 1
            if overlong or len(raw) >= limit:
                overlong = False
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
            if n == 1:
                yield new(SeedLine, (source, lineno, fields[0], 0))
                continue
            for i in range(1, n):
                if fields[i][0] == "#":
                    n = i
                    break
            if n == 1:
                yield new(SeedLine, (source, lineno, fields[0], 0))
            elif n == 2:
                if valid_priority(fields[1]):
                    yield new(SeedLine, (source, lineno, fields[0], int(fields[1])))
                else:
                    yield BadLine(source, lineno, f"bad priority {_short(fields[1], 30)}")
            else:
                yield BadLine(source, lineno, f"{n} columns, expected URL [PRIORITY]")
        if not data:
            return
        if len(rest) >= limit:  # an overlong line, not ended yet: its start is not kept
            overlong, rest = True, b""


def _short(text: str, chars: int = _REASON_CHARS) -> str:
    text = repr(text)
    return text if len(text) <= chars else text[: chars - 3] + "..."


# -- ingesting -------------------------------------------------------------------------
