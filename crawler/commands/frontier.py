"""``scrapy frontier [stats|clear]``: the frontier's numbers, one command away.

scrapy frontier                 finished, running or waiting (until when, and why); queue
                                sizes, hosts, leases (the oldest one's age), pages of the
                                last minute, URL-seen fill, counters, the busiest hosts
                                (queue length, interval, back-off, next due)
scrapy frontier --hosts 20      with the 20 busiest hosts (0: none)
scrapy frontier stats --json    the same as JSON
scrapy frontier clear --yes     delete every key of the crawl (CRAWL_NAME)
scrapy frontier pause           no worker is handed new work (what is in hand is finished
                                and stored) until ``resume``; ``--host H``: that host only
scrapy frontier resume          hand out work again (``--host H``: that host)
scrapy frontier drop --host H --yes  fetch nothing more of host H: its URLs are recorded as
                                not fetched (fate dropped); ``resume --host H`` undoes it
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import time

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.config.validation import exit_if_invalid
from crawler.frontier.connection import (
    crawl_exists,
    frontier_from_settings,
    known_crawls,
    redis_location,
    unreachable,
    uses_embedded,
)
from crawler.frontier.steering import host_key
from crawler.frontier.words import REASONS
from crawler.observe.livestats import waiting_lines
from crawler.observe.report import count as plural
from crawler.observe.report import deferred_lines, numbers, status_line, totals_text, when
from crawler.services import spill_from_settings
from crawler.urlstore.sqlite import sqlite_path


class Command(ScrapyCommand):
    requires_project = True
    default_settings = {"LOG_ENABLED": False}

    def syntax(self):
        return "[stats|clear|pause|resume|drop] [options]"

    def short_desc(self):
        return "Show where a crawl stands; pause, resume, drop a host, or clear it"

    def long_desc(self):
        return (
            "Actions on the crawl CRAWL_NAME (or --crawl). stats (the default): where the crawl stands "
            "(finished, running, waiting and why), its queues, hosts, leases, page budget and totals, the "
            "busiest hosts (--hosts N, --json, --watch SECONDS). pause [--host H]: no worker is handed new "
            "work (of host H) until resume; what is in hand is finished. resume [--host H]: hand out work "
            "again. drop --host H --yes: fetch nothing more of host H, its URLs recorded as not fetched "
            "(resume --host H undoes it). clear --yes: delete the crawl's frontier (--store: its SQLite "
            "UrlStore too). Exits 2 for a crawl that does not exist."
        )

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--crawl", metavar="NAME", help="crawl name (default: CRAWL_NAME)")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.add_argument("--yes", action="store_true", help="confirm clear")
        parser.add_argument(
            "--store", action="store_true", help="with clear: delete the crawl's SQLite UrlStore too (a fresh start)"
        )
        parser.add_argument(
            "--watch", type=float, metavar="SECONDS", help="print a progress line every SECONDS (Ctrl-C stops)"
        )
        parser.add_argument("--count", type=int, default=0, help="with --watch: stop after this many lines")
        parser.add_argument(
            "--host", metavar="H", help="with pause, resume or drop: this host (a host name, host:port, or a URL of it)"
        )
        parser.add_argument(
            "--hosts", type=int, default=10, metavar="N", help="show the N busiest hosts (default 10; 0: none)"
        )

    def process_options(self, args, opts):
        super().process_options(args, opts)
        exit_if_invalid(self.settings, "frontier")  # before anything starts or logs

    def run(self, args, opts):
        action = args[0] if args else "stats"
        if action not in ("stats", "clear", "pause", "resume", "drop") or len(args) > 1:
            raise UsageError(
                f"unknown action {' '.join(args)!r}: expected stats (the default), clear, pause, resume or drop"
            )
        if opts.host is not None and action not in ("pause", "resume", "drop"):
            raise UsageError("--host goes with pause, resume or drop")
        if action == "drop" and not opts.host:
            raise UsageError("drop takes --host H")
        if opts.crawl:
            self.settings.set("CRAWL_NAME", opts.crawl, priority="cmdline")
        if (opts.watch is not None and not opts.watch > 0) or opts.count < 0 or opts.hosts < 0:
            print(
                "frontier: --watch takes a number of seconds above 0, --count and --hosts a whole number >= 0",
                file=sys.stderr,
            )
            self.exitcode = 2
            return
        if opts.store and action != "clear":
            raise UsageError("--store goes with clear")
        try:
            store = store_files(self.settings) if opts.store else []
            if not crawl_exists(self.settings) and not store:  # (a read never creates a crawl)
                print(no_such_crawl(self.settings), file=sys.stderr)
                self.exitcode = 2
                return
            if action == "clear":
                self.exitcode = clear(self.settings, opts.yes, opts.store, store)
                return
            frontier = frontier_from_settings(self.settings)
            if action in ("pause", "resume", "drop"):
                self.exitcode = hold(frontier, action, opts.host, opts.yes)
                return
            if opts.watch:
                watch(frontier, opts.watch, opts.count)
                return
            stats = numbers(frontier, self.settings.getfloat("FRONTIER_MAX_WAIT"), opts.hosts)
        except KeyboardInterrupt:
            return
        except Exception as exc:  # Redis unreachable, bad settings: one clear line
            if unreachable(exc):
                print(f"frontier: cannot connect to Redis ({redis_location(self.settings)}): {exc}", file=sys.stderr)
            else:
                print(f"frontier: {type(exc).__name__}: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        if opts.json:
            print(json.dumps(stats, indent=2))
        else:
            print(format_stats(frontier.keys.crawl_name, stats, cluster=bool(self.settings.get("REDIS_CLUSTER_URL"))))


def hold(frontier, verb: str, host: str | None, yes: bool = False) -> int:
    """``frontier pause|resume [--host H]``, ``drop --host H --yes``: say what changed; the
    exit code (2: a host that is no host, a drop not confirmed)."""
    if host is not None:
        try:
            host = host_key(frontier, host)
        except ValueError as exc:
            print(f"frontier: --host: {exc}", file=sys.stderr)
            return 2
    name = frontier.keys.crawl_name
    what = f"host {host} of crawl {name!r}" if host else f"crawl {name!r}"
    if verb == "drop" and not yes:
        print(f"drop records every URL queued of {what} as not fetched, and fetches none of it; add --yes")
        return 2
    changed = getattr(frontier, verb)(host)
    if verb == "drop":
        print(
            f"dropped {what}: its URLs are recorded as not fetched (fate dropped) as workers take them"
            if changed
            else f"{what} was dropped (or given up) already"
        )
    elif not changed:
        print(f"{what} was {'paused' if verb == 'pause' else 'not paused'} already")
    elif verb == "pause":
        print(
            f"paused {what}: no worker is handed new work of it; what they hold is finished and stored "
            f"(scrapy frontier resume{f' --host {host}' if host else ''} goes on)"
        )
    else:
        print(f"resumed {what}")
    return 0


def store_files(settings) -> list[str]:
    """The files of the crawl's SQLite UrlStore that exist (none for Cassandra)."""
    if settings.get("URLSTORE_BACKEND").lower() != "sqlite":
        return []
    path = sqlite_path(settings)
    return [p for p in (path, f"{path}-wal", f"{path}-shm") if os.path.exists(p)]


def clear(settings, yes: bool, with_store: bool, store: list[str]) -> int:
    """``frontier clear``: the crawl's frontier keys, and with ``with_store`` its SQLite
    UrlStore's files; the exit code."""
    name = settings.get("CRAWL_NAME")
    if with_store and settings.get("URLSTORE_BACKEND").lower() != "sqlite":
        print(
            "frontier: --store clears an SQLite UrlStore; a Cassandra one is shared by every crawl of its keyspace "
            f"({settings.get('CASSANDRA_KEYSPACE')}): truncate its tables with cqlsh if that is meant",
            file=sys.stderr,
        )
        return 2
    what = f"every key of crawl {name!r}" + (" and its UrlStore" if with_store else "")
    if not yes:
        print(f"clear deletes {what}; add --yes")
        return 2
    deleted = chunks = 0
    if crawl_exists(settings):
        frontier = frontier_from_settings(settings)
        spill = spill_from_settings(settings, frontier, bind=False)  # (what this machine holds)
        if spill is not None:  # (before the keys that list the chunks go)
            chunks = spill.clear()
            spill.close()
        deleted = frontier.clear()
    if chunks:
        print(f"deleted {chunks} chunks of queued URLs from the spill store")
    if with_store:
        for path in store:
            os.remove(path)
        print(f"deleted {deleted} keys of crawl {name!r} and its UrlStore ({store[0] if store else 'none there'})")
        return 0
    kept = store_files(settings)
    print(
        f"deleted {deleted} keys of crawl {name!r}; its UrlStore{f' ({kept[0]})' if kept else ''} and archive are "
        "kept: a URL it holds as fetched within FETCH_POLICY_MAX_AGE is not fetched again (seeds included); "
        "clear --store --yes deletes the UrlStore too"
    )
    return 0


def no_such_crawl(settings, command: str = "frontier", also=(), then: str = "name one with --crawl NAME") -> str:
    """The line for a crawl name that has no frontier, naming the crawls there are
    (``also``: more of them, known otherwise), and the one it may be a typo of; ``then``:
    what to do about it."""
    where = f"under {settings.get('CRAWL_DIR')}" if uses_embedded(settings) else "in this Redis"
    name = settings.get("CRAWL_NAME")
    crawls = sorted({*known_crawls(settings), *also})
    there = f"crawls {where}: {', '.join(crawls)}" if crawls else f"no crawl {where} yet"
    near = difflib.get_close_matches(name, crawls, n=1, cutoff=0.6)
    guess = f"did you mean {near[0]}? " if near else ""
    return f"{command}: no crawl {name!r} {where} ({there}); {guess}{then}"


def _queued_where(s: dict, levels: str) -> str:
    """Where the queued URLs wait: the front queues by level (all in Redis), the inbox and the
    spill store (with windows, FRONTIER_HOST_WINDOW), hosts waiting on disk for a window."""
    parts = [f"front queues by level: {levels}"] if any(s["front_by_level"]) else []
    if s.get("inbox"):
        parts.append(f"{s['inbox']} in the inbox, to be written out")
    if s.get("spilled"):
        parts.append(f"{s['spilled']} on disk, in the spill store")
    if s.get("hosts_dormant"):
        parts.append(f"{s['hosts_dormant']} hosts waiting on disk for a window")
    return f"  ({'; '.join(parts)})" if parts else ""


def format_stats(name: str, s: dict, cluster: bool = False) -> str:
    """The numbers as ``scrapy frontier`` prints them; ``cluster``: the shards are a Redis
    Cluster's (REDIS_CLUSTER_URL), not servers of REDIS_URLS."""
    seen = s["seen"]
    levels = " / ".join(str(n) for n in s["front_by_level"])
    status = s["status"]
    where = ""
    if s.get("shards"):
        where = (
            f" (on a Redis Cluster, {s['shards']} shards)"
            if cluster
            else f" (on {s['shards']} Redis servers, REDIS_URLS)"
        )
    return "\n".join(
        [
            f"crawl            {name}{where}",
            f"status           {status_line(status, status['deferred'], workers=s.get('workers'))}",
            *(f"                 {line}" for line in deferred_lines(status["deferred"])),
            f"workers          {workers_line(s.get('workers'), s.get('published') or {})}",
            *(f"                 {line}" for line in waiting_lines(s.get("waiting") or [], s.get("read_at", 0) / 1000)),
            *steering_lines(s.get("paused"), s.get("budget")),
            f"queued           {s['queued']}{_queued_where(s, levels)}",
            f"hosts            {s['hosts_with_urls']} with URLs queued: {s['hosts_queued']} ready ({s['hosts_due']} due now), "
            f"{s['hosts_in_flight']} downloading, {s['hosts_seen']} handed out so far",
            f"leased           {s['leased']} ({s['in_flight']} downloading){_oldest(s)}"
            + (f"; {s['given_back']} given back, queued again at the next pop" if s["given_back"] else ""),
            f"pushed/popped    {s['pushed']} / {s['popped']}",
            f"acked            {s['acked']}",
            f"last minute      {plural(s['acked_last_minute'], 'page')} done (acknowledged, all workers)",
            f"expired leases   {s['expired']} (abandoned {s['abandoned']})",
            f"retries          {plural(s['retries_delayed'], 'URL')} waiting for their next try; "
            f"{plural(s['hosts_slowed'], 'host')} slowed down by failures"
            + "".join(f"{', ' if i else ' ('}{h} x{f:g}" for i, (h, f) in enumerate(s.get("slowed", [])))
            + (")" if s.get("slowed") else ""),
            f"URL-seen         {plural(seen['urls'], 'URL')} in {_generations(seen)}, {seen['bytes']} bytes of fingerprints"
            f" (in Redis {seen['kind']}), "
            f"fill {', '.join(f'{100 * f:.2f}%' for f in seen['fill'])}, "
            f"est. false-positive rate {seen['false_positive_rate']:.2e}",
            f"pages (all)      {totals_text(s.get('totals') or {})}",
            *busiest_lines(s.get("busiest")),
            *busiest_address_lines(s.get("busiest_addresses")),
        ]
    )


def _generations(seen: dict) -> str:
    """URL-seen's generations: ``1 generation``; sharded, each shard has its own filter:
    ``16 shards (1 generation each)`` or ``(1 to 2 generations each)``."""
    per_shard = seen.get("shard_generations")
    if not per_shard:
        return plural(seen["generations"], "generation")
    low, high = min(per_shard), max(per_shard)
    each = plural(low, "generation") if low == high else f"{low} to {high} generations"
    return f"{plural(len(per_shard), 'shard')} ({each} each)"


def steering_lines(paused: dict | None, budget: dict | None) -> list[str]:
    """What the operator holds (the crawl, hosts) and the page budget, when there is any."""
    lines = []
    if paused and (paused["crawl"] or paused["hosts"]):
        hosts = sorted(paused["hosts"])
        held = [f"the crawl since {when(paused['crawl'])}"] if paused["crawl"] else []
        if hosts:
            held.append(f"{plural(len(hosts), 'host')} ({', '.join(hosts[:5])}{', ...' if len(hosts) > 5 else ''})")
        lines.append(f"paused           {' and '.join(held)}: scrapy frontier resume [--host H] goes on")
    dropped = (paused or {}).get("dropped") or {}
    if dropped:
        hosts = sorted(dropped)
        given_up = sum(1 for _, reason in dropped.values() if reason == "down")
        lines.append(
            f"dropped          {plural(len(hosts), 'host')} ({', '.join(hosts[:5])}{', ...' if len(hosts) > 5 else ''}; "
            f"{given_up} given up after HOST_GIVE_UP_AFTER down): their URLs are recorded, not fetched"
        )
    if budget and budget["max"]:
        spent = (
            "spent: nothing more is handed out"
            if budget["spent"]
            else f"{budget['max'] - budget['done'] - budget['leased']} left"
        )
        lines.append(
            f"page budget      {budget['done']} handled + {budget['leased']} in hand of CRAWL_MAX_PAGES {budget['max']}; {spent}"
        )
    return lines


def workers_line(workers: int | None, published: dict) -> str:
    """Workers alive, and the settings they run with (as they published them)."""
    alive = "unknown" if workers is None else f"{workers} alive"
    if not published:
        return f"{alive} (none has published its settings yet)"
    limit = published.get("host_max_in_flight")
    return (
        f"{alive}; they run with a host interval of {published.get('host_interval', 0):.2f} s, "
        f"{'no limit' if limit == 0 else limit} in flight per host, max wait {published.get('max_wait', 0):g} s, "
        f"profile {published.get('profile', '?')}"
    )


def _oldest(s: dict) -> str:
    age = s.get("oldest_lease_age")
    if age is None:
        return ""
    if age > s["lease_seconds"]:
        return f"; the oldest expired {age - s['lease_seconds']:.0f} s ago (its worker stopped renewing)"
    return f"; the oldest taken or renewed {age:.0f} s ago"


def busiest_lines(busiest: dict | None, now: float | None = None) -> list[str]:
    """The busiest hosts as a table: queued URLs, interval, back-off, next due."""
    if not busiest or not busiest["hosts"]:
        return []
    hosts = busiest["hosts"]
    scope = "" if busiest["complete"] else f" (of the first {busiest['looked_at']} hosts with a queue)"
    rows = []
    for h in hosts:
        interval = f"{h['interval']:.2f} s" + (f" (x{h['slowed']:g})" if h["slowed"] > 1 else "")
        if h["backoff"]:
            b = h["backoff"]
            state = f"{REASONS.get(b['reason'], b['reason'])} until {when(b['until'], now)} (level {b['level']})"
        elif h.get("on_disk"):
            start = h["next_due"] / 1000 > (time.time() if now is None else now)
            state = f"on disk until {when(h['next_due'], now)}" if start else "on disk, waiting for a window"
        elif h["next_due"] is None:
            state = f"{h['in_flight']} downloading; due once one lands"
        else:
            state = f"due {when(h['next_due'], now)}"
        rows.append((h["host"], str(h["queued"]), interval, state))
    head = ("host", "queued", "interval", "back-off / next due")
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(3)]
    lines = [f"busiest hosts    by URLs queued{scope}"]
    for host, queued, interval, state in [head, *rows]:
        lines.append(f"  {host:<{widths[0]}}  {queued:>{widths[1]}}  {interval:>{widths[2]}}  {state}")
    return lines


def busiest_address_lines(busiest: dict | None) -> list[str]:
    """FRONTIER_ADDRESS_POLITENESS: the busiest address classes as a table: their hosts,
    URLs queued, hosts waiting for the class, downloads in flight against the cap, the
    class's rate (one request an interval) and the URLs handed out so far."""
    if not busiest or not busiest["classes"]:
        return []
    scope = "" if busiest["complete"] else f" (of {busiest['looked_at']} hosts' addresses)"
    head = ("address (class)", "hosts", "queued", "waiting", "in flight", "rate", "handed out")
    rows = []
    for c in busiest["classes"]:
        shown = ", ".join(c["addresses"])
        name = (
            c["class"]
            if c["addresses"] == [c["class"]]
            else f"{c['class']} ({shown}{', ...' if len(c['addresses']) > 2 else ''})"
        )
        rate = f"{1 / c['interval']:.3g}/s" if c["interval"] > 0 else "no limit"
        cap = f"/{c['cap']}" if c["cap"] else ""
        rows.append(
            (
                name,
                str(c["hosts"]),
                str(c["queued"]),
                str(c["parked"]),
                f"{c['in_flight']}{cap}",
                rate,
                str(c["handed_out"]),
            )
        )
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    lines = [f"busiest addresses by URLs queued{scope}"]
    for row in [head, *rows]:
        lines.append(
            "  " + "  ".join(f"{v:<{widths[0]}}" if i == 0 else f"{v:>{widths[i]}}" for i, v in enumerate(row))
        )
    return lines


def watch(frontier, every: float, count: int = 0) -> None:
    """Print a progress line every ``every`` seconds: queue sizes, leases, and the
    URLs handed out and acknowledged per second (all workers together)."""
    last, shown = None, 0
    while not count or shown < count:
        s, now = frontier.stats(), time.monotonic()
        rates = ""
        if last is not None:
            elapsed = max(now - last[0], 1e-9)
            rates = (
                f", {(s['popped'] - last[1]['popped']) / elapsed:.1f} handed out/s,"
                f" {(s['acked'] - last[1]['acked']) / elapsed:.1f} pages done/s"
            )
        print(
            f"{time.strftime('%H:%M:%S')} queued {s['queued']} ({s['hosts_due']} hosts due of "
            f"{s['hosts_queued']}), leased {s['leased']}, seen {s['seen']['urls']}, "
            f"expired {s['expired']}{rates}",
            flush=True,
        )
        last, shown = (now, s), shown + 1
        if not count or shown < count:
            time.sleep(every)
