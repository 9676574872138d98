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

The rules are plain values (crawler/config/values.py), tested as such; each setting's
default, rule and meaning are one row of the settings table (crawler/config/settings.py).
"""

from __future__ import annotations

import difflib
import sys

from crawler.config.settings import BY_NAME, RULES

# settings no longer read, and what replaced them: a value given for one is refused, not ignored
RETIRED = {"CASSANDRA_REPLICATION": "CASSANDRA_REPLICATION_FACTOR and CASSANDRA_DATACENTER"}

# pairs that must hold together: (low setting, high setting)
ORDERED = (
    ("HOST_BACKOFF_MIN", "HOST_BACKOFF_MAX"),
    ("URL_RETRY_DELAY", "URL_RETRY_DELAY_MAX"),
    ("ROBOTSTXT_RETRY_MIN", "ROBOTSTXT_RETRY_MAX"),
    ("ARCHIVE_RETRY_MIN", "ARCHIVE_RETRY_MAX"),
    ("RECRAWL_MIN_INTERVAL", "RECRAWL_MAX_INTERVAL"),
    ("FRONTIER_ADDRESS_TTL_MIN", "FRONTIER_ADDRESS_TTL_MAX"),
)


# settings scrapy-redis reads (its connection helper is the frontier's), beside Scrapy's own
SCRAPY_REDIS_SETTINGS = (
    "DUPEFILTER_CLASS", "DUPEFILTER_DEBUG", "MAX_IDLE_TIME_BEFORE_CLOSE", "REDIS_DB", "REDIS_DECODE_RESPONSES",
    "REDIS_ENCODING", "REDIS_HOST", "REDIS_ITEMS_KEY", "REDIS_ITEMS_SERIALIZER", "REDIS_PARAMS", "REDIS_PORT",
    "REDIS_START_URLS_AS_SET", "REDIS_START_URLS_AS_ZSET", "REDIS_START_URLS_KEY", "REDIS_URL",
    "SCHEDULER_DUPEFILTER_KEY", "SCHEDULER_FLUSH_ON_START", "SCHEDULER_IDLE_BEFORE_CLOSE", "SCHEDULER_PERSIST",
    "SCHEDULER_QUEUE_CLASS", "SCHEDULER_QUEUE_KEY", "SCHEDULER_SERIALIZER", "STATS_KEY",
)  # fmt: skip
CLOSE_ENOUGH = 0.85  # difflib's ratio from which an unknown name is taken for a misspelling


def known_settings() -> tuple[frozenset, frozenset]:
    """(every setting name Scrapy, scrapy-redis and this project know; the prefixes of the
    project's own names that none of Scrapy's has, FRONTIER_ and the like)."""
    from scrapy.settings import default_settings

    scrapy = {n for n in dir(default_settings) if n.isupper()}
    project = set(BY_NAME)  # the settings table: every profile sets only its names (tests/unit/test_settings_table.py)
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
                f"{name}={_shown(name, settings.get(name))}: not a setting of this crawler{hint} (docs/SETTINGS.md)"
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
        sharded = len(settings.getlist("REDIS_URLS")) > 1 or settings.get("REDIS_CLUSTER_URL")
        if settings.getbool("FRONTIER_ADDRESS_POLITENESS") and sharded:
            out.append(
                "FRONTIER_ADDRESS_POLITENESS=True: expected one Redis (REDIS_URL), not a sharded frontier"
                " (REDIS_URLS, REDIS_CLUSTER_URL): each shard would keep its own budget for an address"
                " whose hosts fall on several shards"
            )
        if settings.getbool("FRONTIER_ADDRESS_POLITENESS") and settings.get("FRONTIER_POLITENESS_KEY") != "host":
            out.append(
                f"FRONTIER_ADDRESS_POLITENESS=True: expected FRONTIER_POLITENESS_KEY=host"
                f" (not {settings.get('FRONTIER_POLITENESS_KEY')}: a registered domain has no one address)"
            )
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
