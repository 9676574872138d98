"""Page workers: the processes that read pages for the broad spider and the content-seen
and metadata pipelines (parsing, links, fingerprints, metadata extraction).

Reading a page is pure computation, a few milliseconds of it for a 100 KB page, and
most of it holds the GIL: in the crawling process it would compete with the reactor,
which then downloads less. PAGE_PROCESSES page processes (crawler/page/process.py) take
that work, and one ``scrapy crawl`` uses more than one core. With PAGE_PROCESSES = 0 the
work runs in the reactor's thread pool instead.

Each page process is a fresh interpreter (``python -c``, not a fork: it shares nothing
with the reactor's threads) fed by one thread of the worker, one call at a time, through
its standard input and output. Neither multiprocessing nor its resource tracker (a
process of 15 MB) is involved, and a page process imports only what reading a page needs
(no Scrapy, no Twisted): bench/memory.py measured 82 MB after its imports with a
ProcessPoolExecutor, 56 MB now.

A page that kills its page process (a parser crash on hostile bytes, the OOM killer)
does not take the crawl down: a new process is started, and the call is tried once more;
if that fails too, the call fails with ``PageWorkerCrashed``, which the pipelines count
and handle as a page they could not read. The other calls are not touched. A call that
takes longer than PAGE_READ_TIMEOUT (hostile HTML that the parser reads in time growing
faster than its size: tens of thousands of attributes on one tag) has its process killed
and fails with ``PageReadTimedOut`` (a PageWorkerCrashed), not tried again. The
processes ignore SIGINT and SIGTERM: Ctrl-C reaches every process of the terminal's
group, and the crawling process stops them itself once the pages in flight are read.
They run at a lower CPU priority (PAGE_PROCESS_NICE): when the cores are busy, the
reactor, whose delays are every due host's delays, goes first, and the pages wait.

    result = await maybe_deferred_to_future(page_workers.run(fn, *args))

``fn`` must be a module-level function (it is pickled by name), and its arguments and
result picklable. Calls wait in one queue for the first free process; what bounds them
is what bounds the pages a worker holds (FRONTIER_MAX_UNREAD, SCRAPER_SLOT_MAX_ACTIVE_SIZE,
BODY_BUDGET_BYTES). An urgent call (a submitted page's: ``run(..., urgent=True)``) goes
before the calls waiting, so that a submission's record does not wait behind a CPU-bound
worker's backlog.
One set of processes per crawler, shared by the spider and the pipelines, stopped when
the engine stops.
"""

from __future__ import annotations

import itertools
import logging
import pickle
import queue
import select
import subprocess
import sys
import threading

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads
from twisted.internet.defer import Deferred, DeferredList

from crawler.page.process import read_message, warm_up, write_message

logger = logging.getLogger(__name__)

OUT_OF_BAND = 64 * 1024  # bytes: an argument this large goes to the page process without a copy
STOP_WAIT = 5.0  # seconds a page process has to exit once its input is closed, before it is killed
URGENT, IN_TURN, STOP = 0, 1, 2  # the ranks of the calls: a stop comes after the calls queued
_START = "import sys; sys.path[:] = {path!r}; from crawler.page.process import main; main({nice})"


class PageWorkerCrashed(Exception):
    """The page process died while reading a page."""


class PageReadTimedOut(PageWorkerCrashed):
    """A call took longer than its deadline: its page process was killed (not tried again)."""


class PageWorkers:
    def __init__(self, processes: int, nice: int = 0, timeout: float = 0.0):
        self.processes = processes
        self.nice = nice
        self.timeout = timeout  # seconds a call may take (PAGE_READ_TIMEOUT; 0: no deadline)
        # (rank, seq, (fn, args, Deferred)), urgent calls first, then in order; None: a feeder stops
        self._calls: queue.PriorityQueue = queue.PriorityQueue()
        self._seq = itertools.count()
        self._feeders: list[_Feeder] = []
        self._warming: list[Deferred] = []

    def run(self, fn, *args, urgent: bool = False) -> Deferred:
        """``fn(*args)`` in a page process (or a thread, with no processes); a Deferred
        that fires in the reactor thread. ``urgent``: before the calls waiting."""
        if self.processes <= 0:
            return threads.deferToThread(fn, *args)
        d = self._submit(fn, args, urgent)
        d.addErrback(self._again, fn, args, urgent)
        return d

    def _submit(self, fn, args: tuple, urgent: bool) -> Deferred:
        self.start()
        d: Deferred = Deferred()
        self._calls.put((URGENT if urgent else IN_TURN, next(self._seq), (fn, args, d)))
        return d

    def _again(self, failure, fn, args: tuple, urgent: bool) -> Deferred:
        failure.trap(PageWorkerCrashed)
        if failure.check(PageReadTimedOut):  # (it would take as long again)
            return failure
        return self._submit(fn, args, urgent)

    def start(self) -> None:
        """Start the processes now rather than at the first page: a process takes about
        a second to start and import the page reader, and the crawl's first pages would
        wait for it."""
        if self.processes > 0 and not self._feeders:
            for n in range(self.processes):
                feeder = _Feeder(n, self._calls, self.nice, self.timeout)
                self._feeders.append(feeder)
                self._warming.append(feeder.ready)
                feeder.start()

    async def ready(self) -> None:
        """Returns once the processes ``start`` began have started (or failed to: a call
        starts a new one). The broad spider opens after it, so that the crawl's first
        pages do not wait for them."""
        warming, self._warming = self._warming, []
        if warming:
            await maybe_deferred_to_future(DeferredList(warming, consumeErrors=True))

    def close(self) -> None:
        """Stop the processes once the calls queued before are done; calls made after
        start new ones."""
        feeders, self._feeders = self._feeders, []
        for _ in feeders:
            self._calls.put((STOP, next(self._seq), None))
        for feeder in feeders:
            feeder.join(STOP_WAIT * 2)


class _Feeder(threading.Thread):
    """One page process, and the thread that hands it calls one at a time, starting a new
    process when the last one died."""

    def __init__(self, n: int, calls: queue.PriorityQueue, nice: int, timeout: float = 0.0):
        super().__init__(name=f"page-process-{n}", daemon=True)
        self.calls = calls
        self.nice = nice
        self.timeout = timeout
        self.ready: Deferred = Deferred()
        self.proc: subprocess.Popen | None = None

    def run(self) -> None:
        try:
            self._call(warm_up, (), deadline=False)  # (a cold start may take seconds)
            _fire(self.ready, None)
        except Exception as exc:
            _fire(self.ready, exc, ok=False)
        while (call := self.calls.get()[2]) is not None:
            fn, args, d = call
            try:
                ok, value = self._call(fn, args)
            except Exception as exc:  # the process died, or the call could not be sent
                ok, value = False, exc
            del call, args
            _fire(d, value, ok)
        self._stop()

    def _call(self, fn, args: tuple, deadline: bool = True) -> tuple[bool, object]:
        """(True, result) or (False, exception) of ``fn(*args)`` in the process; raises
        PageWorkerCrashed when the process dies meanwhile, PageReadTimedOut (its process
        killed) when no answer begins within ``timeout`` seconds (``deadline``)."""
        buffers: list[pickle.PickleBuffer] = []
        data = pickle.dumps((fn, _out_of_band(args)), 5, buffer_callback=buffers.append)
        if self.proc is None:
            self.proc = _spawn(self.nice)
            if deadline:  # (a process started again after one died or was stopped: its
                # imports take no page's time, which a loaded machine can make longer than
                # the deadline, and every page after would be stopped in turn)
                self._call(warm_up, (), deadline=False)
        try:
            write_message(self.proc.stdin, data, buffers)
            del data, buffers
            if deadline and self.timeout > 0 and not select.select([self.proc.stdout], [], [], self.timeout)[0]:
                self.proc.kill()
                self._stop()
                logger.error(
                    "A page took more than %.0f s to read (PAGE_READ_TIMEOUT): its page process was stopped, "
                    "and a new one started",
                    self.timeout,
                )
                raise PageReadTimedOut(f"no answer within {self.timeout:.0f} s (PAGE_READ_TIMEOUT)")
            answer = read_message(self.proc.stdout)
        except OSError:  # a broken pipe: the process is gone
            answer = None
        if answer is None:
            code = self._stop()
            logger.error("A page process died (exit code %s); starting a new one", code)
            raise PageWorkerCrashed(f"the page process died (exit code {code})")
        return pickle.loads(answer[0], buffers=answer[1])

    def _stop(self) -> int | None:
        """Close the process's input (it exits at its end), wait for it, kill it if it
        does not exit; its exit code."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            return proc.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()


def _out_of_band(args: tuple) -> tuple:
    """The arguments, a large bytes (a page's body) wrapped to go out of band: written to
    the page process from where it lies instead of being copied into the pickle."""
    return tuple(pickle.PickleBuffer(a) if isinstance(a, bytes) and len(a) >= OUT_OF_BAND else a for a in args)


def _spawn(nice: int) -> subprocess.Popen:
    start = _START.format(path=sys.path, nice=nice)
    return subprocess.Popen([sys.executable, "-c", start], stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def _fire(d: Deferred, value, ok: bool = True) -> None:
    """Fire ``d`` with ``value`` (or fail it with the exception ``value``) in the
    reactor thread."""
    from twisted.internet import reactor

    if ok:
        reactor.callFromThread(d.callback, value)
    else:
        reactor.callFromThread(d.errback, value)
