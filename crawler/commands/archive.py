"""``scrapy archive``: a crawl's archive as a web archive.

    scrapy archive index [-o FILE] [--rebuild]   every WARC file's CDXJ index merged into one
                                                 sorted CDXJ (default CRAWL_DIR/CRAWL_NAME/index.cdxj);
                                                 --rebuild builds each file's index again from
                                                 its WARC (cdxj-indexer) and stores it
    scrapy archive export --wacz FILE            the crawl as one WACZ package
    scrapy archive get URL [--at TIME]           a stored capture's body to stdout (the latest,
                                                 or the nearest TIME: 14 digits or fewer, or
                                                 ISO 8601), a revisit followed to its payload

The crawl is CRAWL_NAME (or --crawl); its archive is the one its settings name
(ARCHIVE_DIR or ARCHIVE_S3_BUCKET, ARCHIVE_PREFIX). A line on stderr says what was done
and shows progress over many files. Exit status: 0 when done; 1 when the crawl has no
WARC files there, the URL was not captured, or the archive cannot be read, with one
line on stderr; 2 for a wrong option or setting.
"""

from __future__ import annotations

import os
import sys
import time

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.archive import cdxj, wacz
from crawler.archive.collection import Collection
from crawler.archive.storage import storage_from_settings
from crawler.archive.warc import NOT_MODIFIED
from crawler.config.validation import exit_if_invalid
from crawler.urlstore.backends import tries_said, urlstore_from_settings
from crawler.urlstore.sqlite import sqlite_path

PROGRESS_EVERY = 2.0  # seconds between progress lines


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self):
        return "index|export|get [URL] [options]"

    def short_desc(self):
        return "A crawl's archive as a web archive: merged CDXJ index, WACZ export, a capture by URL"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--crawl", metavar="NAME", help="crawl name (default: CRAWL_NAME)")
        parser.add_argument("-o", "--output", metavar="FILE", help="index: where the merged CDXJ goes")
        parser.add_argument("--rebuild", action="store_true", help="index: build each file's index from its WARC")
        parser.add_argument("--wacz", metavar="FILE", help="export: the WACZ file to write")
        parser.add_argument(
            "--at",
            metavar="TIME",
            help="get: the capture nearest this time (UTC): 20261126, 20261126093000 or 2026-11-26T09:30:00Z",
        )

    def process_options(self, args, opts):
        super().process_options(args, opts)
        exit_if_invalid(self.settings, "archive")

    def run(self, args, opts):
        if not args or args[0] not in ("index", "export", "get"):
            raise UsageError("expected index, export or get")
        action = args[0]
        if action == "get" and len(args) != 2:
            raise UsageError("get takes one URL")
        if action != "get" and len(args) != 1:
            raise UsageError(f"{action} takes no argument")
        if action == "export" and not opts.wacz:
            raise UsageError("export needs --wacz FILE")
        if opts.crawl:
            self.settings.set("CRAWL_NAME", opts.crawl, priority="cmdline")
        s = self.settings
        storage = storage_from_settings(s)
        collection = Collection(storage, s.get("CRAWL_NAME"), s.get("ARCHIVE_PREFIX"))
        try:
            if not collection.warc_keys():
                return self._fail(f"archive: crawl {s.get('CRAWL_NAME')!r} has no WARC files in {storage.describe()}")
            if action == "index":
                self._index(collection, opts)
            elif action == "export":
                self._export(collection, opts.wacz)
            else:
                self._get(collection, args[1], opts.at)
        except BrokenPipeError:  # the reader went away (``| head``): not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except Exception as exc:  # an unreachable store, a file that does not read: one line
            self._fail(f"archive: {type(exc).__name__}: {exc}")

    def _index(self, collection: Collection, opts) -> None:
        s = self.settings
        out = opts.output or os.path.join(s.get("CRAWL_DIR"), s.get("CRAWL_NAME"), "index.cdxj")
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        lines = 0
        with open(out + ".part", "w", encoding="utf-8") as f:
            for text in collection.merged(opts.rebuild, Progress("indexed", "WARC files")):
                f.write(text)
                lines += 1
        os.replace(out + ".part", out)
        print(
            f"archive: {lines} captures of {len(collection.warc_keys())} WARC files indexed in {out}", file=sys.stderr
        )

    def _export(self, collection: Collection, out: str) -> None:
        lines = list(collection.merged(progress=Progress("indexed", "WARC files")))
        pages = wacz.pages_of(lines, self._titles())
        files = wacz.export(collection, out, pages, Progress("gathered", "WARC files"))
        print(f"archive: {out}: {files} WARC files, {len(lines)} captures, {len(pages)} pages", file=sys.stderr)

    def _titles(self):
        """The page titles the UrlStore knows, or None without a store to read."""
        s = self.settings
        if s.get("URLSTORE_BACKEND").lower() == "sqlite" and not os.path.isfile(sqlite_path(s)):
            return None

        def titles(urls: list[str]) -> dict[str, str]:
            with tries_said("archive"):
                store = urlstore_from_settings(s, readonly=True)
            try:
                out = {}
                for i in range(0, len(urls), 500):
                    chunk = urls[i : i + 500]
                    for url, record in zip(chunk, store.get_many(chunk), strict=True):
                        title = ((record or {}).get("metadata") or {}).get("title")
                        if title:
                            out[url] = title
                return out
            finally:
                store.close()

        return titles

    def _get(self, collection: Collection, url: str, at: str | None) -> None:
        lines = [text for index in collection.indexes() for text in index]
        captures = cdxj.captures_of(lines, url)
        capture = cdxj.closest(captures, _timestamp(at) if at else None)
        if capture is None:
            return self._fail(f"archive: {url} was not captured in crawl {collection.crawl!r}")
        found, payload = collection.payload(lines, capture)
        status = found.http_status or ("304" if found.warc_headers.get("WARC-Profile") == NOT_MODIFIED else "-")
        note = f"archive: {capture.url} captured {found.warc_headers.get('WARC-Date')}, HTTP {status}"
        if payload is not found:
            note += f"; a revisit of {payload.capture.url} captured {payload.warc_headers.get('WARC-Date')}"
        print(f"{note}; {len(payload.body)} bytes", file=sys.stderr)
        sys.stdout.buffer.write(payload.body)
        sys.stdout.buffer.flush()

    def _fail(self, message: str) -> None:
        print(message, file=sys.stderr)
        self.exitcode = 1


def _timestamp(at: str) -> str:
    """A time given as 14 digits or fewer, or ISO 8601, as index digits."""
    digits = "".join(ch for ch in at if ch.isdigit())
    if not digits or len(digits) > 14 and not any(ch in at for ch in "-:T"):
        raise UsageError(f"--at {at!r}: expected a time such as 20261126 or 2026-11-26T09:00:00Z")
    return digits[:14]


class Progress:
    """A progress line on stderr at most every PROGRESS_EVERY seconds, and at the end."""

    def __init__(self, verb: str, what: str):
        self.verb, self.what = verb, what
        self.started = self.last = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - self.last >= PROGRESS_EVERY:
            self.last = now
            rate = done / max(now - self.started, 1e-9)
            print(f"archive: {self.verb} {done}/{total} {self.what} ({rate:.1f}/s)", file=sys.stderr, flush=True)
