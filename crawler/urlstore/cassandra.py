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
- A page's inlinks (a row per outlink, each in the partition of its target) go as UNLOGGED
  batches, one or more per replica set (the token map's replicas of each row's partition:
  a batch is sent to nodes that own all its rows, no coordinator fan-out), each under
  INLINK_BATCH_BYTES, not as a statement each: a page of 200 links is a handful of
  requests instead of 200 (the driver's CPU a request is what bounds a worker's writes).
  The server's warning that such a batch covers many partitions is dropped from the
  driver's log (``BatchWarnings``): the batches are made that way on purpose.
- Reads run on the calling thread; ``last_fetched`` and ``get_many`` read their URLs
  with ``url IN ?`` (READ_KEYS at most a read, each of one replica set, sent to it), and
  ``inlinks`` a read per bucket, all at once through ``execute_concurrent``.
- Contact points, port, credentials and TLS come from settings (CASSANDRA_*).
"""

from __future__ import annotations

import logging
import re
import ssl
import struct
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC
from importlib import resources

from cassandra import ConsistencyLevel, InvalidRequest
from cassandra.cluster import EXEC_PROFILE_DEFAULT, NoHostAvailable
from cassandra.concurrent import execute_concurrent
from cassandra.policies import RetryPolicy
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType, BoundStatement

from crawler.config.rules import CQL_NAME, DATACENTER_NAME
from crawler.urlstore.record import (
    ARCHIVE_COLUMNS,
    DUE_FIELDS,
    ArchivePointer,
    FetchRecord,
    answered,
    inlink_bucket,
    signed64,
    unsigned64,
    url_in_host,
)
from crawler.urlstore.record import COLUMNS as RECORD_COLUMNS
from crawler.urlstore.store import UrlStore

logger = logging.getLogger(__name__)

SCHEMA = resources.files("crawler.urlstore").joinpath("schema.cql")
# The urls table's columns (but its key, url) with their CQL types, as schema.cql makes
# them: a fetch's record writes them all, in this order, and every read maps them back.
# A table made before the lists were frozen keeps them as they were and works alike (a
# list binds the same either way), with a tombstone per list per write: no migration.
COLUMNS = {name: cql for name, _, cql, _ in RECORD_COLUMNS}
# columns schema.cql gained after its first version: added to an existing table at start
ADDED_COLUMNS = tuple(name for name, _, _, added in RECORD_COLUMNS if added)
# the types bound as big-endian bytes through CQL's blobAs<Type>(?), where b"" is the
# type's empty value (a timestamp: milliseconds since 1970)
_PACKED = {"int": ">i", "bigint": ">q", "float": ">f", "double": ">d", "timestamp": ">q"}

SCAN_PAGES = 4  # pages of ``limit`` rows one ``due`` call reads at most (a token-range scan)
MIN_TOKEN = -(2**63)  # Murmur3Partitioner's smallest token
# the values of one batch of inlinks at most, with INLINK_ROW_BYTES a row for its cells:
# under the server's batch_size_warn_threshold (5 KiB), which counts their cells too
INLINK_BATCH_BYTES = 4096
INLINK_ROW_BYTES = 48
READ_KEYS = 25  # URLs one read asks for at most (WHERE url IN ...), all of one replica set: a read
# of 100 keys took 60 ms on one coordinator, four of 25 side by side 15 ms
WARN_EVERY = 30.0  # seconds between two warning lines of one kind of write failure
RECONNECT_MAX = 10.0  # seconds between two tries of a node that went down, at most

ROW = tuple(COLUMNS)
ARCHIVE = ARCHIVE_COLUMNS
METADATA = ("metadata",)
# reschedule: the due time, and when given the fetch time and the interval
RESCHEDULES = [
    ("next_fetch_at", *more) for more in ((), ("fetched_at",), ("fetch_interval",), ("fetched_at", "fetch_interval"))
]
_FETCHED = ("url", "fate", "status", "fetched_at", "archive_key")  # last_fetched's columns
_INLINK = "INSERT INTO {ks}.inlinks (target_url, bucket, source_url, anchor_text, nofollow) VALUES (?, ?, ?, ?, ?)"
_INLINKS = "SELECT source_url, anchor_text, nofollow FROM {ks}.inlinks WHERE target_url = ? AND bucket = ? LIMIT ?"
_INLINKS_AFTER = (
    "SELECT source_url, anchor_text, nofollow FROM {ks}.inlinks WHERE target_url = ? AND bucket = ? "
    "AND source_url > ? LIMIT ?"
)


def _update(columns: tuple[str, ...]) -> str:
    """The UPDATE (an upsert) that sets ``columns`` of a URL's row, bound with
    ``_bound`` values and the URL last."""
    sets = []
    for column in columns:
        kind = COLUMNS[column]
        if kind.startswith("map"):
            sets.append(f"{column} = {column} + ?")
        elif kind in _PACKED:
            sets.append(f"{column} = blobAs{kind.capitalize()}(?)")
        else:
            sets.append(f"{column} = ?")
    return f"UPDATE {{ks}}.urls SET {', '.join(sets)} WHERE url = ?"


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


def _read(row) -> dict:
    """A row read from the urls table (any of its columns) as a dict: an empty value is
    None (text as much as numbers), a time is UNIX seconds."""
    out = {}
    for column, value in zip(row._fields, row, strict=True):
        kind = COLUMNS.get(column, "text")  # url (or token(url), a number)
        if kind == "text" and value == "":
            value = None
        elif kind == "timestamp":
            value = _seconds(value)
        out[column] = value
    return out


def _record(row) -> dict:
    """A urls row as ``get`` gives it (UrlStore's record)."""
    record = _read(row)
    record["redirect_chain"] = list(record["redirect_chain"] or [])
    record["simhash"] = unsigned64(record["simhash"])
    record["metadata"] = dict(record["metadata"] or {})
    key, offset, length = (record.pop(c) for c in ARCHIVE)
    record["archive"] = {"key": key, "offset": offset, "length": length} if key else None
    record["outlinks"] = [{"url": u, "text": t, "nofollow": bool(n)} for u, t, n in record["outlinks"] or []]
    return record


def schema_statements(keyspace: str, replication_factor: int = 1, datacenter: str = "") -> list[str]:
    """The statements of schema.cql for this keyspace, comments removed; its replication:
    ``replication_factor`` replicas with SimpleStrategy, or in ``datacenter`` with
    NetworkTopologyStrategy."""
    check_keyspace(keyspace)
    if datacenter:
        if not re.fullmatch(DATACENTER_NAME, datacenter):
            raise ValueError(f"not a datacenter name: {datacenter!r}")
        replication = f"{{'class': 'NetworkTopologyStrategy', '{datacenter}': {int(replication_factor)}}}"
    else:
        replication = f"{{'class': 'SimpleStrategy', 'replication_factor': {int(replication_factor)}}}"
    lines = [line.split("--", 1)[0] for line in SCHEMA.read_text(encoding="utf-8").splitlines()]
    text = "\n".join(lines).replace("{keyspace}", keyspace).replace("{replication}", replication)
    for table in ("urls", "inlinks"):
        text = text.replace(f"{{{table}_id}}", str(table_id(keyspace, table)))
    return [" ".join(s.split()) for s in text.split(";") if s.strip()]


def table_id(keyspace: str, table: str) -> uuid.UUID:
    """The id of one of the store's tables, the same for every worker that creates it:
    two workers creating the schema at once (each ``IF NOT EXISTS``, on different nodes)
    then make one table; with ids of their own, the cluster would hold two tables of one
    name that it cannot reconcile."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"crawler-urlstore:{keyspace.lower()}.{table}")


def check_keyspace(keyspace: str) -> None:
    """A keyspace name is pasted into CQL: only a plain CQL name (CASSANDRA_KEYSPACE's rule)."""
    if not re.fullmatch(CQL_NAME, keyspace):
        raise ValueError(f"not a CQL name (letters, digits and _, starting with a letter): {keyspace!r}")


def add_columns(cluster, session, keyspace: str) -> None:
    """Add ADDED_COLUMNS to a urls table made by an earlier version (another worker may be
    adding them at the same moment). The schema is read once the nodes agree on it: a
    table another worker has just made may not have reached every node yet."""
    name = keyspace.lower()  # CQL folds unquoted names
    cluster.refresh_schema_metadata()  # waits for the nodes to agree first (max_schema_agreement_wait)
    try:
        have = cluster.metadata.keyspaces[name].tables["urls"].columns
    except KeyError:
        raise ValueError(f"the nodes do not agree yet on the schema of keyspace {keyspace}; try again") from None
    for column in ADDED_COLUMNS:
        if column not in have:
            try:
                session.execute(f"ALTER TABLE {keyspace}.urls ADD {column} {COLUMNS[column]}")
            except InvalidRequest as exc:  # added by another worker meanwhile
                if "conflicts with an existing column" not in str(exc) and "already exist" not in str(exc):
                    raise


def consistency_levels(settings) -> tuple[str, str]:
    """(writes, reads): CASSANDRA_WRITE_CONSISTENCY and CASSANDRA_READ_CONSISTENCY, or when
    empty: writes LOCAL_QUORUM with a replication factor of 3 or more (a replica may be
    down), LOCAL_ONE below; reads LOCAL_ONE."""
    write = settings.get("CASSANDRA_WRITE_CONSISTENCY") or (
        "LOCAL_QUORUM" if settings.getint("CASSANDRA_REPLICATION_FACTOR") >= 3 else "LOCAL_ONE"
    )
    return write.upper(), (settings.get("CASSANDRA_READ_CONSISTENCY") or "LOCAL_ONE").upper()


def tls_context(settings) -> ssl.SSLContext | None:
    """The TLS context for the nodes (CASSANDRA_TLS*), None when TLS is off. The nodes'
    certificates are always verified; the driver checks each against the address it
    dialled when CASSANDRA_TLS_CHECK_HOSTNAME is on."""
    if not settings.getbool("CASSANDRA_TLS"):
        return None
    context = ssl.create_default_context(cafile=settings.get("CASSANDRA_TLS_CA_FILE") or None)
    context.check_hostname = settings.getbool("CASSANDRA_TLS_CHECK_HOSTNAME")
    cert = settings.get("CASSANDRA_TLS_CERT_FILE")
    if cert:
        context.load_cert_chain(cert, settings.get("CASSANDRA_TLS_KEY_FILE") or None)
    return context


def connect(make_cluster, datacenter: str | None, patience: float, contact: str):
    """(cluster, session) of ``make_cluster()``, tried again while no node answers (a
    cluster still starting), waiting 1 s, 2 s... (at most 10 s) with a warning line each
    time, for ``patience`` seconds in all; then NoHostAvailable. When no node answers
    because CASSANDRA_DATACENTER names a datacenter the cluster does not have, a
    ValueError that says so, at once."""
    deadline, wait = time.monotonic() + patience, 1.0
    while True:
        cluster = make_cluster()
        try:
            return cluster, cluster.connect()
        except NoHostAvailable as exc:
            known = sorted({host.datacenter for host in cluster.metadata.all_hosts() if host.datacenter})
            cluster.shutdown()
            if datacenter and known and datacenter not in known:
                raise ValueError(
                    f"CASSANDRA_DATACENTER={datacenter!r} is not a datacenter of the cluster ({', '.join(known)})"
                ) from None
            if time.monotonic() + wait > deadline:
                raise
            logger.warning("Cassandra not reachable at %s (%s); trying again in %.0f s", contact, exc, wait)
            time.sleep(wait)
            wait = min(wait * 2, 10.0)


class IdempotentRetries(RetryPolicy):
    """The driver's retry decisions for the store's statements, all idempotent (writing
    one twice is writing it once): a statement that timed out at the replicas is retried
    on the same node, one that found too few replicas alive or met a connection or server
    error on the next node of its query plan (none left: it fails), each up to ``retries``
    times. A statement not marked idempotent is never retried."""

    def __init__(self, retries: int):
        self.retries = retries

    def _again(self, query, retry_num: int, decision: int):
        if query is not None and query.is_idempotent and retry_num < self.retries:
            return decision, None  # None: the same consistency level
        return self.RETHROW, None

    def on_read_timeout(self, query, consistency, required_responses, received_responses, data_retrieved, retry_num):
        return self._again(query, retry_num, self.RETRY)

    def on_write_timeout(self, query, consistency, write_type, required_responses, received_responses, retry_num):
        return self._again(query, retry_num, self.RETRY)

    def on_unavailable(self, query, consistency, required_replicas, alive_replicas, retry_num):
        return self._again(query, retry_num, self.RETRY_NEXT_HOST)

    def on_request_error(self, query, consistency, error, retry_num):
        return self._again(query, retry_num, self.RETRY_NEXT_HOST)


def failure_kind(exc: BaseException) -> str:
    """The kind of a failed statement, for the warning lines: its exception's class, and
    for NoHostAvailable what each node answered (``NoHostAvailable(Unavailable)``)."""
    kind = type(exc).__name__
    if isinstance(exc, NoHostAvailable) and exc.errors:
        kind += "(" + ", ".join(sorted({type(e).__name__ for e in exc.errors.values()})) + ")"
    return kind


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


class BatchWarnings(logging.Filter):
    """Drops the server's warning that an unlogged batch covers many partitions from the
    driver's log (cassandra.protocol): the store batches a page's inlinks that way on
    purpose, by replica set. Every other server warning stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.msg == "Server warning: %s"
            and isinstance(record.args, tuple)
            and str(record.args[0]).startswith("Unlogged batch covering")
        )


class ReconnectWarnings(logging.Filter):
    """The driver logs a warning at every try to reconnect to a node that is down (every
    1 to RECONNECT_MAX seconds, per node and per session): one line per node every
    WARN_EVERY seconds goes through, saying how many were held back."""

    def __init__(self):
        super().__init__()
        self._next: dict[str, float] = {}  # node -> monotonic time its next line may pass
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Error attempting to reconnect") or not isinstance(record.args, tuple):
            return True
        node, now = str(record.args[0]) if record.args else "", time.monotonic()
        if now < self._next.get(node, 0.0):
            self._held[node] = self._held.get(node, 0) + 1
            return False
        self._next[node] = now + WARN_EVERY
        held = self._held.pop(node, 0)
        if held:
            record.msg = f"{record.msg} ({held} such lines of this node held back in the last {WARN_EVERY:.0f} s)"
        return True


_PROTOCOL_LOG = logging.getLogger("cassandra.protocol")
if not any(isinstance(f, BatchWarnings) for f in _PROTOCOL_LOG.filters):
    _PROTOCOL_LOG.addFilter(BatchWarnings())
_POOL_LOG = logging.getLogger("cassandra.pool")
if not any(isinstance(f, ReconnectWarnings) for f in _POOL_LOG.filters):
    _POOL_LOG.addFilter(ReconnectWarnings())


class CassandraUrlStore(UrlStore):
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
        cluster=None,
    ):
        super().__init__(url_options, inlink_buckets)
        check_keyspace(keyspace)
        self.session = session
        self.cluster = cluster
        self.keyspace = keyspace
        self.max_in_flight = max_in_flight
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

        def prepare(cql: str):
            statement = session.prepare(cql.format(ks=keyspace))
            statement.is_idempotent = True  # every statement of the store: written twice is written once
            return statement

        self._updates = {columns: prepare(_update(columns)) for columns in (ROW, ARCHIVE, METADATA, *RESCHEDULES)}
        self._inlink_stmt = prepare(_INLINK)
        self._select_stmt = prepare(_select(("url", *COLUMNS)))
        self._select_in_stmt = prepare(_select(("url", *COLUMNS), "url IN ?"))
        self._fetched_stmt = prepare(_select(_FETCHED))
        self._fetched_in_stmt = prepare(_select(_FETCHED, "url IN ?"))
        self._scan_stmt = prepare(_select(("token(url)", *DUE_FIELDS), "token(url) > ? LIMIT ?"))
        self._inlinks_stmt = prepare(_INLINKS)
        self._inlinks_after_stmt = prepare(_INLINKS_AFTER)
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
                raise ValueError(f"no keyspace {keyspace} on the cluster (a worker makes it, CASSANDRA_APPLY_SCHEMA)")
            write, read = consistency_levels(settings)
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
                cluster=cluster,
            )
        except BaseException:
            cluster.shutdown()
            raise
        logger.info(
            "Cassandra UrlStore: keyspace %s on %s%s; writes %s, reads %s",
            keyspace,
            ", ".join(hosts),
            " (TLS)" if settings.getbool("CASSANDRA_TLS") else "",
            write,
            read,
        )
        return store

    # -- writes ------------------------------------------------------------------------

    def record_fetch(self, record: FetchRecord) -> Future:
        return self._write(self._fetch_statements, record)

    def _fetch_statements(self, r: FetchRecord) -> list[tuple]:
        url = self.normalize(r.url)
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
            "archive_key": archive.key if archive else None,
            "archive_offset": archive.offset if archive else None,
            "archive_length": archive.length if archive else None,
            "outlinks": [(link["url"], link.get("text", ""), bool(link.get("nofollow"))) for link in r.outlinks],
            "fetch_interval": r.fetch_interval,
            "etag": r.etag,
            "last_modified": r.last_modified,
        }
        bucket = inlink_bucket(url, self.inlink_buckets)
        inlinks = [(link["url"], bucket, url, link.get("text", ""), bool(link.get("nofollow"))) for link in r.outlinks]
        return [self._set(url, values), *self._inlink_batches(inlinks)]

    def _inlink_batches(self, rows: list[tuple]) -> list[tuple]:
        """(statement, None) for the inlink ``rows``: UNLOGGED batches of the rows of one
        replica set, each under INLINK_BATCH_BYTES (a row alone: its own statement)."""
        bound = [(row, self._inlink_stmt.bind(row)) for row in rows]
        out = []
        for members in self._replica_groups(bound, lambda pair: pair[1].routing_key).values():
            batches: list[list] = [[0]]  # each [bytes, bound, bound, ...]
            for row, statement in members:
                size = len(row[0].encode()) + len(row[2].encode()) + len(row[3].encode()) + INLINK_ROW_BYTES
                if batches[-1][0] and batches[-1][0] + size > INLINK_BATCH_BYTES:
                    batches.append([0])
                batches[-1][0] += size
                batches[-1].append(statement)
            for _, *statements in batches:
                if len(statements) == 1:
                    out.append((statements[0], None))
                    continue
                batch = BatchStatement(batch_type=BatchType.UNLOGGED)
                batch.is_idempotent = True  # as every row of it is
                for statement in statements:
                    batch.add(statement)
                out.append((batch, None))
        return out

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

    def set_archive(self, url: str, archive: ArchivePointer) -> Future:
        values = {"archive_key": archive.key, "archive_offset": archive.offset, "archive_length": archive.length}
        return self._write(lambda _: [self._set(self.normalize(url), values)], None)

    def reschedule(
        self,
        url: str,
        next_fetch_at: float | None,
        fetched_at: float | None = None,
        fetch_interval: float | None = None,
    ) -> Future:
        values = {"next_fetch_at": next_fetch_at}  # None: an empty value (no due time)
        if fetched_at is not None:
            values["fetched_at"] = fetched_at
        if fetch_interval is not None:
            values["fetch_interval"] = fetch_interval
        return self._write(lambda _: [self._set(self.normalize(url), values)], None)

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
        """Send the statements of every write waiting, at most max_in_flight at a time
        (the driver's execute_concurrent, in the order the writes were made), then settle
        each write's Future by its own statements' results."""
        with self._lock:
            batch, self._pending = self._pending, []
            self._flush_queued = False
        statements, writes = [], []  # writes: (future, how many statements)
        for build, arg, future in batch:
            try:
                mine = build(arg)
            except Exception as exc:  # a value that cannot be bound
                self._failed(exc)
                future.set_exception(exc)
                continue
            statements += mine
            writes.append((future, len(mine)))
        try:
            results = execute_concurrent(
                self.session,
                statements,
                concurrency=self.max_in_flight,
                raise_on_first_error=False,
                execution_profile=self.writes,
            )
        except Exception as exc:  # the session was shut down
            for future, _ in writes:
                future.set_exception(exc)
            return
        start = 0
        for future, count in writes:
            error = next((r.result_or_exc for r in results[start : start + count] if not r.success), None)
            start += count
            if error is None:
                future.set_result(None)
            else:
                self._failed(error)
                future.set_exception(error)

    def _failed(self, exc: BaseException) -> None:
        """Count a failed write; a warning line per kind of failure at most every
        WARN_EVERY seconds (the writer thread's alone: no lock)."""
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

    def _row(self, url: str) -> dict | None:
        row = self.session.execute(self._select_stmt, (url,), execution_profile=self.reads).one()
        return None if row is None else _record(row)

    def _rows(self, urls: list[str]) -> dict[str, dict]:
        """Every URL's row, read at once (``_read_keys``)."""
        return {row.url: _record(row) for row in self._read_keys(self._select_in_stmt, urls)}

    def _read_keys(self, statement, urls: list[str]) -> list:
        """The rows of ``urls`` by ``statement`` (``... WHERE url IN ?``): one read of at
        most READ_KEYS URLs per replica set, each sent to those replicas (the token map:
        no coordinator fans out to other nodes), all at once."""
        reads = []
        key = lambda url: self._select_stmt.bind((url,)).routing_key  # noqa: E731
        for group in self._replica_groups(urls, key).values():
            for start in range(0, len(group), READ_KEYS):
                chunk = group[start : start + READ_KEYS]
                bound = _Routed(statement).bind((chunk,))
                bound.routing_key = key(chunk[0])  # to its replicas
                reads.append((bound, None))
        return [row for result in self._read_all(reads) for row in result]

    def _read_all(self, statements: list[tuple]) -> list:
        """The result of each (statement, parameters), all sent at once (at most
        max_in_flight at a time); the first error is raised."""
        results = execute_concurrent(
            self.session, statements, concurrency=self.max_in_flight, execution_profile=self.reads
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
        """A bounded token-range scan of the urls table (no index on next_fetch_at): at most
        SCAN_PAGES pages of ``limit`` rows per call, filtered here, until ``limit`` rows
        are found; a page may come back empty with a cursor (more to scan). Every due URL is found once per full pass, at
        the cost of reading the whole table over the pass."""
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

    def close(self) -> None:
        """Wait for the writes made so far, then shut the cluster down (when the store
        made it)."""
        self._writer.shutdown(wait=True)
        if self.cluster is not None:
            self.cluster.shutdown()
