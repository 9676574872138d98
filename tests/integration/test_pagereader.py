"""Reading a page once (crawler/page/reader.py): its links are the ones Scrapy's link extractor
and the URL normalizer give (run here as the reference), its metadata what extract_metadata
gives, its fingerprints what page_fingerprints gives; hostile bodies never make it raise:
the tests on real services in this process (Redis, Cassandra, S3, page processes) (the
others: tests/unit/test_pagereader.py)."""

import subprocess
import sys

BIG_PAGE = """
import sys
from crawler.page.reader import read_page

def kb(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

row = '<div class="item"><p>Words of a long listing, item {i}.</p><a href="/item/{i}">item {i}</a></div>'
body = ("<html><body>" + "".join(row.format(i=i) for i in range(60_000)) + "</body></html>").encode()
with open("/proc/self/clear_refs", "w") as f:  # the peak (VmHWM) starts again from here
    f.write("5")
before = kb("VmRSS")
reading = read_page(body, "http://example.com/", {"Content-Type": ["text/html"]}, max_bytes=int(sys.argv[1]))
assert len(reading.links) == 60_000
print(kb("VmHWM") - before)
"""


def test_a_page_over_max_bytes_is_read_without_its_whole_tree():
    """A 6 MB page of 60,000 links: read with its links streamed, the page process's peak
    stays well below (by 30 MB at least; measured: 75 MB against 127 MB) the peak of
    reading it with a tree of the whole page (each run in a process of its own, its peak
    counted from its resident size once the page is built)."""

    def growth(max_bytes: int) -> int:
        run = subprocess.run([sys.executable, "-c", BIG_PAGE, str(max_bytes)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return int(run.stdout)

    streamed, whole = growth(2 * 2**20), growth(100 * 2**20)
    print(f"peak growth: {streamed / 1024:.0f} MB streamed, {whole / 1024:.0f} MB with the whole tree")
    assert whole - streamed > 30 * 1024
