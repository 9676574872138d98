"""The failure policy in one real crawl: three `scrapy crawl broad` workers on one site
whose hosts fail in every way the policy names, then the site healed and a second run.

Hosts (crawler/demo/site.py, 127.0.0.(2+i)), 9 pages each:

- healthy: 0 (the seed), 3, 7, 12, 13
- RETRY_OK: /p5.html answers 503 (no Retry-After) twice, then the page: tried 3 times,
  the third answer is the Page (200)
- RETRY_FAIL: /p6.html always answers 503: tried URL_RETRY_ATTEMPTS times, then recorded
  as a Page with status 503
- RETRY_AFTER: /p4.html answers 503 with Retry-After: 3600: the host is held back for an
  hour (HOST_BACKOFF_MAX): no request of it after that answer, in either run
- THROTTLED: every page request answers 429 (no Retry-After) for 10 s: back-offs of
  2, 4 and 8-10 s (HOST_BACKOFF_MIN doubling), then its pages, all in the first run
- ALL_500: every page answers 500: slowed, then down (HOST_DOWN_AFTER distinct URLs in
  a row), probed with one request at a time; no URL tried more than 3 times
- REFUSED: connections refused (host down: its robots.txt cannot be fetched)
- ROBOTS_500, ROBOTS_503: robots.txt answers 500 / 503: nothing else of the host fetched
- ROBOTS_MOVED: robots.txt is a 301 to /robots-moved.txt, whose rules disallow /p3.html

The workers close by themselves once nothing is leased and nothing is due within
FRONTIER_MAX_WAIT. It is 12 s here, not less: the throttled host's third back-off is
8-10 s, and the first run is to wait for it; ROBOTSTXT_RETRY_MAX is large so that the
robots.txt retries (2 s doubling) soon leave that horizon and the run ends (with a cap
below the horizon they would be due again and again and no worker would ever close).

Then the site is healed (ROBOTS_503 gets rules disallowing /p4.html), the test waits
until everything deferred but the Retry-After host is due, and runs the same three
workers again: they fetch what the first run deferred (the robots hosts' pages, the
refused host's pages, the rest of ALL_500), and leave the Retry-After host waiting: its
hold is in Redis and a run's settings do not shorten it.

Checked from the site's own request log, the workers' feeds and logs, and Redis: exit
codes and times, what was fetched in which run, requests per failing URL, the Pages'
statuses, the closing summaries (deferred hosts by reason), and politeness: per host no
two requests (robots.txt and its redirect hop included) arrive closer than the interval
minus 10 ms. Figures for the report are printed (pytest -s).
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path

import pytest

from crawler.demo.plan import FORBIDDEN_PATHS, REDIRECT_FROM, REDIRECT_TO
from crawler.demo.site import Site
from crawler.frontier.frontier import Frontier
from crawler.frontier.keys import SEP, Keys
from crawler.frontier.words import REASONS, THROTTLED, WAITING
from crawler.urls import authority_host
from testing.workers import Worker, clean_env, launch_worker, read_pages

ROOT = Path(__file__).resolve().parents[2]

HOSTS, PAGES = 14, 9
INTERVAL = 0.25
TOLERANCE = 0.010  # seconds: the site's clock and scheduling
# The site stamps a response's end after its last write returns, which on a loaded machine
# can be tens of milliseconds after the worker has read it; arrivals are stamped as the
# request is read, so the arrival spacing is held to TOLERANCE and this one to more.
END_TOLERANCE = 0.050
ATTEMPTS = 3  # URL_RETRY_ATTEMPTS
RETRY_AFTER_SECONDS = 3600
THROTTLE_SECONDS = 10

# host i's pages are found through host i-1's (and its own): ALL_500 follows the seed
# host, so that all its URLs are queued early and it goes down early
ALL_500, RETRY_OK, RETRY_FAIL, RETRY_AFTER, THROTTLED_HOST = 1, 2, 4, 5, 6
REFUSED, ROBOTS_500, ROBOTS_503, ROBOTS_MOVED = 8, 9, 10, 11
HEALTHY = (0, 3, 7, 12, 13)
RETRY_OK_PATH, RETRY_FAIL_PATH, RETRY_AFTER_PATH = "/p5.html", "/p6.html", "/p4.html"
MOVED_ROBOTS = "/robots-moved.txt"
MOVED_RULES = "User-agent: *\nDisallow: /p3.html\n"
HEALED_RULES = "User-agent: *\nDisallow: /p4.html\n"  # ROBOTS_503's robots.txt once healed
ROBOTS_PATHS = ("/robots.txt", MOVED_ROBOTS)

SETTINGS = {
    "FRONTIER_HOST_INTERVAL": INTERVAL,
    "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
    "URL_RETRY_ATTEMPTS": ATTEMPTS,
    "URL_RETRY_DELAY": 1,
    "HOST_BACKOFF_MIN": 2,
    "HOST_BACKOFF_MAX": 3600,
    "HOST_DOWN_AFTER": 3,
    "ROBOTSTXT_RETRY_MIN": 2,
    "ROBOTSTXT_RETRY_MAX": 3600,
    "FRONTIER_MAX_WAIT": 12,
    "FRONTIER_IDLE_SECONDS": 1,
    "FRONTIER_LEASE_SECONDS": 10,
    "FRONTIER_CLOSE_WHEN_IDLE": "True",
    "LOG_LEVEL": "INFO",
}

# "  robots.txt unreachable: 2 hosts, 18 URLs, first due 12:00:00 (in 20 s) (e.g. a, b)"
REASON_LINE = re.compile(
    r"^\s+(?P<reason>.+?): (?P<hosts>\d+) hosts?, (?P<urls>\d+) URLs?, first due (?P<due>.+) \(e\.g\. (?P<eg>[^()]*)\)$"
)
REASON_KEYS = {text: key for key, text in REASONS.items()}


# -- the site and the workers --------------------------------------------------------------


def _site() -> Site:
    return Site(
        HOSTS,
        PAGES,
        robots={
            ROBOTS_500: 500,
            ROBOTS_503: 503,
            ROBOTS_MOVED: (301, {"Location": MOVED_ROBOTS}, ""),
        },
        routes={MOVED_ROBOTS: MOVED_RULES},
        fail_pages={
            RETRY_OK: {RETRY_OK_PATH: [503, 503, None]},
            RETRY_FAIL: {RETRY_FAIL_PATH: 503},
            RETRY_AFTER: {RETRY_AFTER_PATH: (503, {"Retry-After": str(RETRY_AFTER_SECONDS)})},
        },
        fail_all={ALL_500: 500},
        throttle_for={THROTTLED_HOST: THROTTLE_SECONDS},
        refuse={REFUSED},
    )


@pytest.fixture
def site():
    s = _site().start()
    yield s
    s.stop()


@pytest.fixture
def launch(tmp_path, redis_url, crawl_name):
    """launch(label, seeds) starts a worker of the crawl; teardown kills any still running."""
    started: list[Worker] = []

    def start(label: str, seeds: Path | None) -> Worker:
        settings = {"CRAWL_NAME": crawl_name, **SETTINGS}
        started.append(launch_worker(tmp_path, label, seeds, settings, {**clean_env(), "REDIS_URL": redis_url}))
        return started[-1]

    yield start
    for worker in started:
        worker.kill()


def _run(launch, redis_client, crawl_name: str, seeds: Path, run: int, timeout: float) -> list[Worker]:
    """Three workers of the crawl, the first with the seeds; returns once all have exited
    (each must exit by itself within ``timeout`` of its start)."""
    first = launch(f"run{run}-a", seeds)
    # the others start once the frontier has work: a worker finding the frontier empty
    # for FRONTIER_IDLE_SECONDS would rightly close before the seeds are in
    counters = Keys(crawl_name).prefix + "counters"
    deadline = time.monotonic() + 60
    while not int(redis_client.hget(counters, "pushed") or 0):
        assert first.proc.poll() is None, f"worker {first.label} exited before seeding\n{first.tail()}"
        assert time.monotonic() < deadline, f"no seed pushed after 60 s\n{first.tail()}"
        time.sleep(0.05)
    workers = [first, launch(f"run{run}-b", None), launch(f"run{run}-c", None)]
    while any(w.ended is None for w in workers):
        now = time.monotonic()
        for w in workers:
            if w.ended is None and w.proc.poll() is not None:
                w.ended = now
            elif w.ended is None and now - w.started > timeout:
                w.proc.kill()
                w.proc.wait(timeout=10)
                pytest.fail(f"worker {w.label} still running {timeout:.0f} s after its start (killed)\n{w.tail()}")
        time.sleep(0.05)
    logs = _tails(workers)
    codes = {w.label: w.proc.returncode for w in workers}
    assert set(codes.values()) == {0}, f"worker exit codes {codes}\n{logs}"
    return workers


def _tails(workers) -> str:
    return "\n".join(w.tail() for w in workers)


# -- reading the results ---------------------------------------------------------------------


def _summary(worker: Worker) -> tuple[str, dict[str, dict]]:
    """The worker's closing summary: its "Frontier: ..." line, and reason -> {hosts, urls,
    examples} of its deferral lines."""
    text = worker.log.read_text(errors="replace")
    start = text.rfind("Crawl summary (")
    assert start >= 0, f"no closing summary in {worker.log.name}\n{worker.tail()}"
    status, reasons = "", {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("Frontier: "):
            status = line
            continue
        m = REASON_LINE.match(line)
        if not m:
            if status:
                break
            continue
        examples = {authority_host(h.strip()) for h in m["eg"].split(",")}  # (host:port keys: by host)
        reasons[REASON_KEYS.get(m["reason"], m["reason"])] = {
            "hosts": int(m["hosts"]),
            "urls": int(m["urls"]),
            "examples": examples,
            "line": line.strip(),
        }
    assert status, f"no 'Frontier:' line in the summary of {worker.log.name}\n{text[start:]}"
    return status, reasons


def _pages(workers) -> list[dict]:
    return [p for w in workers for p in read_pages(w.out)]


def _deferred_until(redis_client, crawl_name: str, site: Site, except_host: str) -> float:
    """time.time() by which every host and URL retry waiting in the frontier (but
    ``except_host``'s) is due."""
    k = Keys(crawl_name)
    # (the frontier keeps a host under its politeness key: host:port on the site's port)
    due = [
        s for h, s in redis_client.zrange(k.ready, 0, -1, withscores=True) if authority_host(h.decode()) != except_host
    ]
    for member, s in redis_client.zrange(k.delayed, 0, -1, withscores=True):
        if authority_host(member.split(SEP.encode(), 2)[1].decode()) != except_host:
            due.append(s)
    for host in site.hosts:  # robots.txt retries
        if host != except_host:
            retry = redis_client.hget(k.robots(f"http://{host}:{site.port}"), "retry")
            if retry:
                due.append(float(retry))
    return max(due, default=0) / 1000


def _gaps(hits) -> dict[str, list[tuple[float, float, str, str]]]:
    """Per host, for each two consecutive requests: (time between their arrivals, time
    from the end of the first response to the second arrival, path before, path after)."""
    by_host = defaultdict(list)
    for hit in hits:
        by_host[hit.host].append(hit)
    out = {}
    for host, hs in by_host.items():
        hs.sort(key=lambda h: h.start)
        out[host] = [(b.start - a.start, b.start - (a.end or a.start), a.path, b.path) for a, b in pairwise(hs)]
    return out


# -- the test -----------------------------------------------------------------------------------


def test_failures_deferred_then_fetched_after_healing(site, launch, tmp_path, redis_client, crawl_name):
    t0 = time.monotonic()
    h = site.hosts
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(site.seeds) + "\n")
    timeout = len(site.page_paths()) * INTERVAL + 90  # the largest host's requests x interval + 90 s
    # what a correct crawl fetches, under the failures (before healing), bounds first
    must1 = site.fetch_plan(held=[RETRY_AFTER], attempts=ATTEMPTS)
    must1 = {k for k in must1 if k[0] != h[ALL_500]}  # ALL_500 goes down: part waits for run 2

    # -- run 1 --------------------------------------------------------------------------------
    run1 = _run(launch, redis_client, crawl_name, seeds, 1, timeout)
    run1_end = time.monotonic()
    hits1 = site.hits()
    logs1 = _tails(run1)
    pages1 = _pages(run1)
    keys1 = Counter(hit.key for hit in hits1)
    summaries1 = {w.label: _summary(w) for w in run1}

    # -- heal; wait until what was deferred (but the Retry-After host) is due; run 2 ------------
    site.heal(robots={ROBOTS_503: HEALED_RULES})
    due = _deferred_until(redis_client, crawl_name, site, h[RETRY_AFTER])
    wait = max(due - time.time(), 0) + 0.5
    assert wait < 120, f"deferred for {wait:.0f} s more after run 1\n{logs1}"
    time.sleep(wait)
    run2_start = time.monotonic()
    run2 = _run(launch, redis_client, crawl_name, seeds, 2, timeout)
    run2_end = time.monotonic()
    hits = site.hits()
    hits2 = hits[len(hits1) :]
    logs = _tails(run1 + run2)
    pages = pages1 + _pages(run2)
    pages2 = _pages(run2)
    summaries2 = {w.label: _summary(w) for w in run2}
    frontier = Frontier(redis_client, crawl_name)
    outlook, deferred = frontier.outlook(0), frontier.deferred()

    # -- figures for the report -------------------------------------------------------------
    requests = defaultdict(list)  # (host, path) -> statuses answered, in order, both runs
    for hit in hits:
        requests[hit.key].append(hit.status)
    failing = sorted(k for k, statuses in requests.items() if any(s and s >= 429 for s in statuses))
    gaps = _gaps(hits)
    print(f"\n--- crawl failures: {HOSTS} hosts x {PAGES} pages, interval {INTERVAL} s, 3 workers per run")
    print(f"wall time of the test: {time.monotonic() - t0:.1f} s")
    for run, workers, end in ((1, run1, run1_end), (2, run2, run2_end)):
        first = min(w.started for w in workers)
        exits = ", ".join(f"{w.label} {w.ended - w.started:.1f} s" for w in workers)
        print(f"run {run}: {end - first:.1f} s (worker exit after start: {exits}; limit {timeout:.0f} s)")
    print(f"waited {run2_start - run1_end:.1f} s between the runs for the deferred hosts to be due")
    print(f"requests: run 1 {len(hits1)}, run 2 {len(hits2)}; Pages: run 1 {len(pages1)}, run 2 {len(pages2)}")
    print("requests per failing URL (statuses answered, run 1 | run 2):")
    for key in failing:
        s1 = [hit.status for hit in hits1 if hit.key == key]
        s2 = [hit.status for hit in hits2 if hit.key == key]
        print(f"  {key[0]}{key[1]:<22} {len(s1) + len(s2)}: {s1} | {s2}")
    robots_counts = Counter(hit.host for hit in hits if hit.path == "/robots.txt")
    print(
        "per host: smallest gap between two arrivals, and from a response's end to the next arrival "
        "(robots.txt and its redirect included), requests, robots.txt requests:"
    )
    for i, host in enumerate(h):
        g = gaps.get(host, [])
        arrival = f"{1000 * min(x[0] for x in g):.0f}" if g else "-"
        after_end = f"{1000 * min(x[1] for x in g):.0f}" if g else "-"
        print(
            f"  host {i:>2} {host:<11} {arrival:>5} ms, {after_end:>5} ms after the end; {len(g) + 1:>3} requests, "
            f"robots.txt x{robots_counts[host]}"
        )
    for label, (status, reasons) in {**summaries1, **summaries2}.items():
        print(f"summary {label}: {status}")
        for r in reasons.values():
            print(f"    {r['line']}")

    # -- every worker ended by itself (checked in _run); run 1 fetched what it could ---------
    missing = sorted(must1 - set(keys1))
    assert not missing, (
        f"run 1 never fetched {len(missing)} pages of healthy / partly failing hosts: {missing}\n{logs1}"
    )
    for i in (ROBOTS_500, ROBOTS_503):
        paths = {hit.path for hit in hits1 if hit.host == h[i]}
        assert paths == {"/robots.txt"}, f"host {i} (robots.txt unreachable) requests in run 1: {paths}"
    assert not [hit for hit in hits1 if hit.host == h[REFUSED]], "the refused host received requests in run 1"
    assert (h[ROBOTS_MOVED], "/p3.html") not in requests, "robots.txt (after its 301) disallows /p3.html"
    moved = [hit.path for hit in sorted(hits1, key=lambda x: x.start) if hit.host == h[ROBOTS_MOVED]]
    assert moved[:2] == ["/robots.txt", MOVED_ROBOTS] and moved.count("/robots.txt") == 1, moved

    # -- requests per failing URL --------------------------------------------------------------
    assert requests[(h[RETRY_OK], RETRY_OK_PATH)] == [503, 503, 200], requests[(h[RETRY_OK], RETRY_OK_PATH)]
    assert requests[(h[RETRY_FAIL], RETRY_FAIL_PATH)] == [503] * ATTEMPTS, requests[(h[RETRY_FAIL], RETRY_FAIL_PATH)]
    over = {k: s for k, s in requests.items() if k[1] not in ROBOTS_PATHS and len(s) > ATTEMPTS and 429 not in s}
    assert not over, f"URLs requested more than {ATTEMPTS} times: {over}\n{logs}"
    all500 = {k: s for k, s in requests.items() if k[0] == h[ALL_500] and k[1] not in ROBOTS_PATHS}
    assert all500 and all(s[:-1] == [500] * (len(s) - 1) for s in all500.values()), all500
    assert all(s[-1] == 200 or s == [500] * ATTEMPTS for s in all500.values()), (
        f"an ALL_500 URL neither given up after {ATTEMPTS} tries nor fetched after healing: {all500}\n{logs}"
    )
    throttled = [
        hit.status
        for hit in sorted(hits1, key=lambda x: x.start)
        if hit.host == h[THROTTLED_HOST] and hit.path not in ROBOTS_PATHS
    ]
    n429 = throttled.count(429)
    assert 2 <= n429 <= 4 and throttled[:n429] == [429] * n429, f"throttled host's answers: {throttled}"
    ok = Counter(hit.key for hit in hits if hit.status is not None and hit.status < 400 and hit.path != "/robots.txt")
    twice = sorted(k for k, n in ok.items() if n > 1)
    assert not twice, f"pages answered more than once: {twice}\n{logs}"

    # -- the Retry-After host is held back, in both runs ------------------------------------------
    ra = sorted((hit for hit in hits if hit.host == h[RETRY_AFTER]), key=lambda x: x.start)
    held = [i for i, hit in enumerate(ra) if hit.path == RETRY_AFTER_PATH]
    assert len(held) == 1 and ra[held[0]].status == 503, [(x.path, x.status) for x in ra]
    after = [(x.path, round(x.start - ra[held[0]].start, 1)) for x in ra[held[0] + 1 :]]
    assert not after, f"the host that sent Retry-After: {RETRY_AFTER_SECONDS} was asked again: {after}\n{logs}"

    # -- the first run's summaries: who waits, and why ---------------------------------------------
    for label, (status, reasons) in summaries1.items():
        assert status.startswith("Frontier: waiting until "), f"{label}: {status}"
        assert reasons.get("robots", {}).get("examples") == {h[ROBOTS_500], h[ROBOTS_503]}, (label, reasons)
        assert reasons["robots"]["hosts"] == 2, (label, reasons["robots"])
        assert reasons.get("down", {}).get("examples") == {h[REFUSED], h[ALL_500]}, (label, reasons)
        assert reasons["down"]["hosts"] == 2, (label, reasons["down"])
        assert reasons.get(THROTTLED, {}).get("examples") == {h[RETRY_AFTER]}, (label, reasons)
        assert reasons[THROTTLED]["hosts"] == 1, (label, reasons[THROTTLED])
        assert set(reasons) == {"robots", "down", THROTTLED}, (label, reasons)

    # -- run 2 fetched what run 1 deferred ----------------------------------------------------------
    gave_up = {k for k, s in requests.items() if [x for x in s if x == 500 or x == 503] == s and len(s) >= ATTEMPTS}
    must2 = site.fetch_plan(held=[RETRY_AFTER], failed=gave_up)  # healed now
    missing = sorted(must2 - set(requests))
    assert not missing, f"never fetched in either run: {missing}\n{logs}"
    keys2 = {hit.key for hit in hits2}
    for i in (REFUSED, ROBOTS_500, ROBOTS_503):
        want = {k for k in must2 if k[0] == h[i]}
        assert len(want) >= PAGES - 1 and want <= keys2, f"run 2 did not fetch host {i}: {sorted(want - keys2)}"
    assert (h[ROBOTS_503], "/p4.html") not in requests, "the healed robots.txt disallows /p4.html"
    assert not [hit for hit in hits2 if hit.host == h[RETRY_AFTER]], "the Retry-After host was asked in run 2"
    may = site.fetch_plan()  # everything reachable once healed
    extra = sorted(k for k in requests if k not in may and k[1] not in ROBOTS_PATHS)
    assert not extra, f"requests no correct crawl makes: {extra}\n{logs}"
    assert not [k for k in requests if k[1].split("?", 1)[0] in FORBIDDEN_PATHS], "forbidden paths requested"
    for label, (status, reasons) in summaries2.items():
        assert status.startswith("Frontier: waiting until "), f"{label}: {status}"
        assert set(reasons) == {THROTTLED} and reasons[THROTTLED]["examples"] == {h[RETRY_AFTER]}, (label, reasons)
    assert outlook["state"] == WAITING and outlook["leased"] == 0, outlook
    assert set(deferred) == {THROTTLED} and deferred[THROTTLED]["hosts"] == 1, deferred

    # -- the Pages: one per URL requested, with the status of its last answer ---------------------
    by_url = defaultdict(list)
    for page in pages:
        by_url[page["url"]].append(page)
    dup = sorted(u for u, ps in by_url.items() if len(ps) > 1)
    assert not dup, f"Pages output more than once: {dup}"
    redirected = {k[0] for k, s in requests.items() if k[1] == REDIRECT_FROM and s[-1] == 301}
    want = {
        site.url(*k): s[-1]
        for k, s in requests.items()
        if k[1] not in ROBOTS_PATHS and not (k[1] == REDIRECT_TO and k[0] in redirected)
    }
    del want[site.url(h[RETRY_AFTER], RETRY_AFTER_PATH)]  # held back: no Page yet
    want = {u: (200 if s == 301 else s) for u, s in want.items()}
    want[site.url(h[ROBOTS_MOVED], "/p3.html")] = "robots_disallowed"
    want[site.url(h[ROBOTS_503], "/p4.html")] = "robots_disallowed"
    got = {u: ps[0]["status"] for u, ps in by_url.items()}
    assert got == want, (
        f"Pages: missing {sorted(set(want) - set(got))}, unexpected {sorted(set(got) - set(want))}, "
        f"other status {sorted((u, got[u], want[u]) for u in set(got) & set(want) if got[u] != want[u])}"
    )

    # -- politeness, from the site's own arrival log ---------------------------------------------
    close = sorted(
        (round(g, 3), host, a, b) for host, gs in gaps.items() for g, _, a, b in gs if g < INTERVAL - TOLERANCE
    )
    assert not close, f"requests to one host closer than {INTERVAL} s - {TOLERANCE} s: {close}"
    # the interval counts from the end of each response (one request in flight per host)
    early = sorted(
        (round(g, 3), host, a, b) for host, gs in gaps.items() for _, g, a, b in gs if g < INTERVAL - END_TOLERANCE
    )
    assert not early, (
        f"requests less than {INTERVAL} s - {END_TOLERANCE} s after the host's last response ended: {early}"
    )
