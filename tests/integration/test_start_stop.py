"""Start, stop and resume as a user meets them: exit codes, seeds that wait for a Redis that
starts late, Ctrl-C while the archive target is unreachable, a resumed crawl's output, and a
small crawl that ends soon after its last page: the tests on real services in this process
(Redis, Cassandra, S3, page processes) (the others: tests/e2e/test_start_stop.py)."""

from __future__ import annotations

from testing.servers import redis_servers_in, stop_leftover_redis


def test_threads_asking_for_one_crawls_embedded_redis_at_once_get_one_server(tmp_path):
    """scrapy serve's threads open a crawl's embedded Redis together: one server."""
    import threading

    from crawler.frontier.connection import _embedded, embedded_redis

    path = tmp_path / "crawl" / "c" / "redis.db"
    start, got = threading.Barrier(4), []

    def ask():
        start.wait(10)
        got.append(embedded_redis(str(path)))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert len({id(c) for c in got}) == 1 and len(got) == 4
        assert len(redis_servers_in(tmp_path / "crawl")) == 1
    finally:
        client = _embedded.pop(str(path.resolve()), None)
        if client is not None:
            client._cleanup()
        stop_leftover_redis(tmp_path / "crawl", "teardown")
