"""The spill store's chunks (decision 0055): a host's queued URLs beyond its window, written
out of Redis in chunks of up to FRONTIER_HOST_WINDOW entries (a window given back: its
size), each under (crawl, host, id) and read by that exact key, then deleted once loaded.

A chunk's body is its entries (as the inbox or the host's buffer held them: a payload, one
of another priority level as ``\\x1c<level>\\x1f<payload>``, or ``\\x1e<score>\\x1f<payload>``
for a ranked queue; a window given back, EVICT, as its back queue held them, then its ranked
queue's) after their count and lengths, compressed with zlib when it is not small (pack).
``crawl`` is the frontier's key prefix (a crawl's shard has its own).

``SqliteChunks`` keeps them in a file beside the embedded Redis (CRAWL_DIR); Cassandra's
are in crawler/urlstore/cassandra_chunks.py. Both have ``write``, ``read``, ``delete``,
``clear``, ``release`` (what the calling thread holds) and ``close``.
"""

from __future__ import annotations

import functools
import os
import socket
import sqlite3
import struct
import threading
import zlib

_LEN = struct.Struct(">I")
_ONE = struct.Struct(">II")  # a chunk of one entry: its count (1) and its length
LEVEL = 1  # zlib's fastest: URLs of one host compress to about a third already
# a body smaller than this is stored as it is: zlib's set-up costs some 10 us a call, more
# than the writing of a few URLs saves (most chunks of a crawl of many small hosts)
COMPRESS_FROM = 1024
# a 4 KB window and a small hash table: a chunk is a few KB, and zlib's defaults (32 KB, 256 KB
# of state to set up) cost several times as much a call for the same size
WINDOW_BITS, MEM_LEVEL = 12, 3
RAW, ZLIB = b"\x01", b"\x02"  # a body's first byte (a body of the first layout: zlib's 0x78)


def _laid_out(entries: list[bytes]) -> bytes:
    """The count of the entries, their lengths (4 bytes each, big-endian) and the entries one
    after another: what ``pack`` compresses, and LOAD takes (``uncompressed``)."""
    n = len(entries)
    return struct.pack(f">I{n}I", n, *map(len, entries)) + b"".join(entries)


def pack(entries: list[bytes]) -> bytes:
    """A chunk's body: RAW or ZLIB, then (compressed with ZLIB) the entries ``_laid_out``."""
    # one entry, small (most chunks of a crawl of many small hosts): _laid_out's, sooner
    if len(entries) == 1 and len(entries[0]) < COMPRESS_FROM - _ONE.size:
        return RAW + _ONE.pack(1, len(entries[0])) + entries[0]
    raw = _laid_out(entries)
    if len(raw) < COMPRESS_FROM:
        return RAW + raw
    z = zlib.compressobj(LEVEL, zlib.DEFLATED, WINDOW_BITS, MEM_LEVEL)
    return ZLIB + z.compress(raw) + z.flush()


def unpack(body: bytes) -> list[bytes]:
    """A chunk's entries (a body of the first layout too: zlib, each entry preceded by its
    length)."""
    head = body[:1]
    if head == RAW or head == ZLIB:
        raw = memoryview(body)[1:] if head == RAW else zlib.decompress(memoryview(body)[1:])
        (n,) = _LEN.unpack_from(raw, 0)
        at = 4 + 4 * n
        out = []
        for size in struct.unpack_from(f">{n}I", raw, 4):
            out.append(bytes(raw[at : at + size]))
            at += size
        return out
    raw = zlib.decompress(body)
    out, at = [], 0
    while at < len(raw):
        (size,) = _LEN.unpack_from(raw, at)
        out.append(raw[at + 4 : at + 4 + size])
        at += 4 + size
    return out


def uncompressed(body: bytes) -> bytes:
    """A chunk's entries as LOAD takes them, from its body: what ``pack`` compresses (their
    count, their lengths, the entries), without unpacking each entry."""
    head = body[:1]
    if head == RAW:
        return body[1:]
    if head == ZLIB:
        return zlib.decompress(memoryview(body)[1:])
    return _laid_out(unpack(body))  # (a body of the first layout)


def count_of(data: bytes) -> int:
    """The entries of an ``uncompressed`` chunk."""
    return _LEN.unpack_from(data, 0)[0]


EMPTY = _laid_out([])  # the ``uncompressed`` form of a chunk of no entries


# chunks read by one statement: a compound SELECT of look-ups by the key (SQLite takes 500
# terms at most)
READ_TERMS = 250


@functools.lru_cache(maxsize=8)
def _look_ups(n: int) -> str:
    """A statement that reads ``n`` chunks by their key: (its place, its body) each found."""
    return " UNION ALL ".join(["SELECT ?, body FROM spill_chunks WHERE crawl = ? AND id = ? AND host = ?"] * n)


class SqliteChunks:
    """Chunks in an SQLite file (WAL: the workers of one machine share it)."""

    def __init__(self, path: str):
        self.path = path
        # what the crawl records of its spill store (Spill.bind): a file is this machine's
        self.where = f"the SQLite file {os.path.abspath(path)} on {socket.gethostname()}"
        self._local = threading.local()
        with self._db() as db:
            # keyed by (crawl, id, host), the body in the key's B-tree (WITHOUT ROWID): a
            # crawl's chunk ids rise (chunk:seq), so a round's chunks are appended at the
            # tree's end, a few pages, and a chunk is read with one descent. Keyed by (crawl,
            # host, id), each chunk of a round went to another host's place in the key's
            # index (measured with 380,000 chunks of 150 bytes over 100,000 hosts: 31 us a
            # chunk written against 4, 54 deleted against 35). The host ends the key: the
            # shards of a sharded crawl share a prefix, each with its own chunk:seq, and a
            # host lives on one of them.
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                "CREATE TABLE IF NOT EXISTS spill_chunks (crawl TEXT, id INTEGER, host TEXT, body BLOB,"
                " PRIMARY KEY (crawl, id, host)) WITHOUT ROWID"
            )
            # a file of an earlier version: its chunks move over once, whoever opens it first
            if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunks'").fetchone():
                db.execute("INSERT OR REPLACE INTO spill_chunks SELECT crawl, id, host, body FROM chunks")
                db.execute("DROP TABLE chunks")

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    def write(self, crawl: str, chunks: list[tuple[str, int, bytes]]) -> None:
        """Write chunks, (host, id, body) each; one written again replaces itself."""
        db = self._db()
        with db:
            db.execute("BEGIN")
            db.executemany(
                "INSERT OR REPLACE INTO spill_chunks VALUES (?, ?, ?, ?)", [(crawl, i, h, b) for h, i, b in chunks]
            )

    def read(self, crawl: str, keys: list[tuple[str, int]]) -> list[bytes | None]:
        """The bodies of chunks, (host, id) each, in that order (None: no such chunk):
        READ_TERMS a statement, each a look-up by the key (a statement a chunk cost some
        7 us a chunk against 5: most chunks of a crawl of many small hosts hold a URL or two)."""
        db = self._db()
        out: list[bytes | None] = [None] * len(keys)
        for start in range(0, len(keys), READ_TERMS):
            part = keys[start : start + READ_TERMS]
            args: list = []
            for n, (host, chunk) in enumerate(part, start):
                args += (n, crawl, chunk, host)
            for n, body in db.execute(_look_ups(len(part)), args):
                out[n] = body
        return out

    def delete(self, crawl: str, keys: list[tuple[str, int]]) -> None:
        """Delete chunks, (host, id) each."""
        db = self._db()
        with db:
            db.execute("BEGIN")
            db.executemany(
                "DELETE FROM spill_chunks WHERE crawl = ? AND id = ? AND host = ?", [(crawl, i, h) for h, i in keys]
            )

    def clear(self, crawl: str, keys: list[tuple[str, int]]) -> int:
        """Delete every chunk of the crawl (``keys``: those its queues list; an SQLite file
        finds the others too). Returns how many there were."""
        db = self._db()
        with db:
            return db.execute("DELETE FROM spill_chunks WHERE crawl = ?", (crawl,)).rowcount

    def size(self, crawl: str) -> tuple[int, int]:
        """(chunks, bytes of their bodies) of the crawl."""
        row = self._db().execute(
            "SELECT count(*), coalesce(sum(length(body)), 0) FROM spill_chunks WHERE crawl = ?", (crawl,)
        )
        return tuple(row.fetchone())

    def close(self) -> None:
        """Close the calling thread's connection (each thread has its own)."""
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    def release(self) -> None:
        """What a thread that is done with the store holds let go: its connection."""
        self.close()
