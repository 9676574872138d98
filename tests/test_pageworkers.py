"""Page workers: pages are read in worker processes, and a page that kills its worker
costs that page only (real processes; the crash is a real os._exit in the worker)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import os
from twisted.internet import defer, task
from crawler.fingerprints import page_fingerprints
from crawler.pageworkers import PageWorkerCrashed, PageWorkers

async def main(reactor):
    workers = PageWorkers(1)
    body = b"<html><body>" + b"crawler pages are read elsewhere " * 40 + b"</body></html>"
    assert await workers.run(page_fingerprints, body, 50) == page_fingerprints(body, 50)
    pid = await workers.run(os.getpid)
    assert pid != os.getpid()
    try:
        await workers.run(os._exit, 3)
        print("no crash")
    except PageWorkerCrashed:
        print("crashed")
    print("after", await workers.run(pow, 3, 3), await workers.run(os.getpid) != pid)
    workers.close()
    inline = PageWorkers(0)  # PAGE_PROCESSES = 0: a thread of this process
    print("threads", await inline.run(os.getpid) == os.getpid())

task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
"""


def test_pages_are_read_in_worker_processes_that_survive_a_crash():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:3] == ["crashed", "after 27 True", "threads True"], proc.stdout + proc.stderr
