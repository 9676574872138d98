"""What a worker offers the frontier, for the scheduler (a mixin of FrontierScheduler): the
requests of one reactor turn sent together (a page's 100 links: one PUSH call, not 100),
counted by what became of them; while Redis is away they wait in the outbox.
"""

from __future__ import annotations

import itertools
import logging

import redis
from twisted.internet import reactor

from crawler.frontier.frontier import Entry
from crawler.frontier.words import ADDED, SEEN, put_stat
from crawler.scheduler.outages import PUSH

logger = logging.getLogger(__name__)

PUSH_CHUNK = 256  # entries a PUSH call takes (Redis runs a call of 256 links in some 5 ms)


class Admission:
    def _offer(self, entries: list[Entry]) -> None:
        """Queue entries for the push sent at the end of this reactor turn (or for the
        outbox while Redis is away)."""
        if self.outbox:
            for entry in entries:
                self.outbox.defer(PUSH, entry)
            return
        self._pushes.extend(entries)
        self._push_later()

    def _push_later(self) -> None:
        if self._push_call is None or not self._push_call.active():
            self._push_call = reactor.callLater(0, self._flush_pushes, False)

    def _flush_pushes(self, everything: bool = True) -> None:
        """Send the pushes waiting, PUSH_CHUNK entries a call; unless ``everything``, one
        call now and the rest in the next reactor turns, so that a page of thousands of
        links does not hold up the reactor (and the hosts due) for tens of ms. The turn's
        credits (FRONTIER_ORDER importance) go in one call first; while Redis is away they
        are dropped (a share of importance is not worth keeping)."""
        if self._credits:
            credits, self._credits = self._credits, []
            if not self.outbox:
                try:
                    self.frontier.credit(credits)
                except redis.RedisError as exc:
                    self.outbox.redis_down(exc)
        while self._pushes:
            entries, self._pushes = self._pushes[:PUSH_CHUNK], self._pushes[PUSH_CHUNK:]
            self._push(entries)
            if self._pushes and not everything:
                self._push_later()
                return

    def _push(self, entries: list[Entry]) -> None:
        """Push entries in one call. URLs this worker has pushed before are seen for good
        (the URL-seen filter never forgets): they are counted as seen here and not sent
        again (a site's menu links, on every page)."""
        known = self._known
        fresh = [e for e in entries if e.url not in known or e.dont_filter or e.follow_up]
        if len(fresh) < len(entries):
            self._inc("frontier/seen", len(entries) - len(fresh))
        entries = fresh
        if not entries:
            return
        if self.outbox:
            for entry in entries:
                self.outbox.defer(PUSH, entry)
            return
        try:
            statuses = self.frontier.put(entries)
        except redis.RedisError as exc:  # pushes are idempotent: send them all again later
            self.outbox.redis_down(exc)
            for entry in entries:
                self.outbox.defer(PUSH, entry)
            return
        for entry, status in zip(entries, statuses, strict=True):
            self._inc(put_stat(status))
            if status in (ADDED, SEEN) and not entry.dont_filter and self.known_max > 0:
                known[entry.url] = None
        if ADDED in statuses and self._next_poll:
            # a host whose queue was empty may be due now (or at its landing's interval):
            # look again at once rather than at the next poll
            self._next_poll = 0.0
            self._wake_engine_in(0)
        if len(known) > self.known_max:  # forget the older half
            for url in list(itertools.islice(known, len(known) // 2)):
                del known[url]
