"""Settings are checked in one place before anything starts: the rules with plain values, then
every command of the project started with a bad setting: the tests on real services in this
process (Redis, Cassandra, S3, page processes) (the others: tests/unit/test_validation.py,
tests/e2e/test_validation.py)."""

import pytest
from scrapy.settings import Settings

from crawler.config.validation import problems
from testing.services import project_settings


def problems_with(**overrides) -> list[str]:
    return problems(Settings(project_settings(**overrides)))


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
