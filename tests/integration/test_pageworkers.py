"""Page workers: pages are read in worker processes, at a lower CPU priority; a worker
that dies is replaced and the call tried once more, and Ctrl-C does not kill them (real processes; the crashes are
real os._exit calls in the worker, the Ctrl-C a real SIGINT). A page process imports no Scrapy or Twisted, and the
worker starts no other process beside its page processes."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def frameworks() -> list[str]:
    """The packages of Scrapy's and Twisted's kind imported (run in a page worker)."""
    heavy = {"scrapy", "twisted", "multiprocessing", "concurrent"}
    return sorted({name.split(".")[0] for name in sys.modules} & heavy)


def crash_once(marker: str) -> str:
    """Kills its worker process the first time (run in a page worker)."""
    if not os.path.exists(marker):
        Path(marker).touch()
        os._exit(3)
    return "read"


SCRIPT = """
import os, signal, sys, time
from twisted.internet import defer, task
from crawler.contentseen.fingerprints import page_fingerprints
from crawler.page.workers import PageWorkerCrashed, PageWorkers
from crawler.page.reader import read_page
from tests.integration.test_pageworkers import crash_once, frameworks

def children():
    return sorted(int(p) for t in os.listdir("/proc/self/task") for p in open(f"/proc/self/task/{t}/children").read().split())

async def main(reactor):
    workers = PageWorkers(1, nice=5)
    body = b"<html><body>" + b"crawler pages are read elsewhere " * 40 + b"</body></html>"
    assert await workers.run(page_fingerprints, body, 50) == page_fingerprints(body, 50)
    assert await workers.run(read_page, body, "http://example.com/", {}) is not None
    print("imported", await workers.run(frameworks))
    pid = await workers.run(os.getpid)
    assert pid != os.getpid()
    print("processes", children() == [pid])
    os.kill(pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
    time.sleep(0.5)
    print("after ctrl-c", await workers.run(os.getpid) == pid)
    print("crash once", await workers.run(crash_once, sys.argv[1]))
    try:
        await workers.run(os._exit, 3)
        print("no crash")
    except PageWorkerCrashed:
        print("crashed twice")
    print("after", await workers.run(pow, 3, 3), await workers.run(os.getpid) != pid)
    print("nice", await workers.run(os.nice, 0) - os.nice(0))
    workers.close()
    inline = PageWorkers(0)  # PAGE_PROCESSES = 0: a thread of this process
    print("threads", await inline.run(os.getpid) == os.getpid())

task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
"""


def test_pages_are_read_in_worker_processes_that_survive_crashes(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "crashed")], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")[:8]
    expected = [
        "imported []",
        "processes True",
        "after ctrl-c True",
        "crash once read",
        "crashed twice",
        "after 27 True",
    ]
    expected += ["nice 5", "threads True"]
    assert lines == expected, proc.stdout + proc.stderr


def digest(body) -> tuple[str, str]:
    """The type and SHA-1 of what a page process received (run in a page worker)."""
    import hashlib

    return type(body).__name__, hashlib.sha1(body).hexdigest()


BIG_BODY = """
import hashlib, random
from twisted.internet import defer, task
from crawler.page.workers import PageWorkers
from tests.integration.test_pageworkers import digest

async def main(reactor):
    workers = PageWorkers(1)
    for size in (10, 100_000, 12 * 2**20):
        body = random.Random(size).randbytes(size)
        got = await workers.run(digest, body)
        print(size, got == ("bytes", hashlib.sha1(body).hexdigest()))
    workers.close()

task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
"""


def test_a_big_body_reaches_the_page_process_whole_and_as_bytes():
    """Bodies of 64 KB and more go out of band (no copy into the pickle): they arrive whole,
    as bytes, as small ones do."""
    proc = subprocess.run([sys.executable, "-c", BIG_BODY], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:3] == ["10 True", "100000 True", "12582912 True"], proc.stdout + proc.stderr


URGENT_SCRIPT = """
import time
from twisted.internet import defer, task
from crawler.page.workers import PageWorkers

async def main(reactor):
    workers = PageWorkers(1)
    await workers.ready() if workers.start() is None else None
    order = []
    calls = [workers.run(time.sleep, 0.2)]  # the process busy: the calls below wait
    for n in range(5):
        calls.append(workers.run(pow, n, 1).addCallback(order.append))
    calls.append(workers.run(pow, 99, 1, urgent=True).addCallback(order.append))
    await defer.DeferredList(calls)
    print("order", order)
    workers.close()

task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
"""


def test_an_urgent_call_goes_before_the_calls_waiting():
    """A submitted page's read (urgent) does not wait behind the pages queued before it."""
    out = subprocess.run(
        [sys.executable, "-c", URGENT_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "order [99, 0, 1, 2, 3, 4]" in out, out


HOSTILE = """
import time
from twisted.internet import defer, task
from crawler.page.reader import read_page
from crawler.page.workers import PageReadTimedOut, PageWorkers

async def main(reactor):
    workers = PageWorkers(1, timeout=1.0)
    await workers.ready()
    # one tag of 40,000 attributes: libxml2 reads it in time growing faster than its size
    # (tens of seconds for 350 KB; a 2 MB body of them, hours)
    hostile = b"<html><body><div " + b" ".join(b"a%d=1" % i for i in range(40_000)) + b"></div></body></html>"
    started = time.monotonic()
    try:
        await workers.run(read_page, hostile, "http://example.com/", {})
        print("read")
    except PageReadTimedOut:
        print("timed out", time.monotonic() - started < 5)
    page = b"<html><body><a href=/next>next</a> words of a page</body></html>"
    reading = await workers.run(read_page, page, "http://example.com/", {})
    print("next page", [link["url"] for link in reading.links])
    workers.close()

task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
"""


def test_a_process_started_again_gets_its_imports_outside_the_deadline():
    """A deadline shorter than a new page process's start (its imports: 0.5-1 s here, more on
    a loaded machine): after a page is stopped at it, the next pages are read by the new
    process. (Before, the new process's start counted against the next page's deadline,
    which stopped it too, and so on: no page was read again.)"""
    script = HOSTILE.replace("PageWorkers(1, timeout=1.0)", "PageWorkers(1, timeout=0.3)").replace(
        "    workers.close()",
        "    for _ in range(3):\n        reading = await workers.run(read_page, page, 'http://example.com/', {})\n    workers.close()",
    )
    assert "timeout=0.3" in script and "range(3)" in script  # (the two changes made)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:2] == ["timed out True", "next page ['http://example.com/next']"], (
        proc.stdout + proc.stderr[-2000:]
    )


def test_a_page_that_takes_longer_than_the_deadline_stops_its_process_and_the_next_is_read():
    """PAGE_READ_TIMEOUT: a page whose reading would take minutes (hostile HTML the parser
    reads in time growing faster than its size) has its page process stopped at the
    deadline, and is not tried again (it held the process, and the crawl's reading of
    pages, for as long as it took); a new process reads the next page."""
    proc = subprocess.run([sys.executable, "-c", HOSTILE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["timed out True", "next page ['http://example.com/next']"], (
        proc.stdout + proc.stderr[-2000:]
    )
