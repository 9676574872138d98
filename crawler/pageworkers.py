"""Page workers: the processes that read pages for the content-seen and metadata
pipelines (parsing, visible text, SimHash, metadata extraction).

Reading a page is pure computation, a few milliseconds of it for a 100 KB page, and
most of it holds the GIL: in the crawling process it would compete with the reactor,
which then downloads less. PAGE_PROCESSES worker processes (``spawn``ed, so they share
nothing with the reactor's threads) take that work, and one ``scrapy crawl`` uses more
than one core. With PAGE_PROCESSES = 0 the work runs in the reactor's thread pool instead.

A page that kills its worker process (a parser crash on hostile bytes, the OOM killer)
does not take the crawl down: the pool is replaced and the call is tried once more on
the new processes (the other pages in flight when a process dies fail with it); if that
fails too, the call fails with ``PageWorkerCrashed``, which the pipelines count and handle
as a page they could not read. The workers ignore SIGINT: Ctrl-C reaches every process
of the terminal's group, and the crawling process shuts them down itself once the pages
in flight are read. They run at a lower CPU priority (PAGE_PROCESS_NICE): when the cores
are busy, the reactor, whose delays are every due host's delays, goes first, and the
pages wait.

    result = await maybe_deferred_to_future(page_workers.run(fn, *args))

``fn`` must be a module-level function (it is pickled by name), and its arguments and
result picklable. One pool per process, shared by the pipelines, shut down when the
engine stops.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from scrapy import signals
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads
from twisted.internet.defer import Deferred, DeferredList

from crawler.memory import trim

logger = logging.getLogger(__name__)


class PageWorkerCrashed(Exception):
    """The worker process died while reading a page."""


class PageWorkers:
    def __init__(self, processes: int, nice: int = 0):
        self.processes = processes
        self.nice = nice
        self._warming: list[Future] = []
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_crawler(cls, crawler) -> PageWorkers:
        """The crawler's page workers (one set, shared by every pipeline that asks)."""
        workers = getattr(crawler, "_page_workers", None)
        if workers is None:
            s = crawler.settings
            workers = crawler._page_workers = cls(s.getint("PAGE_PROCESSES"), s.getint("PAGE_PROCESS_NICE"))
            workers.start()  # while the rest of the crawler is built
            crawler.signals.connect(workers.close, signal=signals.engine_stopped)
        return workers

    def run(self, fn, *args) -> Deferred:
        """``fn(*args)`` in a worker process (or a thread, with no processes); a Deferred
        that fires in the reactor thread."""
        if self.processes <= 0:
            return threads.deferToThread(fn, *args)
        d = self._submit(fn, args)
        d.addErrback(self._again, fn, args)
        return d

    def _submit(self, fn, args: tuple) -> Deferred:
        pool = self._current_pool()
        try:
            future = pool.submit(_call, fn, *args)
        except BrokenProcessPool:
            future = self._crashed(pool)
        return _deferred(future, lambda f: self._check(pool, f))

    def _again(self, failure, fn, args: tuple) -> Deferred:
        failure.trap(PageWorkerCrashed)
        return self._submit(fn, args)

    def start(self) -> None:
        """Start the processes now rather than at the first page: a process takes about
        a second to start and import the page reader, and the crawl's first pages would
        wait for it."""
        if self.processes > 0:
            pool = self._current_pool()
            # the pool starts a process per call waiting
            self._warming = [pool.submit(_warm_up) for _ in range(self.processes)]

    async def ready(self) -> None:
        """Returns once the processes ``start`` began have started (or failed to: a later
        call starts new ones). The broad spider opens after it, so that the crawl's first
        pages do not wait for them."""
        warming, self._warming = self._warming, []
        if warming:
            done = DeferredList([_deferred(f, lambda f: None) for f in warming], consumeErrors=True)
            await maybe_deferred_to_future(done)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _current_pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    self.processes,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                    initargs=(self.nice,),
                )
            return self._pool

    def _check(self, pool: ProcessPoolExecutor, future: Future) -> None:
        """Runs in the reactor thread when a call ended: a broken pool is replaced."""
        if isinstance(future.exception(), BrokenProcessPool):
            self._crashed(pool)

    def _crashed(self, pool: ProcessPoolExecutor) -> Future:
        with self._lock:
            if self._pool is pool:
                self._pool = None
                logger.error("A page worker process died; starting new ones")
        pool.shutdown(wait=False)
        failed: Future = Future()
        failed.set_exception(BrokenProcessPool("the page worker process died"))
        return failed


def _start_worker(nice: int) -> None:
    """In each new worker process: ignore Ctrl-C and SIGTERM (sent to the whole process
    group by a terminal or a service manager: the worker stops its page processes itself,
    once the pages they read are handled), and step back ``nice`` CPU priority levels."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if nice > 0:
        os.nice(nice)


def _call(fn, *args):
    """In a page process: ``fn(*args)``, then the memory its page took handed back to the
    system (crawler/memory.py): one large page would otherwise hold the process at its
    size for the rest of the crawl."""
    try:
        return fn(*args)
    finally:
        trim()


def _warm_up() -> None:
    """The first call of a new worker process: import what reading a page needs."""
    import crawler.pagereader  # noqa: F401


def _deferred(future: Future, on_done) -> Deferred:
    """A Deferred that fires in the reactor thread with ``future``'s outcome (a broken
    pool as PageWorkerCrashed), after ``on_done(future)`` ran there."""
    from twisted.internet import reactor

    d: Deferred = Deferred()

    def finish(f: Future) -> None:
        on_done(f)
        exc = f.exception()
        if exc is None:
            d.callback(f.result())
        elif isinstance(exc, BrokenProcessPool):
            d.errback(PageWorkerCrashed(str(exc)))
        else:
            d.errback(exc)

    future.add_done_callback(lambda f: reactor.callFromThread(finish, f))
    return d
