"""What becomes of each page a worker leased, from its download to its acknowledgement, told
to the worker's frontier client (crawler/frontier/client.py) and its pacing (``pacing.py``);
pure: the scheduler turns the engine's signals into these calls, by lease id.

- **Downloaded**: an HTTP answer that is no failure (a 5xx, URL_RETRY_HTTP_CODES,
  HOST_BACKOFF_HTTP_CODES) says the host is well: its landing brings back some of its rate
  if it was slowed. The body's size counts against FRONTIER_MAX_UNSTORED_BYTES.
- **Landed**: the download ended; the host may take another request.
- **Read**: an item of the page left the item pipelines: no longer unread.
- **Acknowledged** (stored), **given back** (a store did not take it: the worker holds a
  while), **forgotten** (a follow-up took its lease over), **let go** (held longer than
  FRONTIER_LEASE_MAX_HOLD): no longer the worker's (a page let go that waits for its store
  still counts against FRONTIER_MAX_UNSTORED until it is acknowledged or given back).

``wake`` is called when one of these lifts a bound (unread pages, pages not stored, a store
hold), so that the engine asks for requests again.
"""

from __future__ import annotations

from collections.abc import Callable


class LeasedPages:
    def __init__(self, client, pacing, clock, failure_codes: set[int], wake: Callable[[], None]):
        self.client = client
        self.pacing = pacing
        self.clock = clock
        self.failure_codes = failure_codes  # answers that are failures (failures.py)
        self.wake = wake
        self._answered: set[bytes] = set()  # leases whose hosts answered (see landed)
        self._sizes: dict[bytes, int] = {}  # leases downloaded -> their bodies' bytes (see landed)

    @classmethod
    def from_settings(cls, settings, client, pacing, clock, wake_in: Callable[[float], None]) -> LeasedPages:
        # answers that are failures (failures.py): they do not bring a slowed host back
        names = ("URL_RETRY_HTTP_CODES", "HOST_BACKOFF_HTTP_CODES")
        failures = {int(code) for name in names for code in settings.getlist(name)}
        return cls(client, pacing, clock, failures, wake=lambda: wake_in(0))

    def downloaded(self, lease: bytes, size: int, status: int) -> None:
        self._sizes[lease] = size
        if status < 500 and status not in self.failure_codes:
            self._answered.add(lease)

    def landed(self, lease: bytes) -> None:
        size = self._sizes.pop(lease, 0)
        if lease in self.client.held:
            self.pacing.downloaded(lease, size)
        answered = lease in self._answered
        self._answered.discard(lease)
        self.client.landed(lease, answered)

    def read(self, lease) -> None:
        if self.pacing.read(lease):  # below FRONTIER_MAX_UNREAD again
            self.wake()

    def ack(self, lease: bytes) -> None:
        self._done(lease)
        if self.pacing.store_up(self.clock.seconds()):
            self.wake()
        self.client.ack(lease)

    def give_back(self, lease: bytes) -> None:
        self._done(lease)
        self.pacing.store_down(self.clock.seconds())  # lease no more for a while (pacing.py)
        self.client.give_back(lease)

    def forget(self, lease: bytes) -> None:
        self.client.forget(lease)
        self._done(lease)

    def renew(self) -> None:
        for lease in self.client.renew():  # (held longer than FRONTIER_LEASE_MAX_HOLD: let go)
            # a page downloaded and not yet stored counts against FRONTIER_MAX_UNSTORED until
            # its store takes it or gives it back, let go or not: else, through a long store
            # outage, each FRONTIER_LEASE_MAX_HOLD let another round of pages be fetched
            if lease not in self.pacing.held:
                self._done(lease)

    def _done(self, lease) -> None:
        if self.pacing.done(lease, self.clock.seconds()):  # below a bound again
            self.wake()
