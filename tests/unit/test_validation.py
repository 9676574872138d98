"""Settings are checked in one place before anything starts: the rules with plain values,
then every command of the project started with a bad setting.

Here: the unit tests (pure: no service, no process); the others of this subject:
tests/integration/test_validation.py, tests/e2e/test_validation.py."""

import pytest
from scrapy.settings import Settings

import settings.base
from crawler.config.settings import RULES
from crawler.config.validation import problems
from testing.services import project_settings


def problems_with(**overrides) -> list[str]:
    return problems(Settings(project_settings(**overrides)))


def test_the_defaults_are_valid_and_every_rule_names_a_setting_that_exists():
    assert problems_with() == []
    defaults = {k for k in vars(settings.base) if k.isupper()} | {"CLOSESPIDER_TIMEOUT", "DOWNLOAD_TIMEOUT"}
    assert set(RULES) <= defaults, set(RULES) - defaults


@pytest.mark.parametrize(
    "name, value",
    [
        ("FRONTIER_HOST_INTERVAL", "0.25"),
        ("FRONTIER_HOST_INTERVAL", 0),
        ("FRONTIER_PRIORITY_LEVELS", "5"),
        ("URLSTORE_BACKEND", "SQLite"),
        ("CASSANDRA_READ_CONSISTENCY", "local_one"),
        ("CASSANDRA_WRITE_CONSISTENCY", ""),
        ("CASSANDRA_KEYSPACE", "Crawl_2024"),
        ("CASSANDRA_KEYSPACE", "k" * 48),
        ("CASSANDRA_DATACENTER", "us-east-1"),
        ("CASSANDRA_DATACENTER", "DC1"),
        ("CASSANDRA_REPLICATION_FACTOR", "3"),
        ("REDIS_URL", "rediss://:pw@redis.internal:6380/2"),
        ("REDIS_URL", "unix:///run/redis.sock"),
        ("ROBOTSTXT_OBEY", "0"),
        ("NETWORK_GUARD_ALLOW", "10.1.0.0/16, 127.0.0.0/8, ::1"),
        ("METRICS_PORT", "9410"),
        ("METRICS_PORT", "9410-9419"),
        ("METRICS_PORT", "auto"),
        ("METRICS_PORT", "0"),
        ("METRICS_ADDRESS", "0.0.0.0"),
        ("METRICS_ADDRESS", "::1"),
        ("METRICS_ADDRESS", "metrics.internal"),
        ("FETCH_POLICY_MAX_AGE", "0"),
        ("FETCH_POLICY_MAX_AGE", "3600"),
    ],
)
def test_good_values_pass(name, value):
    assert problems_with(**{name: value}) == []


def test_settings_that_must_agree_are_checked_together():
    assert problems_with(HOST_BACKOFF_MIN=100, HOST_BACKOFF_MAX=10) == [
        "HOST_BACKOFF_MIN=100 is above HOST_BACKOFF_MAX=10: expected at most it"
    ]
    assert problems_with(URLSTORE_BACKEND="cassandra", CASSANDRA_HOSTS=[]) == [
        "URLSTORE_BACKEND=cassandra: expected CASSANDRA_HOSTS (contact points, comma separated)"
    ]
    assert problems_with(FRONTIER_ADDRESS_TTL_MIN=600, FRONTIER_ADDRESS_TTL_MAX=60) == [
        "FRONTIER_ADDRESS_TTL_MIN=600 is above FRONTIER_ADDRESS_TTL_MAX=60: expected at most it"
    ]
    assert problems_with(FRONTIER_ADDRESS_POLITENESS=True, FRONTIER_POLITENESS_KEY="domain") == [
        "FRONTIER_ADDRESS_POLITENESS=True: expected FRONTIER_POLITENESS_KEY=host"
        " (not domain: a registered domain has no one address)"
    ]
    sharded = problems_with(FRONTIER_ADDRESS_POLITENESS=True, REDIS_URLS="redis://127.0.0.1:1/0,redis://127.0.0.1:2/0")
    assert len(sharded) == 1 and sharded[0].startswith("FRONTIER_ADDRESS_POLITENESS=True: expected one Redis")
    assert problems_with(FRONTIER_ADDRESS_POLITENESS=True, DNS_NAMESERVERS="127.0.0.1:5353") == []


def test_a_setting_no_longer_read_is_refused_naming_what_replaced_it():
    assert problems_with(CASSANDRA_REPLICATION="{'class': 'SimpleStrategy', 'replication_factor': 3}") == [
        "CASSANDRA_REPLICATION=\"{'class': 'SimpleStrategy', 'replication_factor': 3}\": no longer read; "
        "set CASSANDRA_REPLICATION_FACTOR and CASSANDRA_DATACENTER instead"
    ]


def _given(**cmdline) -> Settings:
    values = Settings(project_settings())
    values.setdict(cmdline, priority="cmdline")  # as -s NAME=VALUE gives them
    return values


def test_a_misspelled_or_unknown_project_setting_is_named_with_the_nearest_known_one():
    assert problems(_given(FRONTIER_HOST_INTERVALL="5")) == [
        "FRONTIER_HOST_INTERVALL='5': not a setting of this crawler; did you mean FRONTIER_HOST_INTERVAL?"
    ]
    assert problems(_given(CONCURENT_REQUESTS="4")) == [
        "CONCURENT_REQUESTS='4': not a setting of this crawler; did you mean CONCURRENT_REQUESTS?"
    ]
    [line] = problems(_given(URLSTORE_FLAVOUR="x"))  # a project prefix, close to nothing
    assert line.startswith("URLSTORE_FLAVOUR='x': not a setting of this crawler")
    # Scrapy's, scrapy-redis's and the project's names pass, and so does an extension's own;
    # a misspelled name in the project's own settings file is not the user's -s
    assert problems(_given(CONCURRENT_REQUESTS="4", REDIS_HOST="h", MYEXT_ENABLED="1", SPLASH_URL="u")) == []
    assert problems(Settings({**project_settings(), "FRONTIER_HOST_INTERVALL": 5})) == []


def test_a_password_in_a_bad_url_is_not_shown():
    [line] = problems_with(REDIS_URL="redis://user:s3cret@host:99999/0")
    assert "s3cret" not in line and "***@host:99999/0" in line
    [line] = problems_with(REDIS_URLS="redis://:s3cret@a:6379/0,redis://:s3cret@b:99999/0")
    assert "s3cret" not in line and "***@a:6379/0,redis://***@b:99999/0" in line
