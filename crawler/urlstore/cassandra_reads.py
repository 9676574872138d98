"""The Cassandra UrlStore's reads (a mixin of CassandraUrlStore): a row, the rows of many
URLs (``WHERE url IN ?``, READ_KEYS at a time, each read sent to its URLs' replica set),
the recrawl's due scan over token ranges, the fetch policy's ``last_fetched``, a URL's
inlinks over its buckets. Reads are plain calls on the caller's thread; scrapy serve's
look-ups run on its asyncio loop, those asked on one pass of the loop read together
(``_Together``).
"""

from __future__ import annotations

import asyncio
import functools
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
    put_again,
    url_in_host,
)

logger = logging.getLogger(__name__)

SCAN_PAGES = 4  # pages of ``limit`` rows one ``due`` call reads at most (a token-range scan)
READ_KEYS = 25  # URLs one read asks for at most (WHERE url IN ...), all of one replica set: a read
# of 100 keys took 60 ms on one coordinator, four of 25 side by side 15 ms
READS_IN_FLIGHT = 2  # record reads of scrapy serve's loop waiting for their answers at most; more wait (_Together)
SLOW_READ = 0.05  # seconds a send holds its place among those at most (a node that does not answer holds none)
MAX_KEY = 65_535  # bytes of a partition key at most


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
        return [(bound, None) for _, bound in self._key_groups(statement, urls)]

    def _key_groups(self, statement, urls: list[str]) -> list[tuple[list[str], _Routed]]:
        """``_key_reads``, each with its URLs."""
        reads = []
        key = lambda url: self._select_stmt.bind((url,)).routing_key  # noqa: E731
        for group in self._replica_groups(urls, key).values():
            for start in range(0, len(group), READ_KEYS):
                chunk = group[start : start + READ_KEYS]
                bound = _Routed(statement).bind((chunk,))
                bound.routing_key = key(chunk[0])  # to its replicas
                reads.append((chunk, bound))
        return reads

    # -- on an asyncio loop: the driver's own I/O, its answers handed to the loop

    reads_async = True

    async def _aread(self, urls: list[str]) -> dict[str, dict]:
        loop = asyncio.get_running_loop()
        together = self._together
        if together is None or together.loop is not loop:
            together = self._together = _Together(loop, self._record_reads)
        return {url: _record(row) for url, row in (await together.ask(urls)).items()}

    def _record_reads(self, urls: list[str]) -> list[tuple[list[str], asyncio.Future]]:
        """The reads of ``urls``' rows, sent (one read for one URL, else ``_key_reads``'),
        each with its URLs and a future of its rows on the running loop."""
        if len(urls) == 1:
            return [(urls, self._answer(self._select_stmt, (urls[0],)))]
        return [(chunk, self._answer(bound, None)) for chunk, bound in self._key_groups(self._select_in_stmt, urls)]

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
        put_since: float | None = None,
    ) -> tuple[list[dict], tuple | None]:
        """By due time, through the due index (cassandra_due.py: a round reads what is due,
        and the rows of URLs whose due time moved since); with ``fetched_before`` (and
        ``put_since``, record.put_again), by a
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
                elif not put_again(found, put_since):
                    continue
                if host and not url_in_host(found["url"], host):
                    continue
                out.append({name: found[name] for name in DUE_FIELDS})
                if len(out) == limit:  # the rest of this page is read again by the next call
                    return out, (token,)
            if len(rows) < limit:
                return out, None
        return out, (token,)

    def _due_records(self, urls: list[str], profile=None) -> list[dict]:
        """The due fields of these URLs' records (``_read_keys``, with ``profile``), those
        that have one."""
        return [_read(row) for row in self._read_keys(self._due_in_stmt, urls, profile)]

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
    """The record look-ups asked on a pass of an asyncio loop, read together at the end of
    the pass (``WHERE url IN``, by replica set and READ_KEYS at a time), and while
    READS_IN_FLIGHT such sends wait for their answers, held until one comes back: under
    load each read carries more URLs, so that the driver's and the node's cost of a request
    is shared by the URLs it carries, where one request a look-up saturated the two cores
    at a few hundred look-ups a second. Alone, a look-up is sent at once.

    A look-up is answered once the reads of its own URLs are (a slow or failing replica
    set holds or fails only the look-ups with a URL there), and a send holds its place
    among the READS_IN_FLIGHT for SLOW_READ at most: the look-ups after it are not held
    behind a node that does not answer. A URL too long to be a key is not read: it is not
    stored."""

    def __init__(self, loop: asyncio.AbstractEventLoop, reads):
        self.loop = loop
        self._reads = reads  # (urls) -> [(its urls, a future of their rows)], a row's first field its url
        self._asked: list[tuple[list[str], asyncio.Future]] = []
        self._in_flight = 0
        self._due = False  # a send is scheduled for the end of this pass

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
        if not asked:
            return
        urls = [url for url in dict.fromkeys(url for urls, _ in asked for url in urls) if _a_key(url)]
        try:
            reads = self._reads(urls) if urls else []
        except Exception as exc:  # (the driver refused to send: no node, a closed session)
            for _, future in asked:
                if not future.done():
                    future.set_exception(exc)
            return
        send = _Send(asked, reads)
        send.settle()  # (look-ups with nothing to read)
        if not reads:
            return
        self._in_flight += 1
        send.timer = self.loop.call_later(SLOW_READ, self._release, send)
        for at, (_, answer) in enumerate(reads):
            answer.add_done_callback(functools.partial(self._answered, send, at))

    def _answered(self, send: _Send, at: int, answer: asyncio.Future) -> None:
        send.settle(at, answer)
        if send.left == 0:
            self._release(send)

    def _release(self, send: _Send) -> None:
        """The send no longer holds a place among the READS_IN_FLIGHT (answered, or slower
        than SLOW_READ)."""
        send.timer.cancel()
        if send.holds:
            send.holds = False
            self._in_flight -= 1
            self._schedule()


class _Send:
    """One send of ``_Together``: its look-ups, its reads, what came back."""

    def __init__(self, asked: list[tuple[list[str], asyncio.Future]], reads: list[tuple[list[str], asyncio.Future]]):
        self.asked = asked
        where = {url: at for at, (urls, _) in enumerate(reads) for url in urls}
        self.reads_of = [frozenset(where[url] for url in urls if url in where) for urls, _ in asked]
        self.waits = [set(of) for of in self.reads_of]  # each look-up's reads not answered yet
        self.left = len(reads)
        self.found: dict[str, tuple] = {}
        self.failed: dict[int, BaseException] = {}
        self.holds = True  # a place among the READS_IN_FLIGHT
        self.timer: asyncio.TimerHandle | None = None

    def settle(self, at: int | None = None, answer: asyncio.Future | None = None) -> None:
        """Read ``at`` answered: its rows kept, and each look-up whose reads are all in
        given its rows, or the failure of one of them (without ``at``: the look-ups that
        have no read)."""
        if answer is not None:
            self.left -= 1
            if answer.cancelled():
                self.failed[at] = asyncio.CancelledError()
            elif answer.exception() is not None:
                self.failed[at] = answer.exception()
            else:
                self.found.update((row[0], row) for row in answer.result())
        for (urls, future), waits, reads in zip(self.asked, self.waits, self.reads_of, strict=True):
            if at is not None:
                if at not in waits:
                    continue
                waits.discard(at)
            if waits or future.done():
                continue
            failure = next((self.failed[r] for r in reads if r in self.failed), None)
            if failure is not None:
                future.set_exception(failure)
            else:
                future.set_result({url: self.found[url] for url in urls if url in self.found})


def _a_key(url: str) -> bool:
    """Whether ``url`` can be a partition key (Cassandra's are 65,535 bytes at most)."""
    return len(url) <= MAX_KEY // 4 or len(url.encode()) <= MAX_KEY


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
