"""The Cassandra UrlStore (production), through cassandra-driver.

- Schema: schema.cql, package data read through importlib.resources, applied at start
  when CASSANDRA_APPLY_SCHEMA is true (every statement is ``IF NOT EXISTS``);
  ``schema_statements`` renders it for CASSANDRA_KEYSPACE, with
  CASSANDRA_REPLICATION_FACTOR replicas (SimpleStrategy, or NetworkTopologyStrategy in
  CASSANDRA_DATACENTER). Columns added after its first version (ADDED_COLUMNS) are added
  to an existing table.
- No tombstones. A fetch's record replaces the previous one column by column, and a
  column the record has no value for is written as an *empty value* (a live cell of no
  bytes, read back as None), never as a null, which would write a tombstone per column
  per fetch: text as '', numbers and times through CQL's ``blobAsInt(?)`` (and the like)
  as b"". The two lists are frozen (one cell, overwritten in place); the metadata map is
  merged (``metadata = metadata + ?``) and left alone when the record has no fields.
  COLUMNS, each column with its CQL type, is the one place the statements and the reads
  come from.
- Prepared statements, all idempotent; routing, consistency, timeouts and retries are the
  driver's: token-aware routing to the replicas in the local datacenter
  (CASSANDRA_DATACENTER, or the contact points'), the consistency levels
  CASSANDRA_WRITE_CONSISTENCY and _READ_CONSISTENCY (``consistency_levels``),
  CASSANDRA_REQUEST_TIMEOUT seconds per statement (its retries included), and
  ``IdempotentRetries``: a statement that timed out at the replicas, found too few of them
  alive or lost its connection is retried up to CASSANDRA_RETRIES times.
- Writes never block the caller: each returns a Future at once. One writer thread takes
  every write waiting and sends their statements through the driver's
  ``execute_concurrent``, at most CASSANDRA_MAX_IN_FLIGHT at a time; a write's Future is
  done once all its statements are, or fails with the first error among them (the page's
  lease is then given back, and the page fetched again later). Failures are logged as one
  warning line per kind at most every WARN_EVERY seconds, with their count. Statements
  carry client-side timestamps taken as they are sent, in the order the writes were made:
  of two writes of one column, the later one wins, even when both are in flight at once.
- The statements of the writes waiting (a page's record, its due index row, its inlinks:
  a row per outlink, each in the partition of its target) go as UNLOGGED batches, one or
  more per replica set (the token map's replicas of each row's partition: a batch is sent
  to nodes that own all its rows, no coordinator fan-out), each under CASSANDRA_BATCH_BYTES
  (as the server counts a batch's bytes; by default just under the nodes' own
  batch_size_warn_threshold, read at start: ``batch_bytes``) and
  with one statement a partition at most, not as a statement each: a page of 200 links
  is a handful of requests instead of 200 (the driver's CPU a request is what bounds a
  worker's writes). A batch's statements share its timestamp, so a later write of a
  partition goes in a later batch, sent after it. The server's warning that such a batch
  covers many partitions is dropped from the driver's log (``BatchWarnings``): the
  batches are made that way on purpose.
- Reads run on the calling thread; ``last_fetched`` and ``get_many`` read their URLs
  with ``url IN ?`` (READ_KEYS at most a read, each of one replica set, sent to it), and
  ``inlinks`` a read per bucket, all at once through ``execute_concurrent``.
- Contact points, port, credentials and TLS come from settings (CASSANDRA_*).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT
from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType, BoundStatement, tuple_factory

from crawler.exceptions import StoreRefused
from crawler.urlstore.cassandra_cluster import (
    RECONNECT_MAX,
    WARN_EVERY,
    IdempotentRetries,
    add_columns,
    batch_bytes,
    check_keyspace,
    connect,
    consistency_levels,
    failure_kind,
    schema_statements,
    tls_context,
)
from crawler.urlstore.cassandra_due import DueIndex
from crawler.urlstore.cassandra_reads import CassandraReads
from crawler.urlstore.cassandra_rows import (
    _FETCHED,
    _INLINK,
    _INLINKS,
    _INLINKS_AFTER,
    METADATA,
    POINTER,
    RECORD_READ,
    RESCHEDULES,
    ROW,
    _bound,
    _select,
    _update,
)
from crawler.urlstore.record import (
    ATTEMPT_COLUMNS,
    DUE_FIELDS,
    ArchivePointer,
    FetchRecord,
    attempt_only,
    inlink_bucket,
    signed64,
)
from crawler.urlstore.store import UrlStore

logger = logging.getLogger(__name__)

#: the level to read again at, by the level the store writes at, to meet every acknowledged
#: write: reads and writes together reach more than the replicas (a level not named here: ALL)
SURE_READ = {
    ConsistencyLevel.LOCAL_QUORUM: ConsistencyLevel.LOCAL_QUORUM,
    ConsistencyLevel.EACH_QUORUM: ConsistencyLevel.LOCAL_QUORUM,
    ConsistencyLevel.QUORUM: ConsistencyLevel.QUORUM,
}


# a batch's bytes at most (CASSANDRA_BATCH_BYTES, or the nodes' batch_size_warn_threshold:
# 5 KiB by default; here for a store made without settings), as the server counts
# them against that threshold: the rows' clustering keys and cells, not
# their partition keys. An inlink row is its source URL, its anchor text and
# INLINK_ROW_BYTES more (its cells' timestamps and the like: Cassandra 5.0's count); a
# row of any other statement is counted high, CELL_BYTES more a value and ROW_BYTES more
# a row (its partition key's values included)
BATCH_BYTES = 5000
INLINK_ROW_BYTES = 91
CELL_BYTES = 16
ROW_BYTES = 64
_INT = struct.Struct(">i")


_PAGE_INLINKS = object()  # in a write's statements: (_PAGE_INLINKS, (page URL, its bucket, its outlinks))


def _inlink_values(row: tuple) -> tuple:
    """An inlinks row (target_url, bucket, source_url, anchor_text, nofollow) as the bytes
    of its values, as the driver serializes them (text: UTF-8, int: 4 bytes big-endian,
    boolean: one byte); ``CassandraUrlStore._parts`` makes them the same way."""
    target, bucket, source, text, nofollow = row
    return (target.encode(), _INT.pack(bucket), source.encode(), text.encode(), b"\x01" if nofollow else b"\x00")


_OUTLINKS_AT = ROW.index("outlinks")  # the place of its value in the row's statement


def _outlinks_value(links: list[tuple]) -> bytes:
    """The bytes of a frozen<list<frozen<tuple<text, text, boolean>>>> of (url, anchor
    text, nofollow), as the driver serializes it (native protocol 3 and later): the count,
    then each element's length and bytes; an element's fields each their length and bytes
    (-1: none)."""
    out = [_INT.pack(len(links))]
    for url, text, nofollow in links:
        u = url.encode()
        if text is None:
            element = b"".join((_INT.pack(len(u)), u, _NONE, _ONE, b"\x01" if nofollow else b"\x00"))
        else:
            t = text.encode()
            element = b"".join((_INT.pack(len(u)), u, _INT.pack(len(t)), t, _ONE, b"\x01" if nofollow else b"\x00"))
        out += (_INT.pack(len(element)), element)
    return b"".join(out)


_NONE, _ONE = _INT.pack(-1), _INT.pack(1)


def _partition_key(values: list) -> bytes:
    """The routing key of an inlinks row's partition (target_url, bucket), from its values'
    bytes: the driver's form of a composite key (each part: its length in 2 bytes, the
    part, a zero byte)."""
    return b"".join(len(part).to_bytes(2, "big") + part + b"\0" for part in values[:2])


def _routing_key(part: tuple) -> bytes:
    """The routing key of a part of ``CassandraUrlStore._parts``: an inlink row's made
    from its values (only when asked: on one node, or with as many replicas as nodes,
    the first part's replicas are every part's)."""
    return _partition_key(part[3]) if isinstance(part[3], tuple) else part[1]


class CassandraUrlStore(CassandraReads, UrlStore):
    """The store on a driver ``session`` (its cluster's default execution profile gives
    the routing; ``from_settings`` makes it token-aware in the local datacenter), in
    ``keyspace``, whose schema must exist. ``cluster``: shut down by ``close``."""

    def __init__(
        self,
        session,
        keyspace: str,
        *,
        url_options: dict | None = None,
        inlink_buckets: int = 16,
        write_consistency: str = "LOCAL_ONE",
        read_consistency: str = "LOCAL_ONE",
        request_timeout: float = 10.0,
        max_in_flight: int = 64,
        retries: int = 5,
        batch_bytes: int = BATCH_BYTES,
        cluster=None,
    ):
        super().__init__(url_options, inlink_buckets)
        check_keyspace(keyspace)
        self.session = session
        self.cluster = cluster
        self.keyspace = keyspace
        self.max_in_flight = max_in_flight
        self.batch_bytes = batch_bytes
        # the driver's machinery: the default profile's routing, with these levels, this
        # timeout and these retries
        self.reads = session.execution_profile_clone_update(
            EXEC_PROFILE_DEFAULT,
            consistency_level=ConsistencyLevel.name_to_value[read_consistency.upper()],
            request_timeout=request_timeout,
            retry_policy=IdempotentRetries(retries),
        )
        self.writes = session.execution_profile_clone_update(
            self.reads, consistency_level=ConsistencyLevel.name_to_value[write_consistency.upper()]
        )
        # what reads as missing or stale at the read level, where that would lose work, is read
        # again at a level that meets every write acknowledged at the write level (SURE_READ)
        self.sure_reads = session.execution_profile_clone_update(
            self.reads, consistency_level=SURE_READ.get(self.writes.consistency_level, ConsistencyLevel.ALL)
        )
        # a record's reads: rows as plain tuples of RECORD_READ's columns (the driver's
        # default makes a namedtuple class for every answer, a third of a read's CPU here)
        self.record_reads = session.execution_profile_clone_update(self.reads, row_factory=tuple_factory)

        def prepare(cql: str):
            statement = session.prepare(cql.format(ks=keyspace))
            statement.is_idempotent = True  # every statement of the store: written twice is written once
            return statement

        self._updates = {
            columns: prepare(_update(columns)) for columns in (ROW, METADATA, ATTEMPT_COLUMNS, *RESCHEDULES)
        }
        self._pointer_stmt = prepare(_update(POINTER, timed=True))
        self._inlink_stmt = prepare(_INLINK)
        self._select_stmt = prepare(_select(RECORD_READ))
        self._select_in_stmt = prepare(_select(RECORD_READ, "url IN ?"))
        self._fetched_stmt = prepare(_select(_FETCHED))
        self._fetched_in_stmt = prepare(_select(_FETCHED, "url IN ?"))
        self._scan_stmt = prepare(_select(("token(url)", *DUE_FIELDS), "token(url) > ? LIMIT ?"))
        self._inlinks_stmt = prepare(_INLINKS)
        self._inlinks_after_stmt = prepare(_INLINKS_AFTER)
        self._due_in_stmt = prepare(_select(DUE_FIELDS, "url IN ?"))
        self._any_stmt = prepare("SELECT url FROM {ks}.urls LIMIT 1")
        self.due_index = DueIndex(self, prepare)
        self.due_index.ready()  # (whole, or the recrawl scans: see cassandra_due.py)
        # the writes waiting for the writer thread: (build, its argument, future)
        self._pending: list[tuple[object, object, Future]] = []
        self._lock = threading.Lock()
        self._flush_queued = False
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="urlstore-cassandra")
        self._failures: dict[str, int] = {}  # kind -> failed writes not yet in a warning line
        self._warned: dict[str, float] = {}  # kind -> when its last warning line was logged

    @classmethod
    def from_settings(cls, settings, url_options: dict) -> CassandraUrlStore:
        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import Cluster, ExecutionProfile
        from cassandra.policies import DCAwareRoundRobinPolicy, ExponentialReconnectionPolicy, TokenAwarePolicy

        hosts = settings.getlist("CASSANDRA_HOSTS")
        port = settings.getint("CASSANDRA_PORT")
        user = settings.get("CASSANDRA_USERNAME")
        datacenter = settings.get("CASSANDRA_DATACENTER") or None  # None: the contact points' datacenter
        auth = PlainTextAuthProvider(user, settings.get("CASSANDRA_PASSWORD")) if user else None
        protocol = settings.getint("CASSANDRA_PROTOCOL_VERSION")

        def make_cluster():
            routing = ExecutionProfile(
                load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=datacenter))
            )
            return Cluster(
                hosts,
                port=port,
                auth_provider=auth,
                ssl_context=tls_context(settings),
                execution_profiles={EXEC_PROFILE_DEFAULT: routing},
                # a node that went down is tried again every 10 s at most, for as long as it
                # takes (the driver's default waits up to 10 minutes, and gives up)
                reconnection_policy=ExponentialReconnectionPolicy(1.0, RECONNECT_MAX, max_attempts=None),
                **({"protocol_version": protocol} if protocol else {}),
            )

        patience = settings.getfloat("CASSANDRA_CONNECT_TIMEOUT")
        cluster, session = connect(make_cluster, datacenter, patience, f"{', '.join(hosts)}:{port}")
        try:
            keyspace = settings.get("CASSANDRA_KEYSPACE")
            if settings.getbool("CASSANDRA_APPLY_SCHEMA"):
                factor = settings.getint("CASSANDRA_REPLICATION_FACTOR")
                for statement in schema_statements(keyspace, factor, datacenter or ""):
                    session.execute(statement)
                add_columns(cluster, session, keyspace)
            elif keyspace.lower() not in cluster.metadata.keyspaces:
                raise StoreRefused(
                    f"the UrlStore's keyspace {keyspace} does not exist on the Cassandra cluster at "
                    f"{', '.join(hosts)}:{port} (CASSANDRA_KEYSPACE; with CASSANDRA_APPLY_SCHEMA off no worker makes it)"
                )
            write, read = consistency_levels(settings)
            batch = settings.getint("CASSANDRA_BATCH_BYTES")  # 0: as the nodes allow
            batch, batch_why = (batch, "CASSANDRA_BATCH_BYTES") if batch else batch_bytes(session)
            store = cls(
                session,
                keyspace,
                url_options=url_options,
                inlink_buckets=settings.getint("URLSTORE_INLINK_BUCKETS"),
                write_consistency=write,
                read_consistency=read,
                request_timeout=settings.getfloat("CASSANDRA_REQUEST_TIMEOUT"),
                max_in_flight=settings.getint("CASSANDRA_MAX_IN_FLIGHT"),
                retries=settings.getint("CASSANDRA_RETRIES"),
                batch_bytes=batch,
                cluster=cluster,
            )
        except BaseException:
            cluster.shutdown()
            raise
        logger.info(
            "Cassandra UrlStore: keyspace %s on %s%s; writes %s in batches of %d bytes at most (%s), reads %s",
            keyspace,
            ", ".join(hosts),
            " (TLS)" if settings.getbool("CASSANDRA_TLS") else "",
            write,
            store.batch_bytes,
            batch_why,
            read,
        )
        return store

    # -- writes ------------------------------------------------------------------------

    def record_fetch(self, record: FetchRecord) -> Future:
        return self._write(self._fetch_statements, record)

    def _fetch_statements(self, r: FetchRecord) -> list[tuple]:
        url = self.normalize(r.url)
        due = self.due_index.statements(url, r.next_fetch_at, time.time())
        if attempt_only(r):  # (what the last answer left stays)
            return [self._set(url, {name: getattr(r, name) for name in ATTEMPT_COLUMNS}), *due]
        archive = r.archive if r.archive and r.archive.key else None
        values = {
            "canonical_url": r.canonical_url,
            "near_duplicate_of": r.near_duplicate_of,
            "resemblance": r.resemblance,
            "status": r.status,
            "fate": r.fate,
            "fetched_at": r.fetched_at,
            "error": r.error,
            "next_fetch_at": r.next_fetch_at,
            "final_url": r.final_url,
            "redirect_chain": list(r.redirect_chain),
            "content_digest": r.content_digest,
            "simhash": signed64(r.simhash),
            "metadata": r.metadata,
            "outlinks": [(link["url"], link.get("text", ""), bool(link.get("nofollow"))) for link in r.outlinks],
            "fetch_interval": r.fetch_interval,
            "etag": r.etag,
            "last_modified": r.last_modified,
        }
        # the row bound with no outlinks, then given their bytes (_outlinks_value): the
        # driver's binding of the list, a value at a time, cost 0.8 ms a page of 178 links
        outlinks, values["outlinks"] = values["outlinks"], ()
        statement, parameters = self._set(url, values)
        row = statement.bind(parameters)
        row.values[_OUTLINKS_AT] = _outlinks_value(outlinks)
        # the inlinks: a row per outlink, made by _parts
        return [
            (row, None),
            self._pointer(url, archive, r.fetched_at, 0),  # (its own pointer, or none, at the fetch's time)
            *due,
            (_PAGE_INLINKS, (url, inlink_bucket(url, self.inlink_buckets), r.outlinks)),
        ]

    def _parts(self, write: int, statements: list[tuple]) -> list[tuple]:
        """The (statement, parameters) of write number ``write`` as parts to batch:
        (write, partition, bytes, what the batch takes). A page's inlinks (``_PAGE_INLINKS``) are
        a row each, as the bytes of its values (``_inlink_values``; the page's URL and
        bucket encoded once): the driver's binding of a row (a statement object, each
        value's type looked up and checked) was most of a worker's CPU a record. Any other
        statement is bound."""
        parts = []
        for statement, parameters in statements:
            if statement is _PAGE_INLINKS:
                url, bucket, outlinks = parameters
                source, packed = url.encode(), _INT.pack(bucket)
                for link in outlinks:
                    target, text = link["url"].encode(), link.get("text", "").encode()
                    # a tuple of bytes, which the garbage collector stops tracking: as lists,
                    # a flush's rows outlived a young collection and made full ones frequent
                    values = (target, packed, source, text, b"\x01" if link.get("nofollow") else b"\x00")
                    size = len(source) + len(text) + INLINK_ROW_BYTES
                    parts.append((write, (target, packed), size, values))
            else:
                bound = statement if isinstance(statement, BoundStatement) else statement.bind(parameters)
                size = ROW_BYTES + sum(len(v) + CELL_BYTES for v in bound.values if isinstance(v, bytes))
                parts.append((write, bound.routing_key, size, bound))
        return parts

    def _batches(self, parts: list[tuple]) -> list[tuple[object, list[int]]]:
        """The statements that send ``parts`` (of every write waiting, in the order the
        writes were made), each with the writes it carries: UNLOGGED batches of the parts
        of one replica set (the token map's replicas of each part's partition: a batch is
        sent to nodes that own all its rows, no coordinator fan-out), filled in order,
        each under batch_bytes and with one part a partition at most (a batch's statements
        share its timestamp: a later write of a partition goes in a later batch, sent
        after, and wins; an archive pointer, written at its own time, joins any: ``_timed``);
        a part alone is its own statement. A page's record, its due
        index row and its inlinks, and the writes that came with them, are a few requests
        instead of one a row (the driver's CPU a request is what bounds a worker's
        writes). An inlink row goes in as its values' bytes; the batch's routing key is
        its first part's."""
        out = []
        query_id = self._inlink_stmt.query_id
        for members in self._replica_groups(parts, _routing_key).values():
            batches: list[list] = []  # each [bytes, partitions, parts]
            size, partitions, mine = 0, set(), []
            for part in members:
                timed = self._timed(part)
                if not mine or (part[1] in partitions and not timed) or size + part[2] > self.batch_bytes:
                    size, partitions, mine = 0, set(), []
                    batches.append(mine)
                size += part[2]
                if not timed:
                    partitions.add(part[1])
                mine.append(part)
            for mine in batches:
                writes = sorted({part[0] for part in mine})
                if len(mine) == 1:
                    what = mine[0][3]
                    out.append(((self._inlink_bound(what) if isinstance(what, tuple) else what, None), writes))
                    continue
                batch = BatchStatement(batch_type=BatchType.UNLOGGED)
                batch.is_idempotent = True  # as every statement of it is
                batch.routing_key, batch.keyspace = _routing_key(mine[0]), self.keyspace
                for part in mine:
                    what = part[3]
                    if isinstance(what, tuple):
                        batch._add_statement_and_params(True, query_id, what)
                    else:
                        batch.add(what)
                out.append(((batch, None), writes))
        return out

    def _timed(self, part: tuple) -> bool:
        """Whether a part is an archive pointer, written at its own time (USING TIMESTAMP):
        it may join a batch that holds its partition, its order there of no matter."""
        what = part[3]
        return isinstance(what, BoundStatement) and what.prepared_statement is self._pointer_stmt

    def _inlink_bound(self, values: tuple) -> BoundStatement:
        """An inlink row alone: the inlink statement with these values' bytes."""
        bound = BoundStatement(self._inlink_stmt)
        bound.values = list(values)
        bound.is_idempotent = True
        return bound

    def _replica_groups(self, items: list, routing_key) -> dict[tuple, list]:
        """``items`` by the replica set (the token map's) of ``routing_key(item)``, in
        order; once an item's replicas are every node, every node holds every row and the
        rest join it without a look-up (one node, or as many replicas as nodes)."""
        metadata = self.session.cluster.metadata
        groups: dict[tuple, list] = {}
        everywhere = None
        for item in items:
            replicas = everywhere
            if replicas is None:
                found = metadata.get_replicas(self.keyspace, routing_key(item))
                replicas = tuple(sorted(str(h.endpoint) for h in found))
                if found and len(found) == len(metadata.all_hosts()):
                    everywhere = replicas
            groups.setdefault(replicas, []).append(item)
        return groups

    def _set(self, url: str, values: dict) -> tuple:
        """(statement, parameters) that set ``values`` (column: value, in COLUMNS order) of
        ``url``'s row."""
        return self._updates[tuple(values)], (*(_bound(c, v) for c, v in values.items()), url)

    def update_metadata(self, url: str, fields: dict[str, str]) -> Future:
        return self._write(lambda _: [self._set(self.normalize(url), {"metadata": fields})], None)

    def set_archive(self, url: str, archive: ArchivePointer, fetched_at: float) -> Future:
        return self._write(lambda _: [self._pointer(self.normalize(url), archive, fetched_at, 1)], None)

    def _pointer(self, url: str, archive: ArchivePointer | None, fetched_at: float | None, later: int) -> tuple:
        """(statement, parameters) that write ``url``'s archive pointer (None: none) and
        ARCHIVE_AT at the capture's fetch time, in microseconds, and ``later`` more (a
        record's own at that time, a capture's pointer one after: it wins over the record
        that waits for it, and loses to a newer fetch's)."""
        at = time.time() if fetched_at is None else fetched_at
        values = {
            "archive_key": archive.key if archive else None,
            "archive_offset": archive.offset if archive else None,
            "archive_length": archive.length if archive else None,
            "archive_bucket": archive.bucket if archive else None,
            "archive_at": at,
        }
        return self._pointer_stmt, (round(at * 1_000_000) + later, *(_bound(c, v) for c, v in values.items()), url)

    def reschedule(
        self,
        url: str,
        next_fetch_at: float | None,
        fetched_at: float | None = None,
        fetch_interval: float | None = None,
        put_at: float | None = None,
    ) -> Future:
        values = {"next_fetch_at": next_fetch_at}  # None: an empty value (no due time)
        if fetched_at is not None:
            values["fetched_at"] = fetched_at
        if fetch_interval is not None:
            values["fetch_interval"] = fetch_interval
        if put_at is not None:
            values["put_at"] = put_at
        return self._write(self._reschedule_statements, (self.normalize(url), values))

    def _reschedule_statements(self, arg) -> list[tuple]:
        url, values = arg
        return [self._set(url, values), *self.due_index.statements(url, values["next_fetch_at"], time.time())]

    def _write(self, build, arg) -> Future:
        """Queue a write: on the writer thread, ``build(arg)`` gives its statements (an
        error there fails this write alone). Its Future is done once they all are."""
        future: Future = Future()
        with self._lock:
            self._pending.append((build, arg, future))
            if not self._flush_queued:
                self._flush_queued = True
                self._writer.submit(self._flush)
        return future

    def _flush(self) -> None:
        """Send the statements of every write waiting, batched (``_batches``), at most
        max_in_flight at a time (the driver's execute_concurrent, in the order the writes
        were made), then settle each write's Future by the results of the statements that
        carried its parts (the first error among them fails it)."""
        with self._lock:
            batch, self._pending = self._pending, []
            self._flush_queued = False
        parts, futures = [], []  # futures: each write's
        for build, arg, future in batch:
            try:
                parts += self._parts(len(futures), build(arg))
            except Exception as exc:  # a value that cannot be bound
                self._failed(exc)
                future.set_exception(exc)
                continue
            futures.append(future)
        sent = self._batches(parts)
        try:
            results = execute_concurrent(
                self.session,
                [statement for statement, _ in sent],
                concurrency=self.max_in_flight,
                raise_on_first_error=False,
                execution_profile=self.writes,
            )
        except Exception as exc:  # the session was shut down
            for future in futures:
                future.set_exception(exc)
            return
        errors: dict[int, BaseException] = {}
        for (_, writes), result in zip(sent, results, strict=True):
            if not result.success:
                for write in writes:
                    errors.setdefault(write, result.result_or_exc)
        for write, future in enumerate(futures):
            error = errors.get(write)
            if error is None:
                future.set_result(None)
            else:
                self._failed(error)
                future.set_exception(error)

    def _failed(self, exc: BaseException) -> None:
        """Count a failed write; a warning line per kind of failure at most every
        WARN_EVERY seconds (the writer thread's alone: no lock). The due index lists its
        hours again."""
        self.due_index.write_failed()
        kind = failure_kind(exc)
        self._failures[kind] = self._failures.get(kind, 0) + 1
        now = time.monotonic()
        if now - self._warned.get(kind, -WARN_EVERY) < WARN_EVERY:
            return
        count, self._failures[kind], self._warned[kind] = self._failures[kind], 0, now
        logger.warning(
            "Cassandra UrlStore: %d write(s) failed with %s (their pages are fetched again later; "
            "this kind is logged at most every %.0f s): %s",
            count,
            kind,
            WARN_EVERY,
            str(exc)[:300],
        )

    # -- reads -------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for the writes made so far, then shut the cluster down (when the store
        made it)."""
        self._writer.shutdown(wait=True)
        if self.cluster is not None:
            self.cluster.shutdown()
