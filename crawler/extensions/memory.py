"""The garbage collector's full passes kept short and rare, and freed memory given back
to the system (an extension)."""

from __future__ import annotations

import gc

from scrapy import signals
from twisted.internet import task

from crawler.page.memory import TRIM_EVERY, configure, trim


class GarbageCollection:
    """Keeps the garbage collector's full passes, which stop the reactor (and delay every
    host due meanwhile), short and rare. When the engine has started, the objects built so
    far (modules, classes, settings, the crawl's components: some 120,000) move to the
    permanent generation (``gc.freeze``), so that a full pass walks only the objects of the
    pages in progress; and a full pass comes after FULL_EVERY passes of the middle
    generation instead of Python's 10. In a one-worker crawl (bench/throughput.py) full
    passes took 120-240 ms every 6 s before; 40-90 ms, none in 25 s, after. Every
    TRIM_EVERY seconds the C heap's free memory goes back to the system, and malloc is
    set for the crawl before its threads start (crawler/page/memory.py)."""

    FULL_EVERY = 100

    def __init__(self):
        self._trimmer: task.LoopingCall | None = None

    @classmethod
    def from_crawler(cls, crawler):
        configure()
        ext = cls()
        crawler.signals.connect(ext.engine_started, signal=signals.engine_started)
        crawler.signals.connect(ext.engine_stopped, signal=signals.engine_stopped)
        return ext

    def engine_started(self) -> None:
        gc.collect()
        gc.freeze()
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, self.FULL_EVERY)
        self._trimmer = task.LoopingCall(trim)
        self._trimmer.start(TRIM_EVERY, now=False)

    def engine_stopped(self) -> None:
        if self._trimmer is not None and self._trimmer.running:
            self._trimmer.stop()
