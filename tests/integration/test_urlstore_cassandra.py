"""What only the Cassandra UrlStore does, against the live cluster CASSANDRA_HOSTS names
(tests/conftest.py; each test in a keyspace of its own): no tombstones, the schema and its
upgrade, the driver's routing, consistency, concurrency and retries, and failures.
The contract both backends keep is tests/*/test_urlstore.py.

Here: the tests on real services in this process (Redis, Cassandra, S3, page processes); the
others of this subject: tests/unit/test_urlstore_cassandra.py."""

from __future__ import annotations

import logging
import re
import socket
import threading
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import NoHostAvailable
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
from scrapy.settings import Settings

import crawler.urlstore.cassandra as backend
import crawler.urlstore.cassandra_cluster as cluster
import crawler.urlstore.cassandra_reads as reading
from crawler.exceptions import ServiceUnreachable
from crawler.urlstore.cassandra import CassandraUrlStore
from crawler.urlstore.cassandra_cluster import COLUMNS, IdempotentRetries, schema_statements
from crawler.urlstore.cassandra_due import DUE_BUCKETS, HOUR_MS
from crawler.urlstore.cassandra_reads import SCAN_PAGES
from crawler.urlstore.record import ArchivePointer, FetchRecord
from testing.servers import free_port
from testing.services import project_settings
from testing.stores import cassandra_hosts, cassandra_port, cells_read

T = 1_700_000_000.5
HOUR = 3600


def _fetched(url, **kw):
    defaults = {"fate": "fetched", "fetched_at": T, "status": 200, "final_url": url}
    return FetchRecord(url=url, **{**defaults, **kw})


def _settings(keyspace: str, port: int | None = None, **overrides) -> Settings:
    return Settings(
        project_settings(
            URLSTORE_BACKEND="cassandra",
            CASSANDRA_HOSTS=cassandra_hosts(),
            CASSANDRA_PORT=port or cassandra_port(),
            CASSANDRA_KEYSPACE=keyspace,
            **overrides,
        )
    )


@pytest.fixture
def store(cassandra_session, cassandra_keyspace):
    for statement in schema_statements(cassandra_keyspace):
        cassandra_session.execute(statement)
    s = CassandraUrlStore(cassandra_session, cassandra_keyspace, inlink_buckets=4)
    yield s
    s.close()


class Requests:
    """Every request the driver session sends while it is used as a context manager (the
    driver's own request listener): its CQL, consistency level, and how many were in flight
    at most."""

    def __init__(self, session):
        self.session = session
        self.sent: list[tuple[str, int]] = []
        self.in_flight = self.peak = 0
        self._lock = threading.Lock()

    def _sent(self, response_future):
        query = response_future.query
        cql = getattr(getattr(query, "prepared_statement", None), "query_string", None) or str(query)
        with self._lock:
            self.sent.append((cql, response_future.message.consistency_level))
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        response_future.add_callbacks(self._done, self._done)

    def _done(self, _):
        with self._lock:
            self.in_flight -= 1

    def of(self, words: str) -> list[tuple[str, int]]:
        return [(cql, level) for cql, level in self.sent if words in cql]

    def __enter__(self) -> Requests:
        self.session.add_request_init_listener(self._sent)
        return self

    def __exit__(self, *exc) -> None:
        self.session.remove_request_init_listener(self._sent)


def test_the_columns_table_is_the_schema_the_backend_makes(cassandra_session, cassandra_keyspace):
    for statement in schema_statements(cassandra_keyspace):
        cassandra_session.execute(statement)
    table = cassandra_session.cluster.metadata.keyspaces[cassandra_keyspace].tables["urls"]
    assert {name: column.cql_type for name, column in table.columns.items()} == {"url": "text", **COLUMNS}


def test_records_with_absent_fields_write_no_tombstone(store, cassandra_session, cassandra_keyspace):
    """First fetches, failures, refetches, pointers, metadata and reschedules, each leaving
    fields out: Cassandra reads the whole table back without a tombstone, and each record
    is what the contract says (a record with an answer replaces the previous one; one
    without writes its attempt alone)."""
    urls = [f"http://t.example/{i}" for i in range(40)]
    link = {"url": "http://t.example/target", "text": "", "nofollow": False}
    writes = [store.record_fetch(_fetched(u, metadata={"title": u[-2:]}, outlinks=[link])) for u in urls]
    writes += [
        store.record_fetch(FetchRecord(url=f"http://u.example/{i}", fate="dns_error", fetched_at=T)) for i in range(20)
    ]
    writes += [store.update_metadata("http://v.example/meta-only", {"title": "t"})]
    _all_done(writes)
    _all_done([store.set_archive(u, ArchivePointer("ab/x.warc.gz", 10, 20), T) for u in urls[:20]])
    # refetches: a failure, a success without pointer, digest or links
    _all_done(
        [
            store.record_fetch(FetchRecord(url=u, fate="timeout", error="TimeoutError", fetched_at=T + 1))
            for u in urls[:10]
        ]
    )
    _all_done([store.record_fetch(_fetched(u, fetched_at=T + 2)) for u in urls[:5]])
    _all_done([store.reschedule(u, None, fetched_at=T + 3) for u in urls[20:30]])
    _all_done([store.reschedule(u, T + 600) for u in urls[30:]])

    assert cells_read(cassandra_session, f"{cassandra_keyspace}.urls") == (61, 61, 0)
    assert cells_read(cassandra_session, f"{cassandra_keyspace}.inlinks") == (40, 40, 0)
    refetched = store.get(urls[0])  # a failure, then a success: no error, no pointer, no links
    assert (refetched["fate"], refetched["status"], refetched["error"]) == ("fetched", 200, None)
    assert refetched["archive"] is None and refetched["outlinks"] == [] and refetched["metadata"] == {"title": "/0"}
    failed = store.get(urls[7])  # a failure: its attempt, beside the page of the answer before
    assert (failed["fate"], failed["status"], failed["error"], failed["final_url"]) == (
        "timeout",
        None,
        "TimeoutError",
        urls[7],
    )
    assert failed["archive"]["key"] == "ab/x.warc.gz" and failed["outlinks"] == [link]
    assert store.get(urls[12])["archive"] == {"key": "ab/x.warc.gz", "offset": 10, "length": 20, "bucket": ""}
    assert store.get(urls[25])["next_fetch_at"] is None and store.get(urls[35])["next_fetch_at"] == pytest.approx(
        T + 600
    )
    assert store.get("http://v.example/meta-only")["fate"] is None
    # the measure sees a tombstone when there is one: a null written by hand
    cassandra_session.execute(f"UPDATE {cassandra_keyspace}.urls SET etag = null WHERE url = %s", (urls[1],))
    assert cells_read(cassandra_session, f"{cassandra_keyspace}.urls")[2] == 1


def _all_done(futures, timeout: float = 30) -> None:
    for f in futures:
        f.result(timeout)


# the urls table as schema.cql first made it: lists not frozen, none of ADDED_COLUMNS
_OLD_URLS = """CREATE TABLE {ks}.urls (
    url text PRIMARY KEY, canonical_url text, status int, fate text, fetched_at timestamp, error text,
    next_fetch_at timestamp, final_url text, redirect_chain list<text>, content_digest text, simhash bigint,
    metadata map<text, text>, archive_key text, archive_offset bigint, archive_length bigint,
    outlinks list<frozen<tuple<text, text, boolean>>>)"""


def _open_at_once(keyspace: str, workers: int) -> tuple[list, list]:
    """(stores, errors) of ``workers`` threads opening the store of ``keyspace`` at the
    same moment, each as a worker does (from_settings: the schema applied)."""
    stores, errors = [], []
    start = threading.Barrier(workers)

    def open_store():
        try:
            start.wait(30)
            stores.append(CassandraUrlStore.from_settings(_settings(keyspace), {}))
        except Exception as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return stores, errors


def test_an_old_table_gains_the_new_columns_and_keeps_working(cassandra_session, cassandra_keyspace):
    ks = cassandra_keyspace
    cassandra_session.execute(schema_statements(ks)[0])  # the keyspace
    cassandra_session.execute(_OLD_URLS.format(ks=ks))
    cassandra_session.execute(f"INSERT INTO {ks}.urls (url, fate, status) VALUES ('http://o.example/', 'fetched', 200)")
    stores, errors = _open_at_once(ks, 3)  # three workers, each applying the schema
    try:
        assert not errors and len(stores) == 3, errors
        table = cassandra_session.cluster.metadata
        cassandra_session.cluster.refresh_table_metadata(ks, "urls")
        columns = table.keyspaces[ks].tables["urls"].columns
        assert set(cluster.ADDED_COLUMNS) <= set(columns)
        assert columns["redirect_chain"].cql_type == "list<text>"  # left as it was
        old = stores[0].get("http://o.example/")
        assert old["fate"] == "fetched" and old["etag"] is None and old["redirect_chain"] == []
        record = _fetched("http://o.example/new", redirect_chain=["http://o.example/r"], etag='"x"')
        record.outlinks = [{"url": "http://o.example/", "text": "o", "nofollow": False}]
        stores[1].record_fetch(record).result(30)
        got = stores[2].get("http://o.example/new")
        assert got["redirect_chain"] == ["http://o.example/r"] and got["etag"] == '"x"'
        assert [link["url"] for link in stores[2].inlinks("http://o.example/")] == ["http://o.example/new"]
        # (each write of a list that is not frozen also deletes the list before it: a
        # collection tombstone, which the trace's "tombstone cells" do not count)
    finally:
        for s in stores:
            s.close()


def test_workers_making_a_new_keyspace_at_once_make_one_schema(cassandra_session, cassandra_keyspace):
    """Three workers open a keyspace that is not there yet, at once: each applies the
    schema and gets the store, and each table has the id every worker gives it (on a
    cluster, workers creating a table at once through different nodes then agree)."""
    ks = cassandra_keyspace
    stores, errors = _open_at_once(ks, 3)
    try:
        assert not errors and len(stores) == 3, errors
        ids = {
            row.table_name: row.id
            for row in cassandra_session.execute(
                "SELECT table_name, id FROM system_schema.tables WHERE keyspace_name = %s", (ks,)
            )
        }
        assert ids == {table: cluster.table_id(ks, table) for table in cluster.TABLES}
        stores[0].record_fetch(_fetched("http://k.example/")).result(30)
        assert stores[2].get("http://k.example/")["fate"] == "fetched"
    finally:
        for store in stores:
            store.close()


def test_a_worker_waits_for_a_cluster_that_is_starting(cassandra_keyspace, caplog):
    """No node answers yet (nothing listens on the port): the worker tries again, one
    warning line a try, for CASSANDRA_CONNECT_TIMEOUT seconds; then it does not start."""
    started = time.monotonic()
    port = free_port()
    with pytest.raises(ServiceUnreachable) as failed, caplog.at_level("WARNING"):
        CassandraUrlStore.from_settings(_settings(cassandra_keyspace, port, CASSANDRA_CONNECT_TIMEOUT=4), {})
    waited = time.monotonic() - started
    lines = [r.getMessage() for r in caplog.records if r.name == cluster.__name__]
    # tried at 0, 1, 3 and 4 s: the last wait cut to the deadline (on a loaded machine, where
    # a try takes a second, the waits are 1 s and what is left before the deadline)
    assert 4 <= waited < 30 and 2 <= len(lines) <= 3, (waited, lines)
    prefix = f"Cassandra not reachable at 127.0.0.1:{port} (127.0.0.1:{port}: Connection refused); trying again in "
    assert lines[0] == prefix + "1 s" and all(line.startswith(prefix) for line in lines), lines
    assert re.match(rf"Cassandra unreachable at 127\.0\.0\.1:{port} for [456] s ", str(failed.value)), failed.value
    assert str(failed.value).endswith(f"127.0.0.1:{port}: Connection refused")
    driver = [r for r in caplog.records if r.name.startswith("cassandra")]
    assert not driver, [r.getMessage() for r in driver]  # (the driver's tracebacks of each try: left out)


def test_from_settings_routes_token_aware_in_the_datacenter_at_its_levels(cassandra_session, cassandra_keyspace):
    datacenter = cassandra_session.execute("SELECT data_center FROM system.local").one().data_center
    store = CassandraUrlStore.from_settings(
        _settings(
            cassandra_keyspace, CASSANDRA_DATACENTER=datacenter, CASSANDRA_REQUEST_TIMEOUT=7, CASSANDRA_RETRIES=3
        ),
        {},
    )
    try:
        keyspace = store.cluster.metadata.keyspaces[cassandra_keyspace]
        assert keyspace.replication_strategy.export_for_schema() == (
            f"{{'class': 'NetworkTopologyStrategy', '{datacenter}': '1'}}"
        )
        for profile, level in ((store.writes, ConsistencyLevel.LOCAL_ONE), (store.reads, ConsistencyLevel.LOCAL_ONE)):
            routing = profile.load_balancing_policy
            assert isinstance(routing, TokenAwarePolicy) and isinstance(routing._child_policy, DCAwareRoundRobinPolicy)
            assert routing._child_policy.local_dc == datacenter
            assert profile.consistency_level == level and profile.request_timeout == 7
            assert isinstance(profile.retry_policy, IdempotentRetries) and profile.retry_policy.retries == 3
        store.record_fetch(_fetched("http://dc.example/")).result(30)
        assert store.get("http://dc.example/")["status"] == 200
    finally:
        store.close()
    # a datacenter the cluster does not have: refused at start, naming those it has
    with pytest.raises(
        ValueError, match=f"CASSANDRA_DATACENTER='nodc' is not a datacenter of the cluster \\({datacenter}\\)"
    ):
        CassandraUrlStore.from_settings(_settings(cassandra_keyspace, CASSANDRA_DATACENTER="nodc"), {})


def test_writes_are_sent_together_within_the_bound_and_the_later_one_wins(cassandra_session, cassandra_keyspace):
    for statement in schema_statements(cassandra_keyspace):
        cassandra_session.execute(statement)
    store = CassandraUrlStore(cassandra_session, cassandra_keyspace, inlink_buckets=4, max_in_flight=8)
    links = [{"url": f"http://t.example/{i}", "text": "", "nofollow": False} for i in range(20)]
    try:
        with Requests(cassandra_session) as requests:
            _all_done([store.record_fetch(_fetched(f"http://s{i}.example/", outlinks=links)) for i in range(30)])
        assert 1 < requests.peak <= 8
        # the pages' rows, their pointers (none yet) and their 20 inlinks each, 660 statements, in UNLOGGED batches of
        # the writes waiting together (one node: one replica set): fewer requests than pages
        carried = [
            int(n)
            for cql, _ in requests.sent
            for n in re.findall(r"BatchStatement type=UNLOGGED, statements=(\d+)", cql)
        ]
        alone = [cql for cql, _ in requests.sent if "BatchStatement" not in cql]
        assert sum(carried) + len(alone) == 30 * 22 and len(requests.sent) < 30, requests.sent
        assert len(store.inlinks("http://t.example/3")) == 30
        # writes of one row made one after the other without waiting: each row ends as the
        # last write made it, however they were grouped and sent
        writes = []
        for i in range(20):
            url = f"http://o.example/{i}"
            writes += [
                store.record_fetch(_fetched(url, metadata={"a": "1"})),
                store.set_archive(url, ArchivePointer("first.warc.gz", 1, 2), T),
                store.record_fetch(FetchRecord(url=url, fate="timeout", fetched_at=T + 1)),
                store.update_metadata(url, {"b": "2"}),
            ]
            if i % 2:
                writes += [
                    store.record_fetch(_fetched(url, fetched_at=T + 2)),
                    store.set_archive(url, ArchivePointer("last", 3, 4), T + 2),
                ]
        _all_done(writes)
        for i in range(20):
            got = store.get(f"http://o.example/{i}")
            assert got["metadata"] == {"a": "1", "b": "2"}
            if i % 2:
                assert got["fate"] == "fetched" and got["archive"] == {
                    "key": "last",
                    "offset": 3,
                    "length": 4,
                    "bucket": "",
                }
            else:  # (a failure keeps the pointer of the answer before it)
                assert got["fate"] == "timeout" and got["archive"] == {
                    "key": "first.warc.gz",
                    "offset": 1,
                    "length": 2,
                    "bucket": "",
                }
    finally:
        store.close()


_LONG_LINKS = [
    {"url": f"http://t.example/a/rather/long/path/to/page-{i}.html", "text": f"page é {i}", "nofollow": i % 7 == 0}
    for i in range(500)
]


def _sent_with_warnings(store, session, records) -> tuple[list, list]:
    """The requests that write ``records`` (one after the other), and the server's warnings
    to them."""
    warnings, sent = [], []

    def listen(response_future):
        sent.append(response_future)
        response_future.add_callback(lambda _, f=response_future: warnings.extend(f.warnings or []))

    session.add_request_init_listener(listen)
    try:
        for record in records:
            _all_done([store.record_fetch(record)])
    finally:
        session.remove_request_init_listener(listen)
    return sent, warnings


def test_a_pages_inlinks_go_in_batches_under_the_servers_warning_size(store, cassandra_session, caplog):
    """A page of 500 links: its row and its inlinks sent as a few UNLOGGED batches, none
    of them over the server's batch_size_warn_threshold (the server warns of nothing, and
    its warning about batches covering many partitions is dropped from the log), every
    inlink read back with its text; a page of one link sends one batch of its row and
    its inlink."""
    links = _LONG_LINKS
    with caplog.at_level(logging.WARNING, logger="cassandra"):
        sent, warnings = _sent_with_warnings(
            store,
            cassandra_session,
            [_fetched("http://s.example/", outlinks=links), _fetched("http://s.example/one", outlinks=[links[1]])],
        )
    batches = [f.query for f in sent if f.query.__class__.__name__ == "BatchStatement"]
    # the server counts a row's source URL, its anchor text and 91 bytes: 118 to 120 here
    assert len(batches) == -(-500 // (backend.BATCH_BYTES // 120))  # 42 rows a batch
    alone = len(sent) - len(batches)  # (a row left over after the page's last full batch)
    # (each page's row, its pointer and its inlinks), then the other page's three
    assert sum(len(b._statements_and_parameters) for b in batches) + alone == 502 + 3
    assert alone <= 1 and sent[-1].query is batches[-1] and len(batches[-1]._statements_and_parameters) == 3
    assert all(w.startswith("Unlogged batch covering") for w in warnings), warnings  # none about their size
    assert not [r for r in caplog.records if "Unlogged batch" in r.getMessage()]
    for i in (0, 7, 499):
        got = store.inlinks(links[i]["url"])
        assert got == [{"url": "http://s.example/", "text": f"page é {i}", "nofollow": i % 7 == 0}]
    assert store.inlinks(links[0]["url"], 10) and len(store.inlinks("http://t.example/nothing")) == 0


def _node_batch_thresholds(session) -> tuple[int, int]:
    """(warn, fail): the node's batch_size_warn_threshold and _fail_ in bytes, as it says
    them in KiB."""
    rows = session.execute(
        "SELECT name, value FROM system_views.settings "
        "WHERE name IN ('batch_size_warn_threshold_in_kb', 'batch_size_fail_threshold_in_kb')"
    )
    said = {name: int(value) * 1024 for name, value in rows}
    return said["batch_size_warn_threshold_in_kb"], said["batch_size_fail_threshold_in_kb"]


def test_the_batch_cap_is_the_servers_count_of_a_batchs_bytes(cassandra_session, cassandra_keyspace):
    """A cap over the server's batch_size_warn_threshold (and under its fail threshold):
    fewer, larger batches, each of which the server warns about with its own count of
    their bytes, which is under the cap and near it (the store counts a row as the
    server does)."""
    for statement in schema_statements(cassandra_keyspace):
        cassandra_session.execute(statement)
    warn, fail = _node_batch_thresholds(cassandra_session)
    cap = warn + 8000
    assert cap < fail
    store = CassandraUrlStore(cassandra_session, cassandra_keyspace, inlink_buckets=4, batch_bytes=cap)
    try:
        sent, warnings = _sent_with_warnings(
            store, cassandra_session, [_fetched("http://s.example/", outlinks=_LONG_LINKS)]
        )
    finally:
        store.close()
    batches = [f.query for f in sent if f.query.__class__.__name__ == "BatchStatement"]
    assert sum(len(b._statements_and_parameters) for b in batches) + len(sent) - len(batches) == 502
    sizes = [int(n) for w in warnings for n in re.findall(r"^Batch for \[.*\] is of size (\d+)", w)]
    # every batch but the page's last one is over the threshold, and all under the cap
    assert len(batches) - 1 <= len(sizes) <= len(batches), (sizes, len(batches))
    assert all(warn < size <= cap for size in sizes), (sizes, warn, cap)
    # a full one: another row (at most 120 bytes) would have crossed the cap
    assert max(sizes) > cap - 120, sizes


def test_a_worker_cuts_its_batches_just_under_the_nodes_own_threshold(cassandra_keyspace, caplog):
    """CASSANDRA_BATCH_BYTES 0 (the default): a worker's store reads the node's
    batch_size_warn_threshold at start and fills its batches up to BATCH_MARGIN under it:
    a page of 500 links goes in as few batches as that allows, none of which the node
    warns about; the start's log line says the figure and where it comes from. A figure
    set is taken as it is."""
    with caplog.at_level(logging.INFO, logger="crawler.urlstore.cassandra"):
        store = CassandraUrlStore.from_settings(_settings(cassandra_keyspace), {})
    try:
        warn, _ = _node_batch_thresholds(store.session)
        assert store.batch_bytes == int(warn * cluster.BATCH_MARGIN)
        said = f"in batches of {store.batch_bytes} bytes at most (97% of {warn} bytes, the smallest batch threshold"
        assert any(said in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
        sent, warnings = _sent_with_warnings(
            store, store.session, [_fetched("http://s.example/", outlinks=_LONG_LINKS)]
        )
        got = store.inlinks(_LONG_LINKS[499]["url"])
    finally:
        store.close()
    batches = [f.query for f in sent if f.query.__class__.__name__ == "BatchStatement"]
    rows = sum(len(b._statements_and_parameters) for b in batches) + len(sent) - len(batches)
    assert rows == 502  # the page's row, its pointer and its 500 inlinks
    assert not [w for w in warnings if w.startswith("Batch for")], warnings
    assert got == [{"url": "http://s.example/", "text": "page é 499", "nofollow": False}]
    fixed = CassandraUrlStore.from_settings(_settings(cassandra_keyspace, CASSANDRA_BATCH_BYTES=3000), {})
    try:
        assert fixed.batch_bytes == 3000
        # the same page in 3,000-byte batches: a request for every 25 rows or so
        small, _ = _sent_with_warnings(fixed, fixed.session, [_fetched("http://s.example/", outlinks=_LONG_LINKS)])
    finally:
        fixed.close()
    assert len(small) >= 500 * 117 // 3000
    assert len(sent) <= -(-501 * 120 // store.batch_bytes) + 1  # (the page's row, counted high, may go alone)


def test_an_inlink_rows_bytes_and_routing_key_are_the_drivers_own(store):
    """The inlink rows a batch takes as their values' bytes (all but its first, which the
    driver binds) are what the driver's binding makes of them, and so is their partition's
    routing key (by which they are grouped by replica set)."""
    rows = [
        ("http://t.example/é?q=1", 0, "http://s.example/", "", False),
        ("http://t.example/" + "x" * 300, 15, "http://s.example/ü", "anchor ✓ text", True),
        ("http://t.example/", 2**31 - 1, "http://s.example/b", "b", False),
    ]
    for row in rows:
        bound = store._inlink_stmt.bind(row)
        values = backend._inlink_values(row)
        assert list(values) == bound.values
        assert backend._partition_key(values) == bound.routing_key


def test_last_fetched_and_get_many_read_their_urls_together_at_the_read_level(
    store, cassandra_session, cassandra_keyspace, monkeypatch
):
    reads_one = CassandraUrlStore(cassandra_session, cassandra_keyspace, read_consistency="ONE")
    try:
        _all_done([store.record_fetch(_fetched(f"http://l.example/{i}")) for i in range(10)])
        asked = [f"http://l.example/{i}" for i in range(10)] + ["http://L.example/3", "http://never.example/"]
        with Requests(cassandra_session) as requests:
            got = reads_one.last_fetched(asked)
        assert set(got) == set(asked[:11])
        reads = requests.of("SELECT url, fate, status, fetched_at, archive_key")
        assert len(reads) == len(requests.sent) == 1  # one read of the 11 URLs (the two spellings of /3: one)
        assert {level for _, level in reads} == {ConsistencyLevel.ONE}
        monkeypatch.setattr(reading, "READ_KEYS", 4)  # a read asks for 4 URLs at most
        with Requests(cassandra_session) as requests:
            records = reads_one.get_many(asked)
        assert len(requests.of("WHERE url IN")) == 3  # 11 distinct URLs
        assert [r and r["url"] for r in records] == [*asked[:3], *asked[3:10], "http://l.example/3", None]
        assert records == [reads_one.get(u) for u in asked]
    finally:
        reads_one.close()


def test_the_fetched_before_scan_reads_a_bounded_number_of_pages_a_call(store, cassandra_session, cassandra_keyspace):
    urls = [f"http://h{i % 3}.example/{i}" for i in range(60)]
    _all_done([store.record_fetch(_fetched(u, fetched_at=T + (i % 4) * 100)) for i, u in enumerate(urls)])
    order = [r[0] for r in cassandra_session.execute(f"SELECT token(url) FROM {cassandra_keyspace}.urls")]
    found, cursor, calls = [], None, 0
    with Requests(cassandra_session) as requests:
        while True:
            start = order.index(cursor[0]) + 1 if cursor else 0
            scans = len(requests.sent)
            rows, cursor = store.due(0, 5, cursor, fetched_before=T + 150)
            calls += 1
            assert len(requests.sent) - scans <= SCAN_PAGES and len(rows) <= 5
            if cursor is None:
                break
            assert order.index(cursor[0]) + 1 - start <= SCAN_PAGES * 5  # rows read by the call
            found += rows
        found += rows
    assert sorted(r["url"] for r in found) == sorted(u for i, u in enumerate(urls) if i % 4 < 2)
    assert calls >= 30 // 5
    # none fetched that early: a call reads its pages and says there is more
    rows, cursor = store.due(0, 5, fetched_before=T - 1)
    assert rows == [] and cursor == (order[SCAN_PAGES * 5 - 1],)


def _due_pass(store, before, limit=5, **kw) -> list[dict]:
    found, cursor = [], None
    for _ in range(100):
        rows, cursor = store.due(before, limit, cursor, **kw)
        assert len(rows) <= limit
        found += rows
        if cursor is None:
            return found
    raise AssertionError("no end to the pass")


def test_due_reads_the_hours_due_not_the_table(store, cassandra_session, cassandra_keyspace):
    """300 URLs due in a year and 12 due over three hours: a pass reads the index rows of
    those hours and the 12 records, never the urls table by token range, whatever the
    table holds besides."""
    later = [
        store.record_fetch(_fetched(f"http://n{i % 7}.example/{i}", next_fetch_at=T + 365 * 86400)) for i in range(300)
    ]
    due = [f"http://d{i % 3}.example/{i}" for i in range(12)]
    _all_done(later + [store.record_fetch(_fetched(u, next_fetch_at=T + (i % 3) * HOUR)) for i, u in enumerate(due)])
    with Requests(cassandra_session) as requests:
        found = _due_pass(store, T + 2 * HOUR + 1)
    assert sorted(r["url"] for r in found) == sorted(due)
    assert found[0]["next_fetch_at"] == pytest.approx(T, abs=0.001) and found[0]["fetched_at"] == pytest.approx(T)
    assert not requests.of("token(url)")  # no scan of the urls table
    index_reads = requests.of(f"FROM {cassandra_keyspace}.urls_due WHERE")
    assert len(index_reads) <= DUE_BUCKETS * 6  # each of the 3 hours' partitions, twice at most
    assert sum(1 for cql, _ in requests.of("WHERE url IN")) <= 12  # the due URLs' records
    # by host: only its URLs
    assert sorted(r["url"] for r in _due_pass(store, T + 2 * HOUR + 1, host="d1.example")) == sorted(due[1::3])


def test_an_hour_first_listed_by_a_write_that_failed_is_listed_by_the_next(store):
    """A write that fails (here the node refuses it: a consistency level of three replicas
    where the keyspace has one) takes its hour's listing with it: the next write due in
    that hour lists it again, so the recrawl finds that URL (the hour was taken for
    listed, and its rows were never read)."""
    hour = (int(time.time()) // 3600 + 24) * 3600  # (an hour to come: one that is over is listed at each write)
    level, store.writes.consistency_level = store.writes.consistency_level, ConsistencyLevel.THREE
    refused = store.record_fetch(_fetched("http://refused.example/", next_fetch_at=hour + 60))
    with pytest.raises(NoHostAvailable, match="Cannot achieve consistency level THREE"):
        refused.result(30)
    store.writes.consistency_level = level
    _all_done([store.record_fetch(_fetched("http://after.example/", next_fetch_at=hour + 120))])
    assert [r["url"] for r in _due_pass(store, hour + 3600)] == ["http://after.example/"]


def test_a_moved_due_time_leaves_a_stale_row_skipped_and_its_hour_dropped(store, cassandra_session, cassandra_keyspace):
    ks = cassandra_keyspace
    urls = [f"http://s.example/{i}" for i in range(6)]
    _all_done([store.record_fetch(_fetched(u, next_fetch_at=T)) for u in urls])
    later = T + 400 * 86400
    _all_done([store.reschedule(u, later) for u in urls[:4]])  # moved a year on: their rows at T are stale

    def hours():
        return {r.due_hour for r in cassandra_session.execute(f"SELECT due_hour FROM {ks}.urls_due_hours")}

    hour = round(T * 1000) // HOUR_MS
    assert sorted(r["url"] for r in _due_pass(store, T + 60, 100)) == urls[4:]
    assert hour in hours()  # two of its rows are live
    _all_done([store.reschedule(u, later) for u in urls[4:]])
    assert _due_pass(store, T + 60, 100) == []
    assert hour not in hours()  # over, and all stale: dropped
    assert not list(cassandra_session.execute(f"SELECT url FROM {ks}.urls_due WHERE due_hour = {hour} ALLOW FILTERING"))
    assert sorted(r["url"] for r in _due_pass(store, later + 1)) == urls  # found at their new time
    # a due time written into an hour already dropped is listed again
    store.reschedule(urls[0], T + 30).result(30)
    assert [r["url"] for r in _due_pass(store, T + 60)] == urls[:1]


def test_an_hour_all_stale_on_a_replica_that_missed_a_write_is_read_again_before_its_drop(
    store, cassandra_session, cassandra_keyspace
):
    """An hour over whose rows all read as stale is dropped; a row reads as stale on a
    replica that missed its record's write (it answers the older due time, or no record, at
    LOCAL_ONE), so the rows are read again at the store's sure level first: the URL is due,
    and its hour stays. One node here: the store's record reads at its read level answering
    no record stand in for that replica (three nodes: bench/spill_replica_lag.py)."""
    url = "http://lagging.example/"
    _all_done([store.record_fetch(_fetched(url, next_fetch_at=T))])
    hour = round(T * 1000) // HOUR_MS
    reads = store._due_records
    store._due_records = lambda urls, profile=None: reads(urls, profile) if profile is store.sure_reads else []
    try:
        assert [r["url"] for r in _due_pass(store, T + 60, 100)] == [url]
    finally:
        store._due_records = reads
    listed = {
        r.due_hour for r in cassandra_session.execute(f"SELECT due_hour FROM {cassandra_keyspace}.urls_due_hours")
    }
    assert hour in listed
    assert [r["url"] for r in _due_pass(store, T + 60, 100)] == [url]


def test_records_written_before_the_index_are_scanned_until_index_all(
    store, cassandra_session, cassandra_keyspace, caplog
):
    ks = cassandra_keyspace
    urls = [f"http://o{i % 4}.example/{i}" for i in range(40)]
    _all_done([store.record_fetch(_fetched(u, next_fetch_at=T + (i % 2) * 86400)) for i, u in enumerate(urls)])
    for table in ("urls_due", "urls_due_hours"):  # as a store made before the index left them
        cassandra_session.execute(f"TRUNCATE {ks}.{table}")
    old = CassandraUrlStore(cassandra_session, ks)
    try:
        assert not old.due_index.whole
        with caplog.at_level(logging.WARNING):
            scanned = _due_pass(old, T + 60, 7)
        assert sorted(r["url"] for r in scanned) == sorted(urls[::2])
        assert sum("index-due" in r.getMessage() for r in caplog.records) == 1  # said once
        assert old.due_index.index_all() == 40
        assert old.due_index.whole
        with Requests(cassandra_session) as requests:
            assert sorted(r["url"] for r in _due_pass(old, T + 60, 7)) == sorted(urls[::2])
        assert not requests.of("token(url)")
    finally:
        old.close()
    again = CassandraUrlStore(cassandra_session, ks)  # the next store to start finds it whole
    try:
        assert again.due_index.whole
    finally:
        again.close()


def test_a_write_the_replicas_cannot_take_fails_its_future_and_is_logged_once(cassandra_keyspace, caplog, monkeypatch):
    """Three replicas asked of a one-node cluster: writes at the automatic LOCAL_QUORUM
    are refused (Unavailable), retried on the next node (there is none), and fail their
    Futures; one warning line for them all, then one line with the count a while later."""
    monkeypatch.setattr(backend, "WARN_EVERY", 1.0)
    store = CassandraUrlStore.from_settings(_settings(cassandra_keyspace, CASSANDRA_REPLICATION_FACTOR=3), {})
    try:
        assert store.writes.consistency_level == ConsistencyLevel.LOCAL_QUORUM
        assert store.reads.consistency_level == ConsistencyLevel.LOCAL_ONE
        with caplog.at_level(logging.WARNING, logger="crawler.urlstore.cassandra"):
            futures = [store.record_fetch(_fetched(f"http://q.example/{i}")) for i in range(10)]
            reasons = []
            for f in futures:
                with pytest.raises(NoHostAvailable) as failed:
                    f.result(30)
                reasons.append(str(failed.value))
            # (the driver says Unavailable, or, when its retry on the next node finds none, no reason)
            assert any("Unavailable" in reason for reason in reasons), reasons
            time.sleep(1.1)
            with pytest.raises(NoHostAvailable):
                store.set_archive("http://q.example/0", ArchivePointer("k", 1, 2), T).result(30)
        lines = [r.getMessage() for r in caplog.records if r.name == "crawler.urlstore.cassandra"]
        kinds = {line.split(" failed with ", 1)[1].split(" ", 1)[0] for line in lines}
        # a line for the first failure of each kind, then one with the count of each a while later
        assert kinds <= {"NoHostAvailable(Unavailable)", "NoHostAvailable"} and len(lines) <= 2 * len(kinds), lines
        assert lines[0].startswith("Cassandra UrlStore: 1 write(s) failed with NoHostAvailable")
        later = [int(line.split(": ", 1)[1].split(" ", 1)[0]) for line in lines[len(kinds) :]]
        assert sum(later) == 11 - len(kinds), lines  # (every write failed is counted once)
        assert store.get("http://q.example/0") is None  # reads (LOCAL_ONE) still answer
    finally:
        store.close()
    # an explicit level wins
    one = CassandraUrlStore.from_settings(
        _settings(cassandra_keyspace, CASSANDRA_REPLICATION_FACTOR=3, CASSANDRA_WRITE_CONSISTENCY="one"), {}
    )
    try:
        one.record_fetch(_fetched("http://q.example/0")).result(30)
        assert one.get("http://q.example/0")["status"] == 200
    finally:
        one.close()


class Forwarder:
    """127.0.0.1:port forwarding every connection to the Cassandra node, that a test cuts
    (the listener and every connection closed: the cluster is away) and opens again on the
    same port. The network between the driver and the node is the one thing it changes."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.port = 0
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self.open()

    def open(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
                node = socket.create_connection(self.target)
            except OSError:
                return
            with self._lock:
                self._connections += [client, node]
            threading.Thread(target=self._pipe, args=(client, node), daemon=True).start()
            threading.Thread(target=self._pipe, args=(node, client), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        for s in [self._listener, *self._connections]:
            try:
                s.shutdown(socket.SHUT_RDWR)  # wakes the accept, ends the pipes
            except OSError:
                pass
            s.close()
        self._connections = []


def test_writes_fail_while_the_cluster_is_away_and_go_through_once_it_is_back(cassandra_keyspace):
    forwarder = Forwarder((cassandra_hosts()[0], cassandra_port()))
    store = CassandraUrlStore.from_settings(
        _settings(cassandra_keyspace, port=forwarder.port, CASSANDRA_REQUEST_TIMEOUT=5), {}
    )
    try:
        store.record_fetch(_fetched("http://away.example/before")).result(30)
        forwarder.cut()
        futures = [store.record_fetch(_fetched(f"http://away.example/{i}")) for i in range(20)]
        for f in futures:
            with pytest.raises(NoHostAvailable):
                f.result(30)
        forwarder.open()
        deadline = time.monotonic() + 30
        while True:  # the driver reconnects by itself (its reconnection policy)
            try:
                store.record_fetch(_fetched("http://away.example/after")).result(30)
                break
            except NoHostAvailable:
                assert time.monotonic() < deadline, "the store did not write again once the cluster was back"
                time.sleep(0.2)
        assert store.get("http://away.example/after")["status"] == 200
        assert store.get("http://away.example/before")["status"] == 200
        assert store.get("http://away.example/3") is None
    finally:
        store.close()
        forwarder.cut()
