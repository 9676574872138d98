"""``scrapy crawl``: Scrapy's own command, with exit codes a script can trust and the
arguments a scrapyd job gives.

Two arguments (``-a NAME=VALUE``, or ``-d NAME=VALUE`` to scrapyd's schedule.json) are
the command's, not the spider's:

    crawl     the crawl's name (CRAWL_NAME)
    profile   the settings profile: ``local`` (settings/local.py) or ``distributed``
              (settings/distributed.py), what ``SCRAPY_PROJECT`` picks from scrapy.cfg
              outside scrapyd; ``-s`` settings still come before it

A crawl that cannot start exits non-zero with one clear line, on stderr and in LOG_FILE
when one is set (a scrapyd job's log, which gets no stderr): a setting it cannot use or
an unknown profile (exit 2, before anything starts), an S3 bucket that is not there or
refuses the worker (exit 2, before anything is fetched), a seed file given with ``-a seeds=``
that cannot be read (exit 2), seeds none of which could be used (each invalid or refused,
and nothing queued: ``seeds_refused``, exit 2), a component that fails as the crawl starts (``Crawl not
started: ...`` with its traceback, exit 1). Seeds that could not all be added to the
frontier close the crawl with ``seeds_failed``, a Redis that refuses the worker's
credentials with ``redis_refused``, a crawl whose keys vanished from Redis while it ran
with ``frontier_lost``, an archive that refuses the worker's uploads (wrong S3
credentials, no such bucket) with ``archive_refused``, a spill store that is not the
crawl's, found at the first spill round when Redis was away at start, with
``spill_refused``: exit 1 (found at the start, it is exit 2: nothing fetched).
"""

from __future__ import annotations

import difflib
import logging
import sys
import time
from typing import NoReturn

from scrapy.commands.crawl import Command as ScrapyCrawl
from twisted.internet.defer import Deferred

from crawler.archive.storage import storage_from_settings
from crawler.config.validation import problems
from crawler.exceptions import ServiceUnreachable, StoreRefused
from crawler.frontier.connection import FRONTIER_LOST, REDIS_REFUSED, redis_location, unreachable
from crawler.frontier.spill import SPILL_REFUSED
from crawler.pipelines.archive import ARCHIVE_REFUSED
from crawler.seeds.files import SeedFileError, check_readable
from crawler.spiders.broad import ARGUMENTS, SEEDS_FAILED, SEEDS_REFUSED, split_arg
from crawler.urlstore.sqlite import sqlite_path

logger = logging.getLogger(__name__)

FAILED_REASONS = {SEEDS_FAILED, REDIS_REFUSED, FRONTIER_LOST, ARCHIVE_REFUSED, SPILL_REFUSED, "start_error"}
PROFILES = {"local": "settings.local", "distributed": "settings.distributed"}
DISTRIBUTED = PROFILES["distributed"]


class Command(ScrapyCrawl):
    profile: str | None = None

    def syntax(self):
        return "[options] broad"

    def short_desc(self):
        return "Run a crawl worker (the broad spider) on the crawl's frontier"

    def long_desc(self):
        spider = "; ".join(f"-a {name}=...: {what}" for name, what in ARGUMENTS.items())
        return (
            "Run a worker of the crawl CRAWL_NAME: the broad spider fetches what the frontier hands out, "
            "politely across every worker, until nothing is left (the local profile) or for ever (the "
            f"distributed profile). The broad spider's arguments: {spider}. The command's own: -a crawl=NAME "
            "(CRAWL_NAME), -a profile=local|distributed (the settings profile). Stop it with Ctrl-C and run "
            "the same command again to resume. Exit codes: 0 done (Ctrl-C included), 1 it failed (Redis, a "
            "store or S3 unreachable or refusing, seeds not all added), 2 what was typed is wrong (a setting, "
            "an argument, a seed file that cannot be read, no seed usable)."
        )

    def process_options(self, args, opts):
        super().process_options(args, opts)
        # before anything starts or logs
        crawl, self.profile = opts.spargs.pop("crawl", None), opts.spargs.pop("profile", None)
        if self.profile is not None:
            if self.profile not in PROFILES:
                expected = " or ".join(PROFILES)
                refuse(self.settings, [f"crawl: unknown profile {self.profile!r}: expected {expected}"])
            # the profile's module in place of the project's; -s settings keep their priority
            self.settings.setmodule(PROFILES[self.profile], priority="project")
        if crawl is not None:
            self.settings.set("CRAWL_NAME", crawl, priority="cmdline")
        found = [f"crawl: invalid setting {line}" for line in problems(self.settings)]
        if len(args) == 1:
            from scrapy.spiderloader import get_spider_loader

            found += [
                f"crawl: {line}" for line in unknown_arguments(get_spider_loader(self.settings), args[0], opts.spargs)
            ]
        if found:
            refuse(self.settings, found)

    def run(self, args, opts):
        seeds = opts.spargs.get("seeds")
        if seeds:
            try:
                check_readable(split_arg(seeds))
            except SeedFileError as exc:
                refuse(self.settings, [f"crawl: seeds not readable: {exc}"])
        if len(args) != 1:
            super().run(args, opts)  # Scrapy's usage errors
            return
        if self.profile is not None:
            logger.info("Settings profile %s (%s)", self.profile, PROFILES[self.profile])
        if self.settings.getbool("ARCHIVE_ENABLED") and self.settings.get("ARCHIVE_S3_BUCKET"):
            problem = storage_from_settings(self.settings).check()  # before anything is fetched
            if problem:
                refuse(self.settings, [f"crawl: {problem}"])
        if PROFILES.get(self.profile) == DISTRIBUTED or (
            self.profile is None and self.settings.get("SETTINGS_MODULE") == DISTRIBUTED
        ):
            warn_machine_local_stores(self.settings)
        crawler = self._create_crawler(args[0])
        refused: list[StoreRefused] = []
        _log_start_failure(self.crawler_process.crawl(crawler, **opts.spargs), self.settings, refused)
        self.crawler_process.start()
        if refused:  # a store refuses what the settings name: nothing was fetched
            print(f"crawl: {refused[0]}", file=sys.stderr)
            self.exitcode = 2
        elif self.crawler_process.bootstrap_failed:
            self.exitcode = 1
        elif crawler.stats is not None and crawler.stats.get_value("finish_reason") == SEEDS_REFUSED:
            self.exitcode = 2  # no seed was usable: what was typed is wrong
        elif crawler.stats is not None and (
            crawler.stats.get_value("finish_reason") in FAILED_REASONS or crawler.stats.get_value("seeds/error")
        ):
            self.exitcode = 1  # (seeds not all added: stopped while they waited for Redis too)


def unknown_arguments(spider_loader, name: str, spargs: dict) -> list[str]:
    """A line per ``-a`` argument the spider does not take (a spider declaring its
    ``arguments``), naming the nearest it does; a scrapyd job's own (``_job``) pass."""
    try:
        takes = getattr(spider_loader.load(name), "arguments", None)
    except KeyError:
        return []  # Scrapy says the spider is unknown
    if takes is None:
        return []
    out = []
    for arg in spargs:
        if arg not in takes and not arg.startswith("_"):
            near = difflib.get_close_matches(arg, takes, n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}? " if near else ""
            out.append(f"unknown argument -a {arg}=...: {hint}the {name} spider takes {', '.join(takes)}")
    return out


def machine_local_stores(settings) -> list[str]:
    """The crawl's stores that live on this machine alone: an SQLite UrlStore, an archive
    in a local directory (workers on other machines do not share them)."""
    found = []
    if settings.getbool("URLSTORE_ENABLED") and settings.get("URLSTORE_BACKEND").lower() == "sqlite":
        found.append(f"the UrlStore is SQLite ({sqlite_path(settings)})")
    if settings.getbool("ARCHIVE_ENABLED") and not settings.get("ARCHIVE_S3_BUCKET"):
        found.append(f"the archive is a local {storage_from_settings(settings).describe()}")
    return found


def warn_machine_local_stores(settings) -> None:
    """On the distributed profile, one line naming the stores that other machines' workers
    do not share, and what to use instead."""
    found = machine_local_stores(settings)
    if found:
        logger.warning(
            "Distributed profile, but %s: this machine's alone, not shared with workers on other "
            "machines (URLSTORE_BACKEND=cassandra, ARCHIVE_S3_BUCKET)",
            " and ".join(found),
        )


def refuse(settings, lines: list[str], code: int = 2) -> NoReturn:
    """Stop the command with exit ``code``, saying ``lines`` on stderr and in LOG_FILE
    if one is set, written there as log lines (logging may not have started yet)."""
    for line in lines:
        print(line, file=sys.stderr)
    path = settings.get("LOG_FILE")
    if path and settings.getbool("LOG_ENABLED"):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            with open(path, "a", encoding=settings.get("LOG_ENCODING") or "utf-8") as f:
                f.writelines(f"{stamp} [{__name__}] ERROR: {line}\n" for line in lines)
        except OSError as exc:
            print(f"crawl: cannot write to LOG_FILE {path}: {exc}", file=sys.stderr)
    raise SystemExit(code)


def _log_start_failure(started, settings, refused: list) -> None:
    """Log why the crawl did not start, in one line and its traceback, when ``started``
    (what CrawlerProcess.crawl returns: a Deferred, or an asyncio Task) fails; in one line
    alone when it is that Redis cannot be reached (a Redis Cluster none of whose nodes
    answers: a single Redis away is waited for), or a store that is not there or refuses
    what the settings name (that one also goes into ``refused``)."""

    def log(exc: BaseException) -> None:
        if unreachable(exc):
            logger.error("Crawl not started: cannot connect to Redis (%s): %s", redis_location(settings), exc)
        elif isinstance(exc, (ServiceUnreachable, StoreRefused)):
            logger.error("Crawl not started: %s", exc)
            if isinstance(exc, StoreRefused):
                refused.append(exc)
        else:
            logger.error("Crawl not started: %s: %s", type(exc).__name__, exc, exc_info=exc)

    def done(task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log(task.exception())

    if isinstance(started, Deferred):
        started.addErrback(lambda failure: log(failure.value))
    elif hasattr(started, "add_done_callback"):
        started.add_done_callback(done)
