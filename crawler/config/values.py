"""The kinds of value a setting takes, as plain values with one method:
``problem(settings, name)`` is None when the setting's value is usable, else what it
should be ("expected a number of seconds >= 0"). No I/O but whether a named file can be
read. The settings table (crawler/config/settings.py) gives each setting its rule.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from crawler.scope.rules import CrawlRules, RulesError

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


class CrawlRulesFile:
    """A crawl rules file (crawler/scope/rules.py) that reads without a problem ('': none)."""

    def problem(self, settings, name: str) -> str | None:
        path = settings.get(name)
        if not path:
            return None
        try:
            CrawlRules.from_file(str(path))
        except RulesError as exc:
            return f"expected a crawl rules file (crawler/scope/rules.py); its problems:\n{exc}"
        return None


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


@dataclass(frozen=True)
class Text:
    """Any text."""

    def problem(self, settings, name: str) -> str | None:
        return None if isinstance(settings.get(name), str) else "expected text"


@dataclass(frozen=True)
class Texts:
    """A list of texts, or one text of them separated by commas."""

    def problem(self, settings, name: str) -> str | None:
        value = settings.get(name)
        if isinstance(value, str) or (isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)):
            return None
        return "expected a list of texts (comma separated)"


# an import path: package.module or package.module.Name
DOTTED = r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*"


@dataclass(frozen=True)
class Dotted:
    """An import path (``many``: a list of them), as Scrapy's own settings name components."""

    many: bool = False

    def problem(self, settings, name: str) -> str | None:
        values = settings.getlist(name) if self.many else [settings.get(name)]
        if all(isinstance(v, str) and re.fullmatch(DOTTED, v) for v in values):
            return None
        return "expected " + ("import paths" if self.many else "an import path") + " such as package.module.Name"


@dataclass(frozen=True)
class Statuses:
    """HTTP status codes (100-599), a list or comma separated."""

    def problem(self, settings, name: str) -> str | None:
        try:
            codes = [int(v) for v in settings.getlist(name)]
        except (TypeError, ValueError):
            codes = [0]
        return None if all(100 <= c <= 599 for c in codes) else "expected HTTP status codes (100-599)"


@dataclass(frozen=True)
class Components:
    """Scrapy components and their orders: {import path: a number, or None (off)}."""

    def problem(self, settings, name: str) -> str | None:
        try:
            value = settings.getdict(name)
        except (TypeError, ValueError):
            return "expected {import path: order (a number, or None: off)}"
        for path, order in value.items():
            if not (isinstance(path, str) and re.fullmatch(DOTTED, path)):
                return f"expected import paths as keys, not {path!r}"
            if order is not None and not (isinstance(order, int | float) and math.isfinite(order)):
                return f"expected a number or None as the order of {path}"
        return None


@dataclass(frozen=True)
class Handlers:
    """Download handlers: {URL scheme: import path, or None (the scheme not downloaded)}."""

    def problem(self, settings, name: str) -> str | None:
        try:
            value = settings.getdict(name)
        except (TypeError, ValueError):
            return "expected {scheme: import path (or None)}"
        for scheme, path in value.items():
            if path is not None and not (isinstance(path, str) and re.fullmatch(DOTTED, path)):
                return f"expected an import path (or None) for {scheme}, not {path!r}"
        return None


SECONDS = Number(unit="seconds")
POSITIVE_SECONDS = Number(above=True, unit="seconds")
COUNT = Number(integer=True)  # 0 and up (0 often turns a guard off)
AT_LEAST_ONE = Number(1, integer=True)
PORT = Number(1, 65535, integer=True)
TEXT = Text()
TEXTS = Texts()
PATH = Text()  # a file or folder (a relative one is taken from the current folder)
OBJECT = Dotted()
MODULES = Dotted(many=True)
STATUSES = Statuses()
COMPONENTS = Components()
HANDLERS = Handlers()
# a crawl's name: in its Redis keys (between braces, a cluster's hash tag) and its folder under CRAWL_DIR
CRAWL = Pattern(r"[^\s/\\{}]{1,100}", "a name without spaces, slashes or braces (at most 100 characters)")
