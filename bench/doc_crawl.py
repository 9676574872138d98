"""A crawl of real documentation websites as a user runs it, judging the near-copy marks.

Setup (Debian's documentation packages: HTML that no one here wrote):

    apt-get install -y python3-doc nodejs-doc rust-doc
    python -m bench.doc_crawl                          # 2 workers, 90 s
    python -m bench.doc_crawl --workers 3 --seconds 60 --interval 0.1

The sites, each on its own loopback address and one shared port (those installed):
the Python docs (127.0.0.2), the Node.js API (127.0.0.3), and from rust-doc the book,
the std API, the reference, Rust by Example, the Rustonomicon, the edition guide and the
unstable book (127.0.0.4-10). The rust sites are served from rust-doc's HTML root, as
doc.rust-lang.org serves them (its robots.txt included), each crawled under its own path
(``-a allowed_prefixes``): a link from the book to ../std/ leaves the book's scope
instead of landing on a page that is not there. A file missing but present gzipped
(python3-doc's whatsnew/changelog.html) is served from the .gz with Content-Encoding.

The workers run ``scrapy crawl broad`` with the project's defaults (every pipeline, the
local WARC archive, the SQLite UrlStore) except: loopback allowed, FRONTIER_HOST_INTERVAL
(--interval), CLOSESPIDER_TIMEOUT (--seconds), one throwaway redis-server
(testing/servers.py) and one crawl name and directory for all of them. Each writes its
own feed. Nothing is sent anywhere but 127.0.0.0/8; every worker is killed if it has not
ended --seconds + 60 s after the start.

Figures:
- pages fetched (status 200) per site, other answers, pages/s;
- exact copies (``duplicate_of``), checked byte for byte against the files on disk;
- for every near copy mark (``near_duplicate_of``), the two pages' true similarity from
  their files on disk, independently of the detector: the share of words in common of
  their whole visible text (2 x sum of min word counts / all words; words: lowercased
  whitespace-split tokens of crawler.contentseen.fingerprints.page_text) and the weighted overlap
  (sum of min / sum of max). A histogram of the shares, the marks below 0.9 ("wrong"),
  and the lowest ones with both URLs, the detector's resemblance and, for the diagnosis,
  the share of words in common of the two pages' main text (the detector's input);
- the closing lines of each worker's log ("Crawl summary"), and its errors.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import resource
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlsplit

from crawler.contentseen import fingerprints as fp
from testing.docsites import KILL_AFTER, Site, run_commands, served_sites, stop_sites, worker_commands
from testing.servers import RedisServer
from testing.workers import clean_env, read_pages

ROOT = Path(__file__).resolve().parents[1]

SHARE_BINS = ((0.0, 0.5, "below 0.5"), (0.5, 0.8, "0.5-0.8"), (0.8, 0.9, "0.8-0.9"), (0.9, 9.9, ">= 0.9"))
WRONG_BELOW = 0.9
LOWEST = 15


# -- the crawl ---------------------------------------------------------------------------


def crawl(sites: list[Site], workers: int, seconds: float, interval: float, work: Path) -> tuple[dict, tuple]:
    """Run the workers to their end (or kill them): {worker: (seconds, exit code or None)},
    and the workers' CPU seconds (user, system; their page processes included)."""
    seeds = work / "seeds.txt"
    seeds.write_text("".join(site.seed + "\n" for site in sites))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with RedisServer(str(work)) as redis_server:
        env = clean_env()
        env["REDIS_URL"] = redis_server.url
        settings = {"CRAWL_NAME": "doc-crawl", "FRONTIER_HOST_INTERVAL": interval, "CLOSESPIDER_TIMEOUT": seconds}
        ended = run_commands(worker_commands(sites, workers, work, env, settings), seconds + KILL_AFTER)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # before redis-server ends
    return ended, (after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime)


# -- the report ----------------------------------------------------------------------------


def words_of(path: Path) -> Counter:
    body = path.read_bytes()
    if path.suffix == ".gz":
        body = gzip.decompress(body)
    return Counter(fp.page_text(body).lower().split())


def main_words_of(path: Path) -> Counter:
    body = path.read_bytes()
    if path.suffix == ".gz":
        body = gzip.decompress(body)
    tree = fp.parse(body)
    return Counter(fp.main_text(tree).lower().split()) if tree is not None else Counter()


def shares(a: Counter, b: Counter) -> tuple[float, float]:
    """(share of words in common, weighted overlap) of two word counts."""
    common = sum((a & b).values())
    total = sum(a.values()) + sum(b.values())
    union = sum((a | b).values())
    return (2 * common / total if total else 1.0), (common / union if union else 1.0)


def report(sites: list[Site], ended: dict, cpu: tuple, workers: int, interval: float, work: Path) -> None:
    by_host = {s.host: s for s in sites}

    def site_of(url: str) -> Site | None:
        return by_host.get(urlsplit(url).hostname or "")

    def file_of(url: str) -> Path | None:
        site = site_of(url)
        return site.file_of(url) if site is not None else None

    pages: dict[str, dict] = {}
    seen_twice = 0
    for n in range(workers):
        for page in read_pages(work / f"pages-{n}.jsonl"):
            if page.get("url") in pages:
                seen_twice += 1
            pages[page.get("url")] = page
    print()
    for n in range(workers):
        t, code = ended.get(n, (None, None))
        state = f"exit code {code}" if code is not None else "killed"
        print(f"worker {n}: ended after {t:.0f} s, {state}" if t is not None else f"worker {n}: never ended")

    ok = [p for p in pages.values() if p.get("status") == 200]
    times = sorted(p["fetched_at"] for p in ok if p.get("fetched_at"))
    span = max(times[-1] - times[0], 1e-9) if len(times) > 1 else 0.0
    print(f"\npages recorded: {len(pages)} URLs ({seen_twice} recorded twice); status 200: {len(ok)}")
    if span:
        print(
            f"speed: {len(ok) / span:.1f} pages/s over {span:.0f} s (first to last 200); polite limit "
            f"{len(sites) / interval:.0f} pages/s ({len(sites)} hosts at one page per {interval} s)"
        )
    wall = max((t for t, _ in ended.values()), default=0.0)
    print(
        f"workers' CPU (page processes included): {cpu[0]:.0f} s user + {cpu[1]:.0f} s system "
        f"in {wall:.0f} s, on {os.cpu_count()} CPUs; load average now {os.getloadavg()[0]:.1f}"
    )
    per_site: dict[str, Counter] = defaultdict(Counter)
    latency: dict[str, list] = defaultdict(list)
    for p in pages.values():
        site = site_of(p.get("url", ""))
        per_site[site.name if site else "?"][p.get("status") if p.get("status") is not None else "error"] += 1
        if site is not None and p.get("fetch_latency") is not None:
            latency[site.name].append(p["fetch_latency"])
    print(
        f"\n{'site':20} {'200':>6} {'pages/s':>8} {'latency':>8} {'answer':>7}  other answers; requests the site answered"
    )
    for site in sites:
        counts = per_site.get(site.name, Counter())
        other = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=str) if k != 200) or "-"
        served = ", ".join(f"{k}: {v}" for k, v in sorted(site.answers.items(), key=str)) or "-"
        rate = counts[200] / span if span else 0.0
        lat = sorted(latency.get(site.name, [])) or [0.0]
        answer = site.busy / site.gets if site.gets else 0.0
        print(
            f"{site.name:20} {counts[200]:6} {rate:8.1f} {lat[len(lat) // 2]:8.3f} {answer:7.3f}  "
            f"{other}; served {served}"
        )
    print("(latency: median fetch_latency in the feed, s; answer: mean time the site took per GET, s)")

    # exact copies
    exact = [p for p in pages.values() if p.get("duplicate_of")]
    same = differ = unknown = 0
    for p in exact:
        a, b = file_of(p.get("final_url") or p["url"]), file_of(p["duplicate_of"])
        if a is None or b is None:
            unknown += 1
        elif a.read_bytes() == b.read_bytes():
            same += 1
        else:
            differ += 1
    print(
        f"\nexact copies (duplicate_of): {len(exact)}; same bytes on disk: {same}, different: {differ}"
        + (f", file not found: {unknown}" if unknown else "")
    )
    for p in exact[:5]:
        print(f"  {p['url']}  =  {p['duplicate_of']}")

    # near copies, judged from the files on disk
    near = [p for p in pages.values() if p.get("near_duplicate_of")]
    print(f"near copies (near_duplicate_of): {len(near)}")
    cache: dict[Path, Counter] = {}
    judged, missing = [], []
    for p in near:
        url, other = p.get("final_url") or p["url"], p["near_duplicate_of"]
        a, b = file_of(url), file_of(other)
        if a is None or b is None:
            missing.append((url, other))
            continue
        for path in (a, b):
            if path not in cache:
                cache[path] = words_of(path)
        share, weighted = shares(cache[a], cache[b])
        judged.append((share, weighted, p.get("resemblance"), p["url"], other, a, b))
    if missing:
        print(f"  not judged (no file on disk for a URL): {len(missing)}, e.g. {missing[0]}")
    if judged:
        print_judged(judged)
    print_worker_logs(workers, work)


def print_judged(judged: list) -> None:
    print("  share of words in common of the whole visible text, by the files on disk:")
    for lo, hi, label in SHARE_BINS:
        n = sum(1 for j in judged if lo <= j[0] < hi)
        print(f"    {label:10} {n:6}  {100 * n / len(judged):5.1f}%")
    wrong = [j for j in judged if j[0] < WRONG_BELOW]
    print(f"  wrong (share below {WRONG_BELOW}): {len(wrong)} of {len(judged)}")
    weighted_low = sum(1 for j in judged if j[1] < WRONG_BELOW)
    print(
        f"  weighted overlap below {WRONG_BELOW}: {weighted_low} of {len(judged)} "
        f"(a share of 0.9 is an overlap of {0.9 / 1.1:.3f}: overlap = share / (2 - share))"
    )
    judged.sort(key=lambda j: j[0])
    print(
        f"  the {min(LOWEST, len(judged))} lowest (share, weighted overlap, detector's resemblance, main-text share):"
    )
    for share, weighted, resemblance, url, other, a, b in judged[:LOWEST]:
        main_share, _ = shares(main_words_of(a), main_words_of(b))
        print(f"    {share:.4f} {weighted:.4f} det {resemblance} main {main_share:.4f}")
        print(f"      {url}\n      {other}")


def print_worker_logs(workers: int, work: Path) -> None:
    print()
    for n in range(workers):
        log = work / f"worker-{n}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        out = (work / f"worker-{n}.out").read_text(errors="replace")
        summaries = re.findall(r"Crawl summary.*?(?=\n20\d\d-|\Z)", text, re.S)
        print(f"worker {n}'s closing lines:")
        if summaries:
            print("  " + summaries[-1].strip().replace("\n", "\n  "))
        else:
            print("  (no Crawl summary) " + "\n  ".join(text.splitlines()[-5:]))
        errors = error_lines(text.splitlines()) + error_lines(out.splitlines())
        print(f"  errors: {sum(errors.values())}")
        for (message, exception), n in errors.most_common(8):
            print(f"    {n} x {message[:200]}" + (f"\n        {exception[:200]}" if exception else ""))


def error_lines(lines: list[str]) -> Counter:
    """(ERROR message with URLs and numbers blanked, the exception that follows it) -> count;
    a traceback with no ERROR line before it counts as a message of its own."""
    errors: Counter = Counter()
    pending = None
    for line in lines:
        record = re.match(r"20\d\d-\d\d-\d\d ", line) is not None
        if " ERROR: " in line or (line.startswith("Traceback") and pending is None):
            if pending is not None:
                errors[(pending, "")] += 1
            pending = re.sub(r"https?://\S+|\d+", "#", line.split(" ERROR: ", 1)[-1])
        elif pending is not None and re.match(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b", line):
            errors[(pending, line)] += 1
            pending = None
        elif pending is not None and record:
            errors[(pending, "")] += 1
            pending = None
    if pending is not None:
        errors[(pending, "")] += 1
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=90, help="CLOSESPIDER_TIMEOUT of each worker")
    parser.add_argument("--interval", type=float, default=0.05, help="FRONTIER_HOST_INTERVAL")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (feeds, logs, archive)")
    args = parser.parse_args()
    with served_sites(args.keep, "doc-crawl-") as (sites, work):
        print(f"{args.workers} workers, {args.seconds:g} s, interval {args.interval:g} s; workdir {work}")
        ended, cpu = crawl(sites, args.workers, args.seconds, args.interval, work)
        stop_sites(sites)
        report(sites, ended, cpu, args.workers, args.interval, work)


if __name__ == "__main__":
    main()
