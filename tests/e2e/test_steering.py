"""The operator's hand on a running crawl: pause and resume (the crawl, or a host), and the
page budget (CRAWL_MAX_PAGES), on one frontier and a sharded one: the end-to-end tests
(commands and workers as subprocesses) (the others: tests/integration/test_steering.py)."""

import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from crawler.demo.site import serve_site
from crawler.frontier.frontier import Frontier
from testing.workers import clean_env, crawl_command, launch_worker, loopback_settings, seed_file

ROOT = Path(__file__).resolve().parents[2]


def _scrapy(redis_url, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=ROOT,
        env={**clean_env(), "REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_two_workers_spend_one_page_budget_and_leave_a_paused_host_alone(tmp_path, redis_url, redis_client, crawl_name):
    """Four hosts seeded, one paused with `scrapy frontier pause --host`, two workers with
    CRAWL_MAX_PAGES = 40 (the three others hold about 90 pages): between them the workers
    handle exactly 40 pages, the paused host is never asked for a page (by the site's log),
    and both end by themselves saying the budget is spent and what is left."""
    with serve_site(hosts=4, pages=30) as site:
        seeds = seed_file(tmp_path, [site.url(i, "/p0.html") for i in range(4)])
        store = tmp_path / "urlstore.sqlite"
        common = ("-s", f"CRAWL_NAME={crawl_name}", "-s", f"URLSTORE_SQLITE_PATH={store}")
        common += ("-s", f"CRAWL_DIR={tmp_path / 'crawl'}")  # the workers' (their spill store's)
        common += ("-s", "NETWORK_GUARD_ALLOW=127.0.0.0/8")
        seeded = _scrapy(redis_url, "seed", *common, str(seeds))
        assert seeded.returncode == 0, seeded.stderr
        held = f"{site.hosts[3]}:{site.port}"  # (its politeness key)
        out = _scrapy(redis_url, "frontier", "pause", "--host", site.url(3, "/"), *common)
        assert out.returncode == 0 and f"paused host {held}" in out.stdout, out.stdout + out.stderr
        shown = _scrapy(redis_url, "frontier", *common)
        assert f"1 host ({held})" in shown.stdout, shown.stdout
        settings = loopback_settings(
            crawl_name, tmp_path / "w.log", URLSTORE_SQLITE_PATH=store, CRAWL_MAX_PAGES=40, FRONTIER_HOST_INTERVAL=0.1
        )
        env = {**clean_env(), "REDIS_URL": redis_url}
        workers = [
            launch_worker(tmp_path, label, None, {**settings, "LOG_FILE": tmp_path / f"{label}.log"}, env)
            for label in ("a", "b")
        ]
        codes = [w.wait(120) for w in workers]
        hits = site.page_hits()
    assert codes == [0, 0], [w.tail() for w in workers]
    assert hits and not [h for h in hits if h.host == site.hosts[3]]
    f = Frontier(redis_client, crawl_name)
    assert f.budget()["done"] == 40 and f.budget()["leased"] == 0
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM urls").fetchone()[0] == 40
    for w in workers:
        text = w.text()
        assert "The page budget is spent (CRAWL_MAX_PAGES = 40): closing" in text, w.tail()
        assert "finished: the page budget (CRAWL_MAX_PAGES = 40) is spent" in text
    assert f.paused()["hosts"].keys() == {held}
    # the crawl's totals: said by the last worker to end, and by `scrapy frontier`, whose
    # budget is the workers' (no -s CRAWL_MAX_PAGES given to it)
    totals = [line for w in workers for line in w.text().splitlines() if "Crawl totals (all workers)" in line]
    fetched = sum(int(m[1]) for w in workers for m in re.finditer(r"'pages/fate/fetched': (\d+)", w.text()))
    copies = sum(int(m[1]) for w in workers for m in re.finditer(r"'pages/fate/duplicate': (\d+)", w.text()))
    said = f"Crawl totals (all workers): 40 pages: {fetched} fetched (0 of them near copies), {copies} exact copies"
    assert totals and all(line.endswith(said) for line in totals), (totals, said)
    shown = _scrapy(redis_url, "frontier", *common).stdout
    assert "page budget      40 handled + 0 in hand of CRAWL_MAX_PAGES 40; spent" in shown, shown
    assert f"pages (all)      40 pages: {fetched} fetched" in shown, shown


def test_a_worker_records_a_dropped_host_a_host_given_up_and_urls_over_quota(tmp_path, redis_url, crawl_name):
    """Four hosts: one dropped with `scrapy frontier drop` before the crawl, one refusing
    connections (given up after HOST_GIVE_UP_AFTER = 3 s), a page quota of 8 a host. The
    worker ends by itself; the dropped host is never asked for a page (the site's log); the
    UrlStore records the dropped host's, the given up host's and the URLs over quota with
    their fates, and each host's pages fetched stay within its quota."""
    with serve_site(hosts=4, pages=30, refuse={3}) as site:
        seeds = seed_file(tmp_path, [site.url(i, "/p0.html") for i in range(4)])
        store = tmp_path / "urlstore.sqlite"
        common = ("-s", f"CRAWL_NAME={crawl_name}", "-s", f"URLSTORE_SQLITE_PATH={store}")
        common += ("-s", f"CRAWL_DIR={tmp_path / 'crawl'}")  # the workers' (their spill store's)
        common += ("-s", "NETWORK_GUARD_ALLOW=127.0.0.0/8")
        assert _scrapy(redis_url, "seed", *common, str(seeds)).returncode == 0
        asked = _scrapy(redis_url, "frontier", "drop", "--host", site.url(2, "/"), *common)
        assert asked.returncode == 2 and "--yes" in asked.stdout  # (a drop is confirmed)
        dropped = _scrapy(redis_url, "frontier", "drop", "--host", site.url(2, "/"), "--yes", *common)
        assert dropped.returncode == 0 and "dropped host" in dropped.stdout, dropped.stdout + dropped.stderr
        settings = loopback_settings(
            crawl_name,
            tmp_path / "w.log",
            URLSTORE_SQLITE_PATH=store,
            FRONTIER_HOST_MAX_PAGES=8,
            HOST_GIVE_UP_AFTER=3,
            HOST_BACKOFF_MIN=1,
            HOST_BACKOFF_MAX=2,
            ROBOTSTXT_RETRY_MIN=1,
            ROBOTSTXT_RETRY_MAX=2,
            URL_RETRY_ATTEMPTS=6,
            URL_RETRY_DELAY=1,
        )
        worker = launch_worker(tmp_path, "w", None, settings, {**clean_env(), "REDIS_URL": redis_url})
        code = worker.wait(120)
        hits = site.page_hits()
    assert code == 0, worker.tail()
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT url, fate FROM urls").fetchall()
    fates: dict[str, dict[str, int]] = {}
    for url, fate in rows:
        host = url.split("/")[2].split(":")[0]
        fates.setdefault(host, {}).setdefault(fate, 0)
        fates[host][fate] += 1
    a, b, dropped_host, down = site.hosts
    assert not [h for h in hits if h.host == dropped_host]
    assert set(fates[dropped_host]) == {"dropped"}  # its seed, and its pages the others link to
    assert set(fates[down]) == {"given_up"}, fates[down]
    for host in (a, b):
        assert fates[host].get("over_quota", 0) > 0, fates[host]
        assert sum(n for fate, n in fates[host].items() if fate != "over_quota") <= 8, fates[host]
    summary = worker.text()
    said = f"dropped {fates[dropped_host]['dropped']}", f"given_up {fates[down]['given_up']}", "over_quota"
    assert all(words in summary for words in said), worker.tail()


def test_a_worker_follows_the_crawl_rules_and_reads_them_again_when_they_change(
    tmp_path, redis_url, redis_client, crawl_name
):
    """A rules file rejecting /p1x pages everywhere, slowing one host to 0.4 s and giving
    another a quota of 6 pages: by the site's own log no /p1x page is asked for, the slowed
    host's requests are 0.4 s apart, the other's pages past its quota are recorded as
    over_quota. Then the file changes while the worker runs: a submitted URL the new rules
    reject is not fetched, where one submitted before the change was. A file with mistakes
    stops the worker at its start with each mistake's line."""
    with serve_site(hosts=3, pages=40) as site:
        rules = tmp_path / "rules.txt"
        slow, capped = f"{site.hosts[1]}:{site.port}", f"{site.hosts[2]}:{site.port}"
        rules.write_text(f"reject regex /p1\\d\\.html$\nhost {slow} interval=0.4\nhost {capped} max_pages=6\n")
        store = tmp_path / "urlstore.sqlite"
        settings = loopback_settings(
            crawl_name,
            tmp_path / "w.log",
            URLSTORE_SQLITE_PATH=store,
            CRAWL_RULES=rules,
            CRAWL_RULES_CHECK_INTERVAL=0.5,
        )
        env = {**clean_env(), "REDIS_URL": redis_url}
        bad = tmp_path / "bad.txt"
        bad.write_text("accept host example.com\nreject  nothing\nhost example.com speed=3\n")
        refused = subprocess.run(
            crawl_command(tmp_path / "bad.jsonl", None, {**settings, "CRAWL_RULES": bad}),
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert f"{bad}:2:" in refused.stderr and f"{bad}:3:" in refused.stderr, refused.stderr
        seeds = seed_file(tmp_path, [site.url(i, "/p0.html") for i in range(3)])
        worker = launch_worker(tmp_path, "w", seeds, settings, env)
        submit_key = Frontier(redis_client, crawl_name).keys.submit
        before, after = site.url(0, "/extra-before.html"), site.url(0, "/extra-after.html")
        try:
            deadline = time.monotonic() + 30
            while len(site.page_hits()) < 10 and time.monotonic() < deadline:
                time.sleep(0.1)
            redis_client.rpush(submit_key, before)
            rules.write_text(rules.read_text() + "reject regex /extra-after\\.html$\n")
            time.sleep(1.5)  # (three looks at the file)
            redis_client.rpush(submit_key, after)
            code = worker.wait(120)
        finally:
            worker.kill()
        hits = site.page_hits()
    assert code == 0, worker.tail()
    paths = [h.path for h in hits]
    assert not [p for p in paths if re.fullmatch(r"/p1\d\.html", p)]
    assert "/extra-before.html" in paths and "/extra-after.html" not in paths
    assert "Crawl rules reloaded" in worker.text()
    starts = sorted(h.start for h in hits if h.host == site.hosts[1])
    assert len(starts) > 5 and min(b - a for a, b in zip(starts, starts[1:])) >= 0.38
    with sqlite3.connect(store) as db:
        capped_fates = dict(
            db.execute("SELECT fate, COUNT(*) FROM urls WHERE url LIKE ? GROUP BY fate", (f"%//{capped}/%",))
        )
    assert capped_fates.get("over_quota", 0) > 0, capped_fates
    assert sum(n for fate, n in capped_fates.items() if fate != "over_quota") <= 6, capped_fates
    # the last worker to end (here the only one) gives the crawl's totals, rejections included
    text = worker.text()
    rejected = int(re.search(r"'frontier/rejected': (\d+)", text)[1])
    [totals] = [line for line in text.splitlines() if "Crawl totals (all workers)" in line]
    assert rejected > 0 and f"URLs not admitted: rejected by the crawl rules {rejected}" in totals, totals
    assert "submissions refused 1" in totals, totals  # (/extra-after.html, under the new rules)


def test_a_worker_crawls_by_importance_and_shares_it_with_the_links(tmp_path, redis_url, redis_client, crawl_name):
    """A worker with FRONTIER_ORDER=importance crawls the demo site to its end: every page
    once by the site's log, each host polite, and each page fetched through a link carries
    the share of importance its linking page gave it (a seed 1, the others less), whatever
    happened to its lease on the way (given back, expired, taken over by a redirect)."""
    with serve_site(hosts=2, pages=20) as site:
        seeds = seed_file(tmp_path, [site.url(0, "/p0.html")])
        settings = loopback_settings(
            crawl_name, tmp_path / "w.log", FRONTIER_ORDER="importance", FRONTIER_HOST_INTERVAL=0.1
        )
        worker = launch_worker(tmp_path, "w", seeds, settings, {**clean_env(), "REDIS_URL": redis_url})
        code = worker.wait(120)
        hits = site.page_hits()
    assert code == 0, worker.tail()
    keys = [h.key for h in hits]
    assert len(keys) == len(set(keys)) and len(keys) >= 40  # every page once
    for host in site.hosts:
        starts = sorted(h.start for h in hits if h.host == host)
        assert min(b - a for a, b in zip(starts, starts[1:])) >= 0.095
    pages = {p["url"]: p for p in worker.pages()}
    seed = pages[site.url(0, "/p0.html")]
    assert seed["importance"] == 1.0
    linked = [p.get("importance") for url, p in pages.items() if p.get("status") == 200 and url != seed["url"]]
    # every one, a redirect's target too (the importance of the link to its old address)
    assert linked and all(x is not None and 0 < x < 1 for x in linked), linked
    assert redis_client.hlen(Frontier(redis_client, crawl_name).keys.ranked_payloads) == 0
