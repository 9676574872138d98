"""Benchmark: what the web archive's records cost: CPU and bytes a page of the archive
before and after its warcinfo, metadata and revisit records and its CDXJ index, on real
pages with planted exact copies.

    apt-get install -y python3-doc nodejs-doc rust-doc
    python -m bench.archive_records --pages 3000 --runs 9

The corpus: bench/page_reading.py's ``--pages`` documentation pages, and ``--copies`` of them
again under other URLs as exact copies. "Before" is crawler/archive/warc.py at ``--before``
(``git show``: a response and a request record a page, copies skipped); "after" today's. Both
write every page into ARCHIVE_MAX_BYTES batches as the pipeline's writer thread does, page
by page in step, CPU by ``time.thread_time()``; a run a pass. Figures: CPU ms and KB a page
of each, after / before (goal: CPU at most 1.10), the revisits' share of the bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from scrapy.settings import Settings

from bench.page_reading import URL_OPTIONS, load_pages
from bench.results import Results, git
from crawler.archive import warc
from crawler.page.reader import read_page
from crawler.pipelines.archive import _raw_page, warcinfo

MAX_BYTES = 64 * 2**20  # ARCHIVE_MAX_BYTES
HEADERS = {"Content-Type": ["text/html"], "Server": ["nginx"], "Date": ["Thu, 26 Nov 2026 09:00:00 GMT"]}


def old_warc(commit: str):
    """crawler/archive/warc.py as it was at ``commit``, as a module of its own."""
    source = git("show", f"{commit}:crawler/archive/warc.py")
    path = Path(tempfile.mkdtemp(prefix="bench-warc-")) / "warc_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("warc_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def corpus(pages: int, copies: float, seed: int) -> list[dict]:
    """Page items as the archive pipeline gets them; copies carry duplicate_of."""
    rng = random.Random(seed)
    items = []
    now = time.time()
    for n, (url, body) in enumerate(load_pages(pages, rng)):
        reading = read_page(body, url, HEADERS, fingerprints=False, metadata=False, url_options=URL_OPTIONS)
        items.append(
            {
                "url": url,
                "status": 200,
                "headers": HEADERS,
                "body": body,
                "request_headers": {"User-Agent": ["crawler/0.1"]},
                "fetched_at": now + n * 0.01,
                "fetch_latency": 0.012,
                "outlinks": reading.links,
                "content_digest": "sha1:" + hashlib.sha1(body).hexdigest(),
            }
        )
    for original in rng.sample(items, int(len(items) * copies)):
        copy = {**original, "url": original["url"].replace("http://", "http://mirror."), "fetched_at": now + 99}
        copy["duplicate_of"] = original["url"]
        copy["duplicate_fetched_at"] = original["fetched_at"]
        items.insert(rng.randrange(len(items) + 1), copy)
    return items


class Writer:
    """One version's batches, as the pipeline's writer thread fills them."""

    def __init__(self, module, tmp: str, label: str, info: dict | None):
        self.module, self.tmp, self.label, self.info = module, tmp, label, info
        self.batch, self.seq = None, 0
        self.cpu, self.written, self.revisit_bytes = 0.0, 0, 0

    def add(self, item: dict) -> None:
        t0 = time.thread_time()
        if self.batch is None:
            self.seq += 1
            key = f"ab/bench/{self.label}-{self.seq:06d}.warc.gz"
            kwargs = {"info": self.info} if self.info is not None else {}
            self.batch = self.module.WarcBatch(os.path.join(self.tmp, key), key, 6, **kwargs)
        raw = _raw_page(item)
        if self.info is None:  # (before: its own RawPage, without today's fields)
            raw = self.module.RawPage(**{k: getattr(raw, k) for k in self.module.RawPage.__dataclass_fields__})
        size = self.batch.size
        self.batch.add(raw)
        if self.batch.size >= MAX_BYTES:
            self.close()
        self.cpu += time.thread_time() - t0
        if item.get("duplicate_of") and self.batch is not None:
            self.revisit_bytes += self.batch.size - size

    def close(self) -> None:
        if self.batch is not None:
            self.batch.close()
            self.written += self.batch.size
            self.batch = None


def run(before, items: list[dict]) -> dict[str, Writer]:
    """Every page written by both versions in step, page by page."""
    info = warcinfo(Settings({"CRAWL_NAME": "bench", "USER_AGENT": "crawler/0.1"}))
    with tempfile.TemporaryDirectory(prefix="bench-archive-") as tmp:
        writers = {"before": Writer(before, tmp, "before", None), "after": Writer(warc, tmp, "after", info)}
        for item in items:
            if not item.get("duplicate_of"):  # (before: exact copies were not archived)
                writers["before"].add(item)
            writers["after"].add(item)
        for writer in writers.values():
            t0 = time.thread_time()
            writer.close()
            writer.cpu += time.thread_time() - t0
    return writers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.archive_records", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=3000, help="pages of the corpus (before copies)")
    parser.add_argument("--copies", type=float, default=0.10, help="share of the pages planted again as exact copies")
    parser.add_argument("--runs", type=int, default=3, help="passes over the pages")
    parser.add_argument("--before", default="24d464d", help="the commit whose warc.py is 'before'")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    results = Results("archive_records", runs=args.runs)
    before = old_warc(args.before)
    items = corpus(args.pages, args.copies, args.seed)
    if not items:
        print("no documentation pages: apt-get install -y python3-doc nodejs-doc rust-doc", file=sys.stderr)
        return 1
    n = len(items)
    copies = sum(1 for i in items if i.get("duplicate_of"))
    print(f"{n} pages ({copies} exact copies), {sum(len(i['body']) for i in items) / n / 1024:.1f} KB a page")
    for _ in range(args.runs):
        writers = run(before, items)
        for label, w in writers.items():
            print(f"  {label:7s} {w.cpu / n * 1000:.3f} ms CPU a page, {w.written / n / 1024:.2f} KB a page", end="")
            results.add(f"{label}: CPU a page", w.cpu / n * 1000, "ms")
            results.add(f"{label}: bytes a page", w.written / n / 1024, "KB")
        b, a = writers["before"], writers["after"]
        print(
            f"  after / before: CPU {a.cpu / b.cpu:.3f} (goal <= 1.10), bytes {a.written / b.written:.3f}", flush=True
        )
        results.add("after / before, CPU", a.cpu / b.cpu, "x", baseline="before: CPU a page")
        results.add("after / before, bytes", a.written / b.written, "x", baseline="before: bytes a page")
        results.add(
            f"revisit records' share of the bytes ({copies / n:.1%} of the pages)",
            100 * a.revisit_bytes / a.written,
            "%",
        )
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
