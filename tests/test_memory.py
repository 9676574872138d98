"""crawler/page/memory.py: freed C heap goes back to the system (on glibc, as on these machines)."""

import os
import subprocess
import sys
from pathlib import Path

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


LARGE_BLOCKS = """
import sys
from crawler.page import memory
if sys.argv[1] == "configured":
    memory.configure()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
before = rss()
kept = []
for _ in range(3):  # bodies come and go, with small objects that live on between them
    bodies = []
    for _ in range(40):
        bodies.append(b"x" * 2**20)
        kept.append(bytes(600))
    del bodies
print(rss() - before)
"""


@pytest.mark.skipif(memory._mallopt is None, reason="not glibc: mallopt is not there to call")
def test_large_blocks_freed_go_back_at_once_once_configured():
    """glibc's default takes large blocks from the heap once one was freed, and the heap
    keeps them; configured, each is a mapping of its own, unmapped when freed (no trim)."""

    def held(mode: str) -> float:
        root = Path(__file__).resolve().parents[1]
        run = subprocess.run([sys.executable, "-c", LARGE_BLOCKS, mode], cwd=root, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return float(run.stdout)

    default, configured = held("default"), held("configured")
    print(f"held after 120 blocks of 1 MB: {default:.0f} MB by default, {configured:.0f} MB configured")
    assert configured < 5 < 30 < default
