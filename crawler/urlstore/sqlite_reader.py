"""The SQLite UrlStore opened read-only, for a reader that creates and changes nothing
(``scrapy serve``, ``scrapy urlstore``): the file must exist, reads run on the calling
thread, and every write is refused.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from concurrent.futures import Future
from pathlib import Path

from crawler.urlstore.sqlite import READ_CACHE_KIB, READ_TIMEOUT, SqliteUrlStore, sqlite_path
from crawler.urlstore.store import UrlStore


class SqliteReader(SqliteUrlStore):
    """The store read-only, for a reader beside the crawl (``scrapy serve``): the file is
    opened read-only and never created (a missing one is FileNotFoundError), each thread
    reads through a connection of its own, on the calling thread, so that readers run side
    by side (in WAL mode none waits for the workers' writes). A read that cannot get at
    the file (held exclusively by another process) fails after ``timeout`` seconds with
    sqlite3.OperationalError, never later. Writes raise TypeError."""

    def __init__(
        self, path: str, url_options: dict | None = None, inlink_buckets: int = 16, timeout: float = READ_TIMEOUT
    ):
        if path == ":memory:" or not os.path.isfile(path):
            raise FileNotFoundError(f"no UrlStore at {path}")
        UrlStore.__init__(self, url_options, inlink_buckets)
        self.path = path
        self.timeout = timeout
        self._uri = Path(path).absolute().as_uri() + "?mode=ro"
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._opened_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings, url_options: dict) -> SqliteReader:
        return cls(sqlite_path(settings), url_options, settings.getint("URLSTORE_INLINK_BUCKETS"))

    @property
    def _db(self) -> sqlite3.Connection:
        """This thread's connection (opened at its first read)."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self._uri, uri=True, timeout=self.timeout, check_same_thread=False)
            db.execute(f"PRAGMA cache_size=-{READ_CACHE_KIB}")
            self._local.db = db
            with self._opened_lock:
                self._opened.append(db)
        return db

    def _run(self, fn, *args) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def _grouped(self, write, arg) -> Future:
        raise TypeError(f"the UrlStore at {self.path} is open read-only")

    def _fetched_rows(self, urls: list[str]) -> list[tuple]:
        return [r for i in range(0, len(urls), 500) for r in self._read_fetched(self._db, urls[i : i + 500])]

    def close(self) -> None:
        with self._opened_lock:
            for db in self._opened:
                db.close()
            self._opened.clear()
