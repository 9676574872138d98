"""The Cassandra UrlStore (production), through cassandra-driver.

- Schema: schema.cql, package data read through importlib.resources, applied at start
  when CASSANDRA_APPLY_SCHEMA is true (every statement is ``IF NOT EXISTS``);
  ``schema_statements`` renders it.
- Prepared statements for every query; the URL row is written with an UPDATE (an
  upsert in Cassandra) whose ``metadata = metadata + ?`` merges fields instead of
  replacing the map.
- Asynchronous writes with bounded concurrency: at most CASSANDRA_MAX_IN_FLIGHT
  statements are in flight; more wait in a queue. A statement that fails with a
  timeout or an unavailable cluster is retried CASSANDRA_RETRIES times with exponential
  back-off (a warning line each time); then the write's Future fails and the page's lease
  is not acknowledged (it comes back later).
- Contact points, port, keyspace, credentials and consistency levels come from settings
  (CASSANDRA_*).
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections import deque
from concurrent.futures import Future
from datetime import UTC, datetime
from importlib import resources

from crawler.urlstore.store import (
    ArchivePointer,
    FetchRecord,
    UrlStore,
    answered,
    inlink_bucket,
    signed64,
    unsigned64,
    url_in_host,
)

logger = logging.getLogger(__name__)

SCHEMA = resources.files("crawler.urlstore").joinpath("schema.cql")
# columns schema.cql gained after its first version: added to an existing table at start
ADDED_COLUMNS = {
    "near_duplicate_of": "text",
    "resemblance": "float",
    "fetch_interval": "double",
    "etag": "text",
    "last_modified": "text",
}
SCAN_PAGES = 4  # pages of ``limit`` rows one ``due`` call reads at most (a token-range scan)

_ROW = (
    "UPDATE {ks}.urls SET canonical_url = ?, near_duplicate_of = ?, resemblance = ?, status = ?, fate = ?, fetched_at = ?, error = ?, "
    "next_fetch_at = ?, final_url = ?, redirect_chain = ?, content_digest = ?, simhash = ?, "
    "metadata = metadata + ?, archive_key = ?, archive_offset = ?, archive_length = ?, outlinks = ?, "
    "fetch_interval = ?, etag = ?, last_modified = ? WHERE url = ?"
)
_RESCHEDULE = "UPDATE {ks}.urls SET next_fetch_at = ? WHERE url = ?"
_RESCHEDULE_FETCHED = "UPDATE {ks}.urls SET next_fetch_at = ?, fetched_at = ? WHERE url = ?"
_RESCHEDULE_FETCH = "UPDATE {ks}.urls SET next_fetch_at = ?, fetched_at = ?, fetch_interval = ? WHERE url = ?"
_SCAN = (
    "SELECT url, token(url), next_fetch_at, fetched_at, fetch_interval, content_digest, etag, last_modified "
    "FROM {ks}.urls WHERE token(url) > ? LIMIT ?"
)
MIN_TOKEN = -(2**63)  # Murmur3Partitioner's smallest token
_METADATA = "UPDATE {ks}.urls SET metadata = metadata + ? WHERE url = ?"
_ARCHIVE = "UPDATE {ks}.urls SET archive_key = ?, archive_offset = ?, archive_length = ? WHERE url = ?"
_INLINK = "INSERT INTO {ks}.inlinks (target_url, bucket, source_url, anchor_text, nofollow) VALUES (?, ?, ?, ?, ?)"
_SELECT = (
    "SELECT url, canonical_url, near_duplicate_of, resemblance, status, fate, fetched_at, error, next_fetch_at, final_url, redirect_chain, "
    "content_digest, simhash, metadata, archive_key, archive_offset, archive_length, outlinks, fetch_interval, "
    "etag, last_modified FROM {ks}.urls WHERE url = ?"
)
_FETCHED = "SELECT url, fate, status, fetched_at, archive_key FROM {ks}.urls WHERE url = ?"
_INLINKS = "SELECT source_url, anchor_text, nofollow FROM {ks}.inlinks WHERE target_url = ? AND bucket = ? LIMIT ?"
_INLINKS_AFTER = (
    "SELECT source_url, anchor_text, nofollow FROM {ks}.inlinks WHERE target_url = ? AND bucket = ? "
    "AND source_url > ? LIMIT ?"
)


def schema_statements(keyspace: str, replication: str) -> list[str]:
    """The statements of schema.cql for this keyspace, comments removed."""
    lines = [line.split("--", 1)[0] for line in SCHEMA.read_text(encoding="utf-8").splitlines()]
    text = "\n".join(lines).replace("{keyspace}", keyspace).replace("{replication}", replication)
    return [" ".join(s.split()) for s in text.split(";") if s.strip()]


def add_columns(cluster, session, keyspace: str) -> None:
    """Add ADDED_COLUMNS to a urls table made by an earlier version (another worker may be
    adding them at the same moment)."""
    from cassandra import InvalidRequest

    name = keyspace if keyspace.startswith('"') else keyspace.lower()  # CQL folds unquoted names
    cluster.refresh_table_metadata(name.strip('"'), "urls")
    have = cluster.metadata.keyspaces[name.strip('"')].tables["urls"].columns
    for column, kind in ADDED_COLUMNS.items():
        if column not in have:
            try:
                session.execute(f"ALTER TABLE {keyspace}.urls ADD {column} {kind}")
            except InvalidRequest as exc:  # added by another worker meanwhile
                if "conflicts with an existing column" not in str(exc) and "already exist" not in str(exc):
                    raise


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


def _time(value: float | None):
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _seconds(value) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


class CassandraUrlStore(UrlStore):
    def __init__(
        self,
        session,
        keyspace: str,
        *,
        url_options: dict | None = None,
        inlink_buckets: int = 16,
        write_consistency: str = "LOCAL_QUORUM",
        read_consistency: str = "LOCAL_ONE",
        max_in_flight: int = 64,
        retries: int = 5,
        retry_delay: float = 0.5,
        cluster=None,
    ):
        from cassandra import ConsistencyLevel

        super().__init__(url_options, inlink_buckets)
        self.session = session
        self.cluster = cluster
        self.keyspace = keyspace
        self.max_in_flight = max_in_flight
        self.retries = retries
        self.retry_delay = retry_delay
        write = ConsistencyLevel.name_to_value[write_consistency.upper()]
        read = ConsistencyLevel.name_to_value[read_consistency.upper()]

        def prepare(cql: str, consistency: int):
            statement = session.prepare(cql.format(ks=keyspace))
            statement.consistency_level = consistency
            return statement

        self._row_stmt = prepare(_ROW, write)
        self._metadata_stmt = prepare(_METADATA, write)
        self._archive_stmt = prepare(_ARCHIVE, write)
        self._inlink_stmt = prepare(_INLINK, write)
        self._select_stmt = prepare(_SELECT, read)
        self._inlinks_stmt = prepare(_INLINKS, read)
        self._inlinks_after_stmt = prepare(_INLINKS_AFTER, read)
        self._fetched_stmt = prepare(_FETCHED, read)
        self._reschedule_stmt = prepare(_RESCHEDULE, write)
        self._reschedule_fetch_stmt = prepare(_RESCHEDULE_FETCH, write)
        self._reschedule_fetched_stmt = prepare(_RESCHEDULE_FETCHED, write)
        self._scan_stmt = prepare(_SCAN, read)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._waiting: deque = deque()

    @classmethod
    def from_settings(cls, settings, url_options: dict) -> CassandraUrlStore:
        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import Cluster

        hosts = settings.getlist("CASSANDRA_HOSTS")
        user = settings.get("CASSANDRA_USERNAME")
        auth = PlainTextAuthProvider(user, settings.get("CASSANDRA_PASSWORD")) if user else None
        cluster = Cluster(
            hosts, port=settings.getint("CASSANDRA_PORT"), auth_provider=auth, ssl_context=tls_context(settings)
        )
        session = cluster.connect()
        keyspace = settings.get("CASSANDRA_KEYSPACE")
        if settings.getbool("CASSANDRA_APPLY_SCHEMA"):
            for statement in schema_statements(keyspace, settings.get("CASSANDRA_REPLICATION")):
                session.execute(statement)
            add_columns(cluster, session, keyspace)
        logger.info(
            "Cassandra UrlStore: keyspace %s on %s%s",
            keyspace,
            ", ".join(hosts),
            " (TLS)" if settings.getbool("CASSANDRA_TLS") else "",
        )
        return cls(
            session,
            keyspace,
            url_options=url_options,
            inlink_buckets=settings.getint("URLSTORE_INLINK_BUCKETS"),
            write_consistency=settings.get("CASSANDRA_WRITE_CONSISTENCY"),
            read_consistency=settings.get("CASSANDRA_READ_CONSISTENCY"),
            max_in_flight=settings.getint("CASSANDRA_MAX_IN_FLIGHT"),
            retries=settings.getint("CASSANDRA_RETRIES"),
            cluster=cluster,
        )

    # -- writes ------------------------------------------------------------------------

    def record_fetch(self, r: FetchRecord) -> Future:
        url = self.normalize(r.url)
        archive = r.archive or ArchivePointer("", 0, 0)
        row = (
            r.canonical_url,
            r.near_duplicate_of,
            r.resemblance,
            r.status,
            r.fate,
            _time(r.fetched_at),
            r.error,
            _time(r.next_fetch_at),
            r.final_url,
            list(r.redirect_chain),
            r.content_digest,
            signed64(r.simhash),
            dict(r.metadata or {}),
            archive.key or None,
            archive.offset if archive.key else None,
            archive.length if archive.key else None,
            [(link["url"], link.get("text", ""), bool(link.get("nofollow"))) for link in r.outlinks],
            r.fetch_interval,
            r.etag,
            r.last_modified,
            url,
        )
        bucket = inlink_bucket(url, self.inlink_buckets)
        statements = [(self._row_stmt, row)] + [
            (self._inlink_stmt, (link["url"], bucket, url, link.get("text", ""), bool(link.get("nofollow"))))
            for link in r.outlinks
        ]
        return self._all([self._submit(stmt, params) for stmt, params in statements])

    def update_metadata(self, url: str, fields: dict[str, str]) -> Future:
        return self._submit(self._metadata_stmt, (dict(fields), self.normalize(url)))

    def reschedule(
        self,
        url: str,
        next_fetch_at: float | None,
        fetched_at: float | None = None,
        fetch_interval: float | None = None,
    ) -> Future:
        url = self.normalize(url)
        if fetched_at is None:
            if fetch_interval is not None:
                raise ValueError("Cassandra reschedule: a fetch_interval goes with its fetched_at")
            return self._submit(self._reschedule_stmt, (_time(next_fetch_at), url))
        if fetch_interval is None:
            return self._submit(self._reschedule_fetched_stmt, (_time(next_fetch_at), _time(fetched_at), url))
        return self._submit(self._reschedule_fetch_stmt, (_time(next_fetch_at), _time(fetched_at), fetch_interval, url))

    def set_archive(self, url: str, archive: ArchivePointer) -> Future:
        return self._submit(self._archive_stmt, (archive.key, archive.offset, archive.length, self.normalize(url)))

    def _all(self, futures: list[Future]) -> Future:
        """One Future for several: done when all are, failed when one fails."""
        result: Future = Future()
        remaining = [len(futures)]
        lock = threading.Lock()

        def one_done(f: Future):
            with lock:
                if result.done():
                    return
                if f.exception() is not None:
                    result.set_exception(f.exception())
                    return
                remaining[0] -= 1
                if remaining[0] == 0:
                    result.set_result(None)

        for f in futures:
            f.add_done_callback(one_done)
        return result

    def _submit(self, statement, params) -> Future:
        future: Future = Future()
        with self._lock:
            if self._in_flight >= self.max_in_flight:
                self._waiting.append((statement, params, future, 0))
                return future
            self._in_flight += 1
        self._execute(statement, params, future, 0)
        return future

    def _execute(self, statement, params, future: Future, attempt: int) -> None:
        try:
            response = self.session.execute_async(statement, params)
        except Exception as exc:  # e.g. NoHostAvailable raised at once
            self._failed(statement, params, future, attempt, exc)
            return
        response.add_callbacks(
            self._succeeded, self._errback, callback_args=(future,), errback_args=(statement, params, future, attempt)
        )

    def _succeeded(self, _rows, future: Future) -> None:
        future.set_result(None)
        self._next()

    def _errback(self, exc, statement, params, future: Future, attempt: int) -> None:
        self._failed(statement, params, future, attempt, exc)

    def _failed(self, statement, params, future: Future, attempt: int, exc) -> None:
        from cassandra import OperationTimedOut, Unavailable, WriteTimeout
        from cassandra.cluster import NoHostAvailable

        retriable = isinstance(exc, (OperationTimedOut, Unavailable, WriteTimeout, NoHostAvailable))
        if retriable and attempt < self.retries:
            delay = self.retry_delay * 2**attempt
            logger.warning(
                "Cassandra write failed (%s: %s); retry %d in %.1f s", type(exc).__name__, exc, attempt + 1, delay
            )
            timer = threading.Timer(delay, self._execute, (statement, params, future, attempt + 1))
            timer.daemon = True
            timer.start()
            return
        logger.error("Cassandra write failed for good (%s: %s)", type(exc).__name__, exc)
        future.set_exception(exc)
        self._next()

    def _next(self) -> None:
        with self._lock:
            if not self._waiting:
                self._in_flight -= 1
                return
            statement, params, future, attempt = self._waiting.popleft()
        self._execute(statement, params, future, attempt)

    # -- reads -------------------------------------------------------------------------

    def _row(self, url: str) -> dict | None:
        row = self.session.execute(self._select_stmt, (url,)).one()
        return None if row is None else self._record(row)

    def _record(self, row) -> dict:
        return {
            "url": row.url,
            "canonical_url": row.canonical_url,
            "near_duplicate_of": row.near_duplicate_of,
            "resemblance": row.resemblance,
            "status": row.status,
            "fate": row.fate,
            "fetched_at": _seconds(row.fetched_at),
            "error": row.error,
            "next_fetch_at": _seconds(row.next_fetch_at),
            "final_url": row.final_url,
            "redirect_chain": list(row.redirect_chain or []),
            "content_digest": row.content_digest,
            "simhash": unsigned64(row.simhash),
            "metadata": dict(row.metadata or {}),
            "archive": (
                {"key": row.archive_key, "offset": row.archive_offset, "length": row.archive_length}
                if row.archive_key
                else None
            ),
            "outlinks": [{"url": u, "text": t, "nofollow": bool(n)} for u, t, n in row.outlinks or []],
            "fetch_interval": row.fetch_interval,
            "etag": row.etag,
            "last_modified": row.last_modified,
        }

    def due(
        self,
        before: float,
        limit: int = 1000,
        after: tuple | None = None,
        host: str | None = None,
        fetched_before: float | None = None,
    ) -> tuple[list[dict], tuple | None]:
        """A bounded token-range scan of the urls table (no index on next_fetch_at): at most
        SCAN_PAGES pages of ``limit`` rows per call, filtered here; a page may come back
        empty with a cursor (more to scan). Every due URL is found once per full pass, at
        the cost of reading the whole table over the pass."""
        token = after[0] if after else MIN_TOKEN
        out: list[dict] = []
        for _ in range(SCAN_PAGES):
            rows = list(self.session.execute(self._scan_stmt, (token, limit)))
            for row in rows:
                token = row[1]
                next_at, fetched = _seconds(row.next_fetch_at), _seconds(row.fetched_at)
                if fetched_before is None:
                    if next_at is None or next_at > before:
                        continue
                elif fetched is None or fetched > fetched_before:
                    continue
                if host and not url_in_host(row.url, host):
                    continue
                out.append(
                    {
                        "url": row.url,
                        "next_fetch_at": next_at,
                        "fetched_at": fetched,
                        "fetch_interval": row.fetch_interval,
                        "content_digest": row.content_digest,
                        "etag": row.etag,
                        "last_modified": row.last_modified,
                    }
                )
            if len(rows) < limit:
                return out, None
            if len(out) >= limit:
                break
        return out, (token,)

    def last_fetched(self, urls: list[str], archived: bool = False) -> dict[str, float]:
        """One prepared statement per URL, all sent at once (a partition each), then
        gathered: one round trip's wait for the batch."""
        given: dict[str, list[str]] = {}  # normalized -> the URLs asked
        for u in urls:
            given.setdefault(self.normalize(u), []).append(u)
        pending = [self.session.execute_async(self._fetched_stmt, (url,)) for url in given]
        out = {}
        for response in pending:
            row = response.result().one()
            if (
                row is not None
                and answered(row.fate, row.status, row.archive_key, archived)
                and row.fetched_at is not None
            ):
                out.update(dict.fromkeys(given[row.url], _seconds(row.fetched_at)))
        return out

    def _inlinks(self, url: str, limit: int, after: str | None = None) -> list[dict]:
        # each bucket is ordered by source URL: the first ``limit`` after the cursor of
        # every bucket, merged
        out = []
        for bucket in range(self.inlink_buckets):
            if after is None:
                rows = self.session.execute(self._inlinks_stmt, (url, bucket, limit))
            else:
                rows = self.session.execute(self._inlinks_after_stmt, (url, bucket, after, limit))
            out += [{"url": r.source_url, "text": r.anchor_text, "nofollow": bool(r.nofollow)} for r in rows]
        out.sort(key=lambda link: link["url"])
        return out[:limit]

    def close(self) -> None:
        with self._lock:
            pending = [f for _, _, f, _ in self._waiting]
        for f in pending:
            try:
                f.result(timeout=60)
            except Exception:  # already logged
                pass
        if self.cluster is not None:
            self.cluster.shutdown()
