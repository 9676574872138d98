"""``scrapy crawl``: Scrapy's own command, with exit codes a script can trust.

A crawl that cannot start exits non-zero with one clear line: a seed file given with
``-a seeds=`` that cannot be read (exit 2, before anything starts), or seeds that could
not all be added to the frontier (the crawl closes with ``seeds_failed``: exit 1), or a
Redis that refuses the worker's credentials (``redis_refused``: exit 1), or a crawl
whose keys vanished from Redis while it ran (``frontier_lost``: exit 1).
"""

from __future__ import annotations

import sys

from scrapy.commands.crawl import Command as ScrapyCrawl

from crawler.frontier.connection import FRONTIER_LOST, REDIS_REFUSED
from crawler.seeds import SeedFileError, check_readable
from crawler.spiders.broad import SEEDS_FAILED, split_arg
from crawler.validation import exit_if_invalid

FAILED_REASONS = {SEEDS_FAILED, REDIS_REFUSED, FRONTIER_LOST, "start_error"}


class Command(ScrapyCrawl):
    def process_options(self, args, opts):
        super().process_options(args, opts)
        exit_if_invalid(self.settings, "crawl")  # before anything starts or logs

    def run(self, args, opts):
        seeds = opts.spargs.get("seeds")
        if seeds:
            try:
                check_readable(split_arg(seeds))
            except SeedFileError as exc:
                print(f"crawl: seeds not readable: {exc}", file=sys.stderr)
                self.exitcode = 2
                return
        if len(args) != 1:
            super().run(args, opts)  # Scrapy's usage errors
            return
        crawler = self._create_crawler(args[0])
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
        elif crawler.stats is not None and crawler.stats.get_value("finish_reason") in FAILED_REASONS:
            self.exitcode = 1
