"""Prometheus metrics (crawler/observe/metrics.py): the endpoint of one crawler in-process (what it
serves, its life, its ports, a frontier that hangs), and a real crawl of the demo site
scraped while it runs."""

from __future__ import annotations

import re
import socket
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from crawler.config.values import metrics_ports
from crawler.demo.site import serve_site
from crawler.extensions.metrics import Metrics
from crawler.frontier.frontier import Entry, Frontier
from crawler.observe.metrics import worker_id
from crawler.spiders.broad import BroadSpider
from testing.servers import RedisServer, free_port
from testing.services import project_settings
from testing.workers import clean_env, launch_worker, loopback_settings


def scrape(url: str, timeout: float = 5.0) -> dict:
    """The samples of a scrape: {(name, frozenset of labels other than crawl and worker): value},
    and the labels every sample carries under "_labels"."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        text = response.read().decode()
    samples, labels = {}, set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            rest = {k: v for k, v in sample.labels.items() if k not in ("crawl", "worker")}
            if sample.name.startswith("crawler_"):
                labels.add((sample.labels.get("crawl"), sample.labels.get("worker")))
            samples[(sample.name, frozenset(rest.items()))] = sample.value
    samples["_labels"] = labels
    return samples


def value(samples: dict, name: str, **labels) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def extension(crawler) -> Metrics | None:
    """The crawler's Metrics extension (EXTENSIONS), None when it is off."""
    return next((e for e in crawler.extensions.middlewares if isinstance(e, Metrics)), None)


def started(crawler) -> Metrics:
    """The extension of ``crawler``, its spider opened (the endpoint listening)."""
    ext = extension(crawler)
    crawler.signals.send_catch_log(signal=signals.spider_opened, spider=None)
    assert ext.url, "the endpoint did not start"
    return ext


def closed(crawler) -> None:
    crawler.signals.send_catch_log(signal=signals.spider_closed, spider=None, reason="finished")


def test_ports_a_port_a_range_or_any():
    assert metrics_ports(None) is None and metrics_ports(0) is None and metrics_ports("") is None
    assert metrics_ports("auto") == [0]
    assert metrics_ports("9410") == [9410] and metrics_ports(9410) == [9410]
    assert metrics_ports("9410-9412") == [9410, 9411, 9412] and metrics_ports([9410, 9411]) == [9410, 9411]
    for bad in ("x", "70000", "9412-9410", 1.5, "-1"):
        with pytest.raises(ValueError):
            metrics_ports(bad)


def test_off_unless_a_port_is_set():
    for port in (None, 0):
        crawler = get_crawler(BroadSpider, project_settings(METRICS_PORT=port))
        assert extension(crawler) is None
        with pytest.raises(NotConfigured):
            Metrics.from_crawler(crawler)


def test_the_endpoint_serves_the_crawl_stats_and_the_frontier_and_closes_with_the_spider(
    redis_url, redis_client, crawl_name
):
    f = Frontier(redis_client, crawl_name)
    f.put([Entry(url=f"http://h{i}.example/{i}", payload=b"x") for i in range(5)])
    f.pause()
    f.pause("h1.example")
    crawler = get_crawler(
        BroadSpider, project_settings(METRICS_PORT="auto", CRAWL_NAME=crawl_name, REDIS_URL=redis_url)
    )
    stats = crawler.stats
    stats.inc_value("downloader/response_status_count/200", 7)
    stats.inc_value("downloader/response_status_count/404", 2)
    stats.inc_value("robotstxt/disallowed", 3)
    stats.inc_value("contentseen/exact", 4)
    stats.inc_value("contentseen/near", 1)
    stats.inc_value("frontier/trap/depth", 6)
    stats.inc_value("frontier/host_full", 2)
    stats.inc_value("archive/objects", 5)
    stats.inc_value("archive/bytes", 12345)
    stats.inc_value("urlstore/written/fetched", 8)
    stats.inc_value("ratelimit/wait_ms", 2500)
    ext = started(crawler)
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", ext.url)
        s = scrape(ext.url)
        assert s["_labels"] == {(crawl_name, worker_id())}  # every sample names its crawl and worker
        assert value(s, "crawler_pages_fetched_total", status="200") == 7
        assert value(s, "crawler_pages_fetched_total", status="404") == 2
        assert value(s, "crawler_robots_denied_total") == 3
        assert value(s, "crawler_duplicates_total", kind="exact") == 4
        assert value(s, "crawler_duplicates_total", kind="near") == 1
        assert value(s, "crawler_trap_refusals_total", guard="depth") == 6
        assert value(s, "crawler_trap_refusals_total", guard="host_full") == 2
        assert value(s, "crawler_archive_objects_total") == 5 and value(s, "crawler_archive_bytes_total") == 12345
        assert value(s, "crawler_store_writes_total", fate="fetched") == 8
        assert value(s, "crawler_politeness_wait_seconds_total") == 2.5
        assert value(s, "crawler_politeness_handed_back_total") == 0  # a family not counted yet reads 0
        assert value(s, "crawler_frontier_queued") == 5 and value(s, "crawler_frontier_leased") == 0
        assert value(s, "crawler_frontier_up") == 1
        assert value(s, "crawler_frontier_paused") == 1 and value(s, "crawler_frontier_hosts_paused") == 1
        assert value(s, "crawler_frontier_pages_handled") == 0
        assert value(s, "process_resident_memory_bytes") > 0
        stats.inc_value("downloader/response_status_count/200", 3)  # read at each scrape
        assert value(scrape(ext.url), "crawler_pages_fetched_total", status="200") == 10
    finally:
        closed(crawler)
    with pytest.raises(urllib.error.URLError):  # closed with the spider
        scrape(ext.url, timeout=2)


def test_two_crawlers_in_one_process_keep_their_numbers_apart(redis_url):
    crawlers = [
        get_crawler(BroadSpider, project_settings(METRICS_PORT="auto", CRAWL_NAME=name, REDIS_URL=redis_url))
        for name in ("metrics-a", "metrics-b")
    ]
    crawlers[0].stats.inc_value("downloader/response_status_count/200", 1)
    crawlers[1].stats.inc_value("downloader/response_status_count/200", 2)
    exts = [started(c) for c in crawlers]
    try:
        for n, ext in enumerate(exts, 1):
            s = scrape(ext.url)
            assert value(s, "crawler_pages_fetched_total", status="200") == n
            assert s["_labels"] == {(f"metrics-{'ab'[n - 1]}", worker_id())}
    finally:
        for c in crawlers:
            closed(c)


def test_a_range_takes_its_first_free_port(redis_url):
    for _ in range(50):  # two consecutive ports free, the first then taken by someone else
        port = free_port()
        try:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", port + 1))
            break
        except OSError:
            continue
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        crawler = get_crawler(BroadSpider, project_settings(METRICS_PORT=f"{port}-{port + 1}", REDIS_URL=redis_url))
        ext = started(crawler)
        try:
            assert ext.url == f"http://127.0.0.1:{port + 1}/metrics"
            assert value(scrape(ext.url), "crawler_requests_total") == 0
        finally:
            closed(crawler)


def test_a_frontier_that_hangs_never_hangs_a_scrape(tmp_path):
    with RedisServer(tmp_path / "redis") as server:
        Frontier(server.client, "hang").put([Entry(url="http://a.example/", payload=b"x")])
        settings = project_settings(
            METRICS_PORT="auto",
            CRAWL_NAME="hang",
            REDIS_URL=server.url,
            METRICS_FRONTIER_INTERVAL=0.2,
            METRICS_FRONTIER_TIMEOUT=0.5,
        )
        crawler = get_crawler(BroadSpider, settings)
        ext = started(crawler)
        try:
            s = scrape(ext.url)
            assert value(s, "crawler_frontier_queued") == 1 and value(s, "crawler_frontier_up") == 1
            server.client.execute_command("CLIENT", "PAUSE", 3000)  # every client's commands wait 3 s
            time.sleep(0.3)
            begun = time.monotonic()
            s = scrape(ext.url)
            assert time.monotonic() - begun < 1.5
            assert value(s, "crawler_frontier_up") == 0
            assert value(s, "crawler_frontier_queued") == 1  # the last numbers, with their age
            assert value(s, "crawler_frontier_snapshot_age_seconds") >= 0.3
            deadline = time.monotonic() + 10
            while value(s, "crawler_frontier_up") != 1 and time.monotonic() < deadline:
                time.sleep(0.3)
                s = scrape(ext.url)
            assert value(s, "crawler_frontier_up") == 1  # fresh again once Redis answers
            assert value(s, "crawler_frontier_snapshot_age_seconds") < 1
        finally:
            closed(crawler)


# -- a real crawl, scraped while it runs -------------------------------------------------------


def final_stats(log: str) -> dict[str, int]:
    """The integer stats of the worker's closing dump (Scrapy's 'Dumping Scrapy stats')."""
    dump = log[log.rindex("Dumping Scrapy stats") :]
    return {k: int(v) for k, v in re.findall(r"'([^']+)': (\d+),?\n", dump)}


def test_a_crawl_is_scraped_while_it_runs(tmp_path, redis_url, crawl_name):
    robots = {1: "User-agent: *\nDisallow: /p3.html\n"}
    with serve_site(hosts=3, pages=12, robots=robots, routes={"/drop.html": "drop"}, articles=True) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join([*site.seeds, site.url(0, "/drop.html")]) + "\n")
        log = tmp_path / "worker.log"
        settings = loopback_settings(
            crawl_name,
            log,
            METRICS_PORT="auto",
            METRICS_FRONTIER_INTERVAL=0.5,
            FRONTIER_HOST_INTERVAL=0.2,
            FRONTIER_STATS_INTERVAL=1,
            ARCHIVE_MAX_SECONDS=1,
            URL_RETRY_ATTEMPTS=1,
            SEED_PROGRESS_INTERVAL=0.001,
        )
        worker = launch_worker(tmp_path, "w", seeds, settings, env={**clean_env(), "REDIS_URL": redis_url})
        try:
            url, scrapes = None, []
            deadline = time.monotonic() + 50
            while worker.proc.poll() is None and time.monotonic() < deadline:
                if url is None:
                    found = re.search(r"Metrics on (http://\S+)", worker.text())
                    url = found and found.group(1)
                if url:
                    try:
                        scrapes.append(scrape(url, timeout=2))
                    except (urllib.error.URLError, ConnectionError):  # closing
                        pass
                time.sleep(0.2)
            assert worker.wait(timeout=30) == 0, worker.tail()
        finally:
            worker.kill()
    text = worker.text()
    assert url, worker.tail()
    fetched = [value(s, "crawler_pages_fetched_total", status="200") or 0 for s in scrapes]
    assert len([f for f in fetched if f > 0]) >= 3, fetched  # scraped again and again during the crawl
    assert fetched == sorted(fetched) and fetched[-1] > fetched[0], fetched  # growing, never back
    assert max(value(s, "crawler_frontier_queued") or 0 for s in scrapes) > 0
    assert max(value(s, "crawler_frontier_hosts_ready") or 0 for s in scrapes) > 0
    assert max(value(s, "crawler_frontier_pages_last_minute") or 0 for s in scrapes) > 0
    last = scrapes[-1]
    assert last["_labels"] == {(crawl_name, f"{socket.gethostname()}-{worker.pid}")}

    # the last scrape came while the worker idled before closing: the closing stats agree
    final = final_stats(text)
    for status in ("200", "404"):
        key = f"downloader/response_status_count/{status}"
        assert value(last, "crawler_pages_fetched_total", status=status) == final.get(key), status
    bytes_by_status = {k[1]: v for k, v in last.items() if k[0] == "crawler_bytes_fetched_total"}
    assert sum(bytes_by_status.values()) == final["downloader/response_bytes"]  # counted as Scrapy counts
    assert value(last, "crawler_robots_denied_total") == final["robotstxt/disallowed"] > 0
    assert value(last, "crawler_duplicates_total", kind="exact") == final["contentseen/exact"] > 0
    assert 0 < value(last, "crawler_archive_objects_total") <= final["archive/objects"]
    assert 0 < value(last, "crawler_store_writes_total", fate="fetched") <= final["urlstore/written/fetched"]
    assert value(last, "crawler_politeness_waits_total") == final.get("ratelimit/waits", 0) > 0

    # the periodic line: queue, pages/s, pages and errors of this worker
    lines = re.findall(r"Frontier: (\d+) queued .* this worker: ([\d.]+) pages/s, (\d+) pages, (\d+) errors(.*)", text)
    assert lines, worker.tail()
    assert max(int(pages) for _, _, pages, _, _ in lines) > 0
    assert any(int(errors) > 0 and "connection_error" in detail for _, _, _, errors, detail in lines), lines
    # seed ingestion's progress line (with windows, pushed by host once read: of the URLs held)
    progress = r"Seeding: \d+ lines read, \d+ added, [\d,]+ lines/s, (pushing by host: )?100% of [\d.,]+ (MB|URLs)"
    assert re.search(progress, text), worker.tail()
