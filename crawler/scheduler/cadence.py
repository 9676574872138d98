"""When the scheduler looks at the frontier, and when it has the engine ask again (on an
injected clock: Twisted's IReactorTime, a ``task.Clock`` in tests).

- The engine asks for a request after each download and on a 5-second heartbeat. A pop that
  leases fewer hosts than asked says when the next host is due: the engine is woken then,
  less FRONTIER_LOOKAHEAD, and at most FRONTIER_POLL_INTERVAL later, so that a crawl of few
  hosts does not wait for the heartbeat; URLs added meanwhile (``look_now``) end the wait.
- One pop a reactor turn: the engine's loop asks until its downloader is full, and would
  lease CONCURRENT_REQUESTS at once while every other event (a submission's) waited.
- While Redis is away, the next look is after the outbox's wait.
"""

from __future__ import annotations

from collections.abc import Callable

from crawler.frontier.client import lookahead


class Cadence:
    def __init__(self, clock, wake: Callable[[], None], poll_interval: float, lookahead: float, max_wait: float):
        self.clock = clock
        self.wake = wake  # have the engine ask for a request now
        self.poll_interval = poll_interval
        self.lookahead = lookahead
        self.max_wait = max_wait
        self.next_poll = 0.0  # no pop before (s)
        self.next_due: float | None = 0.0  # when the last pop said the next URL is due (s; None: nothing queued)
        self._turn_popped = False  # a pop was made in this reactor turn
        self._wakeup = None
        self._wake_at = 0.0  # when _wakeup fires

    @classmethod
    def from_settings(cls, settings, clock, wake: Callable[[], None]) -> Cadence:
        return cls(
            clock,
            wake,
            poll_interval=settings.getfloat("FRONTIER_POLL_INTERVAL"),
            lookahead=lookahead(settings),
            max_wait=settings.getfloat("FRONTIER_MAX_WAIT"),
        )

    def pending(self) -> bool:
        """The last look found a URL due within FRONTIER_MAX_WAIT (pops come at least every
        FRONTIER_POLL_INTERVAL)."""
        return self.next_due is not None and self.next_due <= self.clock.seconds() + self.max_wait

    def take_turn(self) -> bool:
        """Whether a pop may be made in this reactor turn (and it is then this turn's); if
        not, the engine asks again at the next turn."""
        if self._turn_popped:
            self.wake_in(0)
            return False
        if getattr(self.clock, "running", True):  # (no turn ends on a reactor that is not running)
            self._turn_popped = True
            self.clock.callLater(0, self._new_turn)
        return True

    def _new_turn(self) -> None:
        self._turn_popped = False

    def more_due(self, now: float) -> None:
        """A pop leased as many hosts as asked: more may be due, look at the engine's next call."""
        self.next_due = now
        self.next_poll = 0.0

    def nothing_due_for(self, next_due_ms: int | None, now: float) -> float:
        """A pop leased fewer hosts than asked, and said when the next is due (ms; None:
        nothing queued): wait until then, or FRONTIER_POLL_INTERVAL at most. The time to the
        next host, or the poll interval when nothing is queued (s)."""
        self.next_due = None if next_due_ms is None else next_due_ms / 1000
        wait = self.poll_interval if next_due_ms is None else max(next_due_ms / 1000 - self.lookahead - now, 0.001)
        self.poll_in(min(wait, self.poll_interval), now)
        return wait

    def poll_in(self, seconds: float, now: float) -> None:
        """Pop again ``seconds`` from ``now`` (Redis away: after the outbox's wait)."""
        self.next_poll = now + seconds
        self.wake_in(seconds)

    def look_now(self) -> None:
        """URLs were added to the frontier (this worker's pushes, submissions, ``scrapy
        submit``): a host whose queue was empty may be due now; look at once rather than at
        the next poll."""
        if self.next_poll:
            self.look_again()

    def look_again(self) -> None:
        """Look at once (Redis answers again)."""
        self.next_poll = 0.0
        self.wake_in(0)

    def look_at(self, at: float) -> None:
        """Something is due at ``at`` (s): look for it then."""
        self.next_due = at
        self.next_poll = 0.0
        self.wake_in(max(at - self.clock.seconds(), 0.0))

    def wake_in(self, seconds: float) -> None:
        """Have the engine ask for a request ``seconds`` from now (or sooner, if a wake-up is
        already due sooner)."""
        at = self.clock.seconds() + seconds
        if self._wakeup is not None and self._wakeup.active():
            if self._wake_at <= at:
                return
            self._wakeup.cancel()
        self._wake_at = at
        self._wakeup = self.clock.callLater(seconds, self.wake)

    def stop(self) -> None:
        if self._wakeup is not None and self._wakeup.active():
            self._wakeup.cancel()
