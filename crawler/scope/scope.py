"""The crawl's scope as one value (no I/O): its allowed domains and URL prefixes (the
spider's ``-a allowed_domains`` / ``allowed_prefixes``, or CRAWL_ALLOWED_DOMAINS /
CRAWL_ALLOWED_PREFIXES), its crawl rules (CRAWL_RULES, crawler/scope/rules.py), its trap
guards (``traps.py``) and its network guard (NETWORK_GUARD_ALLOW, ``addresses.py``).

``verdict(url, depth, guard)`` is the one answer to "is this URL in the crawl, and if not,
why", in the words of ``reasons.py``: the frontier asks it of every URL offered (seeds,
links, submissions, recrawls; Frontier.prepare), before anything reaches Redis; only the
host's page quota is decided there, in PUSH. ``guard``: a URL from outside the crawl (a
seed, a submission) is held to the network guard at once, by the address written in it;
a link is held to it at fetch, where its name is resolved and its refusal recorded
(crawler/middlewares/netguard.py). ``refusal(url)`` is the same verdict with why and what
would let the URL in (what ``scrapy submit`` prints). ``within(url)`` is the domains and
prefixes alone (a spider run without the frontier). ``fields()`` / ``from_fields()`` are
its form in the crawl's Redis (``publish_scope``, crawler/frontier/submit.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from crawler.scope import reasons
from crawler.scope.addresses import AddressPolicy, allow_network
from crawler.scope.reasons import INVALID, OUT_OF_SCOPE, PRIVATE_ADDRESS, REJECTED
from crawler.scope.rules import EMPTY, CrawlRules
from crawler.scope.traps import TrapGuard
from crawler.urls import InvalidURL, url_host


@dataclass(frozen=True)
class Refusal:
    reason: str  # its code (reasons.py): OUT_OF_SCOPE, PRIVATE_ADDRESS, REJECTED, trap:<guard>, INVALID
    why: str  # what refused it, e.g. "127.0.0.2 is not in the allowed domains (127.0.0.6)"
    hint: str  # what would let it in, e.g. "-a allowed_domains=127.0.0.6,127.0.0.2"

    @property
    def words(self) -> str:
        return reasons.words(self.reason)

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
    traps: TrapGuard = field(default_factory=TrapGuard)
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
            traps=TrapGuard.from_settings(settings),
        )

    def with_rules(self, rules: CrawlRules) -> CrawlScope:
        return CrawlScope(self.domains, self.prefixes, rules, self.guard_allow, self.guard, self.traps)

    def verdict(self, url: str, depth: int = 0, guard: bool = False) -> str | None:
        """Why the normalized ``url``, found at ``depth``, is not in the crawl (a code of
        reasons.py), or None: no usable host, the network guard (``guard``: by the address
        written in it), the allowed domains and prefixes, the crawl rules, the trap guards."""
        try:
            host = url_host(url)
        except InvalidURL:
            return INVALID
        return self.host_verdict(host, guard) or self.url_verdict(url, depth)

    def host_verdict(self, host: str, guard: bool = False) -> str | None:
        """The part of ``verdict`` its host decides (``host`` as url_host gives it): the
        network guard and the allowed domains; the same for every URL of the host."""
        if guard and self._policy is not None and self._policy.literal_refusal("", host):
            return PRIVATE_ADDRESS
        if self.domains and not in_domains(host, self.domains):
            return OUT_OF_SCOPE
        return None

    def url_verdict(self, url: str, depth: int = 0) -> str | None:
        """The rest of ``verdict``: the allowed prefixes, the crawl rules, the trap guards."""
        if self.prefixes and not url.startswith(self.prefixes):
            return OUT_OF_SCOPE
        if not self.rules.empty and not self.rules.decide(url).accepted:
            return REJECTED
        trap = self.traps.check(url, depth)
        return reasons.trap(trap) if trap else None

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

    def refusal(self, url: str, depth: int = 0) -> Refusal | None:
        """``verdict(url, depth, guard=True)`` with why and what would let the URL in
        (None: it is in the crawl)."""
        code = self.verdict(url, depth, guard=True)
        if code is None:
            return None
        if code == INVALID:
            return Refusal(INVALID, f"{url} has no usable host", "give its full URL, with its host")
        if code == PRIVATE_ADDRESS:
            address, why = self._policy.literal_refusal(url)
            allow = ",".join((*self.guard_allow, allow_network(address)))
            return Refusal(
                PRIVATE_ADDRESS,
                f"{address} is a {why} address, which the network guard refuses",
                f"run the workers with -s NETWORK_GUARD_ALLOW={allow}",
            )
        host = url_host(url)
        if code == OUT_OF_SCOPE and self.domains and not in_domains(host, self.domains):
            domains = ",".join(self.domains)
            return Refusal(
                OUT_OF_SCOPE,
                f"{host} is not in the crawl's allowed domains ({domains})",
                f"run the workers with -a allowed_domains={domains},{host} (or CRAWL_ALLOWED_DOMAINS)",
            )
        if code == OUT_OF_SCOPE:
            prefixes = ",".join(self.prefixes)
            return Refusal(
                OUT_OF_SCOPE,
                f"it starts with none of the crawl's allowed prefixes ({prefixes})",
                "run the workers with -a allowed_prefixes= naming one of its prefixes (or CRAWL_ALLOWED_PREFIXES)",
            )
        if code == REJECTED:
            decision = self.rules.decide(url)
            where = f"{self.rules.path or 'CRAWL_RULES'}:{decision.line}"
            return Refusal(
                REJECTED,
                f"{where}: {decision.rule}",
                f"accept it in the rules file before line {decision.line}",
            )
        guard = code.partition(":")[2]
        return Refusal(code, f"its {guard} is past the trap guard's limit", "see the FRONTIER_MAX_* settings")

    def fields(self) -> dict[str, str]:
        """Its form in Redis (a hash's fields)."""
        return {
            "domains": json.dumps(list(self.domains)),
            "prefixes": json.dumps(list(self.prefixes)),
            "rules": self.rules.text,
            "rules_path": self.rules.path,
            "guard": "1" if self.guard else "0",
            "guard_allow": json.dumps(list(self.guard_allow)),
            "traps": json.dumps(asdict(self.traps)),
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
            traps=_traps(text.get("traps")),
        )


def _traps(value: str | None) -> TrapGuard:
    limits = json.loads(value) if value else {}
    try:
        return TrapGuard(**{k: int(v) for k, v in limits.items()})
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"not the trap guards' limits: {value!r}") from exc


def _strings(value: str | None) -> list[str]:
    items = json.loads(value) if value else []
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError(f"not a list of strings: {value!r}")
    return items
