"""The Cassandra UrlStore's reads (a mixin of CassandraUrlStore): a row, the rows of many
URLs (``WHERE url IN ?``, READ_KEYS at a time, each read sent to its URLs' replica set),
the recrawl's due scan over token ranges, the fetch policy's ``last_fetched``, a URL's
inlinks over its buckets. Reads are plain calls on the caller's thread; scrapy serve's
look-ups run on its asyncio loop, those asked on one pass of the loop read together
(``_Together``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque

from cassandra.concurrent import execute_concurrent

from crawler.urlstore.cassandra_due import MIN_TOKEN
from crawler.urlstore.cassandra_rows import (
    _read,
    _record,
    _Routed,
)
from crawler.urlstore.record import (
    DUE_FIELDS,
    answered,
    url_in_host,
)

logger = logging.getLogger(__name__)

SCAN_PAGES = 4  # pages of ``limit`` rows one ``due`` call reads at most (a token-range scan)
READ_KEYS = 25  # URLs one read asks for at most (WHERE url IN ...), all of one replica set: a read
# of 100 keys took 60 ms on one coordinator, four of 25 side by side 15 ms
READS_IN_FLIGHT = 2  # record reads of scrapy serve's loop waiting for their answers at most; more wait (_Together)


class CassandraReads:
    _said_unindexed = False  # the warning that the due index is not whole was logged

    def _row(self, url: str) -> dict | None:
        row = self.session.execute(self._select_stmt, (url,), execution_profile=self.record_reads).one()
        return None if row is None else _record(row)

    def _rows(self, urls: list[str]) -> dict[str, dict]:
        """Every URL's row, read at once (``_read_keys``)."""
        return {row[0]: _record(row) for row in self._read_keys(self._select_in_stmt, urls, self.record_reads)}

    def _read_keys(self, statement, urls: list[str], profile=None) -> list:
        """The rows of ``urls`` by ``statement`` (``... WHERE url IN ?``), all read at once
        (``_key_reads``), with the read profile (or ``profile``)."""
        return [row for result in self._read_all(self._key_reads(statement, urls), profile) for row in result]

    def _key_reads(self, statement, urls: list[str]) -> list[tuple]:
        """The reads of ``urls`` by ``statement``: one of at most READ_KEYS URLs per replica
        set, each sent to those replicas (the token map: no coordinator fans out to other
        nodes)."""
        reads = []
        key = lambda url: self._select_stmt.bind((url,)).routing_key  # noqa: E731
        for group in self._replica_groups(urls, key).values():
            for start in range(0, len(group), READ_KEYS):
                chunk = group[start : start + READ_KEYS]
                bound = _Routed(statement).bind((chunk,))
                bound.routing_key = key(chunk[0])  # to its replicas
                reads.append((bound, None))
        return reads

    # -- on an asyncio loop: the driver's own I/O, its answers handed to the loop

    reads_async = True

    async def _aread(self, urls: list[str]) -> dict[str, dict]:
        loop = asyncio.get_running_loop()
        together = self._together
        if together is None or together.loop is not loop:
            together = self._together = _Together(loop, self._read_rows)
        return {url: _record(row) for url, row in (await together.ask(urls)).items()}

    async def _read_rows(self, urls: list[str]) -> list:
        """The rows of ``urls`` (one read for one URL, else ``_key_reads``), on the loop."""
        if len(urls) == 1:
            return await self._answer(self._select_stmt, (urls[0],))
        reads = self._key_reads(self._select_in_stmt, urls)
        return [row for result in await asyncio.gather(*(self._answer(*r) for r in reads)) for row in result]

    _together: _Together | None = None
    _mailbox: _Mailbox | None = None

    def _answer(self, statement, parameters) -> asyncio.Future:
        """The rows of one record read, as a future of the running loop: the driver sends
        it from its own I/O thread, whose callback hands the answer to the loop (through
        the loop's ``_Mailbox``)."""
        loop = asyncio.get_running_loop()
        mailbox = self._mailbox
        if mailbox is None or mailbox.loop is not loop:
            mailbox = self._mailbox = _Mailbox(loop)
        future = loop.create_future()
        response = self.session.execute_async(statement, parameters, execution_profile=self.record_reads)
        response.add_callbacks(
            lambda rows: mailbox.put(future, True, rows),
            lambda exc: mailbox.put(future, False, exc),
        )
        return future

    def _read_all(self, statements: list[tuple], profile=None) -> list:
        """The result of each (statement, parameters), all sent at once (at most
        max_in_flight at a time) with the read profile (or ``profile``); the first error
        is raised."""
        results = execute_concurrent(
            self.session, statements, concurrency=self.max_in_flight, execution_profile=profile or self.reads
        )
        return [r.result_or_exc for r in results]

    def due(
        self,
        before: float,
        limit: int = 1000,
        after: tuple | None = None,
        host: str | None = None,
        fetched_before: float | None = None,
    ) -> tuple[list[dict], tuple | None]:
        """By due time, through the due index (cassandra_due.py: a round reads what is due,
        and the rows of URLs whose due time moved since); with ``fetched_before``, by a
        bounded token-range scan of the urls table: at most SCAN_PAGES pages of ``limit``
        rows per call, filtered here, until ``limit`` rows are found. Either may give a
        page with fewer rows, even none, and a cursor (more to read)."""
        if fetched_before is None and self.due_index.whole:
            return self.due_index.due(before, limit, after, host, time.time())
        if fetched_before is None and not self._said_unindexed:
            self._said_unindexed = True
            logger.warning(
                "The UrlStore's due index is not whole (records written before it): the recrawl scans the "
                "urls table until `scrapy urlstore index-due` has run once"
            )
        token = after[0] if after else MIN_TOKEN
        out: list[dict] = []
        for _ in range(SCAN_PAGES):
            rows = list(self.session.execute(self._scan_stmt, (token, limit), execution_profile=self.reads))
            for row in rows:
                token = row[0]
                found = _read(row)
                if fetched_before is None:
                    if found["next_fetch_at"] is None or found["next_fetch_at"] > before:
                        continue
                elif found["fetched_at"] is None or found["fetched_at"] > fetched_before:
                    continue
                if host and not url_in_host(found["url"], host):
                    continue
                out.append({name: found[name] for name in DUE_FIELDS})
                if len(out) == limit:  # the rest of this page is read again by the next call
                    return out, (token,)
            if len(rows) < limit:
                return out, None
        return out, (token,)

    def _due_records(self, urls: list[str]) -> list[dict]:
        """The due fields of these URLs' records (``_read_keys``), those that have one."""
        return [_read(row) for row in self._read_keys(self._due_in_stmt, urls)]

    def last_fetched(self, urls: list[str], archived: bool = False) -> dict[str, float]:
        """The URLs' rows read at once (``_read_keys``): one round trip's wait."""
        given: dict[str, list[str]] = {}  # normalized -> the URLs asked
        for u in urls:
            given.setdefault(self.normalize(u), []).append(u)
        out = {}
        for row in self._read_keys(self._fetched_in_stmt, list(given)):
            found = _read(row)
            if (
                answered(found["fate"], found["status"], found["archive_key"], archived)
                and found["fetched_at"] is not None
            ):
                out.update(dict.fromkeys(given[found["url"]], found["fetched_at"]))
        return out

    def _inlinks(self, url: str, limit: int, after: str | None = None) -> list[dict]:
        # each bucket is ordered by source URL: the first ``limit`` after the cursor of
        # every bucket, read at once, merged
        if after is None:
            reads = [(self._inlinks_stmt, (url, bucket, limit)) for bucket in range(self.inlink_buckets)]
        else:
            reads = [(self._inlinks_after_stmt, (url, bucket, after, limit)) for bucket in range(self.inlink_buckets)]
        out = [
            {"url": r.source_url, "text": r.anchor_text, "nofollow": bool(r.nofollow)}
            for rows in self._read_all(reads)
            for r in rows
        ]
        out.sort(key=lambda link: link["url"])
        return out[:limit]


class _Together:
    """The record reads asked on a pass of an asyncio loop, sent as one read (``WHERE url
    IN``) at the end of the pass, and while READS_IN_FLIGHT such reads wait for their
    answers, held until one comes back: under load each read carries more URLs, so that
    the driver's and the node's cost of a request is shared by the URLs it carries, where
    one request a look-up saturated the two cores at a few hundred look-ups a second. A
    look-up waits at most one read's answer more; alone, it is sent at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop, read):
        self.loop = loop
        self._read = read  # async (urls) -> rows, each a tuple whose first field is its url
        self._asked: list[tuple[list[str], asyncio.Future]] = []
        self._in_flight = 0
        self._due = False  # a send is scheduled for the end of this pass
        self._reads: set[asyncio.Task] = set()  # (held: the loop keeps only weak references)

    def ask(self, urls: list[str]) -> asyncio.Future:
        """A future of {url: row} of ``urls`` that have one."""
        future = self.loop.create_future()
        self._asked.append((urls, future))
        self._schedule()
        return future

    def _schedule(self) -> None:
        if not self._due and self._asked and self._in_flight < READS_IN_FLIGHT:
            self._due = True
            self.loop.call_soon(self._send)

    def _send(self) -> None:
        self._due = False
        asked = [(urls, future) for urls, future in self._asked if not future.done()]  # not timed out
        self._asked = []
        if asked:
            self._in_flight += 1
            read = self.loop.create_task(self._answer(asked))
            self._reads.add(read)
            read.add_done_callback(self._reads.discard)

    async def _answer(self, asked: list[tuple[list[str], asyncio.Future]]) -> None:
        try:
            rows = await self._read(list(dict.fromkeys(url for urls, _ in asked for url in urls)))
        except Exception as exc:  # each look-up fails with it, as its own read would have
            for _, future in asked:
                if not future.done():
                    future.set_exception(exc)
            return
        finally:
            self._in_flight -= 1
            self._schedule()
        found = {row[0]: row for row in rows}
        for urls, future in asked:
            if not future.done():
                future.set_result({url: found[url] for url in urls if url in found})


class _Mailbox:
    """Answers handed from the driver's I/O thread to an asyncio loop: the loop is woken
    (``call_soon_threadsafe``: a write to its self-pipe, a pass of its selector) once for
    all the answers that came in before it ran, not once an answer."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._lock = threading.Lock()
        self._answers: deque = deque()  # (future, ok, rows or exception)
        self._woken = False  # a wake-up is on its way: later answers go with it

    def put(self, future: asyncio.Future, ok: bool, value) -> None:
        """On the driver's thread."""
        with self._lock:
            self._answers.append((future, ok, value))
            if self._woken:
                return
            self._woken = True
        try:
            self.loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: no one waits for these answers
            pass

    def _deliver(self) -> None:
        """On the loop."""
        with self._lock:
            answers, self._answers = self._answers, deque()
            self._woken = False
        for future, ok, value in answers:
            if future.done():  # cancelled: the request timed out
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
