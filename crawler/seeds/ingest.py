"""Seeds into the frontier: ``ingest`` pushes what ``read_seeds`` (crawler/seeds/files.py)
reads, in batches of SEED_BATCH_SIZE (with windows, grouped by host once read: ``_ByHost``,
more than SEED_GROUP_URLS of them held on disk, crawler/seeds/spool.py, a large file's second half read by a process of
its own, crawler/seeds/split_read.py), each prepared while the two before it are sent
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
from crawler.frontier.spill import PusherRounds
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
from crawler.seeds.split_read import SplitRead
from crawler.seeds.spool import HostSpool, SpoolError, batches_of, parts_for
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
    pushed: int = 0  # URLs sent to the frontier
    #: URLs held on disk while the input is read, to be pushed grouped by host (more than a
    #: block; 0: none)
    spooled: int = 0
    #: grouped by host: the seconds from the start to the end of the reading (None: reading,
    #: or not grouped), and the URLs held then, in memory or on disk, to push
    push_started: float | None = None
    held: int = 0
    #: of ``lines``, those a second process read (the second half of a large file: SplitRead)
    lines_beside: int = 0

    @property
    def rate(self) -> float:
        """Lines per second."""
        return self.lines / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def fraction(self) -> float | None:
        """The share of the input read (None when its size is unknown); grouped by host, once
        the input is read, the share of the URLs held pushed."""
        if self.push_started is not None:
            return min(self.pushed / self.held, 1.0) if self.held else 1.0
        if not self.bytes_total:
            return None
        return min(self.bytes_read / self.bytes_total, 1.0)

    @property
    def eta(self) -> float | None:
        """Seconds left at the rate so far (None when the input's size is unknown): to read
        the input, or, grouped by host once it is read, to push the URLs held."""
        fraction = self.fraction
        took = self.elapsed - (self.push_started or 0.0)
        if fraction is None or not fraction or took <= 0:
            return None
        return took * (1 - fraction) / fraction

    def progress_text(self) -> str:
        """One line of progress: ``120,000 lines read, 118,500 added, 24,000 lines/s,
        35% of 12.1 MB, about 9 s left`` (without size and ETA when the size is unknown).
        Seeds held on disk: ``..., 35% of 12.1 MB read, about 9 s left to read, 400,000 URLs
        held on disk by host``; grouped by host, once read: ``..., pushing by host: 45% of
        990,000 URLs, about 9 s left``."""
        text = f"{self.lines:,} lines read, {self.added:,} added, {self.rate:,.0f} lines/s"
        if self.push_started is not None:
            pushed = f"{100 * self.fraction:.0f}% of {self.held:,} URLs"
            return text + f", pushing by host: {pushed}, about {_duration(self.eta)} left"
        if self.fraction is not None:
            share, eta = f"{100 * self.fraction:.0f}% of {_megabytes(self.bytes_total)}", _duration(self.eta)
            text += f", {share} read, about {eta} left to read" if self.spooled else f", {share}, about {eta} left"
        if self.spooled:
            text += f", {self.spooled:,} URLs held on disk by host"
        return text

    def add_invalid(self, source: str, lineno: int, reason: str) -> None:
        self.invalid += 1
        if len(self.invalid_examples) < MAX_INVALID_EXAMPLES:
            self.invalid_examples.append((f"{source}:{lineno}", _clip(reason)))

    def add_invalid_lines(self, count: int, examples: list[tuple[str, int, str]]) -> None:
        """``count`` invalid lines, the first of them ``examples`` (source, lineno, reason)."""
        for example in examples:
            self.add_invalid(*example)
        self.invalid += count - len(examples)

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


class IngestStopped(Exception):
    """Seed ingestion stopped by its caller (``ingest``'s ``stop``); ``report``: what was
    ingested before."""

    report: IngestReport | None = None


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
    spool_dir: str | None = None,
    stop=None,
    remake=None,
    process_from: int = 0,
    split_from: int = 0,
) -> IngestReport:
    """Read, normalize and push the seeds of ``paths`` into ``frontier``, which holds each
    to the crawl's scope (a seed the network guard refuses, out of scope, rejected by the
    crawl rules or by a trap guard is counted as refused, by its reason: ``refused_by``).

    ``strip_params=None`` strips the normalizer's built-in list of tracking and
    session parameters (``()`` keeps every parameter); ``sort_query`` as in
    ``normalize_url``. Entries are pushed ``batch_size`` at a time at depth 0.
    ``progress(report)`` is called after each batch is pushed, and each ``batch_size`` URLs
    held on disk while the input is read, with the running report (``lines`` counts lines
    read so far, ``bytes_read`` the input read). Raises ``SeedFileError`` (see the module
    docstring; ``SpoolError`` when seeds cannot be held on disk) and lets Redis errors through.
    ``spill``: the crawl's Spill (FRONTIER_HOST_WINDOW), whose rounds run beside the sends
    (PusherRounds, crawler/frontier/spill.py: one every ROUND_URLS URLs pushed, and at the end
    one for what came after the last began): the inbox and the buffers go to disk as they
    fill; with ``remake`` (crawler/services.py's ``spill_remake``), those of an input of
    ``process_from`` URLs or more (SEED_ROUNDS_PROCESS_FROM; 0: never) go to a process of
    their own, which makes the spill again. With a spill,
    URLs are pushed grouped by host once the input is read, each host's in the order read
    (``_ByHost``): up to ``group_urls`` (SEED_GROUP_URLS; 0: as read) held in memory, more
    held on disk under ``spool_dir`` (SEED_SPOOL_DIR; None: the system's temporary
    directory) in parts by host, each part pushed host by host (crawler/seeds/spool.py). A
    push with windows does a host's work (its window's room, its place in the ready heap)
    once a batch, and a host's URLs that come together go to disk in whole chunks: a file
    whose hosts are spread over it costs what a file sorted by host does. What is held when
    ingestion stops (an interrupt, a Redis error, a spool that cannot be written) is not
    pushed; the same command again adds it (what was added is seen). ``stop``: a
    threading.Event whose setting (the crawl that seeds stops) stops the ingestion at its
    next thousand lines read or batch pushed: ``IngestStopped``, with the report so far.
    ``split_from``: with the URLs held on disk, one plain file of this many bytes or more
    (SEED_SPLIT_READ_FROM; 0: never) is read in two processes, its second half by a process
    of its own (crawler/seeds/split_read.py).
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

    rounds = None  # (beside the sends)
    if spill is not None:
        rounds = PusherRounds(spill, remake=remake, process_from=process_from)

    def send(prepared):
        if rounds is not None:  # (before the batch: a round's error stops it unsent, as counted)
            rounds.pushed(len(prepared.statuses))
        return frontier.send(prepared)

    sent = _InOrder(send)
    # oldest first; with each batch, where its URLs were read
    in_flight: deque[tuple[Future, list[SeedLine]]] = deque()

    def collect(keep: int) -> None:
        # wait for the oldest batches until `keep` are in flight, counting their statuses
        while len(in_flight) > keep:
            future, where = in_flight[0]
            statuses = future.result()
            in_flight.popleft()
            _count(report, statuses, where)
            report.elapsed = time.perf_counter() - started
            report.bytes_read = position.read()
            if progress is not None:
                progress(report)

    def push(entries: list[Entry], where: list[SeedLine]) -> None:
        stopped()
        prepared = prepare(entries)  # while the batches before it are being sent
        collect(IN_FLIGHT - 1)
        in_flight.append((pool.submit(sent, prepared), where))

    def stopped() -> None:
        if stop is not None and stop.is_set():
            raise IngestStopped("the crawl stopped")

    def entry(url: str, line: SeedLine) -> Entry:
        return Entry(url, encode_url(url), line[3], 0, cash=SEED_CASH, outside=True)

    def estimate() -> float | None:
        # the URLs of the whole input, at the share read so far (None: its size unknown)
        read = position.read()
        return by_host.held * position.total / read if position.total and read else None

    def spooled() -> None:  # progress while the URLs go to disk
        elsewhere = split.progress() if split is not None else (0, 0, 0)  # (the other process's)
        report.lines, report.spooled = lines + elsewhere[0], by_host.spool.spooled + elsewhere[2]
        report.elapsed = time.perf_counter() - started
        position.elsewhere = elsewhere[1]
        report.bytes_read = position.read()
        if progress is not None:
            progress(report)

    grouping = spill is not None and group_urls > 0
    split = SplitRead.of(paths, split_from, normalize, stopped) if grouping else None
    # (a file read in two halves is judged early: its second reader starts once the spool is made)
    early = SPLIT_JUDGED_AT if split is not None else 0
    by_host = _ByHost(group_urls, batch_size, entry, estimate, spool_dir, early) if grouping else None
    lines = 0  # report.lines, kept in a local while reading
    with _rare_collections(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="seed-push") as pool:
        entries: list[Entry] = []
        where: list[SeedLine] = []  # the line of each entry

        def push_rest() -> None:
            report.lines = lines
            if by_host is not None:
                report.spooled = by_host.spool.spooled if by_host.spool is not None else 0
                report.held = report.spooled or by_host.held
                report.push_started = time.perf_counter() - started
                if rounds is not None:  # (a large input's rounds get a process of their own)
                    rounds.coming = report.held
                with contextlib.closing(by_host.rest()) as batches:  # (its files closed on an error)
                    for batch in batches:
                        push(*by_host.made(batch))
            if entries:
                push(entries, where)
            collect(0)
            if rounds is not None:
                rounds.close()

        try:
            for item in read_seeds(paths, position, split):
                lines += 1
                if not lines % 1000:
                    stopped()
                if type(item) is BadLine:
                    report.add_invalid(*item)
                    continue
                try:
                    url = normalize(item[2])
                except InvalidURL as exc:
                    report.add_invalid(item[0], item[1], str(exc))
                    continue
                if by_host is not None:
                    by_host.add(url, item)
                    if by_host.spool is not None and not by_host.spool.spooled % batch_size:
                        if split is not None and not split.started:  # (the rest read beside, if it can be)
                            split.start(by_host.spool)
                        spooled()
                    continue
                entries.append(entry(url, item))
                where.append(item)
                if len(entries) >= batch_size:
                    report.lines = lines
                    push(entries, where)
                    entries, where = [], []
            if split is not None and split.tail is not None:  # what the other process read
                lines += split.tail.lines
                report.lines_beside = split.tail.lines
                position.elsewhere = split.tail.bytes
                report.add_invalid_lines(split.tail.invalid, split.tail.examples)
                by_host.spool.adopt(split.tail.parts)
            push_rest()
        except SpoolError as exc:  # what is on disk is not pushed (the same command again adds it)
            with contextlib.suppress(Exception):  # (the batches sent before it, counted)
                collect(0)
            report.elapsed = time.perf_counter() - started
            exc.report = report
            raise
        except IngestStopped as exc:  # (what was read and not pushed: the same command again adds it)
            with contextlib.suppress(Exception):  # (the batches sent before it, counted)
                collect(0)
            report.elapsed = time.perf_counter() - started
            exc.report = report
            raise
        except SeedFileError as exc:
            if split is not None:  # (what comes after the error is not pushed: the other process stopped)
                split.close()
            try:  # push what was read before the error
                push_rest()
            except SpoolError as lost:  # (not pushed: said with the input's error)
                exc.args = (f"{exc}; and {lost}",)
                with contextlib.suppress(Exception):
                    collect(0)
            finally:
                report.elapsed = time.perf_counter() - started
                exc.report = report
            raise
        finally:
            report.lines = lines
            for future, _ in in_flight:  # an error: let the batch being sent finish first
                if not future.cancel():
                    future.exception()
            sent.stop()
            if rounds is not None:  # (closed already when all went well: a round running waited for)
                rounds.close(last=False)
            if split is not None:
                split.close()
            if by_host is not None:
                by_host.close()
    report.elapsed = time.perf_counter() - started
    report.bytes_read = position.read()
    return report


UNKNOWN_PARTS = 16  # the spool's parts for an input of unknown size (standard input), in blocks
# URLs held when a file that may be read in two halves (SplitRead) is judged: the spool made
# then if the file looks larger than a block, so that its second reader starts early. 200,000
# lines over 10,000 hosts, judged at 10,000 rather than at the block's 100,000: the second
# reader read 92,374 lines, not 47,929, the reading took 0.31-0.32 s, not 0.56-0.60, and the
# ingestion ran at 123,595-126,355 lines/s, not 109,577-111,993 (taking turns, 3 runs each)
SPLIT_JUDGED_AT = 10_000
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
    """Seed URLs grouped by host before they are pushed: up to ``block`` URLs in memory, all
    pushed once the input is read, host by host; past ``block``, every URL read held on disk
    in a HostSpool (crawler/seeds/spool.py, under ``directory``), which gives them back part
    by part, each part's host by host. A URL is held as its text and its line, its Entry
    (``entry(url, line)``) made when its batch is pushed (``made``). ``estimate()``: the URLs
    the input holds in all, as judged when the block is full (None: unknown), for the
    spool's parts. ``early``: URLs held when the input is judged first (0: only when the
    block is full); all of it goes to disk then if it looks larger than a block."""

    def __init__(
        self,
        block: int,
        batch_size: int,
        entry: Callable[[str, SeedLine], Entry],
        estimate,
        directory,
        early: int = 0,
    ):
        self.block, self.batch_size, self.entry = block, batch_size, entry
        self.estimate, self.directory = estimate, directory
        self.hosts: dict[str, list[tuple[str, SeedLine]]] = {}
        self.held = 0  # URLs in hosts
        self.spool: HostSpool | None = None
        self._judged_at = early if 0 < early < block else block  # held when the input is judged next

    def add(self, url: str, line: SeedLine) -> None:
        """Hold ``url`` (normalized, read from ``line``)."""
        if self.spool is not None:
            self.spool.add(url, line)
            return
        if self.held >= self._judged_at:  # a block full, or an input judged larger early on: all of it on disk
            urls = self.estimate()
            if self.held >= self.block or (urls or 0) > self.block:
                spool = self.spool = HostSpool(
                    parts_for(urls or UNKNOWN_PARTS * self.block, self.block), self.block, self.directory
                )
                for held in self.hosts.values():
                    for item in held:
                        spool.add(*item)
                self.hosts.clear()
                spool.add(url, line)
                return
            self._judged_at = self.block  # (it fits in the block after all)
        self.hosts.setdefault(url.split("/", 3)[2], []).append((url, line))  # (scheme://host/...)
        self.held += 1

    def rest(self) -> Iterator[list[tuple[str, SeedLine]]]:
        """Every URL held, in batches, host by host."""
        if self.spool is not None:
            yield from self.spool.batches(self.batch_size)
            return
        hosts, self.hosts = self.hosts, {}
        yield from batches_of(hosts.values(), self.batch_size)

    def made(self, batch: list[tuple[str, SeedLine]]) -> tuple[list[Entry], list[SeedLine]]:
        """A batch's entries and their lines."""
        entry = self.entry
        return [entry(url, line) for url, line in batch], [line for _, line in batch]

    def close(self) -> None:
        """Let go of what is held (the spool's files removed)."""
        self.hosts.clear()
        if self.spool is not None:
            self.spool.close()


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
    report.pushed += len(statuses)
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
