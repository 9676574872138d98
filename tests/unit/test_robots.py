"""robots.txt answers a crawler meets (RFC 9309), in one real crawl: redirects, too many
redirects, a body over 500 KiB, garbage, 429 with Retry-After, a dropped connection, and an
earlier copy used while the site answers 503; the parsed rules a worker keeps, bounded in
bytes: the unit tests (pure: no service, no process) (the others:
tests/integration/test_robots.py, tests/e2e/test_robots.py)."""

from crawler.robots.parsed import product_token


def test_product_token_comes_from_the_user_agent():
    assert product_token({"USER_AGENT": "crawler/0.1 (+https://x.invalid)"}) == "crawler"
    assert product_token({"ROBOTSTXT_USER_AGENT": "MyBot", "USER_AGENT": "crawler/0.1"}) == "MyBot"
