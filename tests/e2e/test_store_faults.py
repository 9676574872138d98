"""Latency and faults between the workers and their stores, injected with Toxiproxy
(scripts/toxiproxy.py; testing/toxiproxy.py): two workers crawl the demo site with Redis
20 ms away and S3 blackholed for a while, then with Cassandra 20 ms away. Each time the
crawl ends by itself, every page has its record and its archive pointer, which reads back
its WARC record, and no page is fetched twice; while S3 is away, the workers fetch no
more than FRONTIER_MAX_UNSTORED pages each (and what was in flight). bench/remote_stores.py
measures the same faults' cost."""

from __future__ import annotations

import time
import uuid

from crawler.demo.site import serve_site
from testing.archived import check_archived
from testing.servers import RedisServer
from testing.stores import cassandra_hosts, cassandra_port, s3_archive_settings
from testing.workers import Worker, clean_env, launch_worker, loopback_settings, seed_file, until

UNSTORED = 10  # FRONTIER_MAX_UNSTORED of the blackhole's crawl
BLACKHOLE = 20.0  # seconds S3 takes no byte and answers none
S3_TIMEOUT = 4  # ARCHIVE_S3_TIMEOUT: how long an upload waits for an answer that never comes
WORKERS = 2


def _crawl(tmp_path, site, settings: dict, env: dict) -> list[Worker]:
    """WORKERS workers of one crawl, each seeding the site (the frontier takes a URL once),
    each with its own log (LABEL.log)."""
    seeds = seed_file(tmp_path, site.seeds)
    settings = {k: v for k, v in settings.items() if k != "LOG_FILE"}
    return [launch_worker(tmp_path, label, seeds, settings, env) for label in "ab"[:WORKERS]]


def test_s3_blackholed_with_redis_20ms_away_holds_the_bound_and_loses_nothing(tmp_path, s3, s3_server, toxiproxy):
    """Redis 20 ms away the whole crawl; S3 blackholed (a timeout toxic both ways: the bytes
    sent are dropped, nothing answers, no connection is closed) for BLACKHOLE seconds once
    some batches are stored. The uploads wait ARCHIVE_S3_TIMEOUT for an answer and are
    tried again; the workers go on fetching until each holds FRONTIER_MAX_UNSTORED pages
    not stored, renew those pages' leases meanwhile (FRONTIER_LEASE_SECONDS 5, a quarter
    of the blackhole) and store them once S3 answers again."""
    endpoint_direct, bucket = s3
    crawl_name = f"test-{uuid.uuid4().hex[:12]}"
    redis_server = RedisServer(tmp_path / "redis").start()  # its own, on TCP: Toxiproxy goes in front
    redis_proxy = toxiproxy.create(f"redis-{crawl_name}", f"127.0.0.1:{redis_server.port}")
    s3_proxy = toxiproxy.create(f"s3-{crawl_name}", f"127.0.0.1:{s3_server.port}")
    redis_proxy.latency(20)
    endpoint = f"http://{s3_proxy.address}"
    stores = {
        "CRAWL_DIR": tmp_path / "crawl",
        **s3_archive_settings(endpoint, bucket),
    }
    settings = loopback_settings(
        crawl_name,
        tmp_path / "worker.log",
        **stores,
        FRONTIER_HOST_INTERVAL=0.3,
        FRONTIER_LEASE_SECONDS=5,
        FRONTIER_MAX_UNSTORED=UNSTORED,
        ARCHIVE_MAX_SECONDS=1,
        ARCHIVE_S3_TIMEOUT=S3_TIMEOUT,
        ARCHIVE_RETRY_MIN=0.5,
        ARCHIVE_RETRY_MAX=2,
    )
    env = {**clean_env(), "REDIS_URL": f"redis://{redis_proxy.address}/0"}
    with serve_site(hosts=3, pages=30) as site:
        workers = _crawl(tmp_path, site, settings, env)
        try:
            client = s3_server.client()

            def stored() -> int:
                return client.list_objects_v2(Bucket=bucket).get("KeyCount", 0)

            until(lambda: stored() >= 2 and len(site.page_hits()) >= 20, 90, *workers)
            fetched_before = len(site.page_hits())
            s3_proxy.blackhole()
            away = time.monotonic()
            time.sleep(BLACKHOLE)
            fetched_away = len(site.page_hits()) - fetched_before
            s3_proxy.clear()
            back = time.monotonic()
            codes = [w.wait(180) for w in workers]
            ended = time.monotonic()
        finally:
            for w in workers:
                w.kill()
            redis_server.kill()
        texts = [w.text() for w in workers]
        archived = check_archived(
            {"CRAWL_NAME": crawl_name, **stores, "ARCHIVE_S3_ENDPOINT_URL": endpoint_direct}, site
        )
    print(
        f"S3 blackholed {back - away:.0f} s: {fetched_away} pages fetched meanwhile (bound {WORKERS} x {UNSTORED} "
        f"+ {len(site.hosts)} in flight); crawl ended {ended - back:.0f} s after S3 returned; {archived.summary()}"
    )
    assert codes == [0] * WORKERS, "\n".join(w.tail(60) for w in workers)
    for text in texts:
        assert "Traceback" not in text
    assert any("S3 upload of" in text and "failed" in text for text in texts), "no upload failed: no blackhole"
    assert any("Waiting for the stores: " in text for text in texts), "no worker reached FRONTIER_MAX_UNSTORED"
    # the bound: each worker holds at most FRONTIER_MAX_UNSTORED pages not stored, and a
    # page leased before it got there may still be fetched: one a host (one request in
    # flight to a host at a time, FRONTIER_HOST_MAX_IN_FLIGHT)
    assert 0 < fetched_away <= WORKERS * UNSTORED + len(site.hosts), fetched_away
    assert archived.lost == 0, (archived.lost_records[:5], archived.lost_pointers[:5], archived.bad_pointers[:5])
    assert archived.records == len(site.expected_page_urls())
    assert archived.refetched == [], archived.refetched[:5]


def test_cassandra_20ms_away_the_crawl_completes_and_loses_nothing(
    tmp_path, redis_url, crawl_name, cassandra_keyspace, toxiproxy
):
    """The UrlStore on Cassandra 20 ms away (each answer of the node 20 ms late) for the
    whole crawl: two workers finish it by themselves and every page has its record and its
    pointer; none is fetched twice."""
    host = cassandra_hosts()[0]
    proxy = toxiproxy.create(f"cassandra-{crawl_name}", f"{host}:{cassandra_port()}")
    proxy.latency(20)
    stores = {
        "CRAWL_DIR": tmp_path / "crawl",
        "URLSTORE_BACKEND": "cassandra",
        "CASSANDRA_KEYSPACE": cassandra_keyspace,
        "CASSANDRA_HOSTS": proxy.host,
    }
    settings = loopback_settings(
        crawl_name, tmp_path / "worker.log", **stores, CASSANDRA_PORT=proxy.port, FRONTIER_HOST_INTERVAL=0.1
    )
    env = {**clean_env(), "REDIS_URL": redis_url}
    env.pop("CASSANDRA_HOSTS", None)
    with serve_site(hosts=3, pages=15) as site:
        started = time.monotonic()
        workers = _crawl(tmp_path, site, settings, env)
        try:
            codes = [w.wait(180) for w in workers]
            took = time.monotonic() - started
        finally:
            for w in workers:
                w.kill()
        direct = {**stores, "CASSANDRA_HOSTS": host, "CASSANDRA_PORT": cassandra_port()}
        archived = check_archived({"CRAWL_NAME": crawl_name, **direct}, site)
    print(f"crawl with Cassandra 20 ms away: {took:.0f} s; {archived.summary()}")
    assert codes == [0] * WORKERS, "\n".join(w.tail(60) for w in workers)
    for w in workers:
        assert "Traceback" not in w.text()
    assert archived.lost == 0, (archived.lost_records[:5], archived.lost_pointers[:5], archived.bad_pointers[:5])
    assert archived.records == len(site.expected_page_urls())
    assert archived.refetched == [], archived.refetched[:5]


def test_the_toxiproxy_client_adds_and_removes_latency_and_a_blackhole(tmp_path, toxiproxy):
    """The client's calls do what the tests rely on: latency on each answer, a blackhole
    that holds a request without an answer, a proxy disabled refusing connections."""
    import redis

    with RedisServer(tmp_path / "redis") as server:
        _client_calls(toxiproxy.create(f"redis-{uuid.uuid4().hex[:8]}", f"127.0.0.1:{server.port}"), redis)


def _client_calls(proxy, redis) -> None:
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    def connect():  # one try, no retry of redis-py's own
        return redis.Redis(host=proxy.host, port=proxy.port, socket_timeout=1, retry=Retry(NoBackoff(), 0))

    client = connect()

    def ping() -> float:
        t0 = time.monotonic()
        client.ping()
        return time.monotonic() - t0

    assert ping() < 0.5
    with proxy.toxic("latency", latency=100):
        assert 0.1 <= ping() < 0.5
    # gone: the fastest of three pings under 0.1 s (with it, each takes 0.1 s or more; one
    # alone may take longer on a loaded machine)
    assert min(ping() for _ in range(3)) < 0.1
    proxy.blackhole()
    assert {t["type"] for t in proxy.toxics()} == {"timeout"}
    try:
        ping()
        raise AssertionError("a blackholed proxy answered")
    except redis.exceptions.TimeoutError:
        pass
    proxy.clear()
    client.close()
    assert ping() < 0.5
    proxy.disable()
    try:
        connect().ping()
        raise AssertionError("a disabled proxy took a connection")
    except redis.exceptions.ConnectionError:
        pass
    proxy.enable()
    assert connect().ping()
