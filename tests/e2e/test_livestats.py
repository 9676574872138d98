"""Live stats (crawler/observe/livestats.py): the buckets and the reader on plain values, the
extension of an in-process crawler fed signals and stats (flushes, no double counts, a Redis
that goes away and comes back), and a real crawl's numbers afterwards: the end-to-end tests
(commands and workers as subprocesses) (the others: tests/unit/test_livestats.py,
tests/integration/test_livestats.py)."""

from __future__ import annotations

import re
import sqlite3
import time

from crawler.demo.site import serve_site
from crawler.frontier.keys import Keys
from crawler.observe.livestats import (
    RECENT,
    activity,
    bucket_of,
    read_published,
)
from testing.workers import clean_env, launch_worker, loopback_settings


def test_a_crawl_publishes_what_its_urlstore_records(tmp_path, redis_url, redis_client, crawl_name):
    with serve_site(hosts=2, pages=10) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(site.seeds) + "\n")
        settings = loopback_settings(crawl_name, tmp_path / "w.log", LIVE_STATS_INTERVAL=0.5)
        started = time.time()
        worker = launch_worker(tmp_path, "w", seeds, settings, env={**clean_env(), "REDIS_URL": redis_url})
        polls = []  # (pages fetched, live workers) while it runs
        try:
            deadline = time.monotonic() + 60
            while worker.proc.poll() is None and time.monotonic() < deadline:
                during = activity(redis_client, crawl_name, time.time(), minutes=1)
                polls.append((during["totals"].get("pages/fate/fetched", 0), during["workers"]))
                time.sleep(0.2)
            assert worker.wait(timeout=30) == 0, worker.tail()
        finally:
            worker.kill()
    got = activity(redis_client, crawl_name, time.time(), minutes=5)
    # published while it ran (its heartbeat beside them), not only when it closed
    assert any(fetched > 0 and live == 1 for fetched, live in polls), polls
    # and the settings it ran with, for the viewers (scrapy frontier, the dashboard)
    published = read_published(redis_client, Keys(crawl_name))
    assert published["host_interval"] == settings["FRONTIER_HOST_INTERVAL"] and published["profile"] == "local"
    assert published["host_max_in_flight"] == 1 and published["max_wait"] > 0

    db = tmp_path / "crawl" / crawl_name / "urlstore.sqlite"
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT COUNT(*) FROM urls WHERE fate = 'fetched' AND status < 500").fetchone()[0]
    assert stored > 10
    totals = got["totals"]
    assert totals["pages/fate/fetched"] == stored, (totals, worker.tail())
    dump = worker.text()[worker.text().rindex("Dumping Scrapy stats") :]
    assert totals["pages/fate/fetched"] == int(re.search(r"'pages/fate/fetched': (\d+)", dump).group(1))
    assert totals["downloader/response_status_count/200"] >= stored
    assert totals["urlstore/written/fetched"] == stored

    # the series adds up to the totals, in the buckets of the crawl's time
    series_fetched = sum(s["fates"].get("fetched", 0) for s in got["series"])
    assert series_fetched == stored
    busy = [s["t"] for s in got["series"] if s["fates"]]
    assert busy and busy[0] >= bucket_of(started)

    recent = got["recent"]
    assert 0 < len(recent) <= RECENT and len(recent) == min(
        RECENT, sum(totals[k] for k in totals if k.startswith("pages/fate/"))
    )
    assert all(set(e) == {"url", "status", "fate", "title", "at"} for e in recent)
    assert any(e["fate"] == "fetched" and e["status"] == 200 and e["title"] for e in recent), recent
    assert [e["at"] for e in recent] == sorted((e["at"] for e in recent), reverse=True)
    assert got["workers"] == 0  # the worker took itself out when it closed
