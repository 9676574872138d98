"""A crawl on three Redis servers (REDIS_URLS): two real ``scrapy crawl broad`` workers
crawl the loopback site of crawler/demo/site.py with their frontier spread over three
private redis-servers. The same checks as on one Redis: every page fetched once and in
the output, each host's requests its interval apart at the site, the crawl ends by itself;
and the hosts, and content seen, really are spread over the servers."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter, defaultdict
from itertools import pairwise

from scrapy.settings import Settings

from crawler.demo.site import serve_site
from crawler.frontier.connection import frontier_from_settings
from crawler.frontier.frontier import Frontier
from crawler.frontier.keys import Keys
from crawler.frontier.shards import ShardedFrontier, server_name
from crawler.frontier.words import FINISHED
from testing.servers import RedisServer, start_cluster
from testing.services import project_settings
from testing.workers import ROOT, clean_env, launch_worker, loopback_settings, seed_file

HOST_INTERVAL = 0.3
NAME = "sharded"


def _settings(tmp_path, redis_settings: dict) -> dict:
    """A worker's settings on ``redis_settings``: the hosts HOST_INTERVAL apart, the end 3 s idle."""
    return loopback_settings(
        NAME,
        tmp_path / "a.log",
        FRONTIER_HOST_INTERVAL=HOST_INTERVAL,
        FRONTIER_IDLE_SECONDS=3,
        CRAWL_DIR=tmp_path / "crawl",
        **redis_settings,
    )


def _start_two(tmp_path, site, redis_settings: dict, ready, workers: list) -> dict:
    """Worker a with the seeds, then worker b once ``ready()`` (polled), each added to
    ``workers`` as it starts (the caller kills them at the end); returns their settings."""
    settings = _settings(tmp_path, redis_settings)
    env = clean_env()
    workers.append(launch_worker(tmp_path, "a", seed_file(tmp_path, site.seeds), settings, env))
    deadline = time.monotonic() + 60
    while not ready():
        assert workers[0].proc.poll() is None and time.monotonic() < deadline, workers[0].tail()
        time.sleep(0.05)
    workers.append(launch_worker(tmp_path, "b", None, {**settings, "LOG_FILE": tmp_path / "b.log"}, env))
    return settings


def _assert_each_page_fetched_once(site, hits) -> None:
    counts = Counter(h.key for h in hits)
    assert set(counts) == site.expected_fetches(), f"missing {sorted(site.expected_fetches() - set(counts))[:5]}"
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]


def _crawl(tmp_path, site, redis_settings: dict) -> list:
    """Two workers started together, each given the seeds, crawl ``site`` with
    ``redis_settings``; checks that every page was fetched once, is in the output, that
    both did some of it, and that each host's requests were HOST_INTERVAL apart at the
    site. Returns the workers."""
    settings = _settings(tmp_path, redis_settings)
    seeds, env = seed_file(tmp_path, site.seeds), clean_env()
    workers: list = []
    try:
        for label in "ab":
            workers.append(
                launch_worker(tmp_path, label, seeds, {**settings, "LOG_FILE": tmp_path / f"{label}.log"}, env)
            )
        codes = [w.wait(120) for w in workers]
    finally:
        for w in workers:
            w.kill()
    hits = site.page_hits()
    logs = "\n".join(w.tail() for w in workers)
    assert codes == [0, 0], f"exit codes {codes}\n{logs}"
    for w in workers:  # robots.txt shared, nothing refused by the servers
        assert " ERROR: " not in w.text() and "Traceback" not in w.text(), w.tail(80)
    _assert_each_page_fetched_once(site, hits)
    urls = {p["url"] for w in workers for p in w.pages()}
    assert urls >= site.expected_page_urls(), sorted(site.expected_page_urls() - urls)[:5]
    assert all(w.pages() for w in workers), "a worker did no work"
    by_host = defaultdict(list)
    for h in hits:
        by_host[h.host].append(h.start)
    gaps = [b - a for starts in by_host.values() for a, b in pairwise(sorted(starts))]
    print(f"sharded crawl: {len(hits)} pages, smallest gap between a host's requests {min(gaps):.3f} s")
    assert min(gaps) >= HOST_INTERVAL - 0.01, sorted(gaps)[:5]
    return workers


def _assert_digests_spread(workers, clients) -> None:
    """Content seen recorded each page's body digest once, on one of several servers."""
    digests = {p["content_digest"] for w in workers for p in w.pages() if p.get("content_digest")}
    held = [sum(c.hlen(k) for k in c.scan_iter(match=f"crawl:\\{{{NAME}[}}#]*:cdigest")) for c in clients]
    assert sum(held) == len(digests) and sum(1 for n in held if n) >= 2, held


def test_two_workers_on_three_redis_servers_crawl_every_page_once_and_politely(tmp_path):
    servers = [RedisServer(tmp_path / f"redis{i}").start() for i in range(3)]
    try:
        with serve_site(hosts=8, pages=16) as site:
            workers = _crawl(tmp_path, site, {"REDIS_URLS": ",".join(s.url for s in servers)})
        _assert_digests_spread(workers, [s.client for s in servers])
        holding = [len(s.client.hkeys(Keys(NAME).hnext)) for s in servers]
        assert sum(holding) == len(site.hosts) and sum(1 for n in holding if n) >= 2, holding
        frontier = ShardedFrontier([Frontier(s.client, NAME) for s in servers], [server_name(s.url) for s in servers])
        assert frontier.outlook(0)["state"] == FINISHED
        for host in site.hosts:  # each site's robots.txt is shared on its host's server
            origin = f"http://{host}:{site.port}"
            holders = [n for n, s in enumerate(servers) if s.client.exists(Keys(NAME).robots(origin))]
            assert holders == [frontier.ring.index(frontier.politeness_key(origin + "/"))], (host, holders)
        assert frontier.stats()["pushed"] == len(site.expected_fetches()), frontier.stats()
    finally:
        for s in servers:
            s.kill()


def test_two_workers_on_a_three_master_redis_cluster_crawl_every_page_once_and_politely(tmp_path):
    """REDIS_CLUSTER_URL: the crawl's 16 shards (hash tags) spread over the masters."""
    nodes = start_cluster(tmp_path / "cluster")
    try:
        settings = Settings({"CRAWL_NAME": NAME, "REDIS_CLUSTER_URL": nodes[0].url, "REDIS_CLUSTER_SHARDS": 16})
        with serve_site(hosts=8, pages=16) as site:
            workers = _crawl(tmp_path, site, {"REDIS_CLUSTER_URL": nodes[0].url})
        frontier = frontier_from_settings(Settings({**project_settings(), **settings}))
        _assert_digests_spread(workers, [n.client for n in nodes])
        assert frontier.outlook(0)["state"] == FINISHED
        assert frontier.stats()["pushed"] == len(site.expected_fetches()), frontier.stats()
        holding = [len(list(n.client.scan_iter(match="crawl:*hnext"))) for n in nodes]
        assert sum(1 for k in holding if k) >= 2, holding  # the shards are on several masters
    finally:
        for n in nodes:
            n.kill()


def test_a_server_restarted_mid_crawl_holds_back_only_its_hosts_and_loses_nothing(tmp_path):
    """One of the three servers (append-only file on) stops for a few seconds mid-crawl
    and comes back with its data: the workers go on with the other servers' hosts
    meanwhile, then finish every page, each fetched once."""
    servers = [RedisServer(tmp_path / f"redis{i}", persistent=True).start() for i in range(3)]
    workers = []
    try:
        with serve_site(hosts=8, pages=12, delay=0.05) as site:
            urls = {"REDIS_URLS": ",".join(s.url for s in servers)}
            _start_two(tmp_path, site, urls, lambda: len(site.page_hits()) >= 15, workers)
            frontier = ShardedFrontier(
                [Frontier(s.client, NAME) for s in servers], [server_name(s.url) for s in servers]
            )
            victim = max(range(3), key=lambda n: len(servers[n].client.hkeys(Keys(NAME).hnext)))
            servers[victim].stop()
            stopped = time.monotonic()
            before = len(site.page_hits())
            time.sleep(5)
            during = [h for h in site.page_hits()[before:] if h.start > stopped + 1]
            servers[victim].start()
            codes = [w.wait(150) for w in workers]
            hits = site.page_hits()
        logs = "\n".join(w.tail() for w in workers)
        assert codes == [0, 0], f"exit codes {codes}\n{logs}"
        assert any("unreachable" in w.text() for w in workers), logs
        on_victim = {
            h for h in site.hosts if frontier.ring.index(frontier.politeness_key(f"http://{h}:{site.port}/")) == victim
        }
        print(
            f"server {victim + 1} down 5 s ({len(on_victim)} of {len(site.hosts)} hosts): {len(during)} pages meanwhile"
        )
        assert all(h.host not in on_victim for h in during), "a host of the stopped server was fetched"
        _assert_each_page_fetched_once(site, hits)
        assert frontier.outlook(0)["state"] == FINISHED
        assert during, "the other servers' hosts did not go on while one server was down"
    finally:
        for w in workers:
            w.kill()
        for s in servers:
            s.kill()


def test_a_cluster_master_restarted_mid_crawl_loses_nothing(tmp_path):
    """A master of the three (append-only file on) stops for a few seconds mid-crawl and
    comes back with its data and its slots: the workers finish every page, each once."""
    nodes = start_cluster(tmp_path / "cluster", persistent=True)
    workers = []
    try:
        with serve_site(hosts=8, pages=12, delay=0.05) as site:
            cluster = {"REDIS_CLUSTER_URL": nodes[0].url}
            settings = _start_two(tmp_path, site, cluster, lambda: len(site.page_hits()) >= 15, workers)
            nodes[1].stop()
            time.sleep(4)
            nodes[1].start()
            codes = [w.wait(150) for w in workers]
            hits = site.page_hits()
        logs = "\n".join(w.tail() for w in workers)
        assert codes == [0, 0], f"exit codes {codes}\n{logs}"
        assert not any("Traceback" in w.text() for w in workers), logs
        _assert_each_page_fetched_once(site, hits)
        frontier = frontier_from_settings(Settings({**project_settings(), **settings}))
        assert frontier.outlook(0)["state"] == FINISHED
    finally:
        for w in workers:
            w.kill()
        for n in nodes:
            n.kill()


def test_seed_and_frontier_commands_use_every_server(tmp_path):
    servers = [RedisServer(tmp_path / f"redis{i}").start() for i in range(3)]
    try:
        seeds = seed_file(tmp_path, [f"http://h{i}.example/p{j}" for i in range(20) for j in range(3)])
        env = {**clean_env(), "REDIS_URLS": ",".join(s.url for s in servers)}

        def scrapy(*args):
            return subprocess.run(
                [sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
            )

        seeded = scrapy("seed", str(seeds), "--crawl", "cmds", "--no-progress")
        assert seeded.returncode == 0 and seeded.stdout.startswith("added 60,"), seeded.stdout + seeded.stderr
        queued = [int(s.client.hget(Keys("cmds").counters, "queued") or 0) for s in servers]
        assert sum(queued) == 60 and sum(1 for n in queued if n) >= 2, queued
        shown = scrapy("frontier", "--crawl", "cmds")
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert "(on 3 Redis servers, REDIS_URLS)" in shown.stdout and any(
            line.startswith("queued           60 ") for line in lines
        ), shown.stdout
        assert "URL-seen         60 URLs in 3 shards (1 generation each)," in shown.stdout, shown.stdout
    finally:
        for s in servers:
            s.kill()
