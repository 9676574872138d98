"""The Cassandra UrlStore's due index (``urls_due`` and ``urls_due_hours`` in schema.cql):
the recrawl finds the URLs due by a time through it, so that a round reads what is due
and not the whole urls table.

- Each write of a URL's due time (a fetch's record, a reschedule) writes an index row
  beside it, in the partition of the due time's hour (whole hours since 1970) and bucket
  (crc32 of the URL, DUE_BUCKETS of them: an hour's URLs spread over the ring), clustered by
  (due time in ms, URL); and the hour in ``urls_due_hours`` (written once an hour by each
  store).
- An index row is never updated: the record is the truth. ``due`` reads the rows of the
  hours listed, oldest first, then the records of their URLs (``url IN ?``), and keeps a
  URL whose due time is still its row's; a row whose URL's due time has moved since is
  stale, and skipped.
- An hour that is over and whose rows one call of ``due`` found all stale is deleted: its
  partitions and its row in ``urls_due_hours`` (a tombstone a partition, never read again:
  the hour is no longer listed); unless some read as live again at the store's sure level
  (a replica that missed a record's write answers its older due time at LOCAL_ONE).
- The index is whole once ``urls_due_hours`` holds the hour INDEXED: written by the first
  store to start on an empty urls table, or by ``index_all`` (one scan of the urls table,
  ``scrapy urlstore index-due``) for records written before the index existed. Until then
  ``due`` scans the urls table as a store without the index did, and says so once.
"""

from __future__ import annotations

import time
import zlib

from crawler.urlstore.cassandra_rows import _seconds
from crawler.urlstore.record import DUE_FIELDS, url_in_host

MIN_TOKEN = -(2**63)  # Murmur3Partitioner's smallest token
SCAN_ROWS = 1000  # urls rows index_all reads a page
DUE_BUCKETS = 16  # partitions an hour of due URLs is spread over
HOURS_AT_ONCE = 8  # hours whose partitions one read of ``due`` asks for together, at most
HOUR_MS = 3_600_000
HOURS_SHARD = 0  # urls_due_hours' one partition
INDEXED = -1  # the hour in urls_due_hours that says every due time is indexed (no real hour: none is before 1970)
DROP_AFTER_MS = HOUR_MS  # an hour's rows, all stale, are dropped this long after it ends (a
# late write of a due time in that hour, by a clock behind, still lands after the drop)

_ROW = "INSERT INTO {ks}.urls_due (due_hour, bucket, due_ms, url) VALUES (?, ?, ?, ?)"
_HOUR = "INSERT INTO {ks}.urls_due_hours (shard, due_hour) VALUES (?, ?)"
_HOURS = "SELECT due_hour FROM {ks}.urls_due_hours WHERE shard = ? AND due_hour >= ? AND due_hour <= ?"
_PAGE = (
    "SELECT due_ms, url FROM {ks}.urls_due WHERE due_hour = ? AND bucket = ? "
    "AND (due_ms, url) > (?, ?) AND due_ms <= ? LIMIT ?"
)
_DROP_HOUR = "DELETE FROM {ks}.urls_due_hours WHERE shard = ? AND due_hour = ?"
_DROP_PARTITION = "DELETE FROM {ks}.urls_due WHERE due_hour = ? AND bucket = ?"


def due_ms(seconds: float) -> int:
    """A due time as the index keeps it (ms, as the record's timestamp column)."""
    return round(seconds * 1000)


class DueIndex:
    """The index of a CassandraUrlStore, ``store``: its statements prepared by the store's
    ``prepare`` (which makes them idempotent), run through the store's ``_read_all`` (its
    read profile; ``index_all``'s writes with its write profile)."""

    def __init__(self, store, prepare):
        self.store = store
        self._row = prepare(_ROW)
        self._hour = prepare(_HOUR)
        self._hours = prepare(_HOURS)
        self._page = prepare(_PAGE)
        self._drop_hour = prepare(_DROP_HOUR)
        self._drop_partition = prepare(_DROP_PARTITION)
        self._noted: set[int] = set()  # hours this store has written to urls_due_hours
        self.whole = False  # every due time of the store is in the index (see ready)

    def ready(self) -> None:
        """Note whether the index is whole: it says so (INDEXED), or the urls table is
        empty and it now says so. Read once, at the store's start."""
        if not self._read([(self._hours, (HOURS_SHARD, INDEXED, INDEXED))])[0]:
            if list(self._read([(self.store._any_stmt, None)])[0]):
                return
            # (at the read consistency, as the look-up: a store starts when its cluster
            # answers reads, whether or not it takes writes at the write consistency now)
            self._read([(self._hour, (HOURS_SHARD, INDEXED))])
        self.whole = True

    def index_all(self, progress=None) -> int:
        """Index every record's due time (records written before the index), by one scan
        of the urls table; then say the index is whole. The due times indexed."""
        token, indexed = MIN_TOKEN, 0
        while True:
            rows = list(self._read([(self.store._scan_stmt, (token, SCAN_ROWS))])[0])
            now, due = time.time(), [row for row in rows if row.next_fetch_at is not None]
            self._write([s for row in due for s in self.statements(row.url, _seconds(row.next_fetch_at), now)])
            indexed += len(due)
            if progress is not None:
                progress(indexed)
            if len(rows) < SCAN_ROWS:
                break
            token = rows[-1][0]
        self._write([(self._hour, (HOURS_SHARD, INDEXED))])
        self.whole = True
        return indexed

    def statements(self, url: str, next_fetch_at: float | None, now: float) -> list[tuple]:
        """(statement, parameters) that index ``url`` (normalized) as due at ``next_fetch_at``
        (none when it has no due time)."""
        if next_fetch_at is None:
            return []
        ms = due_ms(next_fetch_at)
        hour = ms // HOUR_MS
        out = [(self._row, (hour, zlib.crc32(url.encode()) % DUE_BUCKETS, ms, url))]
        # the hour listed: once an hour a store, and each time for an hour that is over
        # (it may have been dropped meanwhile)
        if hour not in self._noted or hour < due_ms(now) // HOUR_MS:
            self._noted.add(hour)
            out.append((self._hour, (HOURS_SHARD, hour)))
        return out

    def write_failed(self) -> None:
        """A write of the store failed, an hour's listing with it perhaps: every hour is
        listed again at the next write into it (``statements``), else the rows of an hour
        first listed by a failed write would never be read."""
        self._noted.clear()

    def due(self, before: float, limit: int, after: tuple | None, host: str | None, now: float):
        """``store.due`` by the index (see the module's docstring): the rows, and the
        cursor (hour, due ms, URL) of the last row read, or None when the index holds no
        more due by ``before``. A page may hold fewer than ``limit`` rows (some were
        stale) and still have a cursor. Up to HOURS_AT_ONCE hours are read at a time."""
        last = due_ms(before)
        # (a cursor of the scan, given before the index became whole: the pass starts over)
        start_hour, start_ms, start_url = after if after and len(after) == 3 else (0, -1, "")
        listed = self._read([(self._hours, (HOURS_SHARD, start_hour, last // HOUR_MS))])[0]
        hours = [row.due_hour for row in listed]
        cursor = {start_hour: (start_ms, start_url)} if start_ms >= 0 else {}
        over = due_ms(now) - DROP_AFTER_MS  # an hour that ended before this may be dropped
        out: list[dict] = []
        i, size = 0, 1
        while i < len(hours):
            group, want = hours[i : i + size], limit - len(out)
            rows = self._rows(group, cursor, last, want)
            page = rows[:want]
            live = self._live(page, host)
            out += live
            more = len(rows) > want  # the next call goes on after the last row read
            read_whole = [h for h in group if h not in cursor and (not more or h < page[-1][0] // HOUR_MS)]
            living = {due_ms(r["next_fetch_at"]) // HOUR_MS for r in live}
            for hour in read_whole:
                if (hour + 1) * HOUR_MS <= over and host is None and hour not in living:  # every row stale
                    out += self._drop_if_stale(hour, [row for row in page if row[0] // HOUR_MS == hour])
            if more:
                return out, (page[-1][0] // HOUR_MS, *page[-1])
            i += len(group)
            if len(out) >= limit // 2 and i < len(hours):  # a page's worth: the next call
                return out, (hours[i], -1, "")
            # hours that held few rows: more of them at once next (each partition read
            # gives up to ``want + 1`` rows, and one hour dense with rows is read alone)
            size = min(size * 2, HOURS_AT_ONCE) if len(rows) <= want // 4 else 1
        return out, None

    def _rows(self, hours: list[int], cursor: dict, last: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit + 1`` rows of ``hours`` (after ``cursor[hour]`` in an hour that has
        one) due by ``last`` (ms), in order: each partition's first ``limit + 1``, read at
        once, merged."""
        reads = [
            (self._page, (hour, b, *cursor.get(hour, (-1, "")), last, limit + 1))
            for hour in hours
            for b in range(DUE_BUCKETS)
        ]
        rows = sorted((r.due_ms, r.url) for result in self._read(reads) for r in result)
        return rows[: limit + 1]

    def _drop_if_stale(self, hour: int, rows: list[tuple[int, str]]) -> list[dict]:
        """Drop ``hour``, whose ``rows`` all read as stale at the read level, unless some
        are live when read again at the store's sure level (a replica that missed a record's
        write reads as its older due time, or as none): those, as ``due`` gives them."""
        live = self._live(rows, None, self.store.sure_reads)
        if not live:
            self._drop(hour)
        return live

    def _live(self, rows: list[tuple[int, str]], host: str | None, profile=None) -> list[dict]:
        """The rows whose URL's record still has their due time (and is ``host``'s), as
        ``due`` gives them; the records read with the read profile (or ``profile``)."""
        wanted = [url for _, url in rows if not host or url_in_host(url, host)]
        records = {r["url"]: r for r in self.store._due_records(wanted, profile)} if wanted else {}
        out = []
        for ms, url in rows:
            record = records.get(url)
            if record is not None and record["next_fetch_at"] is not None and due_ms(record["next_fetch_at"]) == ms:
                out.append({name: record[name] for name in DUE_FIELDS})
        return out

    def _drop(self, hour: int) -> None:
        # (at the read consistency, as the pass that found the hour stale: a pass works
        # whenever the cluster answers reads; a drop lost is made by a later pass)
        self._read([(self._drop_partition, (hour, b)) for b in range(DUE_BUCKETS)])
        self._read([(self._drop_hour, (HOURS_SHARD, hour))])
        self._noted.discard(hour)

    def _read(self, statements: list[tuple]) -> list:
        return self.store._read_all(statements)

    def _write(self, statements: list[tuple]) -> list:
        return self.store._read_all(statements, self.store.writes)
