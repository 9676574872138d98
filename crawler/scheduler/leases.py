"""The leases a worker holds, for the scheduler (a mixin of FrontierScheduler).

Popped URLs are leased to this worker; it renews the leases it holds every
FRONTIER_LEASE_SECONDS / 3 until they are acknowledged (``ack``, once the page and
everything it produced has been handled) or FRONTIER_LEASE_MAX_HOLD passes. A worker that
dies stops renewing; its leases expire and their URLs are handed out again.

Acknowledgements travel with the worker's next pop (one round trip for both), or after
ACK_DELAY when no pop comes. A landing (a leased request left the downloader) carries the
time the download ended, and its host is due again exactly its interval after that; it
rides on the next pop, and at the latest on a pop sent when the host is due, less the
lookahead.

Store outages: a page a store did not take (``page_not_stored``) gives its lease back, and
the worker leases no more for a while (half the outage so far, from 0.5 s to 30 s), then
tries again; the first page stored ends the hold. A payload of no known form is
acknowledged unread.
"""

from __future__ import annotations

import logging
import time

import redis
from twisted.internet import reactor

from crawler import meta
from crawler.frontier import codec
from crawler.frontier.connection import outage_wait
from crawler.scheduler.outages import ACK

logger = logging.getLogger(__name__)

ACK_DELAY = 0.25  # seconds an acknowledgement may wait for a pop to carry it


class LeaseKeeping:
    def _decoded(self, leases) -> tuple[list, list]:
        """The leases whose payload is a request of this crawler, and those requests; any
        other payload (written into Redis by something else) is acknowledged unread:
        counted, one error line, never run."""
        kept, requests = [], []
        for lease in leases:
            try:
                requests.append(codec.decode(lease.payload, self.spider))
            except codec.UndecodablePayload as exc:
                self._inc("frontier/undecodable")
                logger.error("Queued payload dropped unread: %s", exc)
                self._acks.append(lease.id)
                self._schedule_flush()
                continue
            kept.append(lease)
        return kept, requests

    def _read(self, item=None, response=None, **kwargs) -> None:
        """An item of a leased page left the item pipelines: the page no longer counts as
        unread (its lease may still wait for its archive batch)."""
        request = getattr(response, "request", None)
        if request is not None:
            self._done_reading(request.meta.get(meta.LEASE))

    def _forget(self, lease) -> None:
        """The lease is no longer this worker's to renew or give back (acknowledged, given
        back, taken over by a follow-up, or lost track of); its page is no longer unread."""
        self._held.pop(lease, None)
        self._done_reading(lease)

    def _done_reading(self, lease) -> None:
        self._urgent.discard(lease)
        if lease in self._unread:
            self._unread.discard(lease)
            if self._capped and len(self._unread) < self.max_unread:
                self._capped = False
                self._wake_engine_in(0)

    def ack(self, request, **kwargs) -> None:
        """The page of this request has been handled: release its lease for good."""
        lease = request.meta.get(meta.LEASE)
        if not lease:
            return
        self._forget(lease)
        if self._store_down_since is not None:
            self._store_up()
        self._flush_pushes()  # the page's links before its ack
        if self.outbox:
            self.outbox.defer(ACK, lease)
            return
        self._acks.append(lease)
        self._schedule_flush()

    def give_back(self, request, **kwargs) -> None:
        """The page of this request could not be stored: its URL goes back to its queue
        now (handed out again at its host's next turn), not at the lease's expiry, and
        the worker holds (``_store_down``)."""
        lease = request.meta.get(meta.LEASE)
        if not lease:
            return
        self._forget(lease)
        self._inc("frontier/lease/given_back")
        self._store_down()
        try:
            self.frontier.give_back([lease])
        except redis.RedisError as exc:  # then it expires and comes back all the same
            self.outbox.redis_down(exc)

    def _store_down(self) -> None:
        """A store (the UrlStore, the archive) did not take a page: lease no more for a
        while, as during a Redis outage (half the outage so far, from 0.5 s to 30 s), so
        that pages are not fetched only to be dropped; the pages the worker holds go on.
        The first page stored again ends the hold (``_store_up``)."""
        now = time.time()
        if self._store_down_since is None:
            self._store_down_since = now
        wait = outage_wait(now - self._store_down_since)
        if self._hold_until <= now:
            logger.warning(
                "Pages not stored for %.0f s (a store did not take them; their leases are given back): "
                "this worker leases no more for %.1f s",
                now - self._store_down_since,
                wait,
            )
            self._inc("frontier/store_holds")
        self._hold_until = max(self._hold_until, now + wait)

    def _store_up(self) -> None:
        logger.info("Pages stored again after %.0f s", time.time() - self._store_down_since)
        self._store_down_since = None
        if self._hold_until > time.time():
            self._hold_until = 0.0
            self._wake_engine_in(0)

    def _downloaded(self, response, request, **kwargs) -> None:
        # an HTTP answer that is not a failure (5xx, 429, 408): the host is well (landed)
        lease = request.meta.get(meta.LEASE)
        if lease and response.status < 500 and response.status not in self.failure_codes:
            self._answered.add(lease)

    def landed(self, request, **kwargs) -> None:
        """The download of this request ended: its host may take another request (and
        gets back some of its rate if it was slowed and answered)."""
        lease = request.meta.get(meta.LEASE)
        if lease in self._held:
            self._unread.add(lease)  # (until its page leaves the item pipelines)
        answered = lease in self._answered
        if answered:
            self._answered.discard(lease)
        if lease and lease in self._held:
            # the host's next turn counts from now, the end of the download, not from
            # when the landing reaches the frontier
            ended = time.time()
            self._landed.append((b"+" + lease if answered else lease, int(ended * 1000)))
            # the host is due again one interval from now: the frontier must know by then
            # (less the lookahead, so that the pop that carries the landing can lease the
            # host's next URL too); any pop before carries it
            self._land_by(ended + self._held[lease][1] - self.lookahead)

    def _land_by(self, at: float) -> None:
        call = self._land_call
        if call is not None and call.active():
            if self._land_at <= at:
                return
            call.cancel()
        self._land_at = at
        self._land_call = reactor.callLater(max(at - time.time(), 0), self._land)

    def _land(self) -> None:
        # (while the outbox holds pushes and acks, a pop still carries the landings: a host's
        # next turn needs its landing, not its page's links, and the pop of a sharded
        # frontier goes on with the servers that answer)
        if not self._landed:
            return
        if len(self._unread) >= self.max_unread:  # no room for more pages: the landing alone
            self._flush_acks()
            return
        self._pop(max(self.prefetch - len(self._buffer), 0), time.time())
        if self._buffer:
            self._wake_engine_in(0)

    def _schedule_flush(self) -> None:
        if self._ack_call is None or not self._ack_call.active():
            self._ack_call = reactor.callLater(ACK_DELAY, self._flush_acks)

    def _flush_acks(self) -> None:
        self._flush_pushes()
        acks, self._acks = self._acks, []
        landed, self._landed = self._landed, []
        if not acks and not landed:
            return
        if self.outbox:  # the acks wait their turn; the landings ride on the next pop
            for lease in acks:
                self.outbox.defer(ACK, lease)
            self._landed[:0] = landed
            return
        try:
            self._inc("frontier/acked", self.frontier.ack(*acks, landed=landed))
        except redis.RedisError as exc:  # (landings are idempotent: they ride on the next pop)
            self.outbox.redis_down(exc)
            self._landed[:0] = landed
            for lease in acks:
                self.outbox.defer(ACK, lease)

    def _renew(self):
        try:
            if not self._frontier_there():
                return
        except redis.RedisError as exc:
            self.outbox.redis_down(exc)
            return
        if not self._held:
            return
        cutoff = time.time() - self.lease_max_hold
        for lease, (since, _) in list(self._held.items()):
            if since < cutoff:  # lost track of it: let it expire and be retried
                self._forget(lease)
                self._inc("frontier/lease/given_up")
        try:
            self.frontier.renew(list(self._held))
        except redis.RedisError as exc:  # the next renewal comes well before expiry
            self.outbox.redis_down(exc)
