"""Benchmark: the stored 64-bit SimHash of a page's word bag, by the crawler
(crawler/contentseen/fingerprints.py: a numpy majority vote) against the ``simhash``
package (over the same hashes, and over MD5 of the words), on python3-doc's HTML.

    apt-get install -y python3-doc
    python -m bench.simhash_cost --runs 3         # the first 400 pages of the library reference

Figures: CPU ms a page of each (p50, p90; budget 0.3 ms, docs/decisions/0001-simhash.md),
and the pages where the crawler's SimHash and the package's agree bit for bit.
"""

from __future__ import annotations

import argparse
import glob
import statistics
import sys
import time

from simhash import Simhash

from bench.results import Results
from crawler.contentseen import fingerprints
from testing.sampling import percentile

DOCS = "/usr/share/doc/python3-doc/html/library/*.html"
BUDGET_MS = 0.3


def _as_int(data: bytes) -> int:
    """The package's hash function for features that are already 64-bit hashes."""
    return int(data) if data.isdigit() else 0  # (it calls it once on b"test" to see its type)


def package_simhash(bag) -> int:
    return Simhash([str(int(h)) for h in bag], hashfunc=_as_int).value


def package_simhash_md5(bag) -> int:
    return Simhash([str(int(h)) for h in bag]).value


def cpu_ms(fn, bags) -> list[float]:
    times = []
    for bag in bags:
        start = time.thread_time()
        fn(bag)
        times.append((time.thread_time() - start) * 1000)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--runs", type=int, default=1, help="times each way is timed over the pages")
    args = parser.parse_args()
    results = Results("simhash_cost", runs=args.runs)
    files = sorted(glob.glob(DOCS))[: args.pages]
    if not files:
        print(f"no pages at {DOCS}: apt-get install -y python3-doc", file=sys.stderr)
        return 2
    bags = []
    for path in files:
        tree = fingerprints.parse(open(path, "rb").read())
        if tree is not None:
            bags.append(fingerprints.main_words(tree))
    bags = [b for b in bags if len(b)]
    sizes = [len(b) for b in bags]
    print(f"{len(bags)} pages of {DOCS}; words per bag: p50 {statistics.median(sizes):.0f}, max {max(sizes)}")
    ways = (
        ("crawler (numpy vote)", fingerprints.simhash),
        ("simhash package, same hashes", package_simhash),
        ("simhash package, MD5 of each", package_simhash_md5),
    )
    for _ in range(args.runs):
        p50s = []
        for label, fn in ways:
            times = cpu_ms(fn, bags)
            p50s.append(percentile(times, 0.5))
            verdict = "within" if p50s[-1] <= BUDGET_MS else "over"
            print(
                f"  {label:30s} p50 {p50s[-1]:6.3f} ms  p90 {percentile(times, 0.9):6.3f} ms  "
                f"({verdict} the {BUDGET_MS} ms budget)"
            )
            results.add(f"{label}, CPU a page p50", p50s[-1], "ms")
            results.add(f"{label}, CPU a page p90", percentile(times, 0.9), "ms")
        results.add("package over the same hashes / crawler, p50", p50s[1] / p50s[0], "x", baseline="crawler, p50")
    same = sum(fingerprints.simhash(b) == package_simhash(b) for b in bags)
    print(f"the crawler's SimHash equals the package's on the same hashes: {same} of {len(bags)} pages")
    results.add("pages", len(bags), "pages")
    results.add("pages where both agree", same, "pages")
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
