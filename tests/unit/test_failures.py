"""Failures: a URL's own retries (the delayed set), a host slowed by failures and brought back
by answers (AIMD), a host down (backed off, probed), 429/Retry-After; all shared by every
worker through the frontier: the unit tests (pure: no service, no process) (the others:
tests/integration/test_failures.py, tests/e2e/test_failures.py)."""

from crawler.frontier.words import DOWN, RUNNING, WAITING
from crawler.middlewares.failures import retry_after_seconds, retry_delay
from crawler.observe.report import count, status_line

T0 = 1_700_000_000_000


def test_status_lines_speak_of_one_url_and_one_host_in_the_singular():
    assert [count(n, "URL") for n in (0, 1, 2)] == ["0 URLs", "1 URL", "2 URLs"]
    running = {"state": RUNNING, "queued": 1, "leased": 0, "next_due": None}
    assert status_line(running, {}, workers=1) == "running: 1 URL queued, 0 leased; 1 worker alive"
    waiting = {"state": WAITING, "queued": 1, "leased": 0, "next_due": T0 + 5000}
    deferred = {DOWN: {"hosts": 1, "urls": 1, "due": T0 + 5000, "examples": ["a.example"]}}
    line = status_line(waiting, deferred, now=T0 / 1000, workers=2)
    assert line.endswith("(in 5 s): 1 URL queued (host down: 1 host, 1 URL); 2 workers alive"), line


def test_retry_delays_double_and_are_capped():
    assert [retry_delay(a, 15, 100) for a in (1, 2, 3, 4)] == [15, 30, 60, 100]
    assert retry_delay(1, 15, 100, jitter=1.2) == 18


def test_retry_after_header_forms():
    assert retry_after_seconds(b"120") == 120
    assert retry_after_seconds(None) == 0
    assert retry_after_seconds(b"soon") == 0
    assert retry_after_seconds(b"Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470) == 10
