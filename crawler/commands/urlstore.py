"""``scrapy urlstore``: what the crawl stored about a URL.

scrapy urlstore get URL        the URL's record as JSON (normalized first, then its
                               canonical URL's record when one is known)
scrapy urlstore content URL    the archived raw body, to stdout (a ranged read of the
                               WARC object named by the record's archive pointer)
scrapy urlstore links URL      its outlinks and inlinks as JSON
scrapy urlstore index-due      Cassandra: index the due times of records written before
                               the due index (cassandra_due.py), once; the recrawl scans
                               the urls table until then

The crawl is CRAWL_NAME (or --crawl); the store and the archive are the ones its
settings name (URLSTORE_BACKEND, ARCHIVE_DIR or ARCHIVE_S3_BUCKET). Times are ISO 8601
(UTC). An unknown URL (for ``links``: one with neither a record nor inlinks), one
without an archived body, or a crawl with no SQLite UrlStore (no Cassandra keyspace) prints
a line on stderr and exits with 1, creating nothing; a string that is not a URL exits with 2.
"""

from __future__ import annotations

import json
import os
import sys

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.archive.storage import storage_from_settings
from crawler.archive.warc import read_payload
from crawler.config.crawldir import crawls_holding
from crawler.config.validation import exit_if_invalid
from crawler.exceptions import ServiceUnreachable, StoreRefused
from crawler.seeds.ingest import Every
from crawler.urls import InvalidURL, normalize_url, url_options
from crawler.urlstore.backends import tries_said, urlstore_from_settings
from crawler.urlstore.record import with_iso_times
from crawler.urlstore.sqlite import SQLITE_FILE, sqlite_path


class Command(ScrapyCommand):
    requires_project = True
    default_settings = {"LOG_ENABLED": False}

    def syntax(self):
        return "get|content|links URL | index-due [options]"

    def short_desc(self):
        return "Show what the UrlStore holds about a URL (record, archived body, links)"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--crawl", metavar="NAME", help="crawl name (default: CRAWL_NAME)")
        parser.add_argument("--limit", type=int, default=1000, help="links: at most this many inlinks")

    def process_options(self, args, opts):
        super().process_options(args, opts)
        exit_if_invalid(self.settings, "urlstore")  # before anything starts or logs

    def run(self, args, opts):
        if args == ["index-due"]:
            return self._index_due(opts)
        if len(args) != 2 or args[0] not in ("get", "content", "links"):
            raise UsageError("expected get, content or links, and one URL; or index-due")
        action, url = args
        if opts.crawl:
            self.settings.set("CRAWL_NAME", opts.crawl, priority="cmdline")
        try:
            normalize_url(url, **url_options(self.settings))
        except InvalidURL as exc:
            print(f"urlstore: {url!r} is not a valid URL ({exc})", file=sys.stderr)
            self.exitcode = 2
            return
        path = sqlite_path(self.settings)
        if self.settings.get("URLSTORE_BACKEND").lower() == "sqlite" and not os.path.isfile(path):
            # (a read never creates a store)
            crawls = crawls_holding(self.settings, SQLITE_FILE)
            there = f"crawls with one: {', '.join(crawls)}" if crawls else "none has one yet"
            return self._fail(
                f"urlstore: crawl {self.settings.get('CRAWL_NAME')!r} has no UrlStore at {path} ({there}); "
                "name one with --crawl NAME"
            )
        try:
            with tries_said("urlstore"):
                store = urlstore_from_settings(self.settings, readonly=True)  # creates and changes nothing
        except StoreRefused as exc:  # no such keyspace: what was typed is wrong
            return self._fail(f"urlstore: {exc}", code=2)
        except Exception as exc:  # unreachable cluster, bad settings: one clear line
            kind = "" if isinstance(exc, ServiceUnreachable) else f"{type(exc).__name__}: "
            return self._fail(f"urlstore: {kind}{exc}")
        try:
            if action == "get":
                record = store.get(url)
                if record is None:
                    return self._fail(f"urlstore: {url} is not in the store")
                print(json.dumps(with_iso_times(record), indent=2, default=str))
            elif action == "links":
                outlinks, inlinks = store.outlinks(url), store.inlinks(url, opts.limit)
                if not outlinks and not inlinks and store.fetch_status(url) is None:
                    return self._fail(f"urlstore: {url} is not in the store (no record, no links to it)")
                print(json.dumps({"url": store.normalize(url), "outlinks": outlinks, "inlinks": inlinks}, indent=2))
            else:
                self._content(store, url)
        except BrokenPipeError:  # the reader went away (``| head``): not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        finally:
            store.close()

    def _index_due(self, opts) -> None:
        if opts.crawl:
            self.settings.set("CRAWL_NAME", opts.crawl, priority="cmdline")
        if self.settings.get("URLSTORE_BACKEND").lower() != "cassandra":
            print("urlstore: nothing to do: an SQLite UrlStore's due index is always whole")
            return
        try:
            with tries_said("urlstore"):
                store = urlstore_from_settings(self.settings, readonly=True)
        except Exception as exc:
            kind = "" if isinstance(exc, (ServiceUnreachable, StoreRefused)) else f"{type(exc).__name__}: "
            return self._fail(f"urlstore: {kind}{exc}", code=2 if isinstance(exc, StoreRefused) else 1)
        try:
            if store.due_index.whole:
                print("urlstore: the due index is whole already")
                return
            shown = Every(lambda n: print(f"  {n:,} due times indexed", file=sys.stderr, flush=True), 5.0)
            print(f"urlstore: the due index is whole: {store.due_index.index_all(shown):,} due times indexed")
        finally:
            store.close()

    def _content(self, store, url: str) -> None:
        record = store.get(url)
        if record is None:
            return self._fail(f"urlstore: {url} is not in the store")
        pointer = record.get("archive")
        if not pointer:
            return self._fail(f"urlstore: {record['url']} has no archived body (fate: {record.get('fate')})")
        storage = storage_from_settings(self.settings)
        try:
            _, body = read_payload(storage.get_range, pointer, lambda u: (store.get(u) or {}).get("archive"))
        except Exception as exc:
            return self._fail(f"urlstore: could not read {pointer['key']} from {storage.describe()}: {exc}")
        sys.stdout.buffer.write(body)
        sys.stdout.buffer.flush()

    def _fail(self, message: str, code: int = 1) -> None:
        print(message, file=sys.stderr)
        self.exitcode = code
