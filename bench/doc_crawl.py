"""A crawl of real documentation websites as a user runs it, judging the near-copy marks.

    apt-get install -y python3-doc nodejs-doc rust-doc
    python -m bench.doc_crawl                          # 2 workers, 90 s
    python -m bench.doc_crawl --workers 3 --seconds 60 --interval 0.1
    python -m bench.doc_crawl --windows 0,32           # all in Redis, then a window of 32

The sites of testing/docsites.py, crawled by ``--workers`` workers with the project's
defaults (FRONTIER_HOST_INTERVAL --interval, CLOSESPIDER_TIMEOUT --seconds) and a throwaway
redis-server. Figures: pages fetched and pages/s against the polite limit, the workers'
CPU a page; exact copies checked byte for byte against the files on disk; each near mark
judged by the two files' share of words in common (2 x sum of min word counts / all
words), below 0.9 counting as wrong; the workers' ERROR lines. With ``--windows``, one
crawl for each FRONTIER_HOST_WINDOW, the figures of a window named for it (the spill: the
URLs each host queues beyond its window on disk, crawler/frontier/spill.py).
"""

from __future__ import annotations

import argparse
import gzip
from collections import Counter
from urllib.parse import urlsplit

from bench.results import Results
from crawler.contentseen import fingerprints as fp
from testing.docsites import KILL_AFTER, crawl_sites, read_feeds, served_sites, stop_sites
from testing.workers import error_lines

SHARE_BINS = ((0.0, 0.5, "below 0.5"), (0.5, 0.8, "0.5-0.8"), (0.8, 0.9, "0.8-0.9"), (0.9, 9.9, ">= 0.9"))
WRONG_BELOW = 0.9
LOWEST = 10


def crawl(sites, workers: int, seconds: float, interval: float, work, window: int = 0) -> tuple[dict, float]:
    """``workers`` workers crawl ``sites`` for ``seconds`` (bench/urlstore.py's crawl too),
    ``window``: FRONTIER_HOST_WINDOW (0: every queued URL in Redis):
    ({worker: (seconds, exit code or None)}, the workers' CPU seconds)."""
    settings = {"CRAWL_NAME": "doc-crawl", "FRONTIER_HOST_INTERVAL": interval, "CLOSESPIDER_TIMEOUT": seconds}
    settings.update({"FRONTIER_HOST_WINDOW": window, "CRAWL_DIR": work / "crawl"})
    return crawl_sites(sites, workers, work, settings, seconds + KILL_AFTER)[:2]


def words_of(path) -> Counter:
    body = path.read_bytes()
    return Counter(fp.page_text(gzip.decompress(body) if path.suffix == ".gz" else body).lower().split())


def share(a: Counter, b: Counter) -> float:
    """The share of words in common of two word counts."""
    total = sum(a.values()) + sum(b.values())
    return 2 * sum((a & b).values()) / total if total else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=90, help="CLOSESPIDER_TIMEOUT of each worker")
    parser.add_argument("--interval", type=float, default=0.05, help="FRONTIER_HOST_INTERVAL")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (feeds, logs, archive)")
    parser.add_argument("--windows", default="0", help="FRONTIER_HOST_WINDOW values, a crawl each")
    args = parser.parse_args()
    results = Results("doc_crawl")
    for window in (int(w) for w in args.windows.split(",")):
        run(args, window, results)
    results.write()


def run(args, window: int, results: Results) -> None:
    named = (lambda name: name) if not window else (lambda name: f"window {window}: {name}")
    with served_sites(args.keep, "doc-crawl-") as (sites, work):
        print(
            f"{args.workers} workers, {args.seconds:g} s, interval {args.interval:g} s, window {window}; workdir {work}"
        )
        ended, cpu = crawl(sites, args.workers, args.seconds, args.interval, work, window)
        stop_sites(sites)
        for n, (t, code) in sorted(ended.items()):
            print(f"worker {n}: ended after {t:.0f} s, " + (f"exit code {code}" if code is not None else "killed"))
        pages = {p.get("url"): p for p in read_feeds(work, args.workers)}
        by_host = {s.host: s for s in sites}

        def file_of(url: str):
            site = by_host.get(urlsplit(url).hostname or "")
            return site.file_of(url) if site is not None else None

        ok = [p for p in pages.values() if p.get("status") == 200]
        times = sorted(p["fetched_at"] for p in ok if p.get("fetched_at"))
        span = times[-1] - times[0] if len(times) > 1 else 0.0
        limit = len(sites) / args.interval
        print(f"\n{len(pages)} URLs recorded, {len(ok)} of them 200: {len(ok) / max(span, 1e-9):.1f} pages/s")
        print(
            f"  over {span:.0f} s (polite limit {limit:.0f} pages/s); workers' CPU {1000 * cpu / max(len(ok), 1):.1f} ms a page"
        )
        per_site = Counter(
            by_host[urlsplit(p["url"]).hostname].name for p in ok if urlsplit(p["url"]).hostname in by_host
        )
        print("  " + ", ".join(f"{s.name} {per_site[s.name]}" for s in sites))
        results.add(named("pages fetched (200)"), len(ok), "pages")
        results.add(named("pages/s"), len(ok) / max(span, 1e-9), "pages/s")
        results.add(named("workers' CPU a page"), 1000 * cpu / max(len(ok), 1), "ms")

        exact = [p for p in pages.values() if p.get("duplicate_of")]
        files = [(file_of(p.get("final_url") or p["url"]), file_of(p["duplicate_of"])) for p in exact]
        same = sum(1 for a, b in files if a and b and a.read_bytes() == b.read_bytes())
        print(f"\nexact copies (duplicate_of): {len(exact)}; the same bytes on disk: {same}")
        results.add(named("exact copies marked"), len(exact), "pages")
        results.add(named("exact copies with other bytes on disk"), len(exact) - same, "pages")

        near = [p for p in pages.values() if p.get("near_duplicate_of")]
        cache: dict = {}
        judged = []
        for p in near:
            a, b = file_of(p.get("final_url") or p["url"]), file_of(p["near_duplicate_of"])
            if a is None or b is None:
                continue
            for path in (a, b):
                if path not in cache:
                    cache[path] = words_of(path)
            judged.append((share(cache[a], cache[b]), p.get("resemblance"), p["url"], p["near_duplicate_of"]))
        wrong = sum(1 for j in judged if j[0] < WRONG_BELOW)
        print(f"near copies (near_duplicate_of): {len(near)}, {len(judged)} judged by the files on disk:")
        for lo, hi, label in SHARE_BINS:
            print(f"  words in common {label:10} {sum(1 for j in judged if lo <= j[0] < hi):6}")
        for s, resemblance, url, other in sorted(judged)[:LOWEST]:
            print(f"  {s:.4f} (detector {resemblance}) {url}\n         {other}")
        results.add(named("near marks"), len(near), "pages")
        results.add(named(f"near marks below {WRONG_BELOW} of words in common"), wrong, "pages")

        for n in range(args.workers):
            log = work / f"worker-{n}.log"
            errors = error_lines(log.read_text(errors="replace") if log.exists() else "")
            print(f"worker {n}: {sum(errors.values())} errors")
            for (message, exception), count in errors.most_common(5):
                print(f"  {count} x {message[:160]}" + (f" / {exception[:160]}" if exception else ""))


if __name__ == "__main__":
    main()
