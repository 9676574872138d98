"""Opening the crawl's UrlStore: the backend URLSTORE_BACKEND names (SQLite, the
embedded default; Cassandra, across machines)."""

from __future__ import annotations

import contextlib
import logging
import sys

from crawler.urls import url_options
from crawler.urlstore.sqlite import SqliteUrlStore
from crawler.urlstore.sqlite_reader import SqliteReader
from crawler.urlstore.store import UrlStore


def urlstore_from_settings(settings, readonly: bool = False) -> UrlStore:
    """The crawl's UrlStore: URLSTORE_BACKEND "sqlite" (default) or "cassandra".
    ``readonly``: for a reader (``scrapy serve``) that creates and changes nothing: an
    SQLite file opened read-only (it must exist), reads on the calling thread; a Cassandra
    keyspace whose schema is left as it is."""
    backend = settings.get("URLSTORE_BACKEND").lower()
    if backend == "sqlite":
        return (SqliteReader if readonly else SqliteUrlStore).from_settings(settings, url_options(settings))
    if backend == "cassandra":
        # imported here, not above: the driver's cassandra.cluster installs Twisted's default
        # reactor when imported, which must come after Scrapy has installed its own
        from crawler.urlstore.cassandra import CassandraUrlStore

        if readonly:
            settings = settings.copy()
            settings.set("CASSANDRA_APPLY_SCHEMA", False)
        return CassandraUrlStore.from_settings(settings, url_options(settings))
    raise ValueError(f"URLSTORE_BACKEND must be 'sqlite' or 'cassandra', not {backend!r}")


@contextlib.contextmanager
def tries_said(command: str):
    """While a command opens the UrlStore, each failed try to reach its Cassandra is said on
    stderr as it happens (``urlstore: Cassandra not reachable at ...; trying again in 2 s``):
    commands log nothing, and a person would otherwise wait CASSANDRA_CONNECT_TIMEOUT in
    silence for the last line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{command}: %(message)s"))
    handler.setLevel(logging.WARNING)
    tries = logging.getLogger("crawler.urlstore.cassandra_cluster")
    tries.addHandler(handler)
    try:
        yield
    finally:
        tries.removeHandler(handler)
