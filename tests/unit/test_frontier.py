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


def test_push_arguments_of_plain_entries_are_the_fields_push_reads():
    # a plain entry (checked, of a level, nothing else) is sent as its level, hashes, host and
    # payload after a byte of its own; the others beside it have every field, in push.lua's order
    from crawler.frontier.frontier import PLAIN, Entry, Frontier
    from crawler.frontier.keys import SEP
    from crawler.frontier.urlseen import hashes_text, url_hashes
    from crawler.scope.rules import CrawlRules

    frontier = Frontier(_NoRedis(), "args", priority_levels=5)
    plain = Entry("https://a.example/x", b"https://a.example/x", priority=2)
    other = [
        Entry("https://a.example/f", b"F", dont_filter=True),
        Entry("https://a.example/u", b"U", urgent=True, priority=-3),
        Entry("https://a.example/r", b"R", follow_up=True, replaces_lease=b"lease", not_before=5),
    ]
    batch = [(i, e, "a.example") for i, e in enumerate([plain, *other, plain])]

    def fields(e, level, lease=""):
        h, f = url_hashes(e.url)
        check = "" if e.dont_filter else "1"
        back = "1" if e.follow_up or e.urgent else ""
        retry = str(e.not_before) if e.follow_up and e.not_before else ""
        hashes = "" if e.dont_filter else f"{h % buckets} {f - 2**31}"
        values = (check, back, "1" if e.urgent else "", retry, "", "", "", "", str(level), lease, hashes, "a.example")
        return SEP.join(values).encode() + SEP.encode() + e.payload

    (buckets,) = [g.buckets for g in frontier.layout.generations(1)]  # (its bucket in generation 0)
    h, f = url_hashes(plain.url)
    plain_arg = f"{PLAIN}0{SEP}{h % buckets} {f - 2**31}{SEP}a.example{SEP}".encode() + plain.payload
    args = frontier._push_args(batch, 1)
    assert args[-6:] == [  # the five entries and the lease, after the header
        plain_arg,
        fields(other[0], 2),
        fields(other[1], 4),
        fields(other[2], 2, "1"),
        plain_arg,
        b"lease",
    ]
    # with crawl rules the plain entry is written field by field
    ruled = frontier._push_args(batch[:1], 1, CrawlRules.parse("accept all", "rules"))
    assert (
        ruled[-1]
        == SEP.join(
            ["1", "", "", "", "", "0", "", "", "0", "", hashes_text(plain.url, (buckets,)), "a.example"]
        ).encode()
        + SEP.encode()
        + plain.payload
    )


class _NoRedis:
    def register_script(self, script):
        return None
