"""The requests a worker leased, between the pop and the engine: each pop's leases decoded
into requests (``codec.py``), looked up by the fetch policy when there is one
(``policy_checks.py``), then buffered until the engine asks. A pop leases up to the number
asked for; fewer says when the next host is due (``cadence.py`` wakes the engine then).

- ``next(now)``: the engine's next request, popping when the gates allow (the stores not
  behind, pages read, the next host due, one pop a reactor turn).
- ``pop(n, now)`` leases up to ``n`` due hosts (the acks and landings owed ride along).
- ``take_urgent(now)`` leases due hosts' submissions between pops (``pacing.py``).
- ``land()``: a landing must reach the frontier now (its host is due again): with a pop
  that may lease the host's next URL, or alone while pages wait to be read.

A payload that is no request of this crawler (written into Redis by something else) is
acknowledged unread: counted, one error line, never run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from crawler import meta
from crawler.frontier import codec
from crawler.scheduler.policy_checks import PolicyChecks

logger = logging.getLogger(__name__)


class LeasedRequests:
    def __init__(
        self,
        client,
        pacing,
        cadence,
        stats,
        prefetch: int,
        quiet: Callable[[float | None], None],
        waiting: Callable[[], None],
    ):
        self.client = client
        self.pacing = pacing
        self.cadence = cadence
        self.stats = stats
        self.prefetch = prefetch  # due hosts a pop leases at most (FRONTIER_PREFETCH)
        self.quiet = quiet  # a pop leased nothing: the wait for the next host (s; None: none queued)
        self.waiting = waiting  # the worker waits for the stores: open batches are stored now
        self.spider = None  # (whose requests the payloads are: set at open)
        self.checks: PolicyChecks | None = None  # the fetch policy's look-ups, None when off
        self.buffer: list = []  # leased requests popped but not yet handed to the engine

    def use_policy(self, policy, in_thread) -> None:
        """Check each pop's requests against this fetch policy (None: no policy), read off
        the reactor by ``in_thread`` (deferToThread's way)."""
        self.checks = None if policy is None else PolicyChecks(policy, self.client, in_thread, then=self._checked)

    @property
    def checking(self) -> bool:
        """A pop's requests wait for the fetch policy's look-up (leased, not yet downloading)."""
        return self.checks is not None and self.checks.running > 0

    @property
    def behind(self) -> bool:
        """As many pops wait for their look-ups as may: the end of one wakes the engine."""
        return self.checks is not None and self.checks.behind

    def next(self, now: float):
        """The engine's next leased request, or None: buffered ones first; else a pop, when
        the stores are not behind, pages are read, the next host is due, and none was made
        in this reactor turn (due submissions are taken between pops)."""
        if self.buffer:
            return self.buffer.pop(0)
        began = self.pacing.waiting_since is None
        if self.pacing.unstored_full(now):  # the stores are behind: nothing new (pacing.py)
            if began:  # the open archive batch is stored now, not at its age: the bound waits for it
                self.waiting()
            return None
        capped = self.pacing.full
        until = max(self.cadence.next_poll, self.pacing.hold_until)
        if capped or now < until:
            if self.take_urgent(now):
                return self.buffer.pop(0)
            if capped:  # pages read more slowly than they come: lease no more until some are read
                self.pacing.capped = True
                self.stats.inc_value("frontier/unread_full")
            else:  # (a wake-up may fire a little early by this clock: look again then)
                self.cadence.wake_in(until - now)
            return None
        # the fetch policy's look-ups are behind (their end wakes it), or one pop a reactor
        # turn was made (cadence.py)
        if self.behind or not self.cadence.take_turn():
            return None
        self.pop(self.prefetch, now)
        return self.buffer.pop(0) if self.buffer else None

    def take_urgent(self, now: float) -> bool:
        """Lease due hosts' submissions, not while Redis is away; whether one is buffered now."""
        room = 0 if self.client.down else self.pacing.urgent_room(now)
        if not room:
            return False
        self.pop(room, now, urgent_only=True)
        return bool(self.buffer)

    def pop(self, n: int, now: float, urgent_only: bool = False) -> None:
        """Lease up to ``n`` requests into the buffer; when none is due, note when the next
        one is and wake the engine then. ``urgent_only``: only submissions (see
        Frontier.get), and no next due time."""
        taken = self.client.take(n, int(self.cadence.lookahead * 1000), urgent_only)
        if taken is None:  # Redis away: look again after the outbox's wait
            self.cadence.poll_in(self.client.outbox.backoff, now)
            return
        leases, next_due = taken
        leases, requests = self._decoded(leases, int(now * 1000))
        if self.checks is not None and leases:  # looked up off the reactor; buffered then
            self.checks.check(leases, requests, urgent_only)
        else:
            self._buffered(requests, urgent_only)
        if urgent_only:  # (it says nothing of the other hosts)
            return
        if n and len(leases) == n:  # more may be due: look again at the engine's next call
            self.cadence.more_due(now)
            if not self.buffer:  # (every one skipped by the fetch policy: that call is now)
                self.cadence.wake_in(0)
            return
        # fewer than asked for: the frontier said when the next host is due
        wait = self.cadence.nothing_due_for(next_due, now)
        if not (leases or self.buffer or self.checking):
            self.quiet(None if next_due is None else wait)

    def land(self, now: float) -> None:
        # (while the outbox holds pushes and acks, a pop still carries the landings: a host's
        # next turn needs its landing, not its page's links, and the pop of a sharded
        # frontier goes on with the servers that answer)
        if not self.client.owes_landings:
            return
        began = self.pacing.waiting_since is None
        if self.pacing.unstored_full(now):  # the stores are behind: the landing alone
            if began:  # (the open archive batch is stored now, as ``next`` tells it)
                self.waiting()
            self.client.flush_acks()
            return
        # no room, held after a page not stored, or the look-ups behind: the landing alone
        if self.pacing.full or now < self.pacing.hold_until or self.behind:
            self.client.flush_acks()
            return
        self.pop(max(self.prefetch - len(self.buffer), 0), now)
        if self.buffer:
            self.cadence.wake_in(0)

    def _checked(self, kept: list, urgent: bool) -> None:
        """The fetch policy looked a pop's requests up: these go to the engine."""
        self._buffered(kept, urgent)
        self.cadence.wake_in(0)

    def _buffered(self, requests: list, urgent: bool) -> None:
        self.buffer.extend(requests)
        if urgent and requests:
            self.pacing.urgent.update(request.meta[meta.LEASE] for request in requests)
            self.stats.inc_value("frontier/leased_urgent", len(requests))

    def _decoded(self, leases, now_ms: int) -> tuple[list, list]:
        kept, requests = [], []
        for lease in leases:
            try:
                requests.append(codec.leased_request(lease, self.spider, now_ms))
            except codec.UndecodablePayload as exc:
                self.stats.inc_value("frontier/undecodable")
                logger.error("Queued payload dropped unread: %s", exc)
                self.client.ack(lease.id)
                continue
            kept.append(lease)
        return kept, requests
