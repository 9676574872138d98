"""A stand-in for a thread pool that a test runs by hand (``deferToThread``'s way), and a
UrlStore stand-in that says which URLs were fetched a minute ago: for the tests of
what runs off the reactor (the fetch policy's look-ups, the submissions' check)."""

from __future__ import annotations

import time

from twisted.internet import defer


class HeldThreads:
    """``in_thread(fn, *args)`` keeps the call; ``finish(i)`` runs it now and fires its
    Deferred with the answer, as the thread's answer comes back to the reactor."""

    def __init__(self):
        self.calls: list[tuple] = []  # (fn, args, Deferred)

    def __call__(self, fn, *args) -> defer.Deferred:
        d = defer.Deferred()
        self.calls.append((fn, args, d))
        return d

    def finish(self, i: int = 0) -> None:
        fn, args, d = self.calls[i]
        d.callback(fn(*args))


class FetchedOld:
    """A UrlStore's ``last_fetched``: the URLs ending in ``/old`` were fetched a minute ago."""

    def last_fetched(self, urls, archived=False):
        return {url: time.time() - 60 for url in urls if url.endswith("/old")}
