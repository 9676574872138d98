"""Figures of a test or benchmark: a quantile by nearest rank, the gaps between a site's
requests to a host, the CPU and memory of the machine and of processes with their
descendants (psutil), and a thread's CPU by stage, read the same way by every benchmark."""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter, defaultdict
from itertools import pairwise

import psutil


def percentile(values, q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank (NaN for none): the one the
    tests and benchmarks report."""
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else float("nan")


def arrival_gaps(hits) -> dict[str, list[float]]:
    """Each host's gaps between the arrivals of two consecutive requests (the demo site's
    hits: ``host``, ``start``), in order."""
    arrivals = defaultdict(list)
    for h in hits:
        arrivals[h.host].append(h.start)
    return {host: [b - a for a, b in pairwise(sorted(starts))] for host, starts in arrivals.items()}


class StageClock:
    """CPU seconds of the calling thread by stage (``time.thread_time``): a block
    (``stage``), a function (``wrap``), or functions of a module while a block runs
    (``patched``: name -> stage, restored after)."""

    def __init__(self):
        self.cpu: Counter = Counter()

    @contextlib.contextmanager
    def stage(self, name: str):
        started = time.thread_time()
        try:
            yield
        finally:
            self.cpu[name] += time.thread_time() - started

    def wrap(self, name: str, fn):
        def clocked(*args, **kwargs):
            with self.stage(name):
                return fn(*args, **kwargs)

        return clocked

    @contextlib.contextmanager
    def patched(self, module, stages: dict[str, str]):
        saved = {name: getattr(module, name) for name in stages}
        try:
            for name, fn in saved.items():
                setattr(module, name, self.wrap(stages[name], fn))
            yield self
        finally:
            for name, fn in saved.items():
                setattr(module, name, fn)


def machine_cpu() -> tuple[float, float]:
    """CPU seconds the whole machine has been busy (all cores: not idle, waiting for I/O or
    stolen), and seconds the hypervisor stole."""
    t = psutil.cpu_times()
    steal = getattr(t, "steal", 0.0)
    idle = t.idle + getattr(t, "iowait", 0.0) + steal
    return sum(t) - idle - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0), steal


def tree(pid: int) -> list[psutil.Process]:
    """A process and its live descendants (none once it is gone)."""
    try:
        proc = psutil.Process(pid)
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return []


def cpu_seconds(pids, descendants: bool = True) -> float:
    """User and system CPU seconds so far of these processes (and of their live
    descendants unless ``descendants`` is false); each process counted once."""
    procs = {p for pid in pids for p in (tree(pid) if descendants else tree(pid)[:1])}
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def sched_seconds(pids) -> tuple[float, float]:
    """Seconds on a CPU, and seconds runnable but waiting for one, of every thread of these
    processes and their descendants (the kernel's schedstat: psutil has no waiting time)."""
    run = wait = 0
    for proc in {p for pid in pids for p in tree(pid)}:
        try:
            tasks = os.listdir(f"/proc/{proc.pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{proc.pid}/task/{tid}/schedstat") as f:
                    fields = f.read().split()
            except OSError:
                continue
            run += int(fields[0])
            wait += int(fields[1])
    return run / 1e9, wait / 1e9


def disk_read(pid: int) -> int:
    """Bytes a process and its descendants have read from storage (not the page cache)."""
    total = 0
    for proc in tree(pid):
        try:
            total += proc.io_counters().read_bytes
        except (psutil.Error, AttributeError):
            continue
    return total


def rss_mb(pid: int) -> float:
    """The resident memory of a process in MB (0 once it is gone)."""
    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return 0.0


def children(pid: int) -> list[psutil.Process]:
    """The processes whose parent is ``pid``."""
    try:
        return psutil.Process(pid).children()
    except psutil.Error:
        return []
