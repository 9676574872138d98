"""The SQLite UrlStore: the embedded default, one file in the crawl directory (WAL mode).

Every statement runs on one thread that owns the connection, in the order the calls
were made (a read sees every write made before it); writes return at once with a
Future. ``last_fetched`` (the fetch policy's lookup, in a worker's reactor thread) reads
through a connection of its own instead, so that it never waits behind a group commit:
in WAL mode a reader sees the last commit and is not blocked by the writer. Schema: schema.sql, package data of crawler.urlstore (read through
importlib.resources, so it is found in an egg or a zipped install too).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sqlite3
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import resources

from crawler.urlstore.record import (
    ATTEMPT_COLUMNS,
    COLUMNS,
    DUE_FIELDS,
    READ_COLUMNS,
    RECORD_COLUMNS,
    ArchivePointer,
    FetchRecord,
    answered,
    attempt_only,
    inlink_bucket,
    pop_pointer,
    signed64,
    unsigned64,
)
from crawler.urlstore.store import UrlStore

logger = logging.getLogger(__name__)

SCHEMA = resources.files("crawler.urlstore").joinpath("schema.sql")
SQLITE_FILE = "urlstore.sqlite"
OPEN_TIMEOUT = 30.0  # seconds to wait for another worker's lock (opening; writing: URLSTORE_SQLITE_TIMEOUT)
CACHE_BYTES = 16 * 2**20  # the writer's page cache (URLSTORE_SQLITE_CACHE_BYTES; SQLite's default: 2 MiB)
CHECKPOINT_PAGES = 10_000  # WAL pages (4 KiB) between automatic checkpoints (its default: 1,000)
# columns schema.sql gained after its first version: added to an existing store at open
ADDED_COLUMNS = {name: sqlite for name, sqlite, _, added in COLUMNS if added}
_COLUMNS = ", ".join(("url", *RECORD_COLUMNS))
# a fetch's record replaces the row (but put_at), and its metadata is merged into the stored fields
_UPSERT = (
    f"INSERT INTO urls ({_COLUMNS}) VALUES ({', '.join('?' * (1 + len(RECORD_COLUMNS)))}) ON CONFLICT (url) DO UPDATE SET "
    + ", ".join(
        "metadata = json_patch(urls.metadata, excluded.metadata)" if name == "metadata" else f"{name} = excluded.{name}"
        for name in RECORD_COLUMNS
    )
)
# a fetch without an answer: its attempt's columns alone (record.ATTEMPT_COLUMNS)
_ATTEMPT = (
    f"INSERT INTO urls (url, {', '.join(ATTEMPT_COLUMNS)}) VALUES ({', '.join('?' * (1 + len(ATTEMPT_COLUMNS)))}) "
    f"ON CONFLICT (url) DO UPDATE SET {', '.join(f'{name} = excluded.{name}' for name in ATTEMPT_COLUMNS)}"
)
_METADATA = """
INSERT INTO urls (url, metadata) VALUES (?, ?)
ON CONFLICT (url) DO UPDATE SET metadata = json_patch(urls.metadata, excluded.metadata)
"""
# a capture's pointer, unless the record's last answer is a later capture's (ARCHIVE_AT)
_ARCHIVE = (
    "UPDATE urls SET archive_key = ?, archive_offset = ?, archive_length = ?, archive_bucket = ?, archive_at = ?"
    " WHERE url = ? AND (archive_at IS NULL OR archive_at <= ?)"
)
_INLINK = """
INSERT OR REPLACE INTO inlinks (target_url, bucket, source_url, anchor_text, nofollow) VALUES (?, ?, ?, ?, ?)
"""
_RESCHEDULE = """
UPDATE urls SET next_fetch_at = ?, fetched_at = coalesce(?, fetched_at), fetch_interval = coalesce(?, fetch_interval),
put_at = coalesce(?, put_at) WHERE url = ?
"""
_DUE = ", ".join(DUE_FIELDS)
_READ = ", ".join(("url", *READ_COLUMNS))


def sqlite_path(settings) -> str:
    """The crawl's SQLite file: URLSTORE_SQLITE_PATH, or CRAWL_DIR/CRAWL_NAME/urlstore.sqlite."""
    return settings.get("URLSTORE_SQLITE_PATH") or os.path.join(
        settings.get("CRAWL_DIR"), settings.get("CRAWL_NAME"), SQLITE_FILE
    )


class SqliteUrlStore(UrlStore):
    def __init__(
        self,
        path: str,
        url_options: dict | None = None,
        inlink_buckets: int = 16,
        timeout: float = OPEN_TIMEOUT,
        cache_bytes: int = CACHE_BYTES,
    ):
        super().__init__(url_options, inlink_buckets)
        self.path = path
        self.timeout = timeout  # seconds a write waits for another connection's lock before it fails
        self.cache_bytes = cache_bytes
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="urlstore")
        self._db: sqlite3.Connection | None = None
        # (write, its argument, future) of the writes waiting for the next commit
        self._pending: list[tuple[object, object, Future]] = []
        self._pending_lock = threading.Lock()
        self._flush_queued = False
        self._reader: sqlite3.Connection | None = None  # last_fetched's own connection
        self._reader_lock = threading.Lock()
        self._thread.submit(self._open).result()

    @classmethod
    def from_settings(cls, settings, url_options: dict) -> SqliteUrlStore:
        return cls(
            sqlite_path(settings),
            url_options,
            settings.getint("URLSTORE_INLINK_BUCKETS"),
            settings.getfloat("URLSTORE_SQLITE_TIMEOUT"),
            settings.getint("URLSTORE_SQLITE_CACHE_BYTES"),
        )

    def _open(self) -> None:
        if self.path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        # Workers sharing one crawl directory open the file together: a change of journal
        # mode does not wait for the other's lock (SQLITE_BUSY at once), so it is retried
        deadline = time.monotonic() + max(self.timeout, OPEN_TIMEOUT)
        for attempt in itertools.count():
            db = sqlite3.connect(self.path, timeout=self.timeout)
            try:
                self._prepare(db)
                break
            except sqlite3.OperationalError as exc:
                db.close()
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                if attempt == 0:
                    logger.info("UrlStore %s is being opened by another worker; waiting", self.path)
                time.sleep(min(0.05 * 2**attempt, 1.0))
        self._db = db

    def _prepare(self, db: sqlite3.Connection) -> None:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # WAL: durable up to the last checkpoint on power loss
        # a page's ~150 inlinks land all over the inlinks index: a page cache that holds
        # more of it, and checkpoints every 40 MB of log rather than 4, write a record in
        # 3.1 ms of CPU instead of 4.2 (bench: 3,000 records of 150 links). The cache is
        # resident memory of the worker once full (within a minute of crawling): 32 MiB
        # wrote a record (4,000 of 150 links to random URLs, a 132 MB store) in 2.44 ms of
        # CPU, 16 MiB in 2.54-2.88 ms, 8 MiB in 3.37 ms
        db.execute(f"PRAGMA cache_size=-{max(self.cache_bytes // 1024, 1)}")
        db.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")
        db.executescript(SCHEMA.read_text(encoding="utf-8"))
        have = {row[1] for row in db.execute("PRAGMA table_info(urls)")}
        for name, kind in ADDED_COLUMNS.items():  # a store made by an earlier version
            if name not in have:
                try:
                    db.execute(f"ALTER TABLE urls ADD COLUMN {name} {kind}")
                except sqlite3.OperationalError as exc:  # another worker added it meanwhile
                    if "duplicate column" not in str(exc):
                        raise

    def _run(self, fn, *args) -> Future:
        return self._thread.submit(fn, *args)

    # -- writes ------------------------------------------------------------------------

    def record_fetch(self, record: FetchRecord) -> Future:
        return self._grouped(self._write_fetch, record)

    def set_archive(self, url: str, archive: ArchivePointer, fetched_at: float) -> Future:
        return self._grouped(self._write_archive, (self.normalize(url), archive, fetched_at))

    def _grouped(self, write, arg) -> Future:
        """Group commit: the writes that arrive while the store's thread is busy are
        made together in one transaction (a commit per page was most of a write's cost);
        each future is done once its write is committed."""
        future: Future = Future()
        with self._pending_lock:
            self._pending.append((write, arg, future))
            if not self._flush_queued:
                self._flush_queued = True
                self._thread.submit(self._flush)
        return future

    def _flush(self) -> None:
        with self._pending_lock:
            batch, self._pending = self._pending, []
            self._flush_queued = False
        try:
            with self._db:
                for write, arg, _ in batch:
                    write(arg)
        except Exception:  # rolled back: one transaction each, so that a bad write fails alone
            for write, arg, future in batch:
                try:
                    with self._db:
                        write(arg)
                except Exception as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(None)
            return
        for _, _, future in batch:
            future.set_result(None)

    def _write_archive(self, url_archive: tuple[str, ArchivePointer, float]) -> None:
        url, a, at = url_archive
        self._db.execute(_ARCHIVE, (a.key, a.offset, a.length, a.bucket, at, url, at))

    def _write_fetch(self, r: FetchRecord) -> None:
        url = self.normalize(r.url)
        if attempt_only(r):
            self._db.execute(_ATTEMPT, (url, *(getattr(r, name) for name in ATTEMPT_COLUMNS)))
            return
        archive = r.archive or ArchivePointer("", 0, 0)
        row = (
            url,
            r.canonical_url,
            r.near_duplicate_of,
            r.resemblance,
            r.status,
            r.fate,
            r.fetched_at,
            r.error,
            r.next_fetch_at,
            r.final_url,
            json.dumps(r.redirect_chain),
            r.content_digest,
            signed64(r.simhash),
            json.dumps(r.metadata or {}),
            archive.key or None,
            archive.offset if archive.key else None,
            archive.length if archive.key else None,
            json.dumps(r.outlinks),
            r.fetch_interval,
            r.etag,
            r.last_modified,
            archive.bucket if archive.key else None,
            r.fetched_at,  # ARCHIVE_AT: the capture its pointer names or waits for
        )
        links = [
            (link["url"], self._bucket(url), url, link.get("text", ""), int(bool(link.get("nofollow"))))
            for link in r.outlinks
        ]
        self._db.execute(_UPSERT, row)
        if links:
            self._db.executemany(_INLINK, links)

    def reschedule(
        self,
        url: str,
        next_fetch_at: float | None,
        fetched_at: float | None = None,
        fetch_interval: float | None = None,
        put_at: float | None = None,
    ) -> Future:
        return self._grouped(
            self._write_schedule, (self.normalize(url), next_fetch_at, fetched_at, fetch_interval, put_at)
        )

    def _write_schedule(self, args: tuple) -> None:
        url, next_fetch_at, fetched_at, fetch_interval, put_at = args
        self._db.execute(_RESCHEDULE, (next_fetch_at, fetched_at, fetch_interval, put_at, url))

    def update_metadata(self, url: str, fields: dict[str, str]) -> Future:
        return self._run(self._update_metadata, self.normalize(url), json.dumps(fields))

    def _update_metadata(self, url: str, fields: str) -> None:
        with self._db:
            self._db.execute(_METADATA, (url, fields))

    def _bucket(self, source: str) -> int:
        return inlink_bucket(source, self.inlink_buckets)

    # -- reads -------------------------------------------------------------------------

    def _row(self, url: str) -> dict | None:
        return self._run(self._read_row, url).result()

    def fate_counts(self) -> dict[str, int]:
        return self._run(self._count_fates).result()

    def _count_fates(self) -> dict[str, int]:
        rows = self._db.execute("SELECT fate, COUNT(*) FROM urls WHERE fate IS NOT NULL GROUP BY fate")
        return {fate: n for fate, n in rows}

    def _read_row(self, url: str) -> dict | None:
        row = self._db.execute(f"SELECT {_READ} FROM urls WHERE url = ?", (url,)).fetchone()
        if row is None:
            return None
        record = dict(zip(("url", *READ_COLUMNS), row, strict=True))
        for name in ("redirect_chain", "outlinks"):
            record[name] = json.loads(record[name]) if record[name] else []
        record["metadata"] = json.loads(record["metadata"] or "{}")
        record["simhash"] = unsigned64(record["simhash"])
        record["archive"] = pop_pointer(record)
        return record

    def due(
        self,
        before: float,
        limit: int = 1000,
        after: tuple | None = None,
        host: str | None = None,
        fetched_before: float | None = None,
        put_since: float | None = None,
    ) -> tuple[list[dict], tuple | None]:
        """By (next_fetch_at, url) through its index (urls_due), each page starting where
        the last ended (a row-value comparison the index answers: a page costs its rows,
        not a sort of everything due), or with ``fetched_before`` by URL (and
        ``put_since``, record.put_again); ``host`` narrows the query by URL prefix."""
        where, args = [], []
        if fetched_before is None:
            where.append("next_fetch_at <= ?")
            args.append(before)
            if after is not None:
                where.append("(next_fetch_at, url) > (?, ?)")
                args += [after[0], after[1]]
            order = "next_fetch_at, url"
        else:
            where.append("fetched_at <= ?")
            args.append(fetched_before)
            if put_since is not None:  # (record.put_again)
                where.append("(put_at IS NULL OR put_at <= fetched_at OR put_at < ?)")
                args.append(put_since)
            if after is not None:
                where.append("url > ?")
                args.append(after[-1])
            order = "url"
        if host:
            escaped = host.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append("(url LIKE ? ESCAPE '\\' OR url LIKE ? ESCAPE '\\')")
            args += [f"http://{escaped}/%", f"https://{escaped}/%"]
        sql = f"SELECT {_DUE} FROM urls WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
        rows = self._run(lambda: self._db.execute(sql, [*args, limit]).fetchall()).result()
        out = [dict(zip(DUE_FIELDS, row, strict=True)) for row in rows]
        if len(out) < limit:
            return out, None
        last = out[-1]
        return out, (last["next_fetch_at"], last["url"]) if fetched_before is None else (last["url"],)

    def _inlinks(self, url: str, limit: int, after: str | None = None) -> list[dict]:
        return self._run(self._read_inlinks, url, limit, after).result()

    def last_fetched(self, urls: list[str], archived: bool = False) -> dict[str, float]:
        if not urls:
            return {}
        given: dict[str, list[str]] = {}  # normalized -> the URLs asked
        for u in urls:
            given.setdefault(self.normalize(u), []).append(u)
        rows = self._fetched_rows(list(given))
        return {
            u: at
            for url, fate, status, at, key in rows
            if answered(fate, status, key, archived) and at is not None
            for u in given[url]
        }

    def _fetched_rows(self, urls: list[str]) -> list[tuple]:
        """last_fetched's rows of normalized ``urls``, 500 a query, through a connection of
        its own (never behind a group commit)."""
        if self.path == ":memory:":  # one database per connection: ask the store's own
            return [
                r
                for i in range(0, len(urls), 500)
                for r in self._run(self._read_fetched, self._db, urls[i : i + 500]).result()
            ]
        with self._reader_lock:
            if self._reader is None:
                self._reader = sqlite3.connect(self.path, timeout=OPEN_TIMEOUT, check_same_thread=False)
            return [r for i in range(0, len(urls), 500) for r in self._read_fetched(self._reader, urls[i : i + 500])]

    @staticmethod
    def _read_fetched(db: sqlite3.Connection, urls: list[str]) -> list[tuple]:
        marks = ",".join("?" * len(urls))
        return db.execute(
            f"SELECT url, fate, status, fetched_at, archive_key FROM urls WHERE url IN ({marks})", urls
        ).fetchall()

    def _read_inlinks(self, url: str, limit: int, after: str | None = None) -> list[dict]:
        rows = self._db.execute(
            "SELECT source_url, anchor_text, nofollow FROM inlinks WHERE target_url = ? AND source_url > ? "
            "ORDER BY source_url LIMIT ?",
            (url, "" if after is None else after, limit),
        ).fetchall()
        return [{"url": s, "text": t, "nofollow": bool(n)} for s, t, n in rows]

    def close(self) -> None:
        def _close():
            if self._db is not None:
                self._db.close()
                self._db = None

        self._thread.submit(_close).result()
        self._thread.shutdown(wait=True)
        with self._reader_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None


READ_TIMEOUT = 2.0  # seconds a reader waits for a lock on the file (a process holding it exclusively) before it fails
READ_CACHE_KIB = 16 * 1024  # the page cache of each reader's connection
