"""What only the Cassandra UrlStore does, against the live cluster CASSANDRA_HOSTS names
(tests/conftest.py; each test in a keyspace of its own): no tombstones, the schema and its
upgrade, the driver's routing, consistency, concurrency and retries, and failures: the unit
tests (pure: no service, no process) (the others:
tests/integration/test_urlstore_cassandra.py)."""

from __future__ import annotations

import logging

import pytest
from cassandra import ConsistencyLevel, InvalidRequest
from cassandra.policies import RetryPolicy
from cassandra.query import SimpleStatement
from scrapy.settings import Settings

import crawler.urlstore.cassandra_cluster as cluster
from crawler.urlstore.cassandra_cluster import IdempotentRetries, consistency_levels, schema_statements
from testing.services import project_settings


def test_the_schema_renders_its_keyspace_and_replication():
    simple = schema_statements("ks1", 3)
    assert simple[0] == (
        "CREATE KEYSPACE IF NOT EXISTS ks1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}"
    )
    assert any(s.startswith("CREATE TABLE IF NOT EXISTS ks1.urls (") for s in simple)
    assert any("PRIMARY KEY ((target_url, bucket), source_url)" in s for s in simple)
    assert not any("--" in s or "{keyspace}" in s for s in simple)
    nts = schema_statements("ks1", 2, "eu-west_1")
    assert nts[0].endswith("replication = {'class': 'NetworkTopologyStrategy', 'eu-west_1': 2}")
    for keyspace in ("1ks", "ks;DROP", "ks.x", "k" * 49, ""):
        with pytest.raises(ValueError):
            schema_statements(keyspace)
    with pytest.raises(ValueError):
        schema_statements("ks1", 1, "dc1': 3, 'dc2")


def test_the_consistency_levels_follow_the_replication_factor_unless_given():
    def levels(**settings):
        return consistency_levels(Settings(project_settings(**settings)))

    assert levels() == ("LOCAL_ONE", "LOCAL_ONE")
    assert levels(CASSANDRA_REPLICATION_FACTOR=2) == ("LOCAL_ONE", "LOCAL_ONE")
    assert levels(CASSANDRA_REPLICATION_FACTOR=3) == ("LOCAL_QUORUM", "LOCAL_ONE")
    assert levels(CASSANDRA_REPLICATION_FACTOR=5, CASSANDRA_DATACENTER="dc1") == ("LOCAL_QUORUM", "LOCAL_ONE")
    given = levels(
        CASSANDRA_REPLICATION_FACTOR=3, CASSANDRA_WRITE_CONSISTENCY="one", CASSANDRA_READ_CONSISTENCY="quorum"
    )
    assert given == ("ONE", "QUORUM")


def test_a_nodes_batch_size_settings_read_in_bytes():
    assert cluster.setting_bytes("batch_size_warn_threshold", "5KiB") == 5120
    assert cluster.setting_bytes("batch_size_fail_threshold", " 1MiB ") == 1024 * 1024
    assert cluster.setting_bytes("batch_size_warn_threshold", "900B") == 900
    assert cluster.setting_bytes("batch_size_warn_threshold_in_kb", "32") == 32 * 1024  # Cassandra 4.0
    for value in ("", None, "5 KB", "-1KiB", "lots"):
        assert cluster.setting_bytes("batch_size_warn_threshold", value) is None


class _Node:
    def __init__(self, endpoint: str, rows=None, up: bool = True):
        self.endpoint, self.rows, self.is_up = endpoint, rows, up


class _Nodes:
    """A session of nodes that answer the read of system_views.settings with their rows,
    or refuse it as a node before 4.0 does (no virtual tables): a stand-in, for the
    nodes of other versions and settings than the one the integration tests start (its
    own reads: tests/integration/test_urlstore_cassandra.py)."""

    def __init__(self, *nodes: _Node):
        self.nodes = nodes

    def get_pool_state(self) -> dict:
        return {node: {} for node in self.nodes}

    def execute(self, query, host):
        assert "system_views.settings" in query and host in self.nodes
        if host.rows is TimeoutError:
            raise host.rows("timed out")
        if host.rows is None:
            raise InvalidRequest(
                'Error from server: code=2200 [Invalid query] message="Keyspace system_views does not exist"'
            )
        return host.rows


def test_write_batches_are_cut_under_the_smallest_threshold_the_nodes_say():
    def rows(warn: str, fail: str, old: bool = False):
        suffix = "_in_kb" if old else ""
        return [(f"batch_size_warn_threshold{suffix}", warn), (f"batch_size_fail_threshold{suffix}", fail)]

    raised = _Node("127.0.0.1:9042", rows("32KiB", "50KiB"))
    assert cluster.batch_bytes(_Nodes(raised)) == (
        31784,
        "97% of 32768 bytes, the smallest batch threshold of the nodes",
    )
    # the smallest of the nodes up (a 4.0 node says KiB); a node down is not asked
    old, down = _Node("127.0.0.2:9042", rows("20", "50", old=True)), _Node("127.0.0.3:9042", up=False)
    assert cluster.batch_bytes(_Nodes(raised, old, down))[0] == int(20 * 1024 * cluster.BATCH_MARGIN)
    # a node that does not say counts as Cassandra's default, and the reason says which
    size, why = cluster.batch_bytes(_Nodes(raised, _Node("127.0.0.4:9042")))
    assert size == int(5120 * cluster.BATCH_MARGIN) == 4966
    assert "127.0.0.4:9042: Error from server" in why and "5 KiB where a node did not say" in why
    # a node that does not answer is passed over, and said to be
    size, why = cluster.batch_bytes(_Nodes(raised, _Node("127.0.0.5:9042", rows=TimeoutError)))
    assert size == 31784 and "not answered: 127.0.0.5:9042: TimeoutError" in why
    # never over the fail threshold, nor over MAX_BATCH_BYTES
    assert cluster.batch_bytes(_Nodes(_Node("a", rows("64MiB", "40KiB"))))[0] == int(40 * 1024 * cluster.BATCH_MARGIN)
    assert cluster.batch_bytes(_Nodes(_Node("a", rows("1MiB", "2MiB"))))[0] == cluster.MAX_BATCH_BYTES
    assert cluster.batch_bytes(_Nodes()) == (
        4966,
        "Cassandra's default batch_size_warn_threshold, 5 KiB: no node answered",
    )


def test_the_retry_policy_retries_idempotent_statements_its_number_of_times():
    policy = IdempotentRetries(2)
    idempotent, other = SimpleStatement("x", is_idempotent=True), SimpleStatement("x")
    one = ConsistencyLevel.ONE
    timeouts = [policy.on_write_timeout(idempotent, one, "SIMPLE", 1, 0, n)[0] for n in range(3)]
    assert timeouts == [RetryPolicy.RETRY, RetryPolicy.RETRY, RetryPolicy.RETHROW]
    assert [policy.on_read_timeout(idempotent, one, 1, 0, False, n)[0] for n in range(3)] == timeouts
    unavailable = [policy.on_unavailable(idempotent, one, 2, 1, n)[0] for n in range(3)]
    assert unavailable == [RetryPolicy.RETRY_NEXT_HOST, RetryPolicy.RETRY_NEXT_HOST, RetryPolicy.RETHROW]
    assert [policy.on_request_error(idempotent, one, OSError(), n)[0] for n in range(3)] == unavailable
    assert policy.on_write_timeout(other, one, "SIMPLE", 1, 0, 0)[0] == RetryPolicy.RETHROW
    assert policy.on_unavailable(other, one, 2, 1, 0)[0] == RetryPolicy.RETHROW


def test_the_drivers_reconnect_warnings_are_one_line_per_node_per_period(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(cluster.time, "monotonic", lambda: clock[0])
    held = cluster.ReconnectWarnings()

    def record(node: str) -> logging.LogRecord:
        msg = "Error attempting to reconnect to %s, scheduling retry in %s seconds: %s"
        return logging.LogRecord("cassandra.pool", logging.WARNING, "pool.py", 1, msg, (node, 4.0, "refused"), None)

    assert held.filter(record("127.0.0.2:9042"))
    assert [held.filter(record("127.0.0.2:9042")) for _ in range(5)] == [False] * 5
    assert held.filter(record("127.0.0.3:9042"))  # another node: its own line
    clock[0] += cluster.WARN_EVERY
    again = record("127.0.0.2:9042")
    assert held.filter(again) and again.getMessage().endswith("(5 such lines of this node held back in the last 30 s)")
    other = logging.LogRecord(
        "cassandra.pool", logging.WARNING, "pool.py", 1, "Host %s has been marked down", ("h",), None
    )
    assert all(held.filter(other) for _ in range(3))  # other lines pass


def test_the_drivers_answers_reach_the_loop_with_one_wake_up_a_burst():
    import asyncio
    import threading

    from crawler.urlstore.cassandra_reads import _Mailbox

    async def burst():
        loop = asyncio.get_running_loop()
        wakes = []
        real = loop.call_soon_threadsafe
        loop.call_soon_threadsafe = lambda *a: (wakes.append(a), real(*a))[1]  # counted, then as ever
        mailbox = _Mailbox(loop)
        futures = [loop.create_future() for _ in range(4)]
        futures[2].cancel()  # a request that gave up: its answer is dropped
        failure = RuntimeError("read timed out")

        def driver():  # the driver's I/O thread, while the loop has not run yet
            mailbox.put(futures[0], True, [("a",)])
            mailbox.put(futures[1], False, failure)
            mailbox.put(futures[2], True, [])
            mailbox.put(futures[3], True, [])

        thread = threading.Thread(target=driver)
        thread.start()
        thread.join()
        assert await futures[0] == [("a",)] and await futures[3] == []
        with pytest.raises(RuntimeError):
            await futures[1]
        assert futures[2].cancelled() and len(wakes) == 1
        # an answer after the loop took the burst wakes it again
        later = loop.create_future()
        threading.Thread(target=mailbox.put, args=(later, True, [("b",)])).start()
        assert await asyncio.wait_for(later, 5) == [("b",)] and len(wakes) == 2

    asyncio.run(burst())


def test_record_reads_asked_on_one_pass_of_the_loop_go_as_one_read_and_more_wait_for_an_answer():
    import asyncio

    from crawler.urlstore.cassandra_reads import MAX_KEY, READS_IN_FLIGHT, SLOW_READ, _Together

    async def scenario():
        loop = asyncio.get_running_loop()
        sends, reads = [], []  # the URLs of each send; each read's (urls, future)

        def send(urls):  # the URLs of "slow..." on a replica set of their own
            sends.append(urls)
            mine = [[u for u in urls if not u.startswith("slow")], [u for u in urls if u.startswith("slow")]]
            out = [(group, loop.create_future()) for group in mine if group]
            reads.extend(out)
            return out

        def answer(read, stored):
            urls, future = read
            future.set_result([(u, f"row of {u}") for u in urls if u in stored])

        async def passes():
            for _ in range(3):
                await asyncio.sleep(0)

        together = _Together(loop, send)
        # one look-up alone is sent at the end of the pass, not held for company
        alone = together.ask(["a"])
        await passes()
        assert sends == [["a"]]
        # while READS_IN_FLIGHT sends wait, the look-ups of the next passes are held
        for n in range(1, READS_IN_FLIGHT):
            together.ask([f"first{n}"])
            await passes()
        assert len(sends) == READS_IN_FLIGHT
        b = together.ask(["b", "c"])
        await passes()
        c = together.ask(["c", "d"])  # a URL asked twice is read once
        gone = together.ask(["e"])
        gone.cancel()  # its look-up timed out: not read
        await passes()
        assert len(sends) == READS_IN_FLIGHT
        answer(reads[0], {"a"})
        assert await alone == {"a": ("a", "row of a")}
        await passes()
        assert sends[-1] == ["b", "c", "d"]  # the held ones, as one send
        answer(reads[-1], {"b", "d"})  # c is not stored
        assert await b == {"b": ("b", "row of b")} and await c == {"d": ("d", "row of d")}
        for read in reads:
            if not read[1].done():
                answer(read, set())
        await passes()
        # a failed read fails the look-ups with a URL in it, and those alone
        x, y, z = together.ask(["x"]), together.ask(["slow-y"]), together.ask(["x", "slow-z"])
        await passes()
        assert sends[-1] == ["x", "slow-y", "slow-z"] and len(reads[-2:]) == 2
        reads[-1][1].set_exception(TimeoutError("that node did not answer"))
        answer(reads[-2], {"x"})
        assert await x == {"x": ("x", "row of x")}
        for future in (y, z):
            with pytest.raises(TimeoutError):
                await future
        # a read that does not answer holds its place for SLOW_READ at most, and only the
        # look-ups with a URL in it
        hung, hung_reads = [], []
        for n in range(READS_IN_FLIGHT):  # a send each
            hung.append(together.ask([f"slow-{n}"]))
            await passes()
            hung_reads.append(reads[-1])
        held = together.ask(["later"])
        await passes()
        assert sends[-1] != ["later"]
        await asyncio.sleep(SLOW_READ * 1.5)
        await passes()
        assert sends[-1] == ["later"]  # sent, though the slow reads have not answered
        answer(reads[-1], {"later"})
        assert await held == {"later": ("later", "row of later")} and not any(f.done() for f in hung)
        for read in hung_reads:
            answer(read, set())
        assert [await f for f in hung] == [{}] * READS_IN_FLIGHT
        # a URL too long to be a key is not read: not stored
        before = len(sends)
        assert await together.ask(["http://x/" + "a" * MAX_KEY]) == {} and len(sends) == before

    asyncio.run(scenario())


def test_a_pages_outlinks_are_the_bytes_the_driver_makes_of_them():
    from cassandra.cqltypes import BooleanType, ListType, TupleType, UTF8Type

    from crawler.urlstore.cassandra import _outlinks_value

    kind = ListType.apply_parameters([TupleType.apply_parameters([UTF8Type, UTF8Type, BooleanType])])
    for links in (
        [],
        [("http://a.example/é?x=1", "", False)],
        [("http://a.example/", "Ünïcode ✓ anchor", True), ("http://b.example/" + "p" * 300, None, False)],
    ):
        for protocol in (4, 5):
            assert _outlinks_value(links) == kind.serialize(links, protocol)
