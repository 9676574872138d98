"""The crawl's scope as one value (crawler/scope/scope.py): what it lets in, why it
refuses the rest, and its form in Redis, which `scrapy submit` reads.

Here: the unit tests (pure: no service, no process); the others of this subject:
tests/integration/test_crawl_scope.py."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy.settings import Settings

from crawler.observe.report import totals_text
from crawler.scope import reasons
from crawler.scope.reasons import INVALID, OUT_OF_SCOPE, PRIVATE_ADDRESS, REJECTED
from crawler.scope.rules import CrawlRules, RulesError
from crawler.scope.scope import CrawlScope
from crawler.scope.traps import TrapGuard, repeated_segments, repeats_more_than


def test_within_is_the_allowed_domains_with_their_subdomains_and_the_prefixes():
    scope = CrawlScope(domains=("Example.com", ".docs.org"))
    assert scope.within("http://example.com/a") and scope.within("https://www.example.com:8443/")
    assert scope.within("http://api.docs.org/") and not scope.within("http://notexample.com/")
    assert CrawlScope().within("http://anything.example/")
    prefixed = CrawlScope(prefixes=("https://docs.org/3/",))
    assert prefixed.within("https://docs.org/3/x") and not prefixed.within("https://docs.org/2/x")


def test_a_refusal_says_why_and_what_lets_the_url_in():
    scope = CrawlScope(domains=("a.example",), guard_allow=("127.0.0.0/8",))
    assert scope.refusal("http://www.a.example/x") is None
    refusal = scope.refusal("http://b.example/x")
    assert refusal.reason == OUT_OF_SCOPE
    assert str(refusal) == (
        "b.example is not in the crawl's allowed domains (a.example); "
        "to crawl it: run the workers with -a allowed_domains=a.example,b.example (or CRAWL_ALLOWED_DOMAINS)"
    )
    guarded = scope.refusal("http://10.1.2.3/")
    assert guarded.reason == PRIVATE_ADDRESS and "NETWORK_GUARD_ALLOW=127.0.0.0/8,10.1.2.3/32" in guarded.hint
    assert scope.refusal("http://[::1]:8080/").reason == PRIVATE_ADDRESS  # (not a name: no domain test first)
    assert CrawlScope().refusal("http://localhost/").reason == PRIVATE_ADDRESS
    assert CrawlScope(guard=False).refusal("http://169.254.169.254/") is None
    assert CrawlScope().refusal("http://93.184.216.34/") is None  # a public address
    assert CrawlScope(prefixes=("https://d.example/3/",)).refusal("https://d.example/2/").reason == OUT_OF_SCOPE


def test_the_crawl_rules_refuse_with_their_file_and_line():
    rules = CrawlRules.parse("accept host a.example\nreject regex /private/\n", "rules.txt")
    scope = CrawlScope(rules=rules)
    assert scope.refusal("http://a.example/private/") is None  # the first rule that matches decides
    refusal = scope.refusal("http://b.example/private/x")
    assert refusal.reason == REJECTED and refusal.words == "rejected by the crawl rules"
    assert refusal.why == "rules.txt:2: reject regex /private/"


def test_its_fields_give_it_back_rules_included():
    rules = CrawlRules.parse("reject host b.example\n", "/etc/rules.txt")
    scope = CrawlScope(("a.example",), ("http://a.example/",), rules, ("10.0.0.0/8",), True)
    back = CrawlScope.from_fields({k.encode(): v.encode() for k, v in scope.fields().items()})
    assert (back.domains, back.prefixes, back.guard_allow, back.guard) == (
        ("a.example",),
        ("http://a.example/",),
        ("10.0.0.0/8",),
        True,
    )
    assert back.rules.text == rules.text
    assert back.with_rules(rules).rules is rules
    assert CrawlScope(rules=back.rules).refusal("http://b.example/").why.startswith("/etc/rules.txt:1")
    assert CrawlScope.from_fields(CrawlScope(guard=False).fields()).guard is False
    with pytest.raises(ValueError):
        CrawlScope.from_fields({"domains": "5"})
    with pytest.raises(RulesError):
        CrawlScope.from_fields({"rules": "nonsense here"})


def test_from_settings_reads_the_settings_and_the_spiders_arguments_first(tmp_path):
    path = tmp_path / "rules.txt"
    path.write_text("reject host c.example\n")
    settings = Settings(
        {
            "CRAWL_ALLOWED_DOMAINS": "a.example,b.example",
            "CRAWL_RULES": str(path),
            "NETWORK_GUARD_ALLOW": "10.0.0.0/8",
            "NETWORK_GUARD_ENABLED": True,
        }
    )
    scope = CrawlScope.from_settings(settings)
    assert scope.domains == ("a.example", "b.example") and scope.guard_allow == ("10.0.0.0/8",)
    assert scope.rules.path == str(path) and scope.refusal("http://10.1.1.1/").reason == OUT_OF_SCOPE  # (not guarded)
    assert scope.refusal("http://c.example/").why.startswith("c.example is not in")
    assert CrawlScope.from_settings(settings, domains=["z.example"]).domains == ("z.example",)


def test_one_verdict_in_one_vocabulary_in_the_order_a_person_would_fix_them():
    rules = CrawlRules.parse("reject regex /private/\n", "rules.txt")
    scope = CrawlScope(domains=("a.example",), rules=rules, traps=TrapGuard(max_depth=3, max_url_length=60))
    assert scope.verdict("http://a.example/x", depth=3) is None
    assert scope.verdict("http:///x") == INVALID
    assert scope.verdict("http://b.example/private/") == OUT_OF_SCOPE  # (the domains before the rules)
    assert scope.verdict("http://a.example/private/") == REJECTED
    assert scope.verdict("http://a.example/x", depth=4) == "trap:depth"
    assert scope.verdict("http://a.example/" + "x" * 60) == "trap:url_length"
    # the guard holds URLs from outside at once, by the address written in them; links at fetch
    assert CrawlScope().verdict("http://10.0.0.1/", guard=True) == PRIVATE_ADDRESS
    assert CrawlScope().verdict("http://10.0.0.1/") is None
    assert CrawlScope(guard=False).verdict("http://10.0.0.1/", guard=True) is None
    refusal = scope.refusal("http://a.example/x/x/x/x/x/x/x/x/x")  # (past max_repeated_segments 3)
    assert refusal.reason == "trap:repeated_segments" and "FRONTIER_MAX_" in refusal.hint
    assert reasons.words(refusal.reason) == "trap guards (repeated_segments)"


def test_the_summary_lists_what_was_kept_out_by_reason():
    totals = {
        "pages/fate/fetched": 4,
        "frontier/out_of_scope": 3,
        "frontier/rejected": 2,
        "frontier/trap/depth": 5,
        "frontier/trap/url_length": 1,
        "frontier/host_full": 1,
        "seeds/refused": 2,
    }
    assert totals_text(totals).endswith(
        "URLs not admitted: out-of-scope 3, rejected by the crawl rules 2, trap guards 6 (depth 5, url_length 1), "
        "host full 1, seeds refused 2"
    )


@settings(max_examples=500, deadline=None)
@given(
    segments=st.lists(st.sampled_from(["a", "b", "c", "", "2024"]), max_size=16),
    limit=st.integers(1, 5),
)
def test_the_repeat_check_is_the_longest_run_past_the_limit(segments, limit):
    path = "/" + "/".join(segments)
    assert repeats_more_than(path, limit) == (repeated_segments(path) > limit)
