"""Every setting the crawler reads, checked in one place before anything starts.

``problems(settings)`` returns one line per setting whose value the crawler cannot use
(``FRONTIER_HOST_INTERVAL='abc': expected a number of seconds >= 0``): a wrong type, a
value out of range, an unknown choice, a malformed URL or network. Every command of the
project calls ``exit_if_invalid(settings, command)`` once its options are read, before
anything starts or logs: it prints those lines and exits with code 2, so a bad
``-s NAME=VALUE`` stops the start within a second with one line naming the setting and
what it takes, never a traceback or a silent hang. A name given on the command line
(``-s``) that no component reads but that looks like one of the crawler's (its prefix, or
close to a known name: ``FRONTIER_HOST_INTERVALL``) is a problem too, naming the nearest
known name (``unknown_settings``).

The rules are plain values (no I/O but whether a named file can be read), tested as such;
the defaults themselves live in settings/base.py.
"""

from __future__ import annotations

import difflib
import importlib
import ipaddress
import math
import os
import re
import sys
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

CONSISTENCY_LEVELS = (
    "ANY",
    "ONE",
    "TWO",
    "THREE",
    "QUORUM",
    "ALL",
    "LOCAL_QUORUM",
    "EACH_QUORUM",
    "SERIAL",
    "LOCAL_SERIAL",
    "LOCAL_ONE",
)


@dataclass(frozen=True)
class Number:
    """A number (``integer``: a whole one) in [low, high]; ``above``: strictly above low."""

    low: float = 0
    high: float = math.inf
    integer: bool = False
    above: bool = False
    unit: str = ""

    def problem(self, settings, name: str) -> str | None:
        raw = settings.get(name)
        try:
            value = settings.getint(name) if self.integer else settings.getfloat(name)
        except (TypeError, ValueError):
            return self._expected()
        if self.integer and isinstance(raw, float) and not raw.is_integer():
            return self._expected()
        if not math.isfinite(value):
            return self._expected()
        if value < self.low or (self.above and value == self.low) or value > self.high:
            return self._expected()
        return None

    def _expected(self) -> str:
        what = "a whole number" if self.integer else "a number"
        if self.unit:
            what += f" of {self.unit}"
        low = f"{self.low:g}"
        if self.high < math.inf:
            bounds = f"from {low} to {self.high:g}" if not self.above else f"above {low} and at most {self.high:g}"
        else:
            bounds = f"above {low}" if self.above else f">= {low}"
        return f"expected {what} {bounds}"


@dataclass(frozen=True)
class Flag:
    def problem(self, settings, name: str) -> str | None:
        try:
            settings.getbool(name)
        except (TypeError, ValueError):
            return "expected True or False (or 1 or 0)"
        return None


@dataclass(frozen=True)
class Choice:
    values: tuple[str, ...]
    upper: bool = False  # compared in capitals
    empty: bool = False  # empty is allowed too (the setting's automatic choice)

    def problem(self, settings, name: str) -> str | None:
        value = str(settings.get(name) or "")
        value = value.upper() if self.upper else value.lower()
        if value not in self.values and not (self.empty and not value):
            return ("expected empty or one of " if self.empty else "expected one of ") + ", ".join(self.values)
        return None


@dataclass(frozen=True)
class Pattern:
    """Text that ``regex`` matches whole; ``what``: what it takes, for the message."""

    regex: str
    what: str

    def problem(self, settings, name: str) -> str | None:
        return None if re.fullmatch(self.regex, str(settings.get(name))) else f"expected {self.what}"


@dataclass(frozen=True)
class Url:
    """Empty, or a URL of one of ``schemes``."""

    schemes: tuple[str, ...]

    def problem(self, settings, name: str) -> str | None:
        return self.wrong(str(settings.get(name) or ""))

    def wrong(self, value: str) -> str | None:
        if not value:
            return None
        expected = "expected empty or a URL starting " + " or ".join(f"{s}://" for s in self.schemes)
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 (raises on a bad port)
        except ValueError:
            return expected
        if parts.scheme not in self.schemes:
            return expected
        if parts.scheme == "unix":
            return None if parts.path else expected
        if not parts.hostname:
            return expected
        for key, path in parse_qsl(parts.query):
            if key in TLS_FILES and not _readable(path):
                return f"{key}={path!r}: expected a readable file"
        return None


@dataclass(frozen=True)
class UrlList(Url):
    """Empty, or URLs of ``schemes``, comma separated."""

    def problem(self, settings, name: str) -> str | None:
        for n, value in enumerate(settings.getlist(name), 1):
            problem = self.wrong(str(value).strip())
            if problem:
                return f"URL {n}: {problem}"
        return None


@dataclass(frozen=True)
class Networks:
    def problem(self, settings, name: str) -> str | None:
        for network in settings.getlist(name):
            try:
                ipaddress.ip_network(str(network).strip(), strict=False)
            except ValueError:
                return f"expected networks such as 10.1.0.0/16 or 127.0.0.0/8; {network!r} is not one"
        return None


@dataclass(frozen=True)
class ReadableFile:
    def problem(self, settings, name: str) -> str | None:
        path = settings.get(name)
        if not path or _readable(path):
            return None
        return "expected empty or a readable file"


TLS_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")  # redis-py's TLS files (URL query, REDIS_PARAMS)


@dataclass(frozen=True)
class RedisParams:
    """A dict of redis-py client arguments; its TLS files readable."""

    def problem(self, settings, name: str) -> str | None:
        try:
            params = settings.getdict(name)
        except (TypeError, ValueError):
            return "expected a dict of redis-py client arguments (JSON with -s)"
        for key in TLS_FILES:
            if params.get(key) and not _readable(str(params[key])):
                return f"{key}={params[key]!r}: expected a readable file"
        return None


def _readable(path: str) -> bool:
    return os.access(path, os.R_OK) and os.path.isfile(path)


def metrics_ports(value) -> list[int] | None:
    """The ports METRICS_PORT names, to try in turn: None (off: empty, None or 0), [0]
    (``auto``: any free port), [port], or the ports of a range ``LOW-HIGH`` (or a
    ``[LOW, HIGH]`` list, as Scrapy's TELNETCONSOLE_PORT). Raises ValueError."""
    if value is None or value == "" or value == 0 or value == "0":
        return None
    if isinstance(value, str) and value.strip().lower() == "auto":
        return [0]
    if isinstance(value, list | tuple):
        if len(value) != 2:
            raise ValueError(value)
        low, high = (int(v) for v in value)
    elif isinstance(value, str) and "-" in value.strip()[1:]:
        low, high = (int(v) for v in value.split("-", 1))
    else:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(value)
        low = high = int(value)
    if not 1 <= low <= high <= 65535:
        raise ValueError(value)
    return list(range(low, high + 1))


@dataclass(frozen=True)
class Ports:
    """Empty or 0 (off), a port, a range ``LOW-HIGH`` or ``auto`` (crawler/observe/metrics.py)."""

    def problem(self, settings, name: str) -> str | None:
        try:
            metrics_ports(settings.get(name))
        except (TypeError, ValueError):
            return "expected a port (1-65535), a range such as 9410-9419, auto (any free port), or 0 (off)"
        return None


@dataclass(frozen=True)
class Address:
    """An IP address or a host name to listen on."""

    def problem(self, settings, name: str) -> str | None:
        value = str(settings.get(name) or "")
        try:
            ipaddress.ip_address(value)
            return None
        except ValueError:
            pass
        labels = value.split(".")
        if (
            value
            and len(value) <= 253
            and all(
                label and len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii() for label in labels
            )
        ):
            return None
        return "expected an IP address (127.0.0.1, 0.0.0.0, ::) or a host name"


# a keyspace name pasted into CQL unquoted (Cassandra allows at most 48 characters)
CQL_NAME = r"[A-Za-z][A-Za-z0-9_]{0,47}"
# a datacenter name, quoted in the keyspace's replication map (crawler/urlstore/cassandra.py)
DATACENTER_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"

SECONDS = Number(unit="seconds")
POSITIVE_SECONDS = Number(above=True, unit="seconds")
COUNT = Number(integer=True)  # 0 and up (0 often turns a guard off)
AT_LEAST_ONE = Number(1, integer=True)

RULES = {
    "SETTINGS_PROFILE": Choice(("local", "distributed")),
    # the frontier
    "FRONTIER_PRIORITY_LEVELS": Number(1, 16, integer=True),
    "FRONTIER_HOST_INTERVAL": SECONDS,
    "FRONTIER_HOST_INTERVALS_FILE": ReadableFile(),
    "FRONTIER_POLITENESS_KEY": Choice(("host", "domain")),
    "FRONTIER_HOST_MAX_IN_FLIGHT": COUNT,
    "FRONTIER_LEASE_SECONDS": POSITIVE_SECONDS,
    "FRONTIER_LEASE_MAX_HOLD": POSITIVE_SECONDS,
    "FRONTIER_LEASE_MAX_ATTEMPTS": AT_LEAST_ONE,
    "FRONTIER_SEEN_CACHE": COUNT,
    "FRONTIER_PREFETCH": AT_LEAST_ONE,
    "FRONTIER_MAX_UNREAD": AT_LEAST_ONE,
    "FRONTIER_LOOKAHEAD": SECONDS,
    "FRONTIER_REFILL_BATCH": AT_LEAST_ONE,
    "FRONTIER_POLL_INTERVAL": POSITIVE_SECONDS,
    "FRONTIER_SUBMIT_INTERVAL": SECONDS,
    "FRONTIER_SUBMIT_BATCH": AT_LEAST_ONE,
    "FRONTIER_SEEN_CAPACITY": AT_LEAST_ONE,
    "FRONTIER_SEEN_ERROR_RATE": Number(1e-8, 0.5),  # 4-byte fingerprints: below ~1e-8 a bucket holds one
    "FRONTIER_SEEN_GROWTH": Number(2, 16, integer=True),
    "FRONTIER_MAX_URL_LENGTH": COUNT,
    "FRONTIER_MAX_DEPTH": COUNT,
    "FRONTIER_MAX_PAGES_PER_HOST": COUNT,
    "FRONTIER_MAX_REPEATED_SEGMENTS": COUNT,
    "FRONTIER_MAX_QUERY_PARAMS": COUNT,
    "FRONTIER_MAX_QUERY_LENGTH": COUNT,
    "FRONTIER_MAX_PARAM_REPEATS": COUNT,
    "FRONTIER_CLOSE_WHEN_IDLE": Flag(),
    "FRONTIER_MAX_WAIT": SECONDS,
    "FRONTIER_IDLE_SECONDS": SECONDS,
    "FRONTIER_STATS_INTERVAL": SECONDS,
    "LIVE_STATS_INTERVAL": Number(0, 10, unit="seconds"),
    "METRICS_PORT": Ports(),
    "METRICS_ADDRESS": Address(),
    "METRICS_FRONTIER_INTERVAL": SECONDS,
    "METRICS_FRONTIER_TIMEOUT": POSITIVE_SECONDS,
    "SERVE_HOST": Address(),
    "SERVE_PORT": Number(1, 65535, integer=True),
    "SERVE_TIMEOUT": POSITIVE_SECONDS,
    "SERVE_THREADS": AT_LEAST_ONE,
    "SERVE_PROCESSES": Number(1, 64, integer=True),
    "SERVE_BATCH_MAX": AT_LEAST_ONE,
    "SERVE_ACCESS_LOG": Flag(),
    "REDIS_URL": Url(("redis", "rediss", "unix")),
    "REDIS_URLS": UrlList(("redis", "rediss", "unix")),
    "REDIS_PARAMS": RedisParams(),
    "REDIS_CLUSTER_URL": Url(("redis", "rediss")),
    "REDIS_CLUSTER_SHARDS": Number(1, 16384, integer=True),
    "URL_SORT_QUERY": Flag(),
    "CRAWL_FOLLOW_LINKS": Flag(),
    "SEED_BATCH_SIZE": AT_LEAST_ONE,
    "SEED_PROGRESS_INTERVAL": SECONDS,
    "SITEMAP_MAX_URLS": COUNT,
    # Scrapy's own knobs that the crawl relies on
    "CONCURRENT_REQUESTS": AT_LEAST_ONE,
    "CONCURRENT_REQUESTS_PER_DOMAIN": AT_LEAST_ONE,
    "CONCURRENT_ITEMS": AT_LEAST_ONE,
    "DOWNLOAD_TIMEOUT": POSITIVE_SECONDS,
    "DOWNLOAD_MAXSIZE": COUNT,
    "REDIRECT_MAX_TIMES": COUNT,
    "SCRAPER_SLOT_MAX_ACTIVE_SIZE": AT_LEAST_ONE,
    "BODY_BUDGET_BYTES": COUNT,
    "BODY_BUDGET_MIN_SIZE": AT_LEAST_ONE,
    "BODY_BUDGET_MAX_WAIT": POSITIVE_SECONDS,
    "CLOSESPIDER_TIMEOUT": SECONDS,
    "PAGE_PROCESSES": Number(0, 64, integer=True),
    "PAGE_PROCESS_NICE": Number(0, 19, integer=True),
    # network guard, failures, rate limiter
    "NETWORK_GUARD_ENABLED": Flag(),
    "NETWORK_GUARD_ALLOW": Networks(),
    "HOST_BACKOFF_ENABLED": Flag(),
    "HOST_BACKOFF_MIN": SECONDS,
    "HOST_BACKOFF_MAX": SECONDS,
    "HOST_BACKOFF_QUIET": SECONDS,
    "HOST_BACKOFF_MAX_RETRIES": COUNT,
    "URL_RETRY_ATTEMPTS": AT_LEAST_ONE,
    "URL_RETRY_DELAY": SECONDS,
    "URL_RETRY_DELAY_MAX": SECONDS,
    "HOST_SLOWDOWN_FACTOR": Number(1),
    "HOST_SLOWDOWN_MAX": Number(1),
    "HOST_SLOWDOWN_RECOVERY": Number(0, 1, above=True),
    "HOST_DOWN_AFTER": AT_LEAST_ONE,
    "FAILURE_LOG_PERIOD": SECONDS,
    "RATE_LIMITER_ENABLED": Flag(),
    "RATE_LIMITER_MAX_WAIT": SECONDS,
    # pipelines
    "CONTENT_SEEN_ENABLED": Flag(),
    "CONTENT_SEEN_RESEMBLANCE": Number(0, 1, above=True),
    "CONTENT_SEEN_MIN_WORDS": COUNT,
    "CONTENT_SEEN_BUCKET_SIZE": AT_LEAST_ONE,
    "CONTENT_SEEN_FOLLOW_NEAR_DUPLICATES": Flag(),
    "METADATA_ENABLED": Flag(),
    "METADATA_MAX_FIELD_LENGTH": AT_LEAST_ONE,
    "METADATA_MAX_FIELDS": AT_LEAST_ONE,
    "METADATA_MAX_BYTES": AT_LEAST_ONE,
    "ARCHIVE_ENABLED": Flag(),
    "ARCHIVE_S3_ENDPOINT_URL": Url(("http", "https")),
    "ARCHIVE_MAX_BYTES": AT_LEAST_ONE,
    "ARCHIVE_MAX_SECONDS": POSITIVE_SECONDS,
    "ARCHIVE_GZIP_LEVEL": Number(0, 9, integer=True),
    "ARCHIVE_RETRY_MIN": POSITIVE_SECONDS,
    "ARCHIVE_RETRY_MAX": POSITIVE_SECONDS,
    "WORKER_STOP_TIMEOUT": SECONDS,
    "URLSTORE_ENABLED": Flag(),
    "URLSTORE_BACKEND": Choice(("sqlite", "cassandra")),
    "URLSTORE_INLINK_BUCKETS": AT_LEAST_ONE,
    "URLSTORE_SQLITE_TIMEOUT": POSITIVE_SECONDS,
    "URLSTORE_SQLITE_CACHE_BYTES": AT_LEAST_ONE,
    "RECRAWL_INTERVAL": SECONDS,
    "RECRAWL_RETRY_INTERVAL": SECONDS,
    "RECRAWL_MIN_INTERVAL": POSITIVE_SECONDS,
    "RECRAWL_MAX_INTERVAL": POSITIVE_SECONDS,
    "RECRAWL_INC_RATE": Number(0, 10),
    "RECRAWL_DEC_RATE": Number(0, 0.99),
    "RECRAWL_SYNC_DELTA_RATE": Number(0, 1),
    "RECRAWL_GONE_INTERVAL": SECONDS,
    "RECRAWL_REDIRECT_INTERVAL": SECONDS,
    "RECRAWL_CHECK_INTERVAL": SECONDS,
    "RECRAWL_BATCH": AT_LEAST_ONE,
    "RECRAWL_HOLD": SECONDS,
    "RECRAWL_PROGRESS_INTERVAL": POSITIVE_SECONDS,
    "FETCH_POLICY_MAX_AGE": SECONDS,
    "CASSANDRA_PORT": Number(1, 65535, integer=True),
    "CASSANDRA_KEYSPACE": Pattern(
        CQL_NAME, "a CQL name: letters, digits and _, starting with a letter, at most 48 characters"
    ),
    "CASSANDRA_REPLICATION_FACTOR": AT_LEAST_ONE,
    "CASSANDRA_DATACENTER": Pattern(
        f"|{DATACENTER_NAME}", "empty (SimpleStrategy) or a datacenter name: letters, digits, _, . and -"
    ),
    "CASSANDRA_APPLY_SCHEMA": Flag(),
    "CASSANDRA_WRITE_CONSISTENCY": Choice(CONSISTENCY_LEVELS, upper=True, empty=True),
    "CASSANDRA_READ_CONSISTENCY": Choice(CONSISTENCY_LEVELS, upper=True, empty=True),
    "CASSANDRA_REQUEST_TIMEOUT": POSITIVE_SECONDS,
    "CASSANDRA_CONNECT_TIMEOUT": POSITIVE_SECONDS,
    "CASSANDRA_PROTOCOL_VERSION": Number(0, 5, integer=True),
    "CASSANDRA_MAX_IN_FLIGHT": AT_LEAST_ONE,
    "CASSANDRA_RETRIES": COUNT,
    "CASSANDRA_TLS": Flag(),
    "CASSANDRA_TLS_CA_FILE": ReadableFile(),
    "CASSANDRA_TLS_CERT_FILE": ReadableFile(),
    "CASSANDRA_TLS_KEY_FILE": ReadableFile(),
    "CASSANDRA_TLS_CHECK_HOSTNAME": Flag(),
    # robots.txt
    "ROBOTSTXT_OBEY": Flag(),
    "ROBOTSTXT_CACHE_SECONDS": SECONDS,
    "ROBOTSTXT_STALE_SECONDS": SECONDS,
    "ROBOTSTXT_MAX_BYTES": AT_LEAST_ONE,
    "ROBOTSTXT_RETRY_MIN": POSITIVE_SECONDS,
    "ROBOTSTXT_RETRY_MAX": POSITIVE_SECONDS,
    "ROBOTSTXT_UNREACHABLE_ALLOW_AFTER": SECONDS,
    "ROBOTSTXT_FETCH_TIMEOUT": POSITIVE_SECONDS,
    "ROBOTSTXT_MAX_CRAWL_DELAY": SECONDS,
    "ROBOTSTXT_SITEMAPS": Flag(),
    "ROBOTSTXT_MAX_SITEMAPS": COUNT,
    "ROBOTSTXT_CACHE_ENTRIES": AT_LEAST_ONE,
    "ROBOTSTXT_CACHE_BYTES": AT_LEAST_ONE,
}

# settings no longer read, and what replaced them: a value given for one is refused, not ignored
RETIRED = {"CASSANDRA_REPLICATION": "CASSANDRA_REPLICATION_FACTOR and CASSANDRA_DATACENTER"}

# pairs that must hold together: (low setting, high setting)
ORDERED = (
    ("HOST_BACKOFF_MIN", "HOST_BACKOFF_MAX"),
    ("URL_RETRY_DELAY", "URL_RETRY_DELAY_MAX"),
    ("ROBOTSTXT_RETRY_MIN", "ROBOTSTXT_RETRY_MAX"),
    ("ARCHIVE_RETRY_MIN", "ARCHIVE_RETRY_MAX"),
    ("RECRAWL_MIN_INTERVAL", "RECRAWL_MAX_INTERVAL"),
)


# settings scrapy-redis reads (its connection helper is the frontier's), beside Scrapy's own
SCRAPY_REDIS_SETTINGS = (
    "DUPEFILTER_CLASS", "DUPEFILTER_DEBUG", "MAX_IDLE_TIME_BEFORE_CLOSE", "REDIS_DB", "REDIS_DECODE_RESPONSES",
    "REDIS_ENCODING", "REDIS_HOST", "REDIS_ITEMS_KEY", "REDIS_ITEMS_SERIALIZER", "REDIS_PARAMS", "REDIS_PORT",
    "REDIS_START_URLS_AS_SET", "REDIS_START_URLS_AS_ZSET", "REDIS_START_URLS_KEY", "REDIS_URL",
    "SCHEDULER_DUPEFILTER_KEY", "SCHEDULER_FLUSH_ON_START", "SCHEDULER_IDLE_BEFORE_CLOSE", "SCHEDULER_PERSIST",
    "SCHEDULER_QUEUE_CLASS", "SCHEDULER_QUEUE_KEY", "SCHEDULER_SERIALIZER", "STATS_KEY",
)  # fmt: skip
PROFILE_MODULES = ("settings.base", "settings.local", "settings.distributed")
CLOSE_ENOUGH = 0.85  # difflib's ratio from which an unknown name is taken for a misspelling


def known_settings() -> tuple[frozenset, frozenset]:
    """(every setting name Scrapy, scrapy-redis and this project know; the prefixes of the
    project's own names that none of Scrapy's has, FRONTIER_ and the like)."""
    from scrapy.settings import default_settings

    scrapy = {n for n in dir(default_settings) if n.isupper()}
    project = set()
    for module in PROFILE_MODULES:
        project |= {n for n in dir(importlib.import_module(module)) if n.isupper()}
    prefixes = {n.split("_")[0] for n in project} - {n.split("_")[0] for n in scrapy}
    return frozenset(scrapy | project | set(SCRAPY_REDIS_SETTINGS) | set(RETIRED)), frozenset(prefixes)


def unknown_settings(settings) -> list[str]:
    """A line per name given on the command line (``-s``) that nothing reads but that looks
    like a setting of the crawler: a project prefix (FRONTIER_, URLSTORE_, ...) or close to
    a known name. Other unknown names (an extension's own) pass."""
    from scrapy.settings import SETTINGS_PRIORITIES

    known, prefixes = known_settings()
    out = []
    for name in settings.attributes:
        if name in known or settings.getpriority(name) != SETTINGS_PRIORITIES["cmdline"]:
            continue
        near = difflib.get_close_matches(name, known, n=1, cutoff=CLOSE_ENOUGH)
        if near:
            out.append(
                f"{name}={_shown(name, settings.get(name))}: not a setting of this crawler; did you mean {near[0]}?"
            )
        elif name.split("_")[0] in prefixes:
            nearest = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"; the nearest is {nearest[0]}" if nearest else ""
            out.append(
                f"{name}={_shown(name, settings.get(name))}: not a setting of this crawler{hint} (README: Settings)"
            )
    return out


def problems(settings) -> list[str]:
    """One line per setting the crawler cannot use, naming it, its value and what it takes."""
    out = unknown_settings(settings)
    for name, rule in RULES.items():
        if settings.get(name) is None:
            continue
        problem = rule.problem(settings, name)
        if problem:
            out.append(f"{name}={_shown(name, settings.get(name))}: {problem}")
    for name, instead in RETIRED.items():
        if settings.get(name) is not None:
            out.append(f"{name}={_shown(name, settings.get(name))}: no longer read; set {instead} instead")
    if not out:
        for low, high in ORDERED:
            if settings.getfloat(low) > settings.getfloat(high):
                out.append(f"{low}={settings.get(low)} is above {high}={settings.get(high)}: expected at most it")
        backend = str(settings.get("URLSTORE_BACKEND") or "").lower()
        if backend == "cassandra" and settings.getbool("URLSTORE_ENABLED") and not settings.getlist("CASSANDRA_HOSTS"):
            out.append("URLSTORE_BACKEND=cassandra: expected CASSANDRA_HOSTS (contact points, comma separated)")
    return out


def check(settings, command: str) -> bool:
    """Print the problems of ``settings`` (``command``: its name, first on each line) to
    stderr; True when there are none."""
    found = problems(settings)
    for line in found:
        print(f"{command}: invalid setting {line}", file=sys.stderr)
    return not found


def exit_if_invalid(settings, command: str) -> None:
    """``check``, and leave with exit code 2 when a setting is invalid (a command's start)."""
    if not check(settings, command):
        raise SystemExit(2)


def _shown(name: str, value) -> str:
    """A setting's value as the user gave it, with any password in a URL hidden."""
    if isinstance(value, list | tuple):
        value = ",".join(map(str, value))
    text = str(value)
    if name.endswith(("_URL", "_URLS")) and "@" in text:
        text = ",".join(_without_password(part) for part in text.split(","))
    return repr(text)


def _without_password(url: str) -> str:
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.rsplit('@', 1)[1]}" if rest else "***"
