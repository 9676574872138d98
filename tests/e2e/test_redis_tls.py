"""TLS to Redis (``rediss://``): a private redis-server that speaks TLS only (no plain TCP
port), its certificate for 127.0.0.1 signed by a CA the test makes, and the crawler
reaching it the way a user configures it: the CA file named in the URL
(``rediss://host:port/0?ssl_ca_certs=/path/ca.pem``) or in REDIS_PARAMS. The frontier
works through it, a real worker crawls the loopback demo site through it, and a server
certificate that does not verify (another CA, or not naming the address dialled) is
refused with the certificate error in the message."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from urllib.parse import quote

import pytest
import redis
from scrapy.settings import Settings

from crawler.config.validation import problems
from crawler.demo.site import serve_site
from crawler.frontier.connection import frontier_from_settings
from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.keys import Keys
from crawler.frontier.words import FINISHED
from testing.servers import RedisServer, tls_redis_server_binary
from testing.services import project_settings, require_service
from testing.tls import certificate, pem
from testing.workers import ROOT, clean_env, launch_worker, loopback_settings, seed_file


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA and the Redis server's certificate for 127.0.0.1 it signed, and an unrelated CA."""
    tmp = tmp_path_factory.mktemp("pki")
    ca, ca_key = certificate("test CA", ca=True)
    server, server_key = certificate("redis", ca, ca_key, ip="127.0.0.1")
    other, other_key = certificate("other CA", ca=True)
    return {
        "ca": pem(tmp, "ca", ca, ca_key)[0],
        "server": pem(tmp, "server", server, server_key),
        "other_ca": pem(tmp, "other", other, other_key)[0],
    }


@pytest.fixture(scope="module")
def tls_redis(pki, tmp_path_factory):
    if not tls_redis_server_binary():
        require_service("redis-tls", "no redis-server built with TLS on PATH (apt-get install redis-server)")
    with RedisServer(tmp_path_factory.mktemp("redis-tls"), tls=(*pki["server"], pki["ca"])) as server:
        yield server


def _url(server: RedisServer, ca, host: str = "127.0.0.1") -> str:
    return f"rediss://{host}:{server.port}/0?ssl_ca_certs={quote(str(ca))}"


def _settings(**overrides) -> Settings:
    return Settings(project_settings(CRAWL_NAME=f"test-{uuid.uuid4().hex[:12]}", **overrides))


def test_the_server_speaks_tls_only(tls_redis, pki):
    assert tls_redis.url == _url(tls_redis, pki["ca"])
    plain = redis.Redis(host="127.0.0.1", port=tls_redis.port, socket_timeout=5, socket_connect_timeout=2, retry=None)
    with pytest.raises(redis.ConnectionError):
        plain.ping()
    plain.close()


@pytest.mark.parametrize("ca_in", ["url", "redis_params"])
def test_the_frontier_works_over_tls(tls_redis, pki, ca_in):
    """The CA file in the URL's query, or in REDIS_PARAMS (JSON, as ``-s`` gives it)."""
    every_url_in_redis = {"FRONTIER_HOST_WINDOW": 0}  # (a push, then a pop: no spill round to run here)
    if ca_in == "url":
        settings = _settings(REDIS_URL=_url(tls_redis, pki["ca"]), **every_url_in_redis)
    else:
        settings = _settings(
            REDIS_URL=f"rediss://127.0.0.1:{tls_redis.port}/0",
            REDIS_PARAMS=json.dumps({"ssl_ca_certs": str(pki["ca"])}),
            **every_url_in_redis,
        )
    assert problems(settings) == []
    frontier = frontier_from_settings(settings)
    urls = [f"http://h{i}.example/page" for i in range(3)]
    assert frontier.put([Entry(url=u, payload=u.encode()) for u in urls]) == ["added"] * 3
    assert frontier.put([Entry(url=urls[0], payload=b"")]) == ["seen"]
    leases, _ = frontier.get(10)
    assert sorted(lease.payload.decode() for lease in leases) == urls
    assert frontier.ack(*(lease.id for lease in leases)) == 3
    assert frontier.outlook(0)["state"] == FINISHED
    # the same keys, seen from the harness's own TLS connection
    name = settings.get("CRAWL_NAME")
    assert int(tls_redis.client.hget(Keys(name).counters, "pushed")) == 3
    frontier.clear()
    frontier.redis.close()


@pytest.mark.parametrize(
    ("ca", "host", "error"),
    [
        ("other_ca", "127.0.0.1", "certificate verify failed"),  # signed by a CA the client does not trust
        ("ca", "localhost", "Hostname mismatch"),  # the certificate names 127.0.0.1, not localhost
    ],
)
def test_a_server_certificate_that_does_not_verify_is_refused(tls_redis, pki, ca, host, error):
    settings = _settings(REDIS_URL=_url(tls_redis, pki[ca], host))
    assert problems(settings) == []
    frontier = frontier_from_settings(settings)
    with pytest.raises(redis.ConnectionError, match=error):
        frontier.put([Entry(url="http://a.example/", payload=b"x")])
    frontier.redis.close()
    # the commands stop at once with one line naming the certificate error, writing nothing
    env = {**clean_env(), "REDIS_URL": settings.get("REDIS_URL"), "CRAWL_NAME": settings.get("CRAWL_NAME")}
    for command, first in ((["seed", "-"], "seed: cannot connect to Redis (rediss://"), (["frontier"], "frontier: ")):
        run = subprocess.run(
            [sys.executable, "-m", "scrapy", *command],
            cwd=ROOT,
            env=env,
            input="http://a.example/\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 1, run.stdout + run.stderr
        assert run.stderr.startswith(first) and error in run.stderr, run.stderr
    assert not tls_redis.client.exists(Keys(settings.get("CRAWL_NAME")).counters)


def test_a_worker_crawls_the_site_over_tls(tls_redis, pki, tmp_path):
    name = f"test-{uuid.uuid4().hex[:12]}"
    with serve_site(hosts=2, pages=6) as site:
        settings = loopback_settings(name, tmp_path / "worker.log", REDIS_URL=_url(tls_redis, pki["ca"]))
        worker = launch_worker(tmp_path, "worker", seed_file(tmp_path, site.seeds), settings)
        try:
            code = worker.wait(60)
        finally:
            worker.kill()
        hits = site.page_hits()
    assert code == 0, worker.tail()
    assert " ERROR: " not in worker.text() and "Traceback" not in worker.text(), worker.tail(80)
    counts = Counter(h.key for h in hits)
    assert set(counts) == site.expected_fetches(), sorted(site.expected_fetches() - set(counts))[:5]
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]
    assert {p["url"] for p in worker.pages()} >= site.expected_page_urls()
    frontier = Frontier(tls_redis.client, name)
    assert frontier.outlook(0)["state"] == FINISHED
    assert frontier.stats()["pushed"] == len(site.expected_fetches()), frontier.stats()
    frontier.clear()


def test_a_worker_whose_ca_does_not_verify_the_server_stops_at_once(tls_redis, pki, tmp_path):
    """A certificate that does not verify is a setting to fix, as a wrong password is: the
    worker closes with redis_refused (exit code 1) instead of waiting for an outage to end."""
    settings = loopback_settings(
        f"test-{uuid.uuid4().hex[:12]}", tmp_path / "worker.log", REDIS_URL=_url(tls_redis, pki["other_ca"])
    )
    worker = launch_worker(tmp_path, "worker", None, settings)
    try:
        code = worker.wait(30)
    finally:
        worker.kill()
    assert code == 1, worker.tail()
    assert "Redis refused this worker (ConnectionError" in worker.text(), worker.tail()
    assert "certificate verify failed" in worker.text()
    assert "'finish_reason': 'redis_refused'" in worker.text(), worker.tail()


@pytest.mark.parametrize(
    "overrides",
    [
        {"REDIS_URL": "rediss://127.0.0.1:6380/0?ssl_ca_certs=/nonexistent/ca.pem"},
        {"REDIS_URL": "rediss://127.0.0.1:6380/0", "REDIS_PARAMS": json.dumps({"ssl_ca_certs": "/nonexistent/ca.pem"})},
    ],
)
def test_a_tls_file_that_cannot_be_read_is_an_invalid_setting(overrides):
    found = problems(_settings(**overrides))
    assert len(found) == 1 and "ssl_ca_certs='/nonexistent/ca.pem': expected a readable file" in found[0], found
