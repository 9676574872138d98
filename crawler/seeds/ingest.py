"""Seeds into the frontier: ``ingest`` pushes what ``read_seeds`` (crawler/seeds/files.py)
reads, in batches of SEED_BATCH_SIZE (with windows, grouped by host a block of
SEED_GROUP_URLS at a time: ``_ByHost``), each prepared while the two before it are sent
(in order, by one helper thread: IN_FLIGHT), and reports its progress (``IngestReport``: lines read, URLs added, seen, refused,
invalid; lines a second; the share of the input and the time left) every so often
(``Every``).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from crawler.frontier.codec import encode_url
from crawler.frontier.frontier import SEED_CASH, Entry
from crawler.frontier.words import ADDED, SEEN
from crawler.seeds.files import (
    _REASON_CHARS,
    MAX_INVALID_EXAMPLES,
    BadLine,
    InputPosition,
    PathArg,
    SeedFileError,
    SeedLine,
    _as_paths,
    check_readable,
    read_seeds,
)
from crawler.urls import DEFAULT_STRIP_PARAMS, InvalidURL, normalizer


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
    spill=None,
    group_urls: int = 0,
) -> IngestReport:
    """Read, normalize and push the seeds of ``paths`` into ``frontier``, which holds each
    to the crawl's scope (a seed the network guard refuses, out of scope, rejected by the
    crawl rules or by a trap guard is counted as refused, by its reason: ``refused_by``).

    ``strip_params=None`` strips the normalizer's built-in list of tracking and
    session parameters (``()`` keeps every parameter); ``sort_query`` as in
    ``normalize_url``. Entries are pushed ``batch_size`` at a time at depth 0.
    ``progress(report)`` is called after each batch is pushed, with the running
    report (``lines`` counts lines read so far, ``bytes_read`` the input read). Raises ``SeedFileError`` (see the
    module docstring) and lets Redis errors through.
    ``spill``: the crawl's Spill (FRONTIER_HOST_WINDOW), whose round follows each
    batch: the hosts' buffers beyond their windows go to disk as they fill. With a spill,
    ``group_urls`` URLs at a time (SEED_GROUP_URLS; 0: none) are pushed grouped by host,
    each host's in the order read: a push with windows does a host's work (its window's
    room, its place in the ready heap) once per host a batch, so a file whose hosts are
    spread over it costs less, nearer what a file sorted by host does. What is held when
    ingestion stops (an interrupt, a Redis error: about a block) is not pushed; the same
    command again adds it (what was added is seen).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    paths = _as_paths(paths)
    check_readable(paths)
    strip = DEFAULT_STRIP_PARAMS if strip_params is None else tuple(strip_params)
    normalize = normalizer(strip, sort_query)
    position = InputPosition(paths)
    report = IngestReport(bytes_total=position.total)
    started = time.perf_counter()
    prepare = frontier.prepare  # prepared here, sent in order by the pool's one thread

    def send(prepared):
        statuses = frontier.send(prepared)
        if spill is not None:
            spill.round()
        return statuses

    sent = _InOrder(send)
    # oldest first; with each batch, where the input stood (lines, bytes read) when its URLs
    # were read, if it was not when it was sent (grouped by host: ``_ByHost``)
    in_flight: deque[tuple[Future, list[SeedLine], tuple[int, int] | None]] = deque()

    def collect(keep: int) -> None:
        # wait for the oldest batches until `keep` are in flight, counting their statuses
        while len(in_flight) > keep:
            future, where, at = in_flight[0]
            statuses = future.result()
            in_flight.popleft()
            _count(report, statuses, where)
            report.elapsed = time.perf_counter() - started
            if at is None:
                report.bytes_read = position.read()
            else:
                report.lines, report.bytes_read = at
            if progress is not None:
                progress(report)

    def push(entries: list[Entry], where: list[SeedLine], at: tuple[int, int] | None = None) -> None:
        prepared = prepare(entries)  # while the batches before it are being sent
        collect(IN_FLIGHT - 1)
        in_flight.append((pool.submit(sent, prepared), where, at))

    def entry(url: str, line: SeedLine) -> Entry:
        return Entry(url, encode_url(url), line[3], 0, cash=SEED_CASH, outside=True)

    def read_so_far() -> tuple[int, int]:
        return lines, position.read()

    grouping = spill is not None and group_urls > 0
    by_host = _ByHost(group_urls, batch_size, entry, read_so_far) if grouping else None
    lines = 0  # report.lines, kept in a local while reading
    with _rare_collections(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="seed-push") as pool:
        entries: list[Entry] = []
        where: list[SeedLine] = []  # the line of each entry

        def push_rest() -> None:
            report.lines = lines
            for batch, at in by_host.rest() if by_host is not None else ():
                push(*by_host.made(batch), at)
            if entries:
                push(entries, where)
            collect(0)

        try:
            for item in read_seeds(paths, position):
                lines += 1
                if type(item) is BadLine:
                    report.add_invalid(*item)
                    continue
                try:
                    url = normalize(item[2])
                except InvalidURL as exc:
                    report.add_invalid(item[0], item[1], str(exc))
                    continue
                if by_host is not None:
                    for batch, at in by_host.add(url, item):
                        push(*by_host.made(batch), at)
                    continue
                entries.append(entry(url, item))
                where.append(item)
                if len(entries) >= batch_size:
                    report.lines = lines
                    push(entries, where)
                    entries, where = [], []
            push_rest()
        except SeedFileError as exc:
            try:  # push what was read before the error
                push_rest()
            finally:
                report.elapsed = time.perf_counter() - started
                exc.report = report
            raise
        finally:
            report.lines = lines
            for future, _, _ in in_flight:  # an error: let the batch being sent finish first
                if not future.cancel():
                    future.exception()
            sent.stop()
    report.elapsed = time.perf_counter() - started
    report.bytes_read = position.read()
    return report


IN_FLIGHT = 2  # batches handed to the sending thread and not counted yet (at most)
# allocations between two passes of the garbage collector's youngest generation while seeds
# are read (Python's: 700). Each line makes a dozen objects (its fields, its URL, its entry,
# its argument), none of them in a cycle; at Python's pace a full pass, which walks every
# object of the process (Scrapy's modules and classes among them), came every 70,000
# allocations. 200,000 lines over 10,000 hosts, the two taking turns in one process: 37,000-
# 41,000 lines/s and 21-23 us of the process's CPU a line before, 45,000-52,000 and 14-17 after
YOUNG_PASS_EVERY = 10_000


@contextlib.contextmanager
def _rare_collections() -> Iterator[None]:
    """The collector's youngest generation passed every YOUNG_PASS_EVERY allocations while
    the block runs (cycles are still collected, less often), then as before: the process's
    setting, for a crawl's other threads too while a spider ingests its seed file beside it
    (left as it is when it passes as rarely already, or never: 0)."""
    young, *older = gc.get_threshold()
    if young == 0 or young >= YOUNG_PASS_EVERY:
        yield
        return
    gc.set_threshold(YOUNG_PASS_EVERY, *older)
    try:
        yield
    finally:
        now = gc.get_threshold()
        if now[0] == YOUNG_PASS_EVERY:  # (the older generations' as they are now)
            gc.set_threshold(young, *now[1:])


class _ByHost:
    """Seed URLs grouped by host a block of ``block`` URLs at a time, each host's in the
    order read, in batches of ``batch_size``: the batches of the block read last are
    pushed one each ``batch_size`` URLs read into the next (reading and sending overlap as
    without blocks), the rest when that block is full. A URL is held as its text and its
    line (tuples of strings and numbers, which the garbage collector stops tracking), its
    Entry (``entry(url, line)``) made when its batch is pushed (``made``). Each batch goes
    with where the input stood (``read_so_far()``: lines, bytes) when its share of the
    block had been read: the progress reported as it is pushed."""

    def __init__(self, block: int, batch_size: int, entry: Callable[[str, SeedLine], Entry], read_so_far):
        self.block, self.batch_size, self.entry, self.read_so_far = block, batch_size, entry, read_so_far
        self.hosts: dict[str, list[tuple[str, SeedLine]]] = {}
        self.held = 0  # URLs in hosts
        self.marks: list[tuple[int, int]] = []  # where the input stood at each batch_size URLs held
        self.ready: deque[tuple[list[tuple[str, SeedLine]], tuple[int, int]]] = deque()  # the last block's

    def add(self, url: str, line: SeedLine) -> list[tuple[list[tuple[str, SeedLine]], tuple[int, int]]]:
        """Hold ``url`` (normalized, read from ``line``); the batches to push now, in order,
        each with where the input stood."""
        self.hosts.setdefault(url.split("/", 3)[2], []).append((url, line))  # (scheme://host/...)
        self.held += 1
        at_batch = self.held % self.batch_size == 0
        if not at_batch and self.held < self.block:
            return []
        out = [self.ready.popleft()] if at_batch and self.ready else []
        self.marks.append(self.read_so_far())  # (a batch's end: a full one, or the block's last)
        if self.held >= self.block:  # (what is left of the last block first)
            out += self.ready
            self.ready = deque(self._batches())
        return out

    def rest(self) -> list[tuple[list[tuple[str, SeedLine]], tuple[int, int]]]:
        """Every batch held, in order."""
        if self.held % self.batch_size:
            self.marks.append(self.read_so_far())
        out = [*self.ready, *self._batches()]
        self.ready.clear()
        return out

    def _batches(self) -> list[tuple[list[tuple[str, SeedLine]], tuple[int, int]]]:
        # the block's URLs host by host, in batches, the k-th with the k-th mark
        held = [held for urls in self.hosts.values() for held in urls]
        batches = [held[i : i + self.batch_size] for i in range(0, len(held), self.batch_size)]
        out = list(zip(batches, self.marks, strict=True))
        self.hosts.clear()
        self.held = 0
        self.marks = []
        return out

    def made(self, batch: list[tuple[str, SeedLine]]) -> tuple[list[Entry], list[SeedLine]]:
        """A batch's entries and their lines."""
        entry = self.entry
        return [entry(url, line) for url, line in batch], [line for _, line in batch]


class _InOrder:
    """``send`` for the pool's one thread: batches go to Redis in the order they were read;
    once one failed (or ingestion stopped), the next are not sent (the error is raised
    where the failed one is collected)."""

    def __init__(self, send):
        self.send = send
        self.stopped = False

    def __call__(self, prepared):
        if self.stopped:
            raise _NotSent
        try:
            return self.send(prepared)
        except BaseException:
            self.stopped = True
            raise

    def stop(self) -> None:
        self.stopped = True


class _NotSent(Exception):
    """A batch after one that failed: not sent."""


def _count(report: IngestReport, statuses: list[str], where: list[SeedLine]) -> None:
    counts = Counter(statuses)
    report.added += counts.pop(ADDED, 0)
    report.seen += counts.pop(SEEN, 0)
    if not counts:
        return
    for status, n in counts.items():
        if status == "invalid":  # the frontier found no usable host
            for line, s in zip(where, statuses):
                if s == status:
                    report.add_invalid(line.source, line.lineno, "refused by the frontier: no usable host")
        else:  # why it was not admitted (crawler/scope/reasons.py)
            report.refused += n
            report.refused_by[status] += n
