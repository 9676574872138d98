"""Where a crawl stands: the numbers of ``scrapy frontier`` (and of ``scrapy serve``'s
frontier endpoint) read in one place, and in words the status line and the deferred part
of a worker's closing summary (pure formatting of Frontier.outlook and
Frontier.deferred)."""

from __future__ import annotations

import time

from crawler.frontier.frontier import FINISHED, REASONS, RUNNING

_ORDER = ("robots", "down", "throttled", "retry", "interval")


def numbers(frontier, max_wait: float, hosts: int = 10) -> dict:
    """The frontier's numbers as ``scrapy frontier stats --json`` prints them: its stats,
    ``status`` (finished, running or waiting, and what is deferred), ``slowed`` hosts, and
    the ``hosts`` busiest hosts (0: left out)."""
    stats = frontier.stats()
    outlook = frontier.outlook(max_wait)
    stats["status"] = {**outlook, "deferred": frontier.deferred(max_wait)}
    stats["slowed"] = frontier.slowed()
    if hosts:
        stats["busiest"] = frontier.busiest(hosts)
    return stats


def when(ms: int | None, now: float | None = None) -> str:
    """``12:34:56 (in 3 min)`` for a time in ms."""
    if ms is None:
        return "never"
    now = time.time() if now is None else now
    seconds = ms / 1000 - now
    clock = time.strftime("%H:%M:%S", time.localtime(ms / 1000))
    if seconds <= 0:
        return f"{clock} (now)"
    if seconds < 90:
        return f"{clock} (in {seconds:.0f} s)"
    if seconds < 5400:
        return f"{clock} (in {seconds / 60:.0f} min)"
    return f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(ms / 1000))} (in {seconds / 3600:.1f} h)"


def status_line(outlook: dict, deferred: dict, now: float | None = None) -> str:
    """One line: finished, running, or waiting until when and why."""
    if outlook["state"] == FINISHED:
        return "finished: nothing queued, nothing leased"
    if outlook["state"] == RUNNING:
        return f"running: {count(outlook['queued'], 'URL')} queued, {outlook['leased']} leased"
    why = "; ".join(_reason_text(r, deferred[r]) for r in _ordered(deferred)) or "hosts not due yet"
    return f"waiting until {when(outlook['next_due'], now)}: {count(outlook['queued'], 'URL')} queued ({why})"


def deferred_lines(deferred: dict, now: float | None = None) -> list[str]:
    """One line per reason: hosts, URLs, the earliest due time, example hosts."""
    return [
        f"{REASONS.get(r, r)}: {count(deferred[r]['hosts'], 'host')}, {count(deferred[r]['urls'], 'URL')}, "
        f"first due {when(deferred[r]['due'], now)} (e.g. {', '.join(deferred[r]['examples'])})"
        for r in _ordered(deferred)
    ]


def _ordered(deferred: dict) -> list[str]:
    return sorted(deferred, key=lambda r: (_ORDER.index(r) if r in _ORDER else len(_ORDER), r))


def _reason_text(reason: str, d: dict) -> str:
    return f"{REASONS.get(reason, reason)}: {count(d['hosts'], 'host')}, {count(d['urls'], 'URL')}"


def count(n: int, word: str) -> str:
    """``n`` and ``word``, plural unless n is 1: "1 URL", "3 hosts"."""
    return f"{n} {word}" + ("" if n == 1 else "s")
