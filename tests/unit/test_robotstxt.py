"""robots.txt freshness rules with plain values (no Redis, no fetch)."""

import pytest

from crawler.robots.rules import FETCH, FRESH, GIVEN_UP, STALE, UNREACHABLE, freshness, retry_delay

DAY = 86400.0
RULES = {"lifetime": DAY, "stale": 7 * DAY, "allow_after": 30 * DAY}


def state(now, status=200, fetched=0.0, retry_at=0.0, since=0.0):
    return freshness(now, status=status, fetched=fetched, retry_at=retry_at, since=since, **RULES)


def test_a_copy_is_fresh_for_its_lifetime_then_fetched_again():
    assert state(100.0, fetched=100.0) == (FRESH, 100.0 + DAY)
    assert state(100.0 + DAY - 1, fetched=100.0).state == FRESH
    assert state(100.0 + DAY, fetched=100.0) == (FETCH, 100.0 + DAY)


def test_never_fetched_is_fetched():
    assert state(5.0, status=0) == (FETCH, 5.0)


def test_a_4xx_answer_is_a_fresh_copy_too():
    assert state(10.0, status=404, fetched=0.0).state == FRESH  # (everything allowed: the middleware's part)


def test_a_failed_refetch_uses_the_old_copy_until_the_retry_while_it_is_not_too_old():
    fetched = 0.0
    now = DAY + 60  # the copy expired a minute ago, the refetch failed
    assert state(now, fetched=fetched, retry_at=now + 300, since=now - 1) == (STALE, now + 300)
    late = DAY + 7 * DAY + 1  # past lifetime + stale
    assert state(late, fetched=fetched, retry_at=late + 300, since=DAY).state == UNREACHABLE


def test_unreachable_without_a_copy_waits_for_the_retry_then_fetches():
    assert state(50.0, status=0, retry_at=80.0, since=40.0) == (UNREACHABLE, 80.0)
    assert state(80.0, status=0, retry_at=80.0, since=40.0) == (FETCH, 80.0)


def test_unreachable_for_longer_than_allow_after_is_given_up():
    since = 1000.0
    now = since + 30 * DAY + 1
    assert state(now, status=0, retry_at=now + 600, since=since) == (GIVEN_UP, now + 600)
    assert state(now - 2, status=0, retry_at=now + 600, since=since).state == UNREACHABLE


@pytest.mark.parametrize(
    ("fails", "retry_after", "jitter", "expected"),
    [
        (1, 0.0, 0.0, 60.0),  # the minimum
        (2, 0.0, 0.0, 120.0),  # doubles per failure
        (3, 0.0, 0.5, 240.0 * 1.125),  # plus up to a quarter
        (20, 0.0, 0.9, 3600.0),  # never past the maximum
        (1, 900.0, 0.9, 900.0),  # Retry-After wins
        (1, 86400.0, 0.0, 3600.0),  # but not past the maximum
    ],
)
def test_retry_delay(fails, retry_after, jitter, expected):
    assert retry_delay(fails, retry_after, minimum=60.0, maximum=3600.0, jitter=jitter) == pytest.approx(expected)
