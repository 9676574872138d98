"""Every frontier operation against a real Redis (see conftest.py): the unit tests (pure: no
service, no process) (the others: tests/integration/test_frontier.py)."""

from crawler.frontier.hosts import politeness_key
from crawler.frontier.intervals import HostIntervals
from crawler.scope.traps import TrapGuard
from crawler.urls import authority_host


def test_trap_guard_settings_turn_guards_off():
    guard = TrapGuard(max_url_length=0, max_depth=0, max_repeated_segments=0)
    assert guard.check("http://a.example/a/a/a/a/a/" + "x" * 5000, depth=99) is None


def test_politeness_key_by_host_or_registered_domain():
    assert politeness_key("http://a.b.example.co.uk/x") == "a.b.example.co.uk"
    assert politeness_key("http://a.b.example.co.uk/x", "domain") == "example.co.uk"
    assert politeness_key("http://127.0.0.2:8080/", "domain") == "127.0.0.2"


def test_politeness_key_keeps_a_port_that_is_not_the_default():
    assert politeness_key("http://127.0.0.2:8080/a") == "127.0.0.2:8080"
    assert politeness_key("https://a.example:8443/?q=1") == "a.example:8443"
    assert politeness_key("http://a.example/x") == politeness_key("https://a.example/") == "a.example"
    assert politeness_key("http://[::1]:8080/a") == "[::1]:8080" and politeness_key("http://[::1]/") == "::1"
    assert politeness_key("http://user:pw@a.example:81/") == "a.example:81"
    for key, host in (("a.example:81", "a.example"), ("[::1]:8080", "::1"), ("::1", "::1"), ("a.example", "a.example")):
        assert authority_host(key) == host
    # the operator's intervals: the key itself first, then its host and the domains above it
    intervals = HostIntervals({"example.com": 5, "127.0.0.2": 2, "127.0.0.2:9": 7})
    assert intervals.lookup("a.example.com:8080") == 5 and intervals.lookup("127.0.0.2:8765") == 2
    assert intervals.lookup("127.0.0.2:9") == 7 and intervals.lookup("[::1]:80") is None
