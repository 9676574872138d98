"""crawler/page/memory.py: freed C heap goes back to the system (on glibc, as on these machines).

Here: the tests on real services in this process (Redis, Cassandra, S3, page processes); the
others of this subject: tests/unit/test_memory.py."""

import subprocess
import sys
from pathlib import Path

import pytest

from crawler.page import memory

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
        root = Path(__file__).resolve().parents[2]
        run = subprocess.run([sys.executable, "-c", LARGE_BLOCKS, mode], cwd=root, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return float(run.stdout)

    default, configured = held("default"), held("configured")
    print(f"held after 120 blocks of 1 MB: {default:.0f} MB by default, {configured:.0f} MB configured")
    assert configured < 5 < 30 < default
