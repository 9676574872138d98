"""Where a crawl stands: the numbers of ``scrapy frontier`` (and of ``scrapy serve``'s
frontier endpoint) read in one place, and in words the status line and the deferred part
of a worker's closing summary (pure formatting of Frontier.outlook and
Frontier.deferred)."""

from __future__ import annotations

import time

from crawler.frontier.words import FINISHED, PAUSED, REASONS, RUNNING
from crawler.observe.livestats import live_workers, read_published, read_tally, read_waiting
from crawler.scope import reasons

_ORDER = ("paused", "robots", "down", "throttled", "retry", "interval")
IDLE, STOPPED = "idle", "stopped"  # (a viewer's states beside the frontier's own)


def numbers(frontier, max_wait: float, hosts: int = 10) -> dict:
    """The frontier's numbers as ``scrapy frontier stats --json`` prints them: its stats,
    ``status`` (``crawl_state``, and what is deferred), ``slowed`` hosts, the ``hosts``
    busiest hosts (0: left out), the ``workers`` alive and the settings they ``published``
    (their host interval and max wait count, not the viewer's own settings), what the
    operator ``paused`` (the crawl, hosts), the page ``budget`` (the workers' CRAWL_MAX_PAGES
    as they published it) and the crawl's ``totals`` over its workers (their tally)."""
    read_at = int(time.time() * 1000)  # when these are read (ms): what "due now" means beside them
    published = read_published(frontier.redis, frontier.keys)
    if "host_interval" in published:
        frontier.host_interval_ms = int(published["host_interval"] * 1000)
    if "max_pages" in published:  # the workers' page budget (CRAWL_MAX_PAGES), not the viewer's
        frontier.max_pages = published["max_pages"]
    max_wait = published.get("max_wait", max_wait)
    stats = frontier.stats()
    outlook = frontier.outlook(max_wait)
    workers = live_workers(frontier.redis, frontier.keys, time.time())
    stats["status"] = {
        **outlook,
        "state": crawl_state(outlook, workers),
        "deferred": frontier.deferred(max_wait),
    }
    stats["workers"] = workers
    stats["waiting"] = read_waiting(frontier.redis, frontier.keys, time.time())
    stats["published"] = published
    stats["slowed"] = frontier.slowed()
    stats["paused"] = frontier.paused()
    stats["budget"] = frontier.budget()
    stats["totals"] = read_tally(frontier.redis.hgetall(frontier.keys.tally))
    stats["read_at"] = read_at
    if hosts:
        stats["busiest"] = frontier.busiest(hosts)
        if frontier.by_address:
            stats["busiest_addresses"] = frontier.busiest_addresses(hosts)
    return stats


def crawl_state(outlook: dict, workers: int) -> str:
    """Where the crawl stands, from the frontier's outlook and the workers alive:
    ``finished`` (nothing queued or leased, no worker), ``idle`` (workers alive, nothing
    queued or leased: they wait for work), ``stopped`` (work left, no worker alive),
    ``running`` or ``waiting`` (workers alive; nothing due within the max wait), or
    ``paused`` (by the operator, whether workers are alive or not)."""
    if outlook["state"] == FINISHED:
        return IDLE if workers and not outlook.get("budget_spent") else FINISHED
    if outlook["state"] == PAUSED:
        return PAUSED
    if not workers:
        return STOPPED
    return outlook["state"]


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


def status_line(outlook: dict, deferred: dict, now: float | None = None, workers: int | None = None) -> str:
    """One line: finished, idle, stopped, running, or waiting until when and why
    (``workers``: those alive, when known)."""
    alive = "" if workers is None else f"; {count(workers, 'worker')} alive"
    if outlook["state"] == FINISHED and outlook.get("budget_spent"):
        return (
            f"finished: the page budget (CRAWL_MAX_PAGES = {outlook.get('max_pages')}) is spent; "
            f"{count(outlook['queued'], 'URL')} left queued"
        )
    if outlook["state"] == FINISHED:
        return "finished: nothing queued, nothing leased"
    if outlook["state"] == PAUSED:
        return (
            f"paused by the operator since {when(outlook.get('paused_at'), now)}: {count(outlook['queued'], 'URL')} "
            f"queued, {outlook['leased']} leased (being finished){alive}; scrapy frontier resume goes on"
        )
    if outlook["state"] == IDLE:
        return f"idle: nothing queued, nothing leased{alive}, waiting for work"
    if outlook["state"] == STOPPED:
        return (
            f"stopped: {count(outlook['queued'], 'URL')} queued, {outlook['leased']} leased, no worker alive "
            "(start one to go on)"
        )
    if outlook["state"] == RUNNING:
        return f"running: {count(outlook['queued'], 'URL')} queued, {outlook['leased']} leased{alive}"
    why = "; ".join(_reason_text(r, deferred[r]) for r in _ordered(deferred)) or "hosts not due yet"
    return f"waiting until {when(outlook['next_due'], now)}: {count(outlook['queued'], 'URL')} queued ({why}){alive}"


def deferred_lines(deferred: dict, now: float | None = None) -> list[str]:
    """One line per reason: hosts, URLs, the earliest due time, example hosts."""
    return [
        f"{REASONS.get(r, r)}: {count(deferred[r]['hosts'], 'host')}, {count(deferred[r]['urls'], 'URL')}, "
        + (f"first due {when(deferred[r]['due'], now)}" if deferred[r]["due"] is not None else "until resumed")
        + f" (e.g. {', '.join(deferred[r]['examples'])})"
        for r in _ordered(deferred)
    ]


def _ordered(deferred: dict) -> list[str]:
    return sorted(deferred, key=lambda r: (_ORDER.index(r) if r in _ORDER else len(_ORDER), r))


def _reason_text(reason: str, d: dict) -> str:
    return f"{REASONS.get(reason, reason)}: {count(d['hosts'], 'host')}, {count(d['urls'], 'URL')}"


def count(n: int, word: str) -> str:
    """``n`` and ``word``, plural unless n is 1: "1 URL", "3 hosts"."""
    return f"{n} {word}" + ("" if n == 1 else "s")


FATE = "pages/fate/"  # the stats (and tally fields) of pages by fate
KEPT = ("fetched", "duplicate", "not_modified")  # fates that are a page kept, not a failure


def fates_of(counters: dict) -> dict[str, int]:
    """Pages by fate, from a worker's stats or the crawl's tally (``pages/fate/<fate>``)."""
    return {k[len(FATE) :]: int(v) for k, v in counters.items() if k.startswith(FATE)}


def pages_text(fates: dict[str, int], near: int) -> str:
    """``1873 pages: 1790 fetched (14 of them near copies), 12 exact copies; not fetched
    or failed: connection_error 3, server_error 6``."""
    failures = ", ".join(f"{k} {v}" for k, v in sorted(fates.items()) if k not in KEPT and v)
    unchanged = f", {fates['not_modified']} not modified (304)" if fates.get("not_modified") else ""
    return (
        f"{count(sum(fates.values()), 'page')}: {fates.get('fetched', 0)} fetched ({near} of them near copies), "
        f"{fates.get('duplicate', 0)} exact copies"
        + unchanged
        + (f"; not fetched or failed: {failures}" if failures else "")
    )


def totals_text(totals: dict) -> str:
    """The crawl's totals over all its workers, from the tally (crawler/observe/livestats.py):
    pages by fate, and the URLs kept out of the frontier and why (crawler/scope/reasons.py:
    out of scope, the crawl rules, trap guards, host quotas...; seeds and submissions
    refused)."""
    codes = {k[len("frontier/") :].replace("/", ":", 1): v for k, v in totals.items() if k.startswith("frontier/")}
    kept_out = reasons.kept_out(codes)
    for key, what in (("seeds/refused", "seeds refused"), ("seeds/invalid", "seed lines invalid")):
        if totals.get(key):
            kept_out.append(f"{what} {totals[key]}")
    refused = sum(v for k, v in totals.items() if k.startswith("submit/refused/"))
    if refused:
        kept_out.append(f"submissions refused {refused}")
    text = pages_text(fates_of(totals), totals.get("contentseen/near", 0))
    return text + ("; URLs not admitted: " + ", ".join(kept_out) if kept_out else "")
