"""crawler/page/memory.py: freed C heap goes back to the system (on glibc, as on these
machines): the unit tests (pure: no service, no process) (the others:
tests/integration/test_memory.py)."""

import os

import lxml.html
import pytest

from crawler.page import memory


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(memory._malloc_trim is None, reason="not glibc: malloc_trim is not there to call")
def test_the_heap_a_large_page_left_behind_goes_back_after_a_trim():
    page = "<html><body>" + "<div><p>word <a href='/x'>link</a></p></div>" * 200_000 + "</body></html>"
    trees = [lxml.html.fromstring(page) for _ in range(3)]  # lxml's nodes: on the C heap
    del trees
    before = _rss_mb()
    memory.trim()
    after = _rss_mb()
    print(f"RSS {before:.0f} MB before the trim, {after:.0f} MB after")
    assert before - after > 50, (before, after)
