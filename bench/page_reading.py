"""Benchmark: reading an HTML page once (crawler/page/reader.py) against the three
separate reads it replaces, on real HTML.

    apt-get install -y python3-doc nodejs-doc rust-doc
    python -m bench.page_reading                    # 3,000 pages, about a minute
    python -m bench.page_reading --pages 1000 --seed 2

The pages: the documentation of testing/docsites.py (every file of python3-doc and
nodejs-doc, a sample of rust-doc's), up to ``--pages``, as its sites serve them. Each is
read the old way (the spider's links through Scrapy's HtmlResponse and LinkExtractor,
``page_fingerprints``, ``extract_metadata``), then with one ``read_page`` (its stages by
its own timings), and its links once more with the reader's cache of links emptied.
Printed: CPU ms a page of each (``time.thread_time``), the pages whose links, metadata or
fingerprints differ from the old reads, and the pickled size of a Reading against the
two page-worker results it replaces.
"""

from __future__ import annotations

import argparse
import pickle
import random
import statistics
import time
from pathlib import Path

from bench.results import Results
from crawler.contentseen.fingerprints import page_fingerprints
from crawler.page import links as pagelinks
from crawler.page.reader import STAGES, read_page
from crawler.pipelines.metadata import extract_metadata
from crawler.spiders.broad import extracted_links
from crawler.urls import DEFAULT_STRIP_PARAMS
from testing.docsites import available_sites

HEADERS = {"Content-Type": ["text/html"]}  # what bench/doc_crawl.py's server sends
URL_OPTIONS = {"strip_params": DEFAULT_STRIP_PARAMS, "sort_query": True}  # the defaults
MIN_WORDS = 100  # CONTENT_SEEN_MIN_WORDS


def load_pages(total: int, rng: random.Random) -> list[tuple[str, bytes]]:
    """(URL, body) of the sample: all of the small trees, rust-doc's files at random."""
    trees: dict[str, object] = {}
    for site in available_sites():
        trees.setdefault(site.directory, site)  # the rust sites share one tree
    chosen = []
    for directory, site in sorted(trees.items(), key=lambda item: "rust" in item[0]):
        files = sorted(Path(directory).rglob("*.html"))
        room = max(total - len(chosen), 0)
        taken = rng.sample(files, min(room, len(files))) if "rust" in directory else files[:room]
        print(f"  {directory}: {len(files)} HTML files, {len(taken)} taken")
        chosen += [(f"http://{site.host}/{f.relative_to(directory).as_posix()}", f) for f in taken]
    rng.shuffle(chosen)
    return [(url, f.read_bytes()) for url, f in chosen]


def old_links(body: bytes, url: str, extractor) -> tuple[tuple, float]:
    """(links, meta nofollow, invalid links) as the spider reads them, and the CPU seconds of
    the response's decode and parse among them."""
    from scrapy.http import HtmlResponse

    t0 = time.thread_time()
    response = HtmlResponse(url, body=body, headers=HEADERS)
    response.selector  # noqa: B018 (decode and parse)
    reading = time.thread_time() - t0
    return extracted_links(response, extractor, URL_OPTIONS), reading


def timed(fn, *args, **kwargs):
    t0 = time.thread_time()
    result = fn(*args, **kwargs)
    return result, time.thread_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=1, help="times the pages are read each way (the last run printed)")
    args = ap.parse_args()
    results = Results("page_reading", runs=args.runs)
    from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor

    started = time.monotonic()
    print("Pages:")
    pages = load_pages(args.pages, random.Random(args.seed))
    kb = sum(len(body) for _, body in pages) / len(pages) / 1000
    extractor = LinkExtractor(deny_extensions=IGNORED_EXTENSIONS, canonicalize=False, unique=True, tags=("a", "area"))
    for _ in range(args.runs):
        old = dict.fromkeys(("links", "response", "fingerprints", "metadata", "total"), 0.0)
        new = dict.fromkeys((*STAGES, "call", "links, nothing known"), 0.0)
        differ: dict[str, list[str]] = {"links": [], "metadata": [], "fingerprints": []}
        sizes, old_sizes, parts = [], [], {"links": [], "metadata": [], "prints": []}
        links_per_page = []
        for url, body in pages:
            (links, response), seconds = timed(old_links, body, url, extractor)
            old["links"] += seconds
            old["response"] += response
            prints, seconds = timed(page_fingerprints, body, MIN_WORDS)
            old["fingerprints"] += seconds
            metadata, seconds = timed(extract_metadata, body, url, HEADERS, url_options=URL_OPTIONS)
            old["metadata"] += seconds

            reading, seconds = timed(read_page, body, url, HEADERS, url_options=URL_OPTIONS, min_words=MIN_WORDS)
            new["call"] += seconds
            for stage in STAGES:
                new[stage] += reading.timings[stage]
            saved, pagelinks._KNOWN = pagelinks._KNOWN, {}
            try:
                cold = read_page(body, url, HEADERS, url_options=URL_OPTIONS, min_words=MIN_WORDS)
            finally:
                pagelinks._KNOWN = saved
            new["links, nothing known"] += cold.timings["links"]

            if (reading.links, reading.nofollow_page, reading.invalid_links) != links or cold.links != links[0]:
                differ["links"].append(url)
            if (reading.metadata, reading.problems) != metadata:
                differ["metadata"].append(url)
            if reading.prints != prints:
                differ["fingerprints"].append(url)
            links_per_page.append(len(reading.links))
            sizes.append(len(pickle.dumps(reading)))
            old_sizes.append(len(pickle.dumps(prints)) + len(pickle.dumps(metadata)))
            parts["links"].append(len(pickle.dumps(reading.links)))
            parts["metadata"].append(len(pickle.dumps(reading.metadata)))
            parts["prints"].append(len(pickle.dumps(reading.prints)))
        old["total"] = old["links"] + old["fingerprints"] + old["metadata"]
        n = len(pages)
        ms_a_page = 1000 / n
        results.add("three reads (links, fingerprints, metadata): CPU a page", old["total"] * ms_a_page, "ms")
        results.add("read_page, one read: CPU a page", new["call"] * ms_a_page, "ms")
        results.add("three reads / one read", old["total"] / new["call"], "x", baseline="read_page, one read")

    n = len(pages)

    def ms(seconds: float) -> str:
        return f"{seconds / n * 1000:7.3f}"

    links = statistics.mean(links_per_page)
    print(f"\n{n} pages, {kb:.0f} KB on average, {links:.0f} links each (normalized, deduplicated); CPU ms a page:")
    print(f"  old: three reads\n    links (Scrapy process)   {ms(old['links'])}   of which HtmlResponse decode + parse"
          f" {ms(old['response'])}\n    page_fingerprints        {ms(old['fingerprints'])}\n    extract_metadata"
          f"         {ms(old['metadata'])}\n    total                    {ms(old['total'])}")  # fmt: skip
    print("  read_page: one read, by stage (its timings)")
    for stage in STAGES:
        extra = f"   ({ms(new['links, nothing known']).strip()} with nothing known from earlier pages)"
        print(f"    {stage:24s} {ms(new[stage])}{extra if stage == 'links' else ''}")
    print(
        f"    total                    {ms(sum(new[s] for s in STAGES))}   (around the call: {ms(new['call']).strip()})"
    )
    print(
        f"  old / new: {old['total'] / new['call']:.2f}x; links {old['links'] / new['links']:.2f}x (old: its own parse)"
    )
    print("\nSame as the old reads:")
    for part, urls in differ.items():
        print(f"  {part:13s} {n - len(urls)} of {n} pages")
        for url in urls[:10]:
            print(f"    differs: {url}")
    print(
        f"\nPickled size of a Reading (bytes): mean {statistics.mean(sizes):.0f}, median {statistics.median(sizes):.0f}"
        f", max {max(sizes)}; by part, mean: " + ", ".join(f"{k} {statistics.mean(v):.0f}" for k, v in parts.items())
    )
    print(
        f"  the two page-worker results it replaces (Fingerprints; metadata and problems): mean {statistics.mean(old_sizes):.0f}"
    )
    print(f"\n{time.monotonic() - started:.0f} s in all")
    results.add("pages that differ from the three reads", sum(len(urls) for urls in differ.values()), "pages")
    results.write()


if __name__ == "__main__":
    main()
