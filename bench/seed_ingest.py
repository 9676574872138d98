"""Benchmark: seed-file ingestion (crawler.seeds.files.ingest) into a real Redis.

    python -m bench.seed_ingest                       # 1,000,000 lines
    python -m bench.seed_ingest --lines 200000 --batch 1000 --gz
    python -m bench.seed_ingest --profile -s FRONTIER_SEEN_ERROR_RATE=1e-4

A generated seed file of N lines over many hosts (tracking parameters, priorities, ~2%
duplicates, ~1% invalid lines, comments) is ingested into a fresh crawl with the
project's frontier settings (with its spill, FRONTIER_HOST_WINDOW, in a temporary CRAWL_DIR,
as `scrapy seed` runs it), whose keys and chunks are deleted at the end. Figures: URLs/s (the goal:
100,000 on two cores; BENCHMARKS says how far it is) and the push script's Redis time a URL (INFO commandstats: approximate if other
clients share the Redis); with windows, each run beside the same lines sorted by host and
pushed as read (SEED_GROUP_URLS=0: what grouping aims at), as a ratio; then each stage timed
alone on --stages lines.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gzip
import itertools
import os
import pstats
import random
import sys
import tempfile
import time
import uuid
from functools import partial

import redis
from scrapy.settings import Settings

from bench.results import Results
from crawler.frontier.codec import encode_url
from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.hosts import politeness_key
from crawler.seeds.files import SeedLine, read_seeds
from crawler.seeds.ingest import ingest
from crawler.services import spill_from_settings, spill_remake
from crawler.urls import InvalidURL, normalize_url, url_options
from testing.servers import script_usec

TARGET = 100_000
WORDS = ["news", "article", "blog", "products", "item", "category", "page", "docs", "about", "2024", "en", "wiki"]


def generate(path: str, lines: int, hosts: int, seed: int = 1, gz: bool = False) -> dict:
    """Write the seed file; return what it holds."""
    rnd = random.Random(seed)
    counts = {"urls": 0, "duplicates": 0, "invalid": 0, "comments": 0}
    recent: list[str] = []
    opener = gzip.open if gz else open
    with opener(path, "wt", encoding="utf-8", newline="\n") as f:
        for i in range(lines):
            r = rnd.random()
            if r < 0.005:
                f.write("# a comment line\n" if i % 2 else "\n")
                counts["comments"] += 1
                continue
            if r < 0.015:
                f.write(rnd.choice(["not a url at all\n", "ftp://files.example/x\n", "http://a.example/ high\n",
                                    "http://a.example/ 1 2\n", "http://exa mple.com/\n"]))  # fmt: skip
                counts["invalid"] += 1
                continue
            if r < 0.035 and recent:
                f.write(rnd.choice(recent) + "\n")
                counts["duplicates"] += 1
                continue
            h = rnd.randrange(hosts)
            path_ = "/".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 4)))
            url = f"https://www.site{h}.com/{path_}/{i}.html"
            q = rnd.random()
            if q < 0.2:
                url += f"?page={rnd.randint(1, 50)}&id={i}"
            elif q < 0.3:
                url += f"?utm_source=mail&ref={i}"
            if rnd.random() < 0.1:
                url = url.replace("https://www.", "HTTPS://WWW.")
            line = url
            p = rnd.random()
            if p < 0.05:
                line += " 1"
            elif p < 0.1:
                line += " -1"
            elif p < 0.12:
                line += "  # trailing comment"
            f.write(line + "\n")
            counts["urls"] += 1
            if len(recent) < 1000:
                recent.append(line)
            else:
                recent[rnd.randrange(1000)] = line
    return counts


def stage_breakdown(path: str, settings: Settings, client, n: int, batch: int) -> None:
    """Time each stage alone, single-threaded, on the first ``n`` lines, into a
    second fresh crawl (deleted afterwards): where the time of one URL goes."""
    settings = settings.copy()
    settings.set("CRAWL_NAME", f"bench-seed-{uuid.uuid4().hex[:10]}", priority="cmdline")
    frontier = Frontier.from_settings(settings, client)
    times: dict[str, float] = {}

    def timed(name, func):
        t = time.perf_counter()
        out = func()
        times[name] = time.perf_counter() - t
        return out

    def normalize_all():
        out = []
        for item in items:
            with contextlib.suppress(InvalidURL):
                out.append(normalize_url(item.url))
        return out

    try:
        items = timed("read + parse lines", lambda: list(itertools.islice(read_seeds(path), n)))
        items = [i for i in items if type(i) is SeedLine]
        urls = timed("normalize_url", normalize_all)
        scope = frontier.current_scope()  # (the trap guards are the scope's)
        timed("put: trap guards", lambda: [scope.verdict(u) for u in urls])
        timed("put: politeness_key", lambda: [politeness_key(u, frontier.politeness) for u in urls])
        entries = [Entry(url=u, payload=encode_url(u)) for u in urls]
        before = script_usec(client)
        timed("put total", lambda: [frontier.put(entries[i : i + batch]) for i in range(0, len(urls), batch)])
        redis_s = (script_usec(client) - before) / 1e6
    finally:
        frontier.clear()
    count = len(urls)
    us = {k: 1e6 * v / count for k, v in times.items()}
    redis_us = 1e6 * redis_s / count
    client_us = us["put total"] - redis_us
    python_us = us["read + parse lines"] + us["normalize_url"] + client_us
    print(f"\nstages, one at a time, single-threaded, {count:,} URLs, batch {batch} (us per URL):")
    print(f"  {'read + parse lines':40s} {us['read + parse lines']:7.1f}")
    print(f"  {'normalize_url':40s} {us['normalize_url']:7.1f}")
    print(f"  {'put, client side (wall - server)':40s} {client_us:7.1f}   of which, timed alone:")
    for name in ("put: trap guards", "put: politeness_key"):
        print(f"    {name.split(': ')[1]:38s} {us[name]:7.1f}")
    print(f"  {'= Python, one GIL':40s} {python_us:7.1f}   -> at most {1e6 / python_us:,.0f} URLs/s")
    print(f"  {'put, Redis script (server)':40s} {redis_us:7.1f}   -> at most {1e6 / redis_us:,.0f} URLs/s")
    total = python_us + redis_us
    print(
        f"  {'= CPU per URL':40s} {total:7.1f}   -> {1e6 / total:,.0f} URLs/s on one core, "
        f"at most {2e6 / total:,.0f} on two"
    )


def ingest_once(path: str, settings: Settings, frontier, client, opts, group: int | None = None, profiler=None):
    """One ingestion of ``path`` into the bench's crawl (cleared after), its lines printed:
    (its report, the Redis scripts' seconds). ``group``: SEED_GROUP_URLS in its place."""
    redis_before = script_usec(client)
    spill = spill_from_settings(settings, frontier)  # FRONTIER_HOST_WINDOW (None: 0)
    try:
        options = {**url_options(settings), "batch_size": opts.batch}
        options |= {"group_urls": settings.getint("SEED_GROUP_URLS") if group is None else group}
        options |= {"spool_dir": settings.get("SEED_SPOOL_DIR") or None}
        with profiler or contextlib.nullcontext():
            remake = spill_remake(settings) if spill is not None else None  # (as `scrapy seed`'s)
            process_from = settings.getint("SEED_ROUNDS_PROCESS_FROM")
            split_from = settings.getint("SEED_SPLIT_READ_FROM")
            report = ingest(
                frontier, path, **options, spill=spill, remake=remake, process_from=process_from, split_from=split_from
            )
        redis_s = (script_usec(client) - redis_before) / 1e6
        stats = frontier.stats()
    finally:
        if spill is not None:
            spill.clear()
            spill.close()
        deleted = frontier.clear()
    urls_per_s = report.lines / report.elapsed
    print(report.summary())
    reading = f", of which reading {report.push_started:.2f} s" if report.push_started is not None else ""
    if report.lines_beside:
        reading += f" ({report.lines_beside:,} lines read by a second process)"
    print(
        f"ingest: {report.lines:,} URLs in {report.elapsed:.2f} s{reading} = {urls_per_s:,.0f} URLs/s "
        f"(Redis scripts {redis_s:.2f} s = {1e6 * redis_s / max(report.lines, 1):.1f} us/URL; "
        f"target {TARGET:,} URLs/s: {'PASS' if urls_per_s >= TARGET else 'below'})"
    )
    print(
        f"frontier: queued {stats['queued']:,} ({stats.get('spilled', 0):,} on disk), front queues by level"
        f" {stats['front_by_level']}"
    )
    print(f"cleaned up: {deleted} keys of {frontier.keys.crawl_name!r} deleted")
    return report, redis_s


def sort_by_host(path: str, out: str, gz: bool) -> None:
    """Write the lines of the seed file ``path`` to ``out`` sorted by their URL's host (the
    lines without one first), each host's in the order they came."""
    opener = gzip.open if gz else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    lines.sort(key=lambda line: line.split("/", 3)[2].lower() if line.count("/") >= 2 else "")
    with opener(out, "wt", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1_000_000, help="lines in the seed file (default 1,000,000)")
    parser.add_argument("--hosts", type=int, default=50_000, help="distinct hosts (default 50,000)")
    parser.add_argument("--batch", type=int, default=2000, help="URLs per put (default 2000)")
    parser.add_argument("--gz", action="store_true", help="gzip the seed file")
    parser.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE", help="override a setting")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
    parser.add_argument("--runs", type=int, default=1, help="times the file is ingested (each into a new crawl)")
    parser.add_argument("--profile", action="store_true", help="cProfile the ingestion (slower), print the top")
    parser.add_argument("--stages", type=int, default=50_000, metavar="N", help="time each stage on N lines (0: no)")
    parser.add_argument(
        "--sorted-reference",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with windows, each run beside the same lines sorted by host, pushed as read (default: on)",
    )
    opts = parser.parse_args()
    # (200,000 lines, the figures BENCHMARKS follows over time, in seed_ingest.json; others
    # in a file of their size: 1,000,000 lines, the default, in seed_ingest_1m.json)
    size = f"{opts.lines // 1_000_000}m" if opts.lines % 1_000_000 == 0 else f"{opts.lines // 1000}k"
    file = "seed_ingest" if opts.lines == 200_000 else f"seed_ingest_{size}"
    results = Results("seed_ingest", runs=opts.runs, file=file)

    crawl = f"bench-seed-{uuid.uuid4().hex[:10]}"
    settings = Settings()
    settings.setmodule("settings.base", priority="project")
    for item in opts.set:
        name, _, value = item.partition("=")
        settings.set(name, value, priority="cmdline")
    settings.set("CRAWL_NAME", crawl, priority="cmdline")
    settings.set("REDIS_URL", opts.redis_url, priority="cmdline")  # (the spill's rounds' process makes its own client)
    client = redis.Redis.from_url(opts.redis_url)
    frontier = Frontier.from_settings(settings, client)
    spill_dir = tempfile.TemporaryDirectory(prefix="seed-bench-spill-")
    settings.set("CRAWL_DIR", spill_dir.name, priority="cmdline")  # (the spill store, as `scrapy seed`'s)
    push_profiler = None
    if opts.profile:  # the push thread gets its own profiler (cProfile is per thread)
        push_profiler = cProfile.Profile()
        frontier.send = partial(push_profiler.runcall, frontier.send)
    with tempfile.TemporaryDirectory(prefix="seed-bench-") as tmp:
        path = os.path.join(tmp, "seeds.txt.gz" if opts.gz else "seeds.txt")
        t = time.perf_counter()
        counts = generate(path, opts.lines, opts.hosts, gz=opts.gz)
        size = os.path.getsize(path)
        print(
            f"seed file: {opts.lines:,} lines, {size / 1e6:.1f} MB, {counts['urls']:,} URL lines, "
            f"{counts['duplicates']:,} duplicate lines, {counts['invalid']:,} invalid lines, "
            f"{counts['comments']:,} comment/blank lines (written in {time.perf_counter() - t:.1f} s)"
        )
        print(f"crawl {crawl!r} on {opts.redis_url}, batch {opts.batch}, pid {os.getpid()}, {os.cpu_count()} CPUs")
        sorted_path = None
        if opts.sorted_reference and settings.getint("FRONTIER_HOST_WINDOW") > 0:
            sorted_path = os.path.join(tmp, "sorted.txt.gz" if opts.gz else "sorted.txt")
            sort_by_host(path, sorted_path, opts.gz)
        profiler = None
        for _ in range(opts.runs):
            profiler = cProfile.Profile() if opts.profile else None
            report, redis_s = ingest_once(path, settings, frontier, client, opts, profiler=profiler)
            urls_per_s = report.lines / report.elapsed
            results.add("ingestion rate", urls_per_s, "URLs/s")
            results.add("Redis push script a URL", 1e6 * redis_s / max(report.lines, 1), "us")
            if sorted_path is not None:  # the same seeds sorted by host, pushed as read (no grouping)
                print("the same lines sorted by host, pushed as read (SEED_GROUP_URLS=0):")
                reference, _ = ingest_once(sorted_path, settings, frontier, client, opts, group=0)
                sorted_rate = reference.lines / reference.elapsed
                results.add("the same lines sorted by host, pushed as read", sorted_rate, "URLs/s")
                name = "ingestion rate / sorted by host"
                results.add(name, urls_per_s / sorted_rate, "x", "the same lines sorted by host, pushed as read")
                print(f"ingestion rate / sorted by host, in this turn: {urls_per_s / sorted_rate:.2f}")
        if opts.stages:
            stage_breakdown(path, settings, client, opts.stages, opts.batch)
    if profiler:
        print("\ncProfile, main thread (reading, normalizing, preparing, waiting for the push thread):")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
        print("cProfile, push thread (Frontier.send: the Redis call):")
        pstats.Stats(push_profiler).sort_stats("tottime").print_stats(15)
    spill_dir.cleanup()
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
