"""Politeness per address (FRONTIER_ADDRESS_POLITENESS) across worker processes, by the
site's own arrival log: a DNS server on loopback (testing/dns.py) puts 300 host names on 5
loopback addresses; 4 workers crawl them all. Each address gets no two requests closer than
its interval and never more in flight than its cap, each name none closer than the host
interval; every page is fetched once, each name is resolved about once for all workers, and
a name that does not resolve is recorded as given up. A name whose answer changes mid-crawl
is fetched at its new address, under that address's budget."""

import sqlite3
import time
from collections import defaultdict
from itertools import pairwise

from testing.dns import Zone
from testing.sites import AddressSite
from testing.workers import clean_env, launch_worker, loopback_settings, seed_file

ADDRESSES = [f"127.0.0.{21 + i}" for i in range(5)]
NAMES = [f"h{i:03d}.test" for i in range(300)]
ADDRESS_INTERVAL = 0.1
HOST_INTERVAL = 0.5
CAP = 1
TOLERANCE = 0.010  # seconds: the site's own timing


def _gaps(starts: list[float]) -> list[float]:
    return [b - a for a, b in pairwise(sorted(starts))]


def _most_at_once(hits) -> int:
    events = sorted([(h.start, 1) for h in hits] + [(h.end, -1) for h in hits])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_four_workers_keep_each_addresses_budget_over_300_names(tmp_path, redis_url, crawl_name):
    zone_names = {name: ADDRESSES[i % len(ADDRESSES)] for i, name in enumerate(NAMES)}
    with Zone(zone_names, ttl=300) as zone, AddressSite(ADDRESSES, delay=0.02) as site:
        seeds = seed_file(tmp_path, [site.url(name) for name in NAMES] + [site.url("gone.test")])
        store = tmp_path / "urlstore.sqlite"
        settings = loopback_settings(
            crawl_name,
            tmp_path / "w.log",
            URLSTORE_SQLITE_PATH=store,
            FRONTIER_ADDRESS_POLITENESS=True,
            FRONTIER_ADDRESS_INTERVAL=ADDRESS_INTERVAL,
            FRONTIER_ADDRESS_MAX_IN_FLIGHT=CAP,
            FRONTIER_HOST_INTERVAL=HOST_INTERVAL,
            DNS_NAMESERVERS=zone.nameserver,
            HOST_GIVE_UP_AFTER=2,
            HOST_BACKOFF_MIN=1,
            HOST_BACKOFF_MAX=1,
        )
        env = {**clean_env(), "REDIS_URL": redis_url}
        started = time.monotonic()
        workers = [
            launch_worker(
                tmp_path, f"w{i}", seeds if i == 0 else None, {**settings, "LOG_FILE": tmp_path / f"w{i}.log"}, env
            )
            for i in range(4)
        ]
        codes = [w.wait(240) for w in workers]
        took = time.monotonic() - started
        hits = site.hits()
        asked = dict(zone.asked)
    logs = "\n".join(w.tail(15) for w in workers)
    assert codes == [0, 0, 0, 0], logs

    pages = [(h.name, h.path) for h in hits if h.path != "/robots.txt"]
    assert sorted(pages) == sorted((n, p) for n in NAMES for p in ["/", *site.page_paths]), logs
    for hit in hits:  # each name at its address
        assert hit.address == zone_names[hit.name], hit
    by_address, by_name = defaultdict(list), defaultdict(list)
    for hit in hits:
        by_address[hit.address].append(hit)
        by_name[hit.name].append(hit.start)
    for address, its in by_address.items():
        small = [g for g in _gaps([h.start for h in its]) if g < ADDRESS_INTERVAL - TOLERANCE]
        assert small == [], f"{address}: {len(small)} gaps below {ADDRESS_INTERVAL} s, the least {min(small):.3f} s"
        assert _most_at_once(its) <= CAP, address
    for name, starts in by_name.items():
        assert min(_gaps(starts)) >= HOST_INTERVAL - TOLERANCE, name
    # one look-up a name for 4 workers (its A question; a retried question counts again)
    assert all(asked.get(name, 0) <= 2 for name in NAMES), {n: c for n, c in asked.items() if c > 2}
    with sqlite3.connect(store) as db:
        fates = dict(db.execute("SELECT url, fate FROM urls WHERE url LIKE '%gone.test%'").fetchall())
    assert fates == {site.url("gone.test"): "given_up"}, fates
    # the addresses were the bound: 1,200 requests over 5 addresses at 10 a second each
    assert took < 240


def test_a_name_that_moves_is_fetched_at_its_new_address_and_no_address_exceeds_its_cap(
    tmp_path, redis_url, crawl_name
):
    old, new = "127.0.0.31", "127.0.0.32"
    names = {f"n{i}.test": (old, new)[i % 2] for i in range(6)} | {"mover.test": old}
    cap, slow = 2, 0.15  # answers slower than the interval: requests to an address overlap
    with Zone(names, ttl=2) as zone, AddressSite([old, new], delay=slow, pages=12) as site:
        seeds = seed_file(tmp_path, [site.url(name) for name in names])
        settings = loopback_settings(
            crawl_name,
            tmp_path / "w.log",
            FRONTIER_ADDRESS_POLITENESS=True,
            FRONTIER_ADDRESS_INTERVAL=ADDRESS_INTERVAL,
            FRONTIER_ADDRESS_MAX_IN_FLIGHT=cap,
            FRONTIER_ADDRESS_TTL_MIN=1,
            FRONTIER_HOST_INTERVAL=0.3,
            DNS_NAMESERVERS=zone.nameserver,
        )
        env = {**clean_env(), "REDIS_URL": redis_url}
        workers = [
            launch_worker(
                tmp_path, f"w{i}", seeds if i == 0 else None, {**settings, "LOG_FILE": tmp_path / f"w{i}.log"}, env
            )
            for i in range(2)
        ]
        deadline = time.monotonic() + 60
        while not [h for h in site.hits() if h.name == "mover.test" and h.path != "/robots.txt"]:
            assert time.monotonic() < deadline, "\n".join(w.tail(15) for w in workers)
            time.sleep(0.05)
        zone.move("mover.test", new)
        moved = time.monotonic()
        codes = [w.wait(120) for w in workers]
        hits = site.hits()
    assert codes == [0, 0], "\n".join(w.tail(15) for w in workers)
    assert sorted((h.name, h.path) for h in hits if h.path != "/robots.txt") == sorted(
        (n, p) for n in names for p in ["/", *site.page_paths]
    )
    mover = [h for h in hits if h.name == "mover.test"]
    # at its old address before the move; at its new one from one TTL (2 s) and a look-up
    # round after it, on a connection of its own
    assert mover[0].address == old
    late = [h.address for h in mover if h.start > moved + 3.0]
    assert late and set(late) == {new}, [(round(h.start - moved, 2), h.address) for h in mover]
    for address in (old, new):
        its = [h for h in hits if h.address == address]
        assert _most_at_once(its) <= cap, address
