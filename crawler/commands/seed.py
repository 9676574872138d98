"""``scrapy seed FILE [FILE ...]``: add seed URLs to a crawl's frontier.

    scrapy seed seeds.txt                       into CRAWL_NAME (settings, -s, env)
    scrapy seed --crawl news a.txt b.txt.gz     into crawl "news"
    zcat big.gz | scrapy seed - --no-progress   from standard input

File format: one URL a line, an optional integer priority as second column (higher is
sooner), ``#`` comments, blank lines skipped, ``.gz`` read through gzip; see
crawler/seeds/files.py. URLs are normalized with URL_STRIP_PARAMS / URL_SORT_QUERY, pushed
SEED_BATCH_SIZE at a time (``--batch``) at depth 0.

Output: progress on stderr (unless ``--no-progress``): on a terminal one line rewritten in
place; otherwise (a log, a pipe) a line every SEED_PROGRESS_INTERVAL seconds; each with
the lines read, URLs added, lines/s and, when the input's size is known (files, not
standard input), the share read and the time left. Then the first invalid lines with
their reason on stderr, and one summary line on stdout.
Exit status: 0 when every file was read (invalid lines included); 2 when a file given
cannot be opened (as ``scrapy crawl -a seeds=`` says it); 1 when a file fails while it is
read, or Redis or the spill store fails; each with a one-line message on stderr. Ctrl-C
(130) and SIGTERM (143) stop it as cleanly: the summary of what was pushed, marked
``[interrupted]`` or ``[terminated]``, and the seeds held on disk removed.
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import sys
import time

from redis.exceptions import RedisError
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.config.validation import exit_if_invalid
from crawler.exceptions import StoreRefused
from crawler.frontier.connection import frontier_from_settings, redis_location
from crawler.frontier.keys import Keys
from crawler.frontier.submit import use_published_scope
from crawler.scope.addresses import guard_hint
from crawler.scope.reasons import PRIVATE_ADDRESS
from crawler.seeds.files import STDIN, SeedFileError, check_readable
from crawler.seeds.ingest import Every, IngestReport, ingest
from crawler.services import spill_from_settings, spill_remake
from crawler.urls import url_options


class ProgressLine:
    """Seed ingestion's progress: on a terminal, a status line rewritten in place with
    ``\\r`` at most every ``interval`` seconds; on any other stream (a log, a pipe), a
    line every ``every`` seconds (0: none)."""

    def __init__(self, stream=None, interval: float = 0.25, enabled: bool = True, every: float = 5.0):
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.enabled = enabled
        self.tty = _isatty(self.stream)
        self.report: IngestReport | None = None  # the latest running report
        self._last = 0.0
        self._width = 0
        self._lines = Every(self._line, every)

    def __call__(self, report: IngestReport) -> None:
        self.report = report
        if not self.enabled:
            return
        if not self.tty:
            self._lines(report)
            return
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        text = f"seeding: {report.progress_text()}"
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def _line(self, report: IngestReport) -> None:
        print(f"{time.strftime('%H:%M:%S')} seeding: {report.progress_text()}", file=self.stream, flush=True)

    def clear(self) -> None:
        if self.enabled and self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False  # no crawl, no reactor: plain Redis calls
    default_settings = {"LOG_ENABLED": False}

    def syntax(self):
        return "[options] FILE|URL [FILE|URL ...]"

    def short_desc(self):
        return "Add seed URLs, from files, URLs given or - for stdin, to the crawl's frontier"

    def long_desc(self):
        return (
            "Add seed URLs to the frontier of a crawl (CRAWL_NAME, or --crawl). An argument is a URL "
            "(http:// or https://, added as it is) or a FILE of one URL a line, optionally followed by an "
            "integer priority (higher is sooner); # starts a comment; files ending in .gz are decompressed; "
            "- reads standard input. Prints a summary line; exits "
            "2 if a file cannot be opened, 1 if reading it fails or Redis is unreachable."
        )

    def add_options(self, parser):
        super().add_options(parser)
        group = parser  # beside -h, before the global options: what a user reads first
        group.add_argument("--crawl", metavar="NAME", help="crawl name (default CRAWL_NAME)")
        group.add_argument(
            "--batch", metavar="N", type=int, help="URLs per frontier round trip (default SEED_BATCH_SIZE)"
        )
        group.add_argument("--no-progress", action="store_true", help="no progress lines")

    def process_options(self, args, opts):
        super().process_options(args, opts)
        if opts.crawl:
            self.settings.set("CRAWL_NAME", opts.crawl, priority="cmdline")
        exit_if_invalid(self.settings, "seed")  # before anything starts or logs

    def run(self, args, opts):
        if not args:
            raise UsageError("give at least one seed file (- for standard input)")
        unknown = [a for a in args if a.startswith("-") and a != STDIN]
        if unknown:
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)}")
        settings = self.settings
        batch = opts.batch if opts.batch is not None else settings.getint("SEED_BATCH_SIZE")
        if batch < 1:
            raise UsageError("--batch must be at least 1")
        try:
            check_readable(args)  # before touching Redis
        except SeedFileError as exc:  # what was typed is wrong: 2, as scrapy crawl -a seeds= says it
            self._fail(f"seed: {exc}")
            self.exitcode = 2
            return

        try:
            Keys(settings.get("CRAWL_NAME"))  # a bad crawl name: before any embedded Redis starts
        except ValueError as exc:
            return self._fail(f"seed: {exc}")
        client = None
        try:
            frontier = frontier_from_settings(settings)
            client = frontier.redis
            client.ping()
        except ValueError as exc:  # a bad frontier setting
            _close(client)
            return self._fail(f"seed: {exc}")
        except Exception as exc:  # Redis unreachable, embedded Redis failed to start
            _close(client)
            return self._fail(f"seed: cannot connect to Redis ({_where(settings)}): {_reason(exc)}")

        progress = ProgressLine(enabled=not opts.no_progress, every=settings.getfloat("SEED_PROGRESS_INTERVAL"))
        spill = None
        try:
            use_published_scope(frontier)
            spill = spill_from_settings(settings, frontier)
            with _terminated_as_interrupt():
                report = ingest(
                    frontier,
                    args,
                    batch_size=batch,
                    **url_options(settings),
                    progress=progress,
                    spill=spill,
                    group_urls=settings.getint("SEED_GROUP_URLS"),
                    spool_dir=settings.get("SEED_SPOOL_DIR") or None,
                    remake=spill_remake(settings) if spill is not None else None,
                    process_from=settings.getint("SEED_ROUNDS_PROCESS_FROM"),
                    split_from=settings.getint("SEED_SPLIT_READ_FROM"),
                )
        except SeedFileError as exc:
            progress.clear()
            self._print_report(exc.report, note="stopped")
            return self._fail(f"seed: {exc}")
        except StoreRefused as exc:  # a spill store the crawl did not record: nothing pushed
            self._fail(f"seed: {exc}")
            self.exitcode = 2
            return
        except RedisError as exc:
            progress.clear()
            self._print_report(progress.report, note="before the Redis error")
            return self._fail(f"seed: Redis error ({_where(settings)}): {_reason(exc)}")
        except (OSError, sqlite3.Error) as exc:  # the spill store (its file, its disk)
            progress.clear()
            self._print_report(progress.report, note="before the spill store failed")
            return self._fail(
                f"seed: spill store error: {type(exc).__name__}: {exc} (the seeds pushed are queued: those beyond"
                " their hosts' windows wait in Redis for a round that writes them to disk; run the same command"
                " again once the store is mended: the seeds queued already count as seen)"
            )
        except KeyboardInterrupt as exc:
            progress.clear()
            term = isinstance(exc, Terminated)
            self._print_report(progress.report or IngestReport(), note="terminated" if term else "interrupted")
            self.exitcode = 143 if term else 130
            return
        finally:
            _close(client)
            if spill is not None:
                spill.close()
        progress.clear()
        self._print_report(report)
        if report.refused_by.get(PRIVATE_ADDRESS):
            print(f"seed: {guard_hint(report.refused_by[PRIVATE_ADDRESS])}", file=sys.stderr)

    def _print_report(self, report: IngestReport | None, note: str = "") -> None:
        if report is None:
            return
        for where, reason in report.invalid_examples:
            print(f"invalid: {where}: {reason}", file=sys.stderr)
        if report.invalid > len(report.invalid_examples):
            print(f"invalid: ... {report.invalid - len(report.invalid_examples)} more", file=sys.stderr)
        summary = report.summary()
        print(f"{summary} [{note}]" if note else summary, flush=True)

    def _fail(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)
        self.exitcode = 1


class Terminated(KeyboardInterrupt):
    """SIGTERM (a service manager's stop, ``timeout``), raised where the ingestion is, as
    Ctrl-C is: it stops as cleanly, its seeds held on disk removed."""


@contextlib.contextmanager
def _terminated_as_interrupt():
    def stop(signum, frame):
        raise Terminated()

    try:
        before = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # (not the main thread: the caller's signals stay as they are)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _close(client) -> None:
    if client is not None:
        try:
            client.close()
        except Exception:  # closing is best effort
            pass


def _where(settings) -> str:
    return redis_location(settings)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
