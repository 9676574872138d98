"""``scrapy recrawl``: put the URLs that are due back into a crawl's frontier, once.

    scrapy recrawl                       every URL due now (next_fetch_at passed): --all-due
    scrapy recrawl --host example.com    only that host's due URLs
    scrapy recrawl --older-than 86400    URLs fetched more than a day ago, due or not
    scrapy recrawl --due-within 3600     URLs due now or within the next hour
    scrapy recrawl --limit 10000         at most this many

The UrlStore's ``due`` query (crawler/urlstore/) gives the URLs a page at a time; each is
put through the frontier's ``put`` as a recrawl (crawler/freshness/recrawl.py): past URL-seen and
the workers' fetch policy, fetched with If-None-Match / If-Modified-Since from its stored
ETag and Last-Modified, and held (not put again for RECRAWL_HOLD seconds unless it is
fetched meanwhile). A running crawl on the distributed profile does this by itself every
RECRAWL_CHECK_INTERVAL.

Output: a progress line every RECRAWL_PROGRESS_INTERVAL seconds (due URLs read, put
back, URLs/s), then a summary (what ``put`` said of them: added, host_full, trap:...).
Exit status: 0 when done; 1 when Redis or the UrlStore is unreachable, with a one-line
message on stderr; 2 for an invalid setting or option.
"""

from __future__ import annotations

import sys

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.commands.frontier import no_such_crawl, store_files
from crawler.commands.seed import _close, _reason, _where
from crawler.config.crawldir import crawls_holding
from crawler.config.validation import exit_if_invalid
from crawler.exceptions import StoreRefused
from crawler.freshness.recrawl import Recrawl
from crawler.frontier.connection import crawl_exists, frontier_from_settings
from crawler.frontier.keys import Keys
from crawler.frontier.submit import use_published_scope
from crawler.seeds.ingest import Every
from crawler.services import spill_from_settings
from crawler.urlstore.backends import tries_said, urlstore_from_settings
from crawler.urlstore.sqlite import SQLITE_FILE


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False  # no crawl, no reactor: plain Redis and UrlStore calls
    default_settings = {"LOG_ENABLED": False}

    def syntax(self):
        return "[options]"

    def short_desc(self):
        return "Put the URLs that are due for a refetch back into a crawl's frontier"

    def add_options(self, parser):
        super().add_options(parser)
        group = parser  # beside -h, before the global options: what a user reads first
        group.add_argument("--crawl", metavar="NAME", help="crawl name (default CRAWL_NAME)")
        group.add_argument("--all-due", action="store_true", help="every URL due now (the default)")
        group.add_argument("--host", metavar="HOST", help="only this host's URLs (host[:port])")
        group.add_argument(
            "--older-than", metavar="SECONDS", type=float, help="URLs fetched more than SECONDS ago, due or not"
        )
        group.add_argument(
            "--due-within", metavar="SECONDS", type=float, default=0.0, help="also URLs due within SECONDS from now"
        )
        group.add_argument("--limit", metavar="N", type=int, help="put at most N URLs")

    def process_options(self, args, opts):
        super().process_options(args, opts)
        if opts.crawl:
            self.settings.set("CRAWL_NAME", opts.crawl, priority="cmdline")
        exit_if_invalid(self.settings, "recrawl")

    def run(self, args, opts):
        if args:
            raise UsageError(f"unexpected arguments: {' '.join(args)}")
        if opts.all_due and opts.older_than is not None:
            raise UsageError("--all-due and --older-than choose differently: give one")
        if opts.older_than is not None and opts.older_than < 0:
            raise UsageError("--older-than takes seconds, 0 or more")
        if opts.due_within < 0:
            raise UsageError("--due-within takes seconds, 0 or more")
        if opts.limit is not None and opts.limit < 1:
            raise UsageError("--limit takes a number of URLs, 1 or more")
        settings = self.settings
        try:
            Keys(settings.get("CRAWL_NAME"))
        except ValueError as exc:
            return self._fail(f"recrawl: {exc}")
        client = store = None
        try:
            if not crawl_exists(settings) and not store_files(settings):  # a mistyped name
                stores = crawls_holding(settings, SQLITE_FILE)
                print(no_such_crawl(settings, "recrawl", also=stores), file=sys.stderr, flush=True)
                self.exitcode = 2
                return
            frontier = frontier_from_settings(settings)
            client = frontier.redis
            client.ping()
            use_published_scope(frontier)
        except Exception as exc:
            _close(client)
            return self._fail(f"recrawl: cannot connect to Redis ({_where(settings)}): {_reason(exc)}")
        try:
            with tries_said("recrawl"):
                store = urlstore_from_settings(settings)
        except Exception as exc:
            _close(client)
            return self._fail(f"recrawl: cannot open the UrlStore: {_reason(exc)}")
        try:  # its pushes go where the crawl's workers look for them: the same window, or none
            spill = spill_from_settings(settings, frontier, urlstore=lambda: store)
        except StoreRefused as exc:
            store.close()
            _close(client)
            self._fail(f"recrawl: {exc}")
            self.exitcode = 2
            return
        if spill is not None:
            spill.close()  # (the store stays open: the recrawl's)
        recrawl = Recrawl(store, frontier, settings.getfloat("RECRAWL_HOLD"))
        progress = Every(
            lambda r: print(f"Recrawl: {r.progress_text()}", flush=True), settings.getfloat("RECRAWL_PROGRESS_INTERVAL")
        )
        try:
            report = recrawl.round(
                opts.limit,
                host=opts.host.lower() if opts.host else None,
                older_than=opts.older_than,
                ahead=opts.due_within,
                progress=progress,
            )
        except KeyboardInterrupt:
            self.exitcode = 130
            return
        except Exception as exc:
            return self._fail(f"recrawl: stopped ({type(exc).__name__}): {_reason(exc)}")
        finally:
            store.close()
            _close(client)
        print(f"{report.summary()} [{report.progress_text()}]", flush=True)

    def _fail(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)
        self.exitcode = 1
