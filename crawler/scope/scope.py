"""The crawl's scope as one value (no I/O): its allowed domains and URL prefixes (the
spider's ``-a allowed_domains`` / ``allowed_prefixes``, or CRAWL_ALLOWED_DOMAINS /
CRAWL_ALLOWED_PREFIXES), its crawl rules (CRAWL_RULES, crawler/scope/rules.py) and its
network guard (NETWORK_GUARD_ALLOW, ``addresses.py``).

``within(url)`` is the spider's test of a link (domains and prefixes: the frontier applies
the rules, the guard the fetch); ``refusal(url)`` is the whole test a URL that comes in
from outside (a submission) is held to at once: None, or a ``Refusal`` saying why and
what would let the URL in. ``fields()`` / ``from_fields()`` are its form in the crawl's
Redis (``publish_scope``, crawler/frontier/submit.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from crawler.scope.addresses import AddressPolicy, allow_network
from crawler.scope.rules import EMPTY, CrawlRules
from crawler.urls import InvalidURL, url_host

OUT_OF_SCOPE = "out-of-scope"  # outside the allowed domains or prefixes, or rejected by the crawl rules
PRIVATE_ADDRESS = "private address"  # an address the network guard refuses


@dataclass(frozen=True)
class Refusal:
    reason: str  # OUT_OF_SCOPE or PRIVATE_ADDRESS
    why: str  # what refused it, e.g. "127.0.0.2 is not in the allowed domains (127.0.0.6)"
    hint: str  # what would let it in, e.g. "-a allowed_domains=127.0.0.6,127.0.0.2"

    def __str__(self) -> str:
        return f"{self.why}; to crawl it: {self.hint}"


def in_domains(host: str, domains) -> bool:
    """``host`` is one of ``domains`` or a subdomain of one."""
    return any(host == d or host.endswith("." + d) for d in domains)


@dataclass(frozen=True)
class CrawlScope:
    domains: tuple[str, ...] = ()  # lowercase, no leading dot; empty: any
    prefixes: tuple[str, ...] = ()  # empty: any
    rules: CrawlRules = EMPTY
    guard_allow: tuple[str, ...] = ()  # NETWORK_GUARD_ALLOW's networks
    guard: bool = True  # NETWORK_GUARD_ENABLED
    _policy: AddressPolicy | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "domains", tuple(d.lower().lstrip(".") for d in self.domains if d))
        object.__setattr__(self, "prefixes", tuple(p for p in self.prefixes if p))
        object.__setattr__(self, "_policy", AddressPolicy(self.guard_allow) if self.guard else None)

    @classmethod
    def from_settings(cls, settings, domains=None, prefixes=None, rules: CrawlRules | None = None) -> CrawlScope:
        """The scope of these settings; ``domains`` and ``prefixes`` (the spider's
        arguments) over CRAWL_ALLOWED_DOMAINS and CRAWL_ALLOWED_PREFIXES, ``rules`` over
        CRAWL_RULES's file."""
        if rules is None:
            path = settings.get("CRAWL_RULES")
            rules = CrawlRules.from_file(path) if path else EMPTY
        return cls(
            domains=tuple(domains or settings.getlist("CRAWL_ALLOWED_DOMAINS")),
            prefixes=tuple(prefixes or settings.getlist("CRAWL_ALLOWED_PREFIXES")),
            rules=rules,
            guard_allow=tuple(settings.getlist("NETWORK_GUARD_ALLOW")),
            guard=settings.getbool("NETWORK_GUARD_ENABLED"),
        )

    def with_rules(self, rules: CrawlRules) -> CrawlScope:
        return CrawlScope(self.domains, self.prefixes, rules, self.guard_allow, self.guard)

    def within(self, url: str) -> bool:
        """``url`` (normalized) is within the allowed domains and prefixes."""
        if self.prefixes and not url.startswith(self.prefixes):
            return False
        if not self.domains:
            return True
        try:
            return in_domains(url_host(url), self.domains)
        except InvalidURL:
            return False

    def refusal(self, url: str) -> Refusal | None:
        """Why the normalized ``url`` is not in the crawl (None: it is): the network guard
        (an address written in the URL), the allowed domains and prefixes, the rules."""
        refused = self._policy.literal_refusal(url) if self._policy is not None else None
        if refused:
            address, why = refused
            allow = ",".join((*self.guard_allow, allow_network(address)))
            return Refusal(
                PRIVATE_ADDRESS,
                f"{address} is a {why} address, which the network guard refuses",
                f"run the workers with -s NETWORK_GUARD_ALLOW={allow}",
            )
        if self.domains:
            try:
                host = url_host(url)
            except InvalidURL:
                host = ""
            if not in_domains(host, self.domains):
                domains = ",".join(self.domains)
                return Refusal(
                    OUT_OF_SCOPE,
                    f"{host or url} is not in the crawl's allowed domains ({domains})",
                    f"run the workers with -a allowed_domains={domains},{host} (or CRAWL_ALLOWED_DOMAINS)",
                )
        if self.prefixes and not url.startswith(self.prefixes):
            prefixes = ",".join(self.prefixes)
            return Refusal(
                OUT_OF_SCOPE,
                f"it starts with none of the crawl's allowed prefixes ({prefixes})",
                "run the workers with -a allowed_prefixes= naming one of its prefixes (or CRAWL_ALLOWED_PREFIXES)",
            )
        decision = self.rules.decide(url)
        if not decision.accepted:
            where = f"{self.rules.path or 'CRAWL_RULES'}:{decision.line}"
            return Refusal(
                OUT_OF_SCOPE,
                f"rejected by the crawl rules ({where}: {decision.rule})",
                f"accept it in the rules file before line {decision.line}",
            )
        return None

    def fields(self) -> dict[str, str]:
        """Its form in Redis (a hash's fields)."""
        return {
            "domains": json.dumps(list(self.domains)),
            "prefixes": json.dumps(list(self.prefixes)),
            "rules": self.rules.text,
            "rules_path": self.rules.path,
            "guard": "1" if self.guard else "0",
            "guard_allow": json.dumps(list(self.guard_allow)),
        }

    @classmethod
    def from_fields(cls, fields: dict) -> CrawlScope:
        """The scope ``fields()`` gave (keys and values as str or bytes); ValueError when
        they do not make one."""
        text = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in fields.items()
        }
        rules = CrawlRules.parse(text["rules"], text.get("rules_path") or "CRAWL_RULES") if text.get("rules") else EMPTY
        return cls(
            domains=tuple(_strings(text.get("domains"))),
            prefixes=tuple(_strings(text.get("prefixes"))),
            rules=rules,
            guard_allow=tuple(_strings(text.get("guard_allow"))),
            guard=text.get("guard", "1") != "0",
        )


def _strings(value: str | None) -> list[str]:
    items = json.loads(value) if value else []
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError(f"not a list of strings: {value!r}")
    return items
