"""Settings are checked in one place before anything starts: the rules with plain values,
then every command of the project started with a bad setting."""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from scrapy.settings import Settings

import settings.base
from crawler.config.settings import RULES
from crawler.config.validation import problems
from testing.services import project_settings
from testing.workers import clean_env

ROOT = Path(__file__).resolve().parents[1]


def problems_with(**overrides) -> list[str]:
    return problems(Settings(project_settings(**overrides)))


def test_the_defaults_are_valid_and_every_rule_names_a_setting_that_exists():
    assert problems_with() == []
    defaults = {k for k in vars(settings.base) if k.isupper()} | {"CLOSESPIDER_TIMEOUT", "DOWNLOAD_TIMEOUT"}
    assert set(RULES) <= defaults, set(RULES) - defaults


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("FRONTIER_HOST_INTERVAL", "abc", "expected a number of seconds >= 0"),
        ("FRONTIER_HOST_INTERVAL", "-1", "expected a number of seconds >= 0"),
        ("FRONTIER_HOST_INTERVAL", "nan", "expected a number of seconds >= 0"),
        ("FRONTIER_HOST_INTERVAL", "inf", "expected a number of seconds >= 0"),
        ("FRONTIER_PRIORITY_LEVELS", "0", "expected a whole number from 1 to 16"),
        ("FRONTIER_PRIORITY_LEVELS", "2.5", "expected a whole number from 1 to 16"),
        ("FRONTIER_PRIORITY_LEVELS", 2.5, "expected a whole number from 1 to 16"),
        ("FRONTIER_LEASE_SECONDS", "0", "expected a number of seconds above 0"),
        ("FRONTIER_SEEN_ERROR_RATE", "1", "expected a number from 1e-08 to 0.5"),
        ("FRONTIER_SEEN_ERROR_RATE", "1e-9", "expected a number from 1e-08 to 0.5"),
        ("CONTENT_SEEN_RESEMBLANCE", "0", "expected a number above 0 and at most 1"),
        ("URLSTORE_BACKEND", "bogus", "expected one of sqlite, cassandra"),
        ("FRONTIER_POLITENESS_KEY", "url", "expected one of host, domain"),
        ("CASSANDRA_WRITE_CONSISTENCY", "most", "expected empty or one of ANY, ONE"),
        ("CASSANDRA_KEYSPACE", "my-crawl", "expected a CQL name: letters, digits and _, starting with a letter"),
        ("CASSANDRA_KEYSPACE", "1crawl", "expected a CQL name"),
        ("CASSANDRA_KEYSPACE", "k" * 49, "at most 48 characters"),
        ("CASSANDRA_KEYSPACE", "crawl; DROP KEYSPACE x", "expected a CQL name"),
        ("CASSANDRA_REPLICATION_FACTOR", "0", "expected a whole number >= 1"),
        ("CASSANDRA_DATACENTER", "dc1', 'dc2", "expected empty (SimpleStrategy) or a datacenter name"),
        ("CASSANDRA_REQUEST_TIMEOUT", "0", "expected a number of seconds above 0"),
        ("REDIS_URL", "notaurl", "expected empty or a URL starting redis:// or rediss:// or unix://"),
        ("REDIS_URL", "redis://host:99999/0", "expected empty or a URL starting redis://"),
        ("REDIS_URLS", "redis://a:6379/0,notaurl", "URL 2: expected empty or a URL starting redis://"),
        ("REDIS_CLUSTER_URL", "unix:///tmp/r.sock", "expected empty or a URL starting redis:// or rediss://"),
        ("REDIS_CLUSTER_SHARDS", "0", "expected a whole number from 1 to 16384"),
        ("CASSANDRA_TLS_CA_FILE", "/no/such/ca.pem", "expected empty or a readable file"),
        ("ARCHIVE_S3_ENDPOINT_URL", "minio:9000", "expected empty or a URL starting http:// or https://"),
        ("ROBOTSTXT_OBEY", "maybe", "expected True or False (or 1 or 0)"),
        ("NETWORK_GUARD_ALLOW", "10.0.0.0/8,nonsense", "'nonsense' is not one"),
        ("FRONTIER_HOST_INTERVALS_FILE", "/no/such/file", "expected empty or a readable file"),
        ("METRICS_PORT", "abc", "expected a port (1-65535), a range such as 9410-9419, auto (any free port)"),
        ("METRICS_PORT", "70000", "expected a port (1-65535)"),
        ("METRICS_PORT", "9420-9410", "expected a port (1-65535)"),
        ("METRICS_ADDRESS", "not an address", "expected an IP address (127.0.0.1, 0.0.0.0, ::) or a host name"),
        ("METRICS_FRONTIER_TIMEOUT", "0", "expected a number of seconds above 0"),
        ("SEED_PROGRESS_INTERVAL", "-1", "expected a number of seconds >= 0"),
        ("FETCH_POLICY_MAX_AGE", "a week", "expected a number of seconds >= 0"),
        ("FRONTIER_SUBMIT_INTERVAL", "-0.1", "expected a number of seconds >= 0"),
        ("FRONTIER_SUBMIT_BATCH", "0", "expected a whole number >= 1"),
    ],
)
def test_a_bad_value_is_named_with_what_the_setting_takes(name, value, expected):
    found = problems_with(**{name: value})
    assert len(found) == 1 and found[0].startswith(f"{name}=") and expected in found[0], found


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


@pytest.mark.parametrize(
    "command",
    [
        ["crawl", "broad"],
        ["seed", "-"],
        ["frontier"],
        ["urlstore", "get", "http://example.com/"],
        ["demo"],
        ["submit", "http://example.com/"],
    ],
)
def test_every_command_stops_at_once_with_one_line_and_exit_code_2(command, tmp_path):
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", *command, "-s", "FRONTIER_HOST_INTERVAL=abc", "-s", f"CRAWL_DIR={tmp_path}"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    took = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"{command[0]}: invalid setting FRONTIER_HOST_INTERVAL='abc': expected a number of seconds >= 0"
    ]
    assert proc.stdout == "" and took < 15, took
    assert not any(tmp_path.iterdir())  # nothing was created


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["-s", "FRONTIER_HOST_INTERVALL=5"],
            "crawl: invalid setting FRONTIER_HOST_INTERVALL='5': not a setting of this crawler; "
            "did you mean FRONTIER_HOST_INTERVAL?",
        ),
        (
            ["-a", "seedz=x.txt"],
            "crawl: unknown argument -a seedz=...: did you mean seeds? the broad spider takes seeds, "
            "allowed_domains, allowed_prefixes, follow",
        ),
    ],
)
def test_a_misspelled_name_stops_the_crawl_naming_the_right_one(args, line, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "broad", *args, "-s", f"CRAWL_DIR={tmp_path}"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [line], proc.stderr
    assert not any(tmp_path.iterdir())


def test_frontier_watch_takes_a_positive_number():
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "frontier", "--watch", "-5"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--watch takes a number of seconds above 0" in proc.stderr
