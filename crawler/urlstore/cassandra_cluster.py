"""The Cassandra cluster side of the UrlStore: the schema (schema.cql rendered for a
keyspace, replication and table ids; columns added to an older table), the connection
(TLS, patience at start, the local datacenter), consistency levels by replication
factor, the retry policy for idempotent statements, and the driver's log kept readable
(crawler/urlstore/cassandra.py is the store on top).
"""

from __future__ import annotations

import contextlib
import logging
import re
import ssl
import time
import uuid
from importlib import resources

from cassandra import DriverException, InvalidRequest, Unauthorized
from cassandra.cluster import NoHostAvailable
from cassandra.policies import RetryPolicy

from crawler.config.values import CQL_NAME, DATACENTER_NAME
from crawler.exceptions import ServiceUnreachable
from crawler.urlstore.record import COLUMNS as RECORD_COLUMNS

logger = logging.getLogger(__name__)


SCHEMA = resources.files("crawler.urlstore").joinpath("schema.cql")


# The urls table's columns (but its key, url) with their CQL types, as schema.cql makes
# them: a fetch's record writes them all, in this order, and every read maps them back.
# A table made before the lists were frozen keeps them as they were and works alike (a
# list binds the same either way), with a tombstone per list per write: no migration.
COLUMNS = {name: cql for name, _, cql, _ in RECORD_COLUMNS}


# columns schema.cql gained after its first version: added to an existing table at start
ADDED_COLUMNS = tuple(name for name, _, _, added in RECORD_COLUMNS if added)


WARN_EVERY = 30.0  # seconds between two warning lines of one kind of write failure


RECONNECT_MAX = 10.0  # seconds between two tries of a node that went down, at most
SCHEMA_TRIES = 4  # reads of the schema at start (the nodes may not agree yet), 1 s, 2 s, 3 s apart


TABLES = ("urls", "inlinks", "urls_due", "urls_due_hours", "frontier_chunks")  # schema.cql's tables


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
    for table in TABLES:
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
    for attempt in range(SCHEMA_TRIES):
        try:
            cluster.refresh_schema_metadata()  # waits for the nodes to agree first (max_schema_agreement_wait)
            break
        except DriverException as exc:  # (workers making the schema together, a node far away: again)
            if attempt == SCHEMA_TRIES - 1:
                raise
            logger.warning("Cassandra schema not read (%s); trying again in %d s", exc, attempt + 1)
            time.sleep(attempt + 1)
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


# a write batch's bytes: Cassandra's batch_size_warn_threshold when a node does not say
# (5 KiB); a cut under the node's threshold, for the rows whose bytes the store counts
# high or a version counts a little otherwise; the most a batch carries, whatever the
# nodes allow (a request's size and the node's memory for it)
DEFAULT_BATCH_WARN = 5 * 1024
BATCH_MARGIN = 0.97
MAX_BATCH_BYTES = 64 * 1024

_BATCH_SETTINGS = (
    "SELECT name, value FROM system_views.settings WHERE name IN "
    "('batch_size_warn_threshold', 'batch_size_fail_threshold', "
    "'batch_size_warn_threshold_in_kb', 'batch_size_fail_threshold_in_kb')"
)
_SIZE = re.compile(r"\s*(\d+)\s*(B|KiB|MiB)?\s*")
_UNITS = {None: 1, "B": 1, "KiB": 1024, "MiB": 1024 * 1024}


def setting_bytes(name: str, value: str | None) -> int | None:
    """A batch size setting of system_views.settings in bytes: ``5KiB`` (Cassandra 4.1 and
    later), or a number of KiB under a name that ends ``_in_kb`` (4.0); None for a value
    that is neither."""
    match = _SIZE.fullmatch(value or "")
    if not match:
        return None
    number, unit = int(match.group(1)), match.group(2)
    return number * 1024 if name.endswith("_in_kb") and unit is None else number * _UNITS[unit]


def batch_bytes(session) -> tuple[int, str]:
    """(bytes, why): the bytes a write batch may have on ``session``'s cluster, and where
    the figure comes from. Each node the session writes to (those it holds connections to:
    the local datacenter's, up) says its batch_size_warn_threshold (and _fail_) in
    ``system_views.settings`` (Cassandra 4.0 and later): a batch over it is logged at the
    node as a warning each time; the smallest of them, BATCH_MARGIN under it, at most
    MAX_BATCH_BYTES. A node that refuses the read (an older version without the table, no
    right to read it) counts as Cassandra's default, 5 KiB; one that does not answer (a
    timeout, a node going down) is passed over."""
    said_by: list[int] = []
    unread, unanswered = [], []
    for host in session.get_pool_state():
        if host.is_up is False:
            continue
        try:
            rows = session.execute(_BATCH_SETTINGS, host=host)
        except (InvalidRequest, Unauthorized) as exc:  # no such table, or no right to read it
            unread.append(f"{host.endpoint}: {str(exc).splitlines()[0][:120]}")
            said_by.append(DEFAULT_BATCH_WARN)
            continue
        except Exception as exc:  # no answer (a timeout, a node going down): its figure is not known
            unanswered.append(f"{host.endpoint}: {type(exc).__name__}")
            continue
        said: dict[str, int] = {}
        for name, value in rows:
            size = setting_bytes(name, value)
            if size is not None:
                said.setdefault(name.removesuffix("_in_kb"), size)
        said_by.append(said.get("batch_size_warn_threshold", DEFAULT_BATCH_WARN))
        if "batch_size_fail_threshold" in said:
            said_by.append(said["batch_size_fail_threshold"])
    if not said_by:
        why = "Cassandra's default batch_size_warn_threshold, 5 KiB: no node answered"
        return int(DEFAULT_BATCH_WARN * BATCH_MARGIN), why + (f" ({'; '.join(unanswered)})" if unanswered else "")
    limit = min(said_by)
    size = max(256, min(MAX_BATCH_BYTES, int(limit * BATCH_MARGIN)))
    why = f"{BATCH_MARGIN:.0%} of {limit} bytes, the smallest batch threshold of the nodes"
    if size == MAX_BATCH_BYTES:
        why += f", at most {MAX_BATCH_BYTES}"
    if unread:
        why += f"; 5 KiB where a node did not say: {'; '.join(unread)}"
    if unanswered:
        why += f"; not answered: {'; '.join(unanswered)}"
    return size, why


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
    cluster still starting), waiting 1 s, 2 s... (at most 10 s) with one warning line each
    time, for ``patience`` seconds in all (the last try at its end); then ServiceUnreachable, one line saying where
    and why. The driver's own log of those failed tries (a warning and an error with
    their tracebacks, each try) is left out: the warning line says it. When no node
    answers because CASSANDRA_DATACENTER names a datacenter the cluster does not have, a
    ValueError that says so, at once."""
    started = time.monotonic()
    deadline, wait = started + patience, 1.0
    while True:
        cluster = make_cluster()
        try:
            with _quiet_control_connection():
                # every local node's pool made before the store starts (a write batch's size
                # is asked of each: batch_bytes), not only the first
                return cluster, cluster.connect(wait_for_all_pools=True)
        except NoHostAvailable as exc:
            known = sorted({host.datacenter for host in cluster.metadata.all_hosts() if host.datacenter})
            cluster.shutdown()
            if datacenter and known and datacenter not in known:
                raise ValueError(
                    f"CASSANDRA_DATACENTER={datacenter!r} is not a datacenter of the cluster ({', '.join(known)})"
                ) from None
            why = no_host_reason(exc)
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServiceUnreachable(
                    f"Cassandra unreachable at {contact} for {time.monotonic() - started:.0f} s "
                    f"(CASSANDRA_CONNECT_TIMEOUT {patience:g} s): {why}"
                ) from None
            # the last wait is cut to the deadline, and the last try made there: the worker
            # waits as long as it was told, however long each try took
            pause = min(wait, left)
            logger.warning("Cassandra not reachable at %s (%s); trying again in %.2g s", contact, why, pause)
            time.sleep(pause)
            wait = min(wait * 2, 10.0)


def no_host_reason(exc: NoHostAvailable) -> str:
    """Why no node answered, a few words a node: ``127.0.0.1:9042: Connection refused``."""
    errors = getattr(exc, "errors", None) or {}
    parts = []
    for host, error in errors.items():
        text = str(error).strip() or type(error).__name__
        text = text.rpartition("Last error: ")[2] if "Last error: " in text else text
        parts.append(f"{host}: {text.splitlines()[0]}")
    return "; ".join(parts) or (str(exc.args[0]) if exc.args else "no node answered")


class _ControlConnectionTries(logging.Filter):
    """Drops the driver's records of a failed first connection (ours say it in a line)."""

    MESSAGES = ("[control connection] Error connecting to", "Control connection failed to connect")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.MESSAGES)


@contextlib.contextmanager
def _quiet_control_connection():
    driver = logging.getLogger("cassandra.cluster")
    quiet = _ControlConnectionTries()
    driver.addFilter(quiet)
    try:
        yield
    finally:
        driver.removeFilter(quiet)


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


_POOL_LOG = logging.getLogger("cassandra.pool")

if not any(isinstance(f, BatchWarnings) for f in _PROTOCOL_LOG.filters):
    _PROTOCOL_LOG.addFilter(BatchWarnings())

if not any(isinstance(f, ReconnectWarnings) for f in _POOL_LOG.filters):
    _POOL_LOG.addFilter(ReconnectWarnings())
