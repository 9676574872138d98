"""Why a URL is kept out of the crawl: the one vocabulary every part speaks of it in.

A code is what the frontier's ``put`` answers for a URL it did not admit, what the stats
count (``frontier/<code>``, ``seeds``' ``refused_by``, ``submit/refused/<code>``), what
``scrapy submit`` prints and what the crawl's summary lists (``words``). The scope
(``scope.py``) decides all of them but the host's page quota, which PUSH counts in Redis.
"""

from __future__ import annotations

INVALID = "invalid"  # no usable host
PRIVATE_ADDRESS = "network_guard"  # an address the network guard refuses (NETWORK_GUARD_ALLOW)
OUT_OF_SCOPE = "out_of_scope"  # outside the allowed domains or URL prefixes
REJECTED = "rejected"  # by the crawl rules (CRAWL_RULES)
TRAP = "trap"  # a trap guard: ``trap:<guard>`` (depth, url_length, repeated_segments, ...)
HOST_FULL = "host_full"  # its host holds FRONTIER_HOST_MAX_PAGES URLs already

WORDS = {
    INVALID: "invalid",
    PRIVATE_ADDRESS: "private address",
    OUT_OF_SCOPE: "out-of-scope",
    REJECTED: "rejected by the crawl rules",
    TRAP: "trap guards",
    HOST_FULL: "host full",
}
ORDER = (INVALID, PRIVATE_ADDRESS, OUT_OF_SCOPE, REJECTED, TRAP, HOST_FULL)  # as the summary lists them


def trap(guard: str) -> str:
    """The code of a URL a trap guard refused."""
    return f"{TRAP}:{guard}"


def kind(code: str) -> str:
    """The reason without its detail: ``trap`` for ``trap:depth``."""
    return code.partition(":")[0]


def words(code: str) -> str:
    """How a person reads it: ``out-of-scope``, ``trap guards (depth)``."""
    base, _, detail = code.partition(":")
    said = WORDS.get(base, base.replace("_", " "))
    return f"{said} ({detail})" if detail else said


def stat(prefix: str, code: str) -> str:
    """The stats key counting it under ``prefix``: ``frontier/trap/depth``."""
    return f"{prefix}/{code.replace(':', '/')}"


def kept_out(counts: dict[str, int]) -> list[str]:
    """The summary's words for URLs not admitted, by code (``frontier/<code>`` counts read
    back as codes): ``out-of-scope 3``, ``trap guards 7 (depth 5, url_length 2)``."""
    out = []
    for reason in ORDER:
        if reason == TRAP:
            traps = {c.partition(":")[2]: n for c, n in counts.items() if kind(c) == TRAP and n}
            if traps:
                detail = ", ".join(f"{k} {v}" for k, v in sorted(traps.items()))
                out.append(f"{WORDS[TRAP]} {sum(traps.values())} ({detail})")
        elif counts.get(reason):
            out.append(f"{WORDS[reason]} {counts[reason]}")
    return out
