r"""The crawl's rules file (crawler/scope/rules.py): parsing, every kind of rule, host
entries, and the errors of a bad file. Plain values: no Redis, no network."""

from __future__ import annotations

import socket

import pytest
import surt

from crawler.scope import rules as rules_module
from crawler.scope.rules import EMPTY, AddressOverrides, CrawlRules, Decision, HostOverrides, RulesError
from testing.servers import local_resolver

ACCEPTED = Decision(True, None, "")


def rejected(rule: str, url: str) -> bool:
    """Whether the one-rule file ``reject <rule>`` rejects ``url`` (by its line 1)."""
    decision = CrawlRules.parse(f"reject {rule}").decide(url)
    assert decision in (ACCEPTED, Decision(False, 1, f"reject {rule}"))
    return not decision.accepted


@pytest.fixture(autouse=True)
def no_resolver(monkeypatch):
    """Any name or address look-up fails the test (and is recorded)."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError(f"resolver asked: {args}")

    for name in ("gethostbyname", "gethostbyname_ex", "getaddrinfo", "gethostbyaddr"):
        monkeypatch.setattr(socket, name, refuse)
    return calls


# -- every kind of rule


@pytest.mark.parametrize(
    ("rule", "url", "matches"),
    [
        ("host example.com", "http://example.com/", True),
        ("host example.com", "https://www.example.com/a", True),
        ("host example.com", "http://a.b.example.com:8080/x?y=1", True),
        ("host example.com", "http://user@example.com/", True),
        ("host example.com", "http://notexample.com/", False),
        ("host example.com", "http://example.com.evil.org/", False),
        ("host example.com", "http://evil.org/example.com", False),
        ("host example.com", "http://evil.org/?u=http://example.com/", False),
        ("host example.com", "http://example.org/", False),
        ("host www.example.com", "http://example.com/", False),
        ("host EXAMPLE.com.", "http://example.com/", True),
        ("host bücher.de", "http://www.xn--bcher-kva.de/", True),
        # a port: that host and port only
        ("host example.com:8080", "http://example.com:8080/", True),
        ("host example.com:8080", "http://example.com/", False),
        ("host example.com:8080", "http://example.com:8081/", False),
        ("host example.com:8080", "http://www.example.com:8080/", False),
        ("host 127.0.0.1:8080", "http://127.0.0.1:8080/x", True),
        ("host 127.0.0.1:8080", "http://127.0.0.1/x", False),
        ("host 127.0.0.1:8080", "http://127.0.0.1:8081/x", False),
        # an IP address: itself only, any port
        ("host 127.0.0.1", "http://127.0.0.1/", True),
        ("host 127.0.0.1", "http://127.0.0.1:8080/", True),
        ("host 127.0.0.1", "http://1.127.0.0.1/", False),
        ("host 0.0.1", "http://127.0.0.1/", False),
        ("host 0.1", "http://10.0.0.1/", False),
        ("host ::1", "http://[::1]:8080/", True),
        ("host 0:0::1", "http://[::1]/", True),
        ("host [::1]", "http://[::1]/", True),
        ("host [::1]:8080", "http://[::1]:8080/", True),
        ("host [::1]:8080", "http://[::1]:8081/", False),
        ("host [::1]:8080", "http://[::2]:8080/", False),
        # SURT prefixes (surt drops www. and the scheme, lowercases)
        ("surt com,example)/private", "http://www.example.com/private/a.html", True),
        ("surt com,example)/private", "https://example.com/private", True),
        ("surt com,example)/private", "http://www2.example.com/Private/x", True),
        ("surt com,example)/private", "http://sub.example.com/private", False),
        ("surt com,example)/private", "http://example.com/public/private", False),
        ("surt com,example)/private", "http://examplefoo.com/private", False),
        ("surt COM,Example)/PRIVATE", "http://example.com/private", True),
        ("surt com,example)", "http://www.example.com/", True),
        ("surt com,example)", "http://example.com:8080/", False),
        ("surt com,example:8080)/", "http://example.com:8080/a", True),
        ("surt com,example,", "http://a.example.com/", True),
        ("surt com,example,", "http://example.com/", False),
        ("surt com,example", "http://examplefoo.com/", True),
        ("surt com,example)/a?a=1&b=2", "http://example.com/a?b=2&a=1", True),
        ("surt 1,0,0,127:8080)/admin", "http://127.0.0.1:8080/admin/x", True),
        ("surt 1,0,0,127:8080)/admin", "http://127.1:8080/Admin", True),
        ("surt 1,0,0,127:8080)/admin", "http://127.0.0.1/admin", False),
        ("surt 1,0,0,127)", "http://user:pw@127.0.0.1/?x=1", True),
        # regex: re.search in the full URL
        (r"regex \.pdf$", "http://example.com/a.pdf", True),
        (r"regex \.pdf$", "http://example.com/a.pdf?download=1", False),
        (r"regex \.pdf$", "http://example.com/a.PDF", False),
        (r"regex (?i)\.pdf$", "http://example.com/a.PDF", True),
        (r"regex /calendar/\d{4}-\d\d", "http://example.com/x/calendar/2024-01/", True),
        (r"regex ^https://", "http://example.com/https://", False),
        (r"regex a b", "http://example.com/?q=a b", True),
        # prefix
        ("prefix https://example.com/docs/", "https://example.com/docs/x", True),
        ("prefix https://example.com/docs/", "https://example.com/docs/", True),
        ("prefix https://example.com/docs/", "http://example.com/docs/x", False),
        ("prefix https://example.com/docs/", "https://example.com/doc", False),
        ("prefix https://example.com/docs/", "https://example.com.evil.org/docs/", False),
        # all
        ("all", "http://example.com/", True),
        ("all", "https://[::1]:8080/?a=1", True),
    ],
)
def test_rule_matches(rule, url, matches):
    assert rejected(rule, url) is matches


def test_a_rule_decides_with_its_line_and_text():
    rules = CrawlRules.parse("# scope\n\naccept   host  example.com   # ours\n")
    assert rules.decide("http://www.example.com/") == Decision(True, 3, "accept   host  example.com")
    assert rules.decide("http://example.org/") == ACCEPTED


def test_first_matching_rule_wins():
    rules = CrawlRules.parse(
        "\n".join(
            [
                "reject surt com,example)/private",  # 1
                "accept regex /private/public",  # 2
                "accept host example.com",  # 3
                "reject prefix http://example.com/",  # 4 (after 3: never decides)
                "reject all",  # 5
            ]
        )
    )
    assert rules.decide("http://example.com/private/public") == Decision(False, 1, "reject surt com,example)/private")
    assert rules.decide("http://example.org/private/public") == Decision(True, 2, "accept regex /private/public")
    assert rules.decide("http://example.com/x") == Decision(True, 3, "accept host example.com")
    assert rules.decide("http://example.org/x") == Decision(False, 5, "reject all")


@pytest.mark.parametrize(
    ("text", "url", "line"),
    [
        # consecutive rules of one kind, several matching: still the first in the file
        ("accept host www.example.com\nreject host example.com\n", "http://www.example.com/", 1),
        ("reject host example.com\naccept host www.example.com\n", "http://www.example.com/", 1),
        ("reject host example.com:8080\naccept host example.com\n", "http://example.com:8080/", 1),
        ("accept host example.com\nreject host example.com:8080\n", "http://example.com:8080/", 1),
        ("accept host a.com\nreject host a.com\n", "http://a.com/", 1),
        ("reject host b.com\naccept host a.com\nreject host a.com\n", "http://a.com/", 2),
        ("reject prefix http://a.com/x/\naccept prefix http://a.com/\n", "http://a.com/x/y", 1),
        ("accept prefix http://a.com/\nreject prefix http://a.com/x/\n", "http://a.com/x/y", 1),
        ("reject prefix http://b.com/\naccept prefix http://a.com/\n", "http://a.com/x/y", 2),
        ("accept surt com,a)/x\nreject surt com,a)\n", "http://a.com/x", 1),
        ("reject surt com,a)\naccept surt com,a)/x\n", "http://a.com/x", 1),
        ("reject surt com,b)\naccept surt com,a)/x\n", "http://a.com/x", 2),
    ],
)
def test_first_match_wins_among_rules_of_one_kind(text, url, line):
    decision = CrawlRules.parse(text).decide(url)
    assert decision.line == line
    assert decision.rule == text.split("\n")[line - 1]
    assert decision.accepted is decision.rule.startswith("accept")


def test_a_long_list_of_hosts():
    text = "\n".join(f"accept host site{i}.example.org" for i in range(500)) + "\nreject all\n"
    rules = CrawlRules.parse(text)
    assert len(rules) == 501
    assert rules.decide("http://www.site321.example.org/a") == Decision(True, 322, "accept host site321.example.org")
    assert rules.decide("http://site5000.example.org/") == Decision(False, 501, "reject all")
    assert rules.decide("http://example.org/") == Decision(False, 501, "reject all")


def test_a_url_no_rule_matches_is_accepted():
    rules = CrawlRules.parse("reject host example.com\nreject regex \\.zip$\n")
    assert rules.decide("http://example.org/a.html") == ACCEPTED
    assert rules.decide("http://example.com/a.html") == Decision(False, 1, "reject host example.com")


def test_all_decides_every_url_after_the_rules_before_it():
    rules = CrawlRules.parse("accept host example.com\nreject all\naccept all\n")
    assert rules.decide("http://sub.example.com/") == Decision(True, 1, "accept host example.com")
    for url in ("http://example.org/", "http://127.0.0.1:8080/", "https://[::1]/a?b=c"):
        assert rules.decide(url) == Decision(False, 2, "reject all")


def test_comments_and_a_literal_hash():
    rules = CrawlRules.parse("# a comment line\n   \nreject regex a\\x23b   # ends here\nreject regex /zz#d\n")
    assert len(rules) == 2
    # \x23 is a "#" in the pattern; the rest of the line after "#" is a comment
    assert rules.decide("http://example.com/a#b") == Decision(False, 3, r"reject regex a\x23b")
    assert rules.decide("http://example.com/ab") == ACCEPTED
    assert rules.decide("http://example.com/zz") == Decision(False, 4, "reject regex /zz")


def test_surt_key_is_computed_once_and_only_when_a_surt_rule_is_tried(monkeypatch):
    calls = []
    real = rules_module._surt_key

    def counting(url):
        calls.append(url)
        return real(url)

    monkeypatch.setattr(rules_module, "_surt_key", counting)
    rules = CrawlRules.parse(
        "accept prefix http://example.com/\n"
        "reject surt org,example)/a\nreject surt org,example)/b\nreject surt org,example)/c\n"
    )
    assert rules.decide("http://example.com/a").line == 1
    assert calls == []
    assert rules.decide("http://example.org/c") == Decision(False, 4, "reject surt org,example)/c")
    assert rules.decide("http://example.org/d") == ACCEPTED
    assert calls == ["http://example.org/c", "http://example.org/d"]


# -- SURT keys of IP addresses: built without surt's resolver


IP_URLS = [
    "http://127.0.0.1:8080/path/X?b=1&a=2",
    "http://127.0.0.1/",
    "http://user:pw@10.0.0.1:81/a/",
    "http://127.1/x",
    "http://12345/a",
    "http://010.0.0.1/",
    "http://999.1/a?q=1",
    "http://1.2.3.4.5/",
    "http://[::1]:8080/A",
    "http://[2001:db8::1]/a?b=2&a=1",
    "http://[::ffff:1.2.3.4]/",
]


@pytest.mark.parametrize("url", IP_URLS)
def test_an_address_gets_the_key_surt_gives(url, monkeypatch):
    refuse = socket.gethostbyname_ex
    monkeypatch.setattr(socket, "gethostbyname_ex", local_resolver)
    expected = surt.surt(url)
    monkeypatch.setattr(socket, "gethostbyname_ex", refuse)
    assert rules_module._surt_key(url) == expected


def test_no_lookup_and_no_surt_of_an_address(no_resolver, monkeypatch):
    """surt is given the URL with a placeholder host (for its path and query rules), never
    the address."""
    seen = []
    real = surt.surt

    def spy(url, *args, **kwargs):
        seen.append(url)
        return real(url, *args, **kwargs)

    monkeypatch.setattr(surt, "surt", spy)
    rules = CrawlRules.parse("reject surt 1,0,0,127:8080)/admin\nreject surt 1,999)\naccept surt ::1)\n")
    assert rules.decide("http://127.0.0.1:8080/admin?x=1").line == 1
    assert rules.decide("http://127.1:8080/admin/?b=2&a=1").line == 1
    assert rules.decide("http://999.1/?q=1").line == 2
    assert rules.decide("http://[::1]/a?q=1").line == 3
    assert rules.decide("http://10.0.0.1/a?q=1") == ACCEPTED
    assert no_resolver == []
    assert seen, "a URL with a query goes to surt"
    assert not [url for url in seen if "127." in url or "999" in url or "::1" in url or "10.0" in url]


# -- host entries


OVERRIDES = """
host example.com       interval=2 in_flight=3 max_pages=100 priority=5
host api.example.com   interval=4qps          # keys of example.com are not inherited
host example.com:8080  priority=-2
host 127.0.0.1         max_pages=0
host 127.0.0.1:8080    in_flight=1
host [::1]:8080        interval=0
host ::1               interval=0.5qps
"""


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("example.com", HostOverrides(interval=2.0, in_flight=3, max_pages=100, priority=5)),
        ("www.example.com", HostOverrides(interval=2.0, in_flight=3, max_pages=100, priority=5)),
        ("api.example.com", HostOverrides(interval=0.25)),
        ("v2.api.example.com", HostOverrides(interval=0.25)),
        ("example.com:8080", HostOverrides(priority=-2)),
        ("www.example.com:8080", HostOverrides(interval=2.0, in_flight=3, max_pages=100, priority=5)),
        ("api.example.com:8080", HostOverrides(interval=0.25)),
        ("notexample.com", HostOverrides()),
        ("example.org", HostOverrides()),
        ("com", HostOverrides()),
        ("127.0.0.1", HostOverrides(max_pages=0)),
        ("127.0.0.1:9000", HostOverrides(max_pages=0)),
        ("127.0.0.1:8080", HostOverrides(in_flight=1)),
        ("1.127.0.0.1", HostOverrides()),
        ("[::1]:8080", HostOverrides(interval=0.0)),
        ("[::1]:9000", HostOverrides(interval=2.0)),
        ("::1", HostOverrides(interval=2.0)),
    ],
)
def test_overrides_of_the_longest_matching_name(host, expected):
    assert CrawlRules.parse(OVERRIDES).overrides(host) == expected


def test_overrides_values():
    rules = CrawlRules.parse("host a.com interval=0.5qps\nhost b.com interval=+1.5 priority=+3\nhost c.com max_pages=0")
    assert rules.overrides("a.com").interval == 2.0
    assert rules.overrides("b.com") == HostOverrides(interval=1.5, priority=3)
    assert rules.overrides("c.com") == HostOverrides(max_pages=0)
    assert len(rules) == 3


def test_a_host_entry_with_sharp_s_is_that_domain_not_its_ss_spelling():
    """``host faß.de`` names xn--fa-hia.de, as the crawl's URLs spell it (crawler/urls.py:
    UTS 46 as browsers read it), not fass.de (IDNA 2003), another domain."""
    rules = CrawlRules.parse("host faß.de max_pages=0")
    assert rules.overrides("xn--fa-hia.de") == HostOverrides(max_pages=0)
    assert rules.overrides("fass.de") == HostOverrides()


def test_rules_and_host_entries_together():
    rules = CrawlRules.parse("host example.com in_flight=2\naccept host example.com\nreject all\n")
    assert len(rules) == 3 and not rules.empty
    assert rules.decide("http://example.com/").accepted
    assert not rules.decide("http://host.example.org/").accepted  # a host entry is no rule
    assert rules.overrides("www.example.com") == HostOverrides(in_flight=2)


def test_empty():
    assert len(EMPTY) == 0 and EMPTY.empty
    assert EMPTY.decide("http://example.com/") == ACCEPTED
    assert EMPTY.overrides("example.com") == HostOverrides()
    parsed = CrawlRules.parse("# nothing\n\n")
    assert parsed.empty and len(parsed) == 0
    assert not CrawlRules.parse("reject all").empty
    assert not CrawlRules.parse("host a.com priority=1").empty


def test_the_documented_example():
    doc = rules_module.__doc__
    example = doc[doc.index("ignored::\n") + len("ignored::\n") : doc.index("\nRules (")]
    rules = CrawlRules.parse(example)
    assert len(rules) == 10
    assert rules.address_overrides("198.51.102.9").class_name == "cdn-a"
    assert rules.decide("https://www.example.com/private/x").line == 2  # (line 1 is blank)
    assert rules.decide("https://example.com/calendar/2024-05").line == 3
    assert rules.decide("https://shop.example.com/calendar/").line == 4
    assert rules.decide("https://docs.python.org/3/library/re.html").line == 5
    assert rules.decide("http://127.0.0.1:8080/").line == 6
    assert rules.decide("http://127.0.0.1:8081/") == Decision(False, 7, "reject all")
    assert rules.overrides("v1.api.example.com") == HostOverrides(interval=0.2, max_pages=1000, priority=-1)
    assert rules.overrides("www.example.com") == HostOverrides(interval=2.0, in_flight=2)


# -- errors


BAD = """\
accept host example.com
frobnicate all
accept nothing x
reject
reject surt
reject regex (unclosed    # a comment
reject all now
host example.com interval=fast in_flight=0 colour=red
host EXAMPLE.com. max_pages=5
host
host 127.0.0.1:99999 priority=1.5 max_pages
accept host example.com extra
host a.example.com interval=0qps interval=1
host b.example.com
accept host http://example.com/
host c.example.com max_pages=-1 in_flight=2.0 priority=x
"""


def test_every_problem_of_a_file_in_one_error():
    with pytest.raises(RulesError) as raised:
        CrawlRules.parse(BAD, "scope.rules")
    keys = "interval, in_flight, max_pages, priority"
    assert str(raised.value) == "\n".join(
        [
            "scope.rules:2: unknown verb 'frobnicate', expected accept, reject, host or address",
            "scope.rules:3: unknown kind 'nothing', expected host, surt, regex, prefix or all",
            "scope.rules:4: missing kind, expected host, surt, regex, prefix or all",
            "scope.rules:5: missing value after 'reject surt'",
            "scope.rules:6: bad regex '(unclosed': missing ), unterminated subpattern at position 0",
            "scope.rules:7: 'all' takes no value, got 'now'",
            "scope.rules:8: bad interval 'fast', expected seconds (a number >= 0) or Nqps",
            "scope.rules:8: bad in_flight '0', expected a whole number >= 1",
            f"scope.rules:8: unknown key 'colour', expected {keys}",
            "scope.rules:9: duplicate host entry for example.com (first on line 8)",
            f"scope.rules:10: expected 'host NAME key=value ...' with keys {keys}",
            "scope.rules:11: not a host name: '127.0.0.1:99999'",
            "scope.rules:11: bad priority '1.5', expected an integer",
            "scope.rules:11: not key=value: 'max_pages'",
            "scope.rules:12: 'host' takes one value, got 'example.com extra'",
            "scope.rules:13: bad interval '0qps', expected seconds (a number >= 0) or Nqps",
            "scope.rules:13: interval given twice",
            f"scope.rules:14: expected 'host NAME key=value ...' with keys {keys}",
            "scope.rules:15: not a host name: 'http://example.com/'",
            "scope.rules:16: bad max_pages '-1', expected a whole number >= 0",
            "scope.rules:16: bad in_flight '2.0', expected a whole number >= 1",
            "scope.rules:16: bad priority 'x', expected an integer",
        ]
    )
    lines = [line for line, _ in raised.value.problems]
    assert lines == [2, 3, 4, 5, 6, 7, 8, 8, 8, 9, 10, 11, 11, 11, 12, 13, 13, 14, 15, 16, 16, 16]
    assert raised.value.problems[0] == (2, "unknown verb 'frobnicate', expected accept, reject, host or address")
    assert isinstance(raised.value, ValueError)


def test_default_path_in_errors():
    with pytest.raises(RulesError) as raised:
        CrawlRules.parse("accept host example.com\n\nreject surt\n")
    assert str(raised.value) == "<rules>:3: missing value after 'reject surt'"
    assert raised.value.problems == [(3, "missing value after 'reject surt'")]


@pytest.mark.parametrize("name", ["a..b", "example.com:0", "[::1]:", "[::1]x", "exa$mple", "*.example.com", "::g"])
def test_bad_names(name):
    with pytest.raises(RulesError, match="not a host name"):
        CrawlRules.parse(f"accept host {name}")
    with pytest.raises(RulesError, match="not a host name"):
        CrawlRules.parse(f"host {name} priority=1")


def test_from_file(tmp_path):
    path = tmp_path / "scope.rules"
    path.write_text("\ufeffreject surt com,example)/private\nhost example.com interval=1qps\n", encoding="utf-8")
    rules = CrawlRules.from_file(str(path))
    assert rules.decide("http://www.example.com/private/x") == Decision(False, 1, "reject surt com,example)/private")
    assert rules.overrides("example.com") == HostOverrides(interval=1.0)

    path.write_text("accept all\nreject\n", encoding="utf-8")
    with pytest.raises(RulesError) as raised:
        CrawlRules.from_file(path)
    assert str(raised.value) == f"{path}:2: missing kind, expected host, surt, regex, prefix or all"


def test_an_unreadable_file(tmp_path):
    missing = tmp_path / "missing.rules"
    with pytest.raises(RulesError) as raised:
        CrawlRules.from_file(str(missing))
    assert str(raised.value) == f"{missing}:0: [Errno 2] No such file or directory: '{missing}'"
    assert [line for line, _ in raised.value.problems] == [0]

    latin = tmp_path / "latin.rules"
    latin.write_bytes("accept host b\xfccher.de\n".encode("latin-1"))
    with pytest.raises(RulesError) as raised:
        CrawlRules.from_file(str(latin))
    assert str(raised.value).startswith(f"{latin}:0: 'utf-8' codec can't decode byte 0xfc")


def test_address_entries_give_a_network_its_budget_or_one_class_and_the_longest_wins():
    rules = CrawlRules.parse(
        "address 192.0.2.10 interval=3\n"
        "address 198.51.100.0/22 class=cdn-a interval=20qps in_flight=16  # a CDN's edges\n"
        "address 198.51.100.128/25 in_flight=0\n"
        "address 2001:db8::/32 class=v6-cdn\n"
    )
    assert rules.address_overrides("192.0.2.10") == AddressOverrides("192.0.2.10", None, 3.0, None)
    assert rules.address_overrides("192.0.2.11") is None
    cdn = rules.address_overrides("198.51.101.7")
    assert (cdn.class_name, cdn.interval, cdn.in_flight) == ("cdn-a", 0.05, 16)
    assert rules.address_overrides("198.51.100.200") == AddressOverrides("198.51.100.128/25", None, None, 0)
    assert rules.address_overrides("2001:db8:5::1").class_name == "v6-cdn"
    assert rules.address_overrides("::1") is None and len(rules) == 4 and not rules.empty


def test_bad_address_entries_are_each_said():
    with pytest.raises(RulesError) as raised:
        CrawlRules.parse(
            "address 300.1.2.3 interval=1\n"
            "address 192.0.2.0/24 class=a/b\n"
            "address 192.0.2.0/24 in_flight=-1 colour=red\n"
            "address 192.0.2.0/24\n"
            "address 10.0.0.0/8 interval=1\naddress 10.0.0.0/8 interval=2\n"
            "address 172.16.0.0/16 class=c interval=1\naddress 172.17.0.0/16 class=c\n",
            "r",
        )
    assert str(raised.value).splitlines() == [
        "r:1: bad network '300.1.2.3', expected an address or a.b.c.d/N",
        "r:2: bad class 'a/b', expected a name of letters, digits, '.', '_', '-'",
        "r:3: bad in_flight '-1', expected a whole number >= 0",
        "r:3: unknown key 'colour', expected class, interval, in_flight",
        "r:4: expected 'address NETWORK key=value ...' with keys class, interval, in_flight",
        "r:6: duplicate address entry for 10.0.0.0/8",
        "r:8: class c has another interval or in_flight on line 7: one budget a class",
    ]
