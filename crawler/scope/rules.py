r"""The crawl's rules file (CRAWL_RULES): which discovered URLs are crawled, and per-host
overrides of the politeness and quota settings.

One entry per line; ``#`` starts a comment anywhere on a line; blank lines are ignored::

    reject surt   com,example)/private      # example.com/private..., www. or not
    reject regex  /calendar/\d{4}-\d\d      # a pattern is the rest of the line
    accept host   example.com               # example.com and its subdomains, any port
    accept prefix https://docs.python.org/3/
    accept host   127.0.0.1:8080            # that host and port only
    reject all                              # nothing else

    host example.com      interval=2 in_flight=2
    host api.example.com  interval=5qps max_pages=1000 priority=-1

    address 192.0.2.10         interval=3                      # one server, slower
    address 198.51.100.0/22    class=cdn-a interval=0.05 in_flight=16   # a CDN's edges

Rules (``accept`` or ``reject``, then a kind) are tried in order and the first that matches
a URL decides; a URL that no rule matches is accepted. URLs are matched in their normalized
form (crawler/urls.py: lowercase scheme and host, no default port, no fragment).

``host NAME``
    The URL's host is NAME or a subdomain of it: ``example.com`` matches ``example.com`` and
    ``www.example.com``, not ``notexample.com``. A NAME with a port (``127.0.0.1:8080``,
    ``[::1]:8080``) matches that host and port only; an IP address matches itself only.
``surt PREFIX``
    The URL's SURT form (the CDXJ index's key, crawler/urls.py ``url_key``: the ``surt``
    package's) starts with PREFIX, lowercased as SURT forms are: no scheme, the host
    reversed with commas and without ``www.``, the port, ``)``, the path without a trailing
    ``/``, the query sorted::

        http://www.example.com/private/a.html    com,example)/private/a.html
        https://sub.example.com:8443/A/?b=2&a=1  com,example,sub:8443)/a?a=1&b=2
        http://127.0.0.1:8080/x                  1,0,0,127:8080)/x

    ``com,example)`` is example.com and www.example.com; ``com,example,`` their subdomains;
    ``com,example`` also ``examplefoo.com``. An IP address's form is built without the
    resolver surt would ask: the address read as inet_aton reads it (``127.1`` is
    ``127.0.0.1``), else as written. The form is computed once per URL, when a surt rule is
    first tried (a few µs; some 50 µs for a URL with a query): cheaper rules go first.
``regex PATTERN``
    Python's ``re.search`` of PATTERN in the full URL. PATTERN is the rest of the line
    after ``regex``, stripped; as ``#`` starts a comment, a literal ``#`` is ``\x23``.
``prefix URLPREFIX``
    The URL starts with URLPREFIX (written normalized).
``all``
    Every URL.

Host entries, ``host NAME key=value ...``, override the crawl's settings for a host, with
at least one of ``interval`` (seconds >= 0, or ``Nqps``, as in FRONTIER_HOST_INTERVALS_FILE),
``in_flight`` (a whole number >= 1), ``max_pages`` (a whole number >= 0; 0 is no quota) and
``priority`` (an integer, may be negative). A NAME covers its host and subdomains, with the
port and address rules of ``host NAME`` rules; one entry per NAME. The longest matching
NAME wins, whole: a key it does not set is not taken from a shorter NAME (``api.example.com``
above has no in_flight override), so that each line reads on its own.

Address entries, ``address NETWORK key=value ...`` (FRONTIER_ADDRESS_POLITENESS; decision
0056), set the budget of the addresses in NETWORK (an address, or CIDR ``a.b.c.d/N``,
``v6::/N``): ``interval`` (as a host's) and ``in_flight`` (a whole number >= 1, or 0: no cap)
replace FRONTIER_ADDRESS_INTERVAL and _MAX_IN_FLIGHT for their class; ``class=NAME`` (letters,
digits, ``.``, ``_``, ``-``) puts every address of NETWORK into one class of that name, so
that the hosts behind a CDN's many edge addresses share one budget rather than each edge
address its own. The longest NETWORK containing an address wins, whole. They apply when a
host's address is next looked up (its TTL).

Parsing reports every problem of a file at once: one RulesError, ``PATH:LINE: message``
lines; every command checks the file at its start (exit code 2).

Where they apply: at every entry of a URL into the frontier (seeds, links, submissions,
recrawls; not a redirect or a retry of a URL admitted), before URL-seen: a URL rejected is
counted (``frontier/rejected``) and not queued. A host entry's ``interval`` is the host's
operator interval (before FRONTIER_HOST_INTERVALS_FILE and robots.txt Crawl-delay);
``in_flight`` replaces FRONTIER_HOST_MAX_IN_FLIGHT for the host (which must not be 0: no
limit is tracked then); ``max_pages`` replaces FRONTIER_HOST_MAX_PAGES; ``priority`` is the
priority of the host's URLs that come without one of their own. Each worker reads the file
again within CRAWL_RULES_CHECK_INTERVAL of a change (``RulesWatch``); a file that became
invalid is refused with its problems in the log, and the rules before it stay. A host's
``in_flight`` and ``max_pages`` take effect as its next URL is admitted.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
import struct
import time
from dataclasses import dataclass
from operator import attrgetter

from crawler.urls import ascii_host, authority_host, url_key

logger = logging.getLogger(__name__)


def parse_interval(value: str) -> float:
    """Seconds of ``"2"``, ``"0.5"`` or ``"5qps"``; ValueError when not one of those."""
    value = value.strip().lower()
    seconds = 1.0 / float(value[:-3]) if value.endswith("qps") else float(value)
    if not seconds >= 0 or seconds == float("inf"):
        raise ValueError(f"not an interval: {value!r}")
    return seconds


__all__ = ["EMPTY", "CrawlRules", "Decision", "HostOverrides", "RulesError"]


class RulesError(ValueError):
    """Every problem of a rules file: ``problems`` is (line, message), line 0 for the file."""

    def __init__(self, problems: list[tuple[int, str]], path: str = "<rules>"):
        self.problems = sorted(problems, key=lambda problem: problem[0])
        self.path = path
        super().__init__("\n".join(f"{path}:{line}: {message}" for line, message in self.problems))


@dataclass(frozen=True)
class HostOverrides:
    interval: float | None = None
    in_flight: int | None = None
    max_pages: int | None = None
    priority: int | None = None


@dataclass(frozen=True)
class AddressOverrides:
    network: str = ""  # as written in the entry
    class_name: str | None = None
    interval: float | None = None
    in_flight: int | None = None


@dataclass(frozen=True)
class Decision:
    accepted: bool
    line: int | None  # of the deciding rule; None when no rule matched
    rule: str  # its text as written ('' when none)


_NO_RULE, _NO_OVERRIDES, _LINE = Decision(True, None, ""), HostOverrides(), attrgetter("line")
_HOST, _SURT, _REGEX, _PREFIX, _ALL = _KINDS = ("host", "surt", "regex", "prefix", "all")
_LABELS = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
_AUTHORITY = re.compile(r"([^:/?#]*)://(?:[^@/?#]*@)?([^/?#]*)")
_RESOLVED = re.compile(r"[1-9][0-9]*(?:\.[0-9]+){0,3}|0[0-7]*(?:\.[0-7]+){0,3}")  # what surt resolves
_PLACEHOLDER, _PLACEHOLDER_KEY = "ip.invalid", "invalid,ip"


def _is_address(host: str) -> bool:
    return host.replace(".", "").isdigit() or ":" in host


def _name(text: str) -> str:
    """A NAME as URLs and politeness keys spell it (``example.com``, ``::1``,
    ``127.0.0.1:8080``, ``[::1]:8080``); ValueError when it is none."""
    name = text.lower().strip(".")
    try:
        if name.startswith("["):  # [v6] or [v6]:port
            inner, _, port = name[1:].partition("]")
            if port and not (port[:1] == ":" and port[1:].isdigit()):
                raise ValueError
            host, port = ipaddress.IPv6Address(inner).compressed, port[1:]
        else:
            host = authority_host(name)
            port = name[len(host) + 1 :]
            if ":" in host:
                host = ipaddress.IPv6Address(host).compressed
            elif not _LABELS.fullmatch(host := ascii_host(host)):
                raise ValueError
        if not port:
            return host
        if not 0 < int(port) < 65536:
            raise ValueError
        return f"[{host}]:{int(port)}" if ":" in host else f"{host}:{int(port)}"
    except (ValueError, UnicodeError):
        raise ValueError(f"not a host name: {text!r}") from None


def _names(authority: str) -> list[str]:
    """The NAMEs covering ``host[:port]``, longest first: itself, its host, the domains
    above it (none above an address)."""
    host = authority_host(authority)
    names = [authority] if host == authority else [authority, host]
    dot = -1 if _is_address(host) else host.find(".")
    while dot >= 0:
        names.append(host[dot + 1 :])
        dot = host.find(".", dot + 1)
    return names


def _blocks(rules: list[tuple[str, object, Decision]]) -> tuple[tuple, ...]:
    """The rules as decide tries them: a run of host rules as one table of NAMEs, a run of
    surt or prefix rules as one tuple of prefixes, the others one by one."""
    blocks: list[list] = []
    for kind, value, decision in rules:
        if kind not in (_HOST, _SURT, _PREFIX):
            blocks.append([kind, value, decision])
            continue
        if not blocks or blocks[-1][0] != kind:
            blocks.append([kind, {} if kind == _HOST else (), ()])
        if kind == _HOST:
            blocks[-1][1].setdefault(value, decision)
        else:
            blocks[-1][1:] = blocks[-1][1] + (value,), blocks[-1][2] + (decision,)
    return tuple(map(tuple, blocks))


def _surt_key(url: str) -> str:
    """The URL's SURT form; an address's built here (see the module's docstring)."""
    match = _AUTHORITY.match(url)
    host = authority_host(match[2]) if match else ""
    if not _is_address(host):
        return url_key(url)
    port = match[2].rpartition("]")[2] if match[2][:1] == "[" else match[2][len(host) :]  # ":8080" or ""
    key = url_key(f"{match[1]}://{_PLACEHOLDER}{port}{url[match.end() :]}")
    if not key.startswith(_PLACEHOLDER_KEY):
        return url  # (url_key's answer when surt cannot read a URL)
    if host.isdigit():
        host = socket.inet_ntoa(struct.pack(">L", int(host) & 0xFFFFFFFF))
    elif _RESOLVED.fullmatch(host):
        try:
            host = socket.inet_ntoa(socket.inet_aton(host))  # what the resolver answers
        except OSError:
            pass  # no address: surt keeps it as written when the resolver knows no such name
    return ",".join(reversed(host.split("."))) + key[len(_PLACEHOLDER_KEY) :]


def _integer(value: str, minimum: float = float("-inf")) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", value) or int(value) < minimum:
        raise ValueError
    return int(value)


_ADDRESS_KEYS = {
    "class": (lambda value: re.fullmatch(r"[A-Za-z0-9._-]+", value)[0], "a name of letters, digits, '.', '_', '-'"),
    "interval": (parse_interval, "seconds (a number >= 0) or Nqps"),
    "in_flight": (lambda value: _integer(value, 0), "a whole number >= 0"),
}
_KEYS = {
    "interval": (parse_interval, "seconds (a number >= 0) or Nqps"),
    "in_flight": (lambda value: _integer(value, 1), "a whole number >= 1"),
    "max_pages": (lambda value: _integer(value, 0), "a whole number >= 0"),
    "priority": (_integer, "an integer"),
}


def _rule(line: str) -> tuple[str, object]:
    """(kind, value) of an ``accept`` or ``reject`` line; ValueError(message)."""
    verb, kind, value = (line.split(None, 2) + ["", ""])[:3]
    if kind not in _KINDS:
        what = f"unknown kind {kind!r}" if kind else "missing kind"
        raise ValueError(f"{what}, expected host, surt, regex, prefix or all")
    if kind == _ALL and value:
        raise ValueError(f"'all' takes no value, got {value!r}")
    if kind != _ALL and not value:
        raise ValueError(f"missing value after '{verb} {kind}'")
    if kind == _REGEX:
        try:
            return kind, re.compile(value)
        except re.error as exc:
            raise ValueError(f"bad regex {value!r}: {exc}") from None
    if len(value.split()) > 1:
        raise ValueError(f"'{kind}' takes one value, got {value!r}")
    return kind, _name(value) if kind == _HOST else value.lower() if kind == _SURT else value


def _values(fields: list[str], keys: dict, problems: list[str]) -> dict:
    """The ``key=value`` fields of an entry, each read by its key's reader in ``keys``
    (key -> (reader, what it expects)); its problems go to ``problems``."""
    values: dict = {}
    seen = set()  # (a key given twice is said even when its first value was bad)
    for field in fields:
        key, equals, value = field.partition("=")
        if key not in keys or not equals:
            problems.append(
                f"unknown key {key!r}, expected {', '.join(keys)}" if equals else f"not key=value: {field!r}"
            )
        elif key in seen:
            problems.append(f"{key} given twice")
        else:
            seen.add(key)
            try:
                values[key] = keys[key][0](value)
            except (ValueError, ZeroDivisionError, TypeError):
                problems.append(f"bad {key} {value!r}, expected {keys[key][1]}")
    return values


def _entry(fields: list[str], problems: list[str]) -> tuple[str | None, HostOverrides]:
    """(NAME, overrides) of a ``host`` line's fields; its problems go to ``problems``."""
    if len(fields) < 2:
        problems.append(f"expected 'host NAME key=value ...' with keys {', '.join(_KEYS)}")
    name = None
    try:
        name = _name(fields[0]) if fields else None
    except ValueError as exc:
        problems.append(str(exc))
    return name, HostOverrides(**_values(fields[1:], _KEYS, problems))


def _address_entry(fields: list[str], problems: list[str]):
    """(network, AddressOverrides) of an ``address`` line's fields; problems to ``problems``."""
    if len(fields) < 2:
        problems.append(f"expected 'address NETWORK key=value ...' with keys {', '.join(_ADDRESS_KEYS)}")
    network = None
    try:
        network = ipaddress.ip_network(fields[0], strict=False) if fields else None
    except ValueError:
        problems.append(f"bad network {fields[0]!r}, expected an address or a.b.c.d/N")
    values = _values(fields[1:], _ADDRESS_KEYS, problems)
    if "class" in values:
        values["class_name"] = values.pop("class")
    return network, AddressOverrides(network=fields[0] if fields else "", **values)


def _first(text: str, prefixes: tuple[str, ...], decisions: tuple[Decision, ...]) -> Decision:
    return next(decision for prefix, decision in zip(prefixes, decisions) if text.startswith(prefix))


class CrawlRules:
    """The rules and host entries of a rules file (``parse``, ``from_file``)."""

    def __init__(
        self,
        rules: list[tuple[str, object, Decision]] | None = None,
        hosts: dict | None = None,
        text: str = "",
        path: str = "",
        addresses: dict | None = None,
    ):
        self._rules = tuple(rules or ())  # (kind, value, the Decision it gives)
        self._blocks = _blocks(self._rules)
        self._hosts: dict[str, HostOverrides] = dict(hosts or {})
        # network -> AddressOverrides, the longest first
        self._addresses = sorted((addresses or {}).items(), key=lambda item: -item[0].prefixlen)
        self.text = text  # what they were parsed from, and where it was read (published with the crawl's scope)
        self.path = path

    @classmethod
    def parse(cls, text: str, path: str = "<rules>") -> CrawlRules:
        rules, hosts, first, problems, addresses, classes = [], {}, {}, [], {}, {}
        for lineno, raw in enumerate(text.split("\n"), 1):
            line = raw.split("#", 1)[0].strip()
            verb, messages = line.split(None, 1)[0] if line else "", []
            if verb in ("accept", "reject"):
                try:
                    rules.append((*_rule(line), Decision(verb == "accept", lineno, line)))
                except ValueError as exc:
                    messages.append(str(exc))
            elif verb == "host":
                name, entry = _entry(line.split()[1:], messages)
                if name in first:
                    messages.append(f"duplicate host entry for {name} (first on line {first[name]})")
                elif name is not None:
                    first[name], hosts[name] = lineno, entry
            elif verb == "address":
                network, entry = _address_entry(line.split()[1:], messages)
                named = classes.get(entry.class_name) if entry.class_name else None
                if network in addresses:
                    messages.append(f"duplicate address entry for {network}")
                elif named and (named[1].interval, named[1].in_flight) != (entry.interval, entry.in_flight):
                    messages.append(
                        f"class {entry.class_name} has another interval or in_flight on line {named[0]}: one budget a class"
                    )
                elif network is not None and not messages:
                    addresses[network] = entry
                    if entry.class_name and not named:
                        classes[entry.class_name] = (lineno, entry)
            elif verb:
                messages.append(f"unknown verb {verb!r}, expected accept, reject, host or address")
            problems += [(lineno, message) for message in messages]
        if problems:
            raise RulesError(problems, path)
        return cls(rules, hosts, text, path, addresses)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> CrawlRules:
        """The rules of a UTF-8 file; RulesError (line 0) when it cannot be read."""
        try:
            with open(path, encoding="utf-8-sig") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise RulesError([(0, str(exc))], str(path)) from exc
        return cls.parse(text, str(path))

    def decide(self, url: str) -> Decision:
        """Whether the normalized ``url`` is crawled: the first matching rule's Decision."""
        # timeit, 20 rules tried in full (5 of each kind, then reject all): ~13 us a URL, ~50 us
        # with a query (surt's); ~5 us without surt rules; 500 host rules then reject all: ~3 us
        names = key = None
        for kind, tests, decisions in self._blocks:
            if kind == _PREFIX:
                if url.startswith(tests):
                    return _first(url, tests, decisions)
            elif kind == _REGEX:
                if tests.search(url):
                    return decisions
            elif kind == _HOST:
                if names is None:
                    match = _AUTHORITY.match(url)
                    names = _names(match[2]) if match else ()
                if not tests.keys().isdisjoint(names):
                    return min((tests[name] for name in names if name in tests), key=_LINE)
            elif kind == _SURT:
                if key is None:
                    key = _surt_key(url)
                if key.startswith(tests):
                    return _first(key, tests, decisions)
            else:
                return decisions
        return _NO_RULE

    def overrides(self, host: str) -> HostOverrides:
        """The entry of the longest NAME covering the politeness key ``host`` (a host, or
        ``host:port``); HostOverrides() when none does."""
        for name in _names(host) if self._hosts else ():
            if name in self._hosts:
                return self._hosts[name]
        return _NO_OVERRIDES

    def address_overrides(self, address: str) -> AddressOverrides | None:
        """The entry of the longest network containing ``address``; None when none does."""
        if not self._addresses:
            return None
        ip = ipaddress.ip_address(address)
        for network, entry in self._addresses:
            if ip.version == network.version and ip in network:
                return entry
        return None

    @property
    def empty(self) -> bool:
        return not self._rules and not self._hosts and not self._addresses

    def __len__(self) -> int:
        return len(self._rules) + len(self._hosts) + len(self._addresses)

    def __repr__(self) -> str:
        return f"<CrawlRules: {len(self._rules)} rules, {len(self._hosts)} host entries>"


EMPTY = CrawlRules()


class RulesWatch:
    """The rules of a file, read again when it changes: ``current()`` looks at the file's
    modification time at most every ``every`` seconds (``clock``: a function giving
    seconds). A file that became unreadable or invalid keeps the rules before it, and its
    problems are logged once per change."""

    def __init__(self, path: str, every: float = 5.0, clock=None):
        self.path = path
        self.every = every
        self.clock = clock or time.monotonic
        self.rules = CrawlRules.from_file(path)  # (at start: an invalid file is an error)
        self._stamp = _stamp(path)
        self._checked = self.clock()

    def current(self) -> CrawlRules:
        now = self.clock()
        if now - self._checked < self.every:
            return self.rules
        self._checked = now
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return self.rules
        self._stamp = stamp
        try:
            self.rules = CrawlRules.from_file(self.path)
        except RulesError as exc:
            logger.error("Crawl rules not reloaded, the rules before stay:\n%s", exc)
        else:
            logger.info("Crawl rules reloaded from %s: %d entries", self.path, len(self.rules))
        return self.rules


def _stamp(path: str) -> tuple:
    """What tells a file changed: its modification time and size (None when unreadable)."""
    try:
        st = os.stat(path)
    except OSError:
        return (None,)
    return (st.st_mtime_ns, st.st_size)
