"""At most a few uploads at once: the archive's closed WARC batches go to the store through
one bounded pool of daemon threads (ARCHIVE_UPLOADS), not a thread a batch, so that a store
that is slow or away does not make a worker start a thread for every batch it closes
(the bound on pages not yet stored, crawler/scheduler/pacing.py, bounds the batches).

Daemon threads: an upload that never returns must not keep the process alive at exit, as
the reactor's thread pool would. ``submit(fn, *args)`` gives a Deferred fired in the
reactor with ``fn``'s result or failure.
"""

from __future__ import annotations

import queue
import threading

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure


class UploadPool:
    def __init__(self, size: int, name: str = "warc-upload"):
        self.size = max(size, 1)
        self.name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._outstanding = 0  # submitted, not finished

    @property
    def threads(self) -> int:
        """Threads started (at most ``size``)."""
        return len(self._threads)

    @property
    def waiting(self) -> int:
        """Uploads submitted and not started yet."""
        return self._jobs.qsize()

    def submit(self, fn, *args) -> Deferred:
        from twisted.internet import reactor

        d: Deferred = Deferred()
        self._jobs.put((fn, args, d, reactor))
        with self._lock:
            self._outstanding += 1
            if len(self._threads) < self.size and self._outstanding > len(self._threads):
                thread = threading.Thread(target=self._run, name=f"{self.name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        return d

    def _run(self) -> None:
        while True:
            fn, args, d, reactor = self._jobs.get()
            try:
                result = fn(*args)
            except BaseException:
                reactor.callFromThread(d.errback, Failure())
            else:
                reactor.callFromThread(d.callback, result)
            finally:
                with self._lock:
                    self._outstanding -= 1
