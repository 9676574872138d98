"""The shared stores a test or benchmark uses: the Cassandra cluster CASSANDRA_HOSTS names
(and what Cassandra reads to scan a table), SeaweedFS's S3 server of scripts/s3server.py
in a folder of its own; each skipped on a user's machine without it, failed in CI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid

from testing.servers import free_port
from testing.services import require_service
from testing.workers import ROOT


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


class S3Server:
    """A SeaweedFS server of scripts/s3server.py in its own folder and port, that a test
    may stop (or kill) and start again with its objects. ``secret_key``: its identity's
    secret key (else s3server.py's test key), handed to the script in its environment."""

    def __init__(self, directory, secret_key: str | None = None, reader: tuple[str, str] | None = None):
        self.dir = directory
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.secret_key = secret_key
        self.reader = reader  # (access key, secret key) of an identity that may read and list, not write
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
        reader = ["--reader", ":".join(self.reader)] if self.reader else []
        out = self._script("start", str(self.dir), "--port", str(self.port), *reader)
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


def new_s3_server(directory, secret_key: str | None = None, reader: tuple[str, str] | None = None) -> S3Server:
    """A started S3Server in ``directory`` (skipped, or failed in CI, without a SeaweedFS build)."""
    if not s3_server_built():
        require_service("s3", "no SeaweedFS build: `python scripts/s3server.py build` (about 9 minutes, once)")
    server = S3Server(directory, secret_key, reader)
    try:
        server.start()
    except BaseException:
        server.stop(kill=True)  # one that did not come up is not left running
        raise
    return server


def s3_archive_settings(endpoint: str, bucket: str) -> dict:
    """The settings that send a crawl's archive to the ``s3`` fixture's bucket."""
    return {"ARCHIVE_S3_BUCKET": bucket, "ARCHIVE_S3_ENDPOINT_URL": endpoint, "ARCHIVE_S3_REGION": "us-east-1"}


_READ_COUNTS = re.compile(r"Read (\d+) live rows and (\d+) tombstone cells")


def cells_read(session, table: str, timeout: float = 10.0) -> tuple[int, int, int]:
    """(rows returned, live rows read, tombstone cells read) of a scan of the whole of
    ``table`` (``keyspace.table``), traced: the numbers are Cassandra's own ("Read N live
    rows and M tombstone cells" in the trace's events, summed), waited for until they
    account for every row returned (trace events are written after the answer)."""
    from cassandra.query import SimpleStatement

    result = session.execute(SimpleStatement(f"SELECT * FROM {table}", fetch_size=1_000_000), trace=True)
    rows = len(list(result))
    trace = result.get_query_trace(max_wait_sec=timeout)
    deadline = time.monotonic() + timeout
    while True:
        counts = [tuple(map(int, m.groups())) for e in trace.events if (m := _READ_COUNTS.search(e.description))]
        live, tombstones = sum(c[0] for c in counts), sum(c[1] for c in counts)
        if live >= rows or time.monotonic() > deadline:
            return rows, live, tombstones
        time.sleep(0.2)
        trace.populate(max_wait=timeout)
