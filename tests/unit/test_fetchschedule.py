"""The adaptive schedule (crawler/freshness/schedule.py): plain values in, the next fetch out."""

import pytest

from crawler.freshness.schedule import ERROR, GONE, OK, REDIRECT, Bounds, outcome, schedule

B = Bounds(
    initial=1000.0,
    minimum=100.0,
    maximum=10_000.0,
    error=50.0,
    gone=5000.0,
    redirect=3000.0,
    inc_rate=0.4,
    dec_rate=0.2,
    sync_delta_rate=0.0,
)
T = 1_700_000_000.0


def test_a_first_fetch_starts_at_the_initial_interval():
    assert schedule(T, B) == (1000.0, T + 1000.0)


def test_a_changed_page_comes_back_sooner_and_an_unchanged_one_later():
    assert schedule(T, B, previous=1000.0, changed=True) == pytest.approx((800.0, T + 800.0))
    assert schedule(T, B, previous=1000.0, changed=False) == pytest.approx((1400.0, T + 1400.0))
    # nothing to compare (no digest): the interval stays
    assert schedule(T, B, previous=1000.0, changed=None) == (1000.0, T + 1000.0)


def test_the_interval_stays_within_its_bounds():
    interval = 1000.0
    for _ in range(30):
        interval = schedule(T, B, previous=interval, changed=True).interval
    assert interval == 100.0
    for _ in range(30):
        interval = schedule(T, B, previous=interval, changed=False).interval
    assert interval == 10_000.0


def test_errors_404s_and_redirects_have_their_own_intervals_and_keep_the_adaptive_one():
    assert schedule(T, B, kind=ERROR, previous=700.0) == (700.0, T + 50.0)
    assert schedule(T, B, kind=GONE, previous=700.0) == (700.0, T + 5000.0)
    assert schedule(T, B, kind=REDIRECT) == (1000.0, T + 3000.0)


def test_outcomes_of_statuses():
    assert [outcome(s) for s in (200, 304, 403, 404, 410, 301, 500, None)] == [
        OK,
        OK,
        OK,
        GONE,
        GONE,
        REDIRECT,
        ERROR,
        ERROR,
    ]
    assert outcome(200, redirected=True) == REDIRECT


def test_sitemap_changefreq_sets_a_first_interval_within_bounds():
    assert schedule(T, B, changefreq="hourly").interval == 3600.0
    assert schedule(T, B, changefreq="always").interval == 100.0
    assert schedule(T, B, changefreq="yearly").interval == 10_000.0  # capped
    assert schedule(T, B, changefreq="sometimes").interval == 1000.0  # not understood


def test_a_lastmod_after_the_last_fetch_counts_as_a_change():
    s = schedule(T, B, previous=1000.0, changed=None, modified_at=T - 10, previous_fetch=T - 1000)
    assert s.interval == pytest.approx(800.0)
    s = schedule(T, B, previous=1000.0, changed=None, modified_at=T - 5000, previous_fetch=T - 1000)
    assert s.interval == 1000.0


def test_sync_delta_follows_an_old_last_modified():
    bounds = B._replace(sync_delta_rate=0.3)
    # last changed 5000 s ago: the interval becomes that age, the next fetch counts from
    # fetched_at - 0.3 * 5000
    s = schedule(T, bounds, previous=1000.0, changed=False, modified_at=T - 5000)
    assert s.interval == 5000.0
    assert s.due == pytest.approx(T - 1500 + 5000)
    # a recent change leaves the interval alone but still moves the reference
    s = schedule(T, bounds, previous=1000.0, changed=True, modified_at=T - 100)
    assert s.interval == pytest.approx(800.0)
    assert s.due == pytest.approx(T - 30 + 800)


def test_a_page_unchanged_for_longer_than_the_longest_interval_is_due_after_most_of_it():
    """The shift toward the time of change is a share of the interval at most: a page whose
    Last-Modified is older than the longest interval is due after 0.7 of it, and a page
    older still no sooner (the shift of 0.3 of its whole age made it due after the
    shortest interval: an unchanged page fetched again at each minimum, for good)."""
    bounds = B._replace(sync_delta_rate=0.3)
    dues = [
        schedule(T, bounds, previous=1000.0, changed=False, modified_at=T - age).due
        for age in (9000, 10_000, 40_000, 10**9)
    ]
    assert dues == pytest.approx([T + 0.7 * 9000, T + 7000, T + 7000, T + 7000])
    assert schedule(T, bounds, previous=10_000.0, changed=False, modified_at=T - 10**8).interval == 10_000.0
