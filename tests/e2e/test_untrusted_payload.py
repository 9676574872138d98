"""Nothing a worker reads from Redis is unpickled: a payload written into the crawl's
queues by anyone who reaches that Redis is dropped unread, counted, and runs no code."""

import pickle
import re
import uuid

from crawler.demo.site import serve_site
from crawler.frontier import codec
from crawler.frontier.frontier import Entry, Frontier
from testing.workers import clean_env, launch_worker, loopback_settings, read_pages


class _Touch:
    """Unpickling it creates a file (what a crafted payload would do, and worse)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_crafted_payload_in_the_crawls_redis_runs_no_code(tmp_path, redis_url, redis_client):
    name = f"test-{uuid.uuid4().hex[:12]}"
    marker = tmp_path / "ran"
    frontier = Frontier(redis_client, name)
    try:
        with serve_site(hosts=2, pages=5) as site:
            crafted = site.url(site.hosts[0], "/crafted.html")
            frontier.put(
                [
                    Entry(url=crafted, payload=b"P" + pickle.dumps({"url": crafted, "x": _Touch(marker)})),
                    *(Entry(url=seed, payload=codec.encode_url(seed)) for seed in site.seeds),
                ]
            )
            settings = loopback_settings(name, tmp_path / "worker.log", REDIS_URL=redis_url, STATS_DUMP=True)
            worker = launch_worker(tmp_path, "w", None, settings, {**clean_env(), "REDIS_URL": redis_url})
            assert worker.wait(60) == 0, worker.tail()
            fetched = {hit.path for hit in site.page_hits()}
        text = worker.text()
        assert not marker.exists(), "unpickling the crafted payload ran its code"
        assert "Queued payload dropped unread: not a payload of this crawler" in text, worker.tail()
        assert re.search(r"'frontier/undecodable': 1\b", text), worker.tail()
        assert "/crafted.html" not in fetched and set(site.page_paths()) <= fetched  # the rest of the crawl ran
        assert {p["url"] for p in read_pages(worker.out)} >= set(site.seeds)
        assert frontier.stats()["queued"] == 0 and frontier.stats()["leased"] == 0  # acknowledged, not re-queued
    finally:
        frontier.clear()
