"""The Cassandra UrlStore's statements and rows: the CQL of its writes and reads, a value
bound as the column's empty value rather than a null (no tombstones), a row read back
as the record's fields (crawler/urlstore/cassandra.py and cassandra_reads.py use them).
"""

from __future__ import annotations

import struct
from datetime import UTC

from cassandra.query import UNSET_VALUE, BoundStatement

from crawler.urlstore.cassandra_cluster import (
    COLUMNS,
)
from crawler.urlstore.record import (
    ARCHIVE_AT,
    ARCHIVE_COLUMNS,
    READ_COLUMNS,
    RECORD_COLUMNS,
    pop_pointer,
    unsigned64,
)

# the types bound as big-endian bytes through CQL's blobAs<Type>(?), where b"" is the
# type's empty value (a timestamp: milliseconds since 1970)
_PACKED = {"int": ">i", "bigint": ">q", "float": ">f", "double": ">d", "timestamp": ">q"}


# a record with an answer: its row but the pointer, then the pointer and ARCHIVE_AT (POINTER)
# at the fetch's time (USING TIMESTAMP): a capture's pointer is written at that time and a
# microsecond (set_archive), so the newer capture's pointer wins, whichever comes last
POINTER = (*ARCHIVE_COLUMNS, ARCHIVE_AT)
ROW = tuple(c for c in RECORD_COLUMNS if c not in POINTER)


METADATA = ("metadata",)


# reschedule: the due time, and when given the fetch time and the interval, or when a recrawl
# pass put the URL back
RESCHEDULES = [
    ("next_fetch_at", *more)
    for more in ((), ("fetched_at",), ("fetch_interval",), ("fetched_at", "fetch_interval"), ("put_at",))
]


_FETCHED = ("url", "fate", "status", "fetched_at", "archive_key")  # last_fetched's columns


_INLINK = "INSERT INTO {ks}.inlinks (target_url, bucket, source_url, anchor_text, nofollow) VALUES (?, ?, ?, ?, ?)"


_INLINKS = "SELECT source_url, anchor_text, nofollow FROM {ks}.inlinks WHERE target_url = ? AND bucket = ? LIMIT ?"


_INLINKS_AFTER = (
    "SELECT source_url, anchor_text, nofollow FROM {ks}.inlinks WHERE target_url = ? AND bucket = ? "
    "AND source_url > ? LIMIT ?"
)


def _update(columns: tuple[str, ...], timed: bool = False) -> str:
    """The UPDATE (an upsert) that sets ``columns`` of a URL's row, bound with
    ``_bound`` values and the URL last (``timed``: USING TIMESTAMP, bound first, in
    microseconds)."""
    sets = []
    for column in columns:
        kind = COLUMNS[column]
        if kind.startswith("map"):
            sets.append(f"{column} = {column} + ?")
        elif kind in _PACKED:
            sets.append(f"{column} = blobAs{kind.capitalize()}(?)")
        else:
            sets.append(f"{column} = ?")
    timestamp = " USING TIMESTAMP ?" if timed else ""
    return f"UPDATE {{ks}}.urls{timestamp} SET {', '.join(sets)} WHERE url = ?"


def _select(columns: tuple[str, ...], where: str = "url = ?") -> str:
    return f"SELECT {', '.join(columns)} FROM {{ks}}.urls WHERE {where}"


def _bound(column: str, value):
    """``value`` of ``column`` as its ``_update`` statement takes it. None is an empty
    value, never a null: '' for text, b"" for the types of _PACKED (else their
    big-endian bytes). A map without fields is UNSET (the stored map left as it is)."""
    kind = COLUMNS[column]
    if kind == "text":
        return "" if value is None else value
    if kind in _PACKED:
        if value is None:
            return b""
        return struct.pack(_PACKED[kind], round(value * 1000) if kind == "timestamp" else value)
    if kind.startswith("map"):
        return dict(value) if value else UNSET_VALUE
    return value


# the columns a record's read selects, in this order (its rows read as plain tuples)
RECORD_READ = ("url", *READ_COLUMNS)


def _read(row, names: tuple[str, ...] | None = None) -> dict:
    """A row read from the urls table (any of its columns: ``names``, else a named
    tuple's own) as a dict: an empty value is None (text as much as numbers), a time is
    UNIX seconds."""
    out = {}
    for column, value in zip(names or row._fields, row, strict=True):
        kind = COLUMNS.get(column, "text")  # url (or token(url), a number)
        if kind == "text" and value == "":
            value = None
        elif kind == "timestamp":
            value = _seconds(value)
        out[column] = value
    return out


def _record(row) -> dict:
    """A urls row of RECORD_READ's columns (a plain tuple) as ``get`` gives it (UrlStore's
    record)."""
    record = _read(row, RECORD_READ)
    record["redirect_chain"] = list(record["redirect_chain"] or [])
    record["simhash"] = unsigned64(record["simhash"])
    record["metadata"] = dict(record["metadata"] or {})
    record["archive"] = pop_pointer(record)
    record["outlinks"] = [{"url": u, "text": t, "nofollow": bool(n)} for u, t, n in record["outlinks"] or []]
    return record


def _seconds(value) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


class _Routed(BoundStatement):
    """A bound read whose routing key is given: the driver computes none for ``WHERE url
    IN ?``, and token-aware routing needs one to send the read to the URLs' replicas."""

    routing_key = None  # (a plain attribute in place of BoundStatement's property)
