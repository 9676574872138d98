"""A large seed file read in two processes: the second half in a process of its own.

Once its input is read, ``ingest`` pushes seeds grouped by host, so that reading the input
(decoding, normalizing, holding each URL in a HostSpool, crawler/seeds/spool.py) is a phase
of its own in which nothing else runs: one core busy, the other idle (decision 0063).
``SplitRead`` has the rest of the file read by a second process from the moment the spool is
made (``ingest`` judges such a file early: SPLIT_JUDGED_AT): the process reads from ``cut``
(the start of the line nearest the middle of what is left) to the end into a spool of its
own, with as many parts; the ingesting process reads up to ``cut``, then waits for it, and
its spool adopts the other's parts (``HostSpool.adopt``: each read back after its own part
of the same number, so that each host's URLs still come in the order read). The other
process's malformed lines and URLs are counted as the ingesting process's are, with their
line numbers in the file.

- Only for one plain file (not ``.gz``, not standard input) of ``from_bytes`` or more
  (SEED_SPLIT_READ_FROM), read in the process's main thread: the second process is a fork
  that only reads and writes files (no lock another thread could hold, no logging, no
  finalizer), for ``scrapy seed``; a worker that seeds reads in a thread beside its crawl,
  and reads it all itself.
- The second process is only a help: if it cannot start, fails (a read error, a full disk)
  or dies, the ingesting process reads the rest itself from ``cut`` (said in the log), as
  if it had never started, and meets the same error where it is.
- ``stopped`` is called while the ingesting process waits (it raises to stop the ingestion);
  ``close()`` stops the second process (an error, an interrupt: its files are in the spool's
  directory, removed with it).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import os
import signal
import threading
import warnings
from dataclasses import dataclass, field
from typing import IO

from crawler.seeds.files import (
    MAX_INVALID_EXAMPLES,
    MAX_LINE_BYTES,
    STDIN,
    BadLine,
    is_gzip,
    is_seed_url,
    read_stream,
)
from crawler.seeds.spool import HostSpool
from crawler.urls import InvalidURL

logger = logging.getLogger(__name__)

WAIT_STEP = 0.1  # seconds between two calls of ``stopped`` while the other process is waited for
COUNT_CHUNK = 1 << 20  # bytes read at a time to count the lines before the cut
PROGRESS_EVERY = 1000  # lines the other process reads between two updates of its counters


@dataclass
class Tail:
    """What the second process read: the spool parts it wrote (``HostSpool.written``), its
    lines (seed lines and malformed ones, as ``IngestReport.lines`` counts them), its bytes,
    its invalid lines and URLs (their count, the first MAX_INVALID_EXAMPLES as ``(source,
    lineno, reason)``)."""

    parts: list[tuple[str, int]]
    lines: int
    bytes: int
    invalid: int = 0
    examples: list[tuple[str, int, str]] = field(default_factory=list)


class SplitRead:
    """The reading of ``path`` in two processes (see the module docstring)."""

    def __init__(self, path: str, normalize, stopped):
        self.path, self.normalize, self.stopped = path, normalize, stopped
        self.cut: int | None = None  # where the second process starts (None: not split)
        self.tail: Tail | None = None  # what it read, once it is done
        self.started = False
        self._head: _Head | None = None
        self._process = None
        self._conn = None
        self._counters = None  # (lines, bytes, URLs held) the second process has read so far

    @classmethod
    def of(cls, paths: list[str], from_bytes: int, normalize, stopped) -> SplitRead | None:
        """The split reading of ``paths`` if it is one plain file of ``from_bytes`` or more
        (0: never), else None."""
        if from_bytes <= 0 or len(paths) != 1:
            return None
        path = paths[0]
        if path == STDIN or is_seed_url(path) or is_gzip(path):
            return None
        try:
            if not os.path.isfile(path) or os.path.getsize(path) < from_bytes:
                return None
        except OSError:
            return None
        return cls(path, normalize, stopped)

    def head(self, path: str, f: IO[bytes]):
        """``f`` (``path`` opened) as the ingesting process reads it: up to the cut."""
        if path != self.path:
            return f
        self._head = _Head(f, self)
        return self._head

    def start(self, spool: HostSpool) -> None:
        """Start the second process on the rest of the file (once, once ``spool`` is made):
        it reads from the line nearest the middle of what the ingesting process has not
        read yet, into a spool of ``spool``'s parts under its directory. Not started (the
        ingesting process reads it all): the file not being read yet, a reading outside
        the main thread, no line start found, or a fork that fails."""
        self.started = True
        head = self._head
        if head is None or threading.current_thread() is not threading.main_thread():
            return
        try:
            size = os.fstat(head.fileno()).st_size
            cut = _line_start(head.fileno(), head.pos + (size - head.pos) // 2, size)
        except OSError:
            return
        if cut is None:
            return
        try:
            context = multiprocessing.get_context("fork")
            counters = context.RawArray("q", 3)
            ours, theirs = context.Pipe(duplex=False)
            args = (theirs, self.path, cut, spool.parts, spool.block, spool.where, self.normalize, counters)
            process = context.Process(target=_read_tail, args=args, name="seed-tail", daemon=True)
            with warnings.catch_warnings():  # (Python 3.12's, on a fork beside threads: see above)
                warnings.simplefilter("ignore", DeprecationWarning)
                process.start()
        except (OSError, ValueError) as exc:
            logger.warning(
                "Seeds: the second half of %s could not be read in a process of its own (%s)", self.path, exc
            )
            return
        theirs.close()
        self.cut, self._process, self._conn, self._counters = cut, process, ours, counters

    def progress(self) -> tuple[int, int, int]:
        """(lines, bytes, URLs held on disk) the second process has read so far, as it last
        said (every PROGRESS_EVERY lines), while it reads (its ``tail`` says all of it)."""
        if self._counters is None:
            return 0, 0, 0
        return self._counters[0], self._counters[1], self._counters[2]

    def wait(self) -> bool:
        """At the cut: wait for the second process. True: it read the rest (``tail``); False:
        it failed (said in the log), the cut is lifted and the rest is read here."""
        conn = self._conn
        try:
            while not conn.poll(WAIT_STEP):
                self.stopped()
            kind, value = conn.recv()
        except (EOFError, OSError) as exc:
            kind, value = "error", f"its process ended ({type(exc).__name__})"
        self._end()
        if kind == "ok":
            self.tail = value
            return True
        logger.warning(
            "Seeds: reading the second half of %s in a process of its own failed (%s): it is read here",
            self.path,
            value,
        )
        self.cut = None
        return False

    def close(self) -> None:
        """Stop the second process if it still runs (its files go with the spool's)."""
        if self._process is not None and self._process.is_alive():
            self._process.kill()
        self._end()

    def _end(self) -> None:
        if self._process is not None:
            self._process.join()
            self._process = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class _Head:
    """The ingesting process's file: read up to its SplitRead's cut, where the second
    process is waited for (the end of the file for ``read_stream`` if it read the rest)."""

    def __init__(self, f: IO[bytes], split: SplitRead):
        self.f, self.split = f, split
        self.pos = 0  # bytes handed out
        self._read = getattr(f, "read1", None) or f.read

    def fileno(self) -> int:
        return self.f.fileno()

    def read1(self, n: int) -> bytes:
        cut = self.split.cut
        if cut is not None:
            if self.pos >= cut:
                if self.split.wait():
                    return b""
            else:
                n = min(n, cut - self.pos)
        data = self._read(n)
        self.pos += len(data)
        return data


def _line_start(fd: int, at: int, size: int) -> int | None:
    """The start of the first line that begins after ``at`` (and before ``size``), or None."""
    data = os.pread(fd, MAX_LINE_BYTES + 1, at)
    end = data.find(b"\n")
    if end < 0 or at + end + 1 >= size:
        return None
    return at + end + 1


def _lines_before(f: IO[bytes], cut: int) -> int:
    """The lines of ``f`` before ``cut`` (the start of a line), read from its start."""
    lines, left = 0, cut
    while left > 0:
        data = f.read(min(COUNT_CHUNK, left))
        if not data:
            break
        lines += data.count(b"\n")
        left -= len(data)
    return lines


def _read_tail(conn, path: str, cut: int, parts: int, block: int, directory: str, normalize, counters) -> None:
    """The second process: ``path`` from ``cut`` to its end into a spool of ``parts`` parts
    under ``directory``; replies ("ok", Tail) or ("error", why), then ends at once."""
    gc.freeze()  # (what the fork copied is not collected here: no finalizer of the ingesting process's runs)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (the ingesting process stops it)
    try:
        spool = HostSpool(parts, block, directory)
        lines, invalid, examples = 0, 0, []
        with open(path, "rb") as f:
            before = _lines_before(f, cut)
            f.seek(cut)
            for item in read_stream(f, path, before):
                if not lines % PROGRESS_EVERY:  # (the lines done so far, this one not yet)
                    counters[0], counters[1], counters[2] = lines, f.tell() - cut, spool.spooled
                lines += 1
                if type(item) is BadLine:
                    reason = item.reason
                else:
                    try:
                        url = normalize(item[2])
                    except InvalidURL as exc:
                        reason = str(exc)
                    else:
                        spool.add(url, item)
                        continue
                invalid += 1  # (counted as the ingesting process counts its own: IngestReport.add_invalid)
                if len(examples) < MAX_INVALID_EXAMPLES:
                    examples.append((item[0], item[1], reason))
            read = f.tell() - cut
        conn.send(("ok", Tail(spool.written(), lines, read, invalid, examples)))
    except BaseException as exc:  # (the ingesting process reads the rest itself)
        with contextlib.suppress(BaseException):
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        os._exit(0)  # (nothing of the ingesting process's flushed or closed twice)
