"""How much a worker may lease now, for the scheduler (pure: every time is given as ``now``).

- **Unread pages.** While FRONTIER_MAX_UNREAD of the worker's pages are downloaded but not
  yet through the item pipelines, it leases nothing more: when the CPU, not politeness,
  bounds the crawl, more pages leased would only wait longer to be read (a submitted page's
  record with them), a crash would cost them, and they would hold memory. A due host's
  submission is leased all the same (it is read first), while fewer than FRONTIER_MAX_UNREAD
  such pages are unread, looked for at most every URGENT_LOOK_EVERY.
- **Pages not stored.** A worker holds at most FRONTIER_MAX_UNSTORED pages (and
  FRONTIER_MAX_UNSTORED_BYTES of their bodies) fetched but not yet stored (their leases not
  acknowledged: the archive's batch and the UrlStore's pointer wait): at the bound it
  leases nothing, submissions included, while it keeps renewing what it holds, and says
  so once when it starts waiting and once when it goes on (``frontier/unstored_waits``,
  ``frontier/unstored_wait_seconds``; ``frontier/unstored_max``: the most it held). A store that is slow, throttled or away then slows
  the crawl, and a worker does not read the web into its memory and spool meanwhile.
- **Stores down.** A page a store (the UrlStore, the archive) did not take is given back, and
  the worker leases nothing for a while, as during a Redis outage (half the outage so far,
  from 0.5 s to 30 s, less up to a quarter at random: workers a throttled store refused
  together do not all come back at once), so that pages are not fetched only to be
  dropped; the first page stored again ends the hold.
"""

from __future__ import annotations

import logging
import random

from crawler.frontier.connection import outage_wait
from crawler.observe.trouble import StoreTrouble

logger = logging.getLogger(__name__)

URGENT_LOOK_EVERY = 0.02  # seconds: between pops, how often a worker looks for a submission
JITTER = 0.25  # a store hold is this much shorter at most, at random


class Pacing:
    def __init__(
        self,
        max_unread: int,
        stats=None,
        max_unstored: int = 500,
        max_unstored_bytes: int = 128 * 2**20,
        trouble: StoreTrouble | None = None,
    ):
        self.stats = stats
        self.trouble = trouble or StoreTrouble()  # which store fails, and why (said while waiting)
        self.max_unread = max(max_unread, 1)
        self.max_unstored = max(max_unstored, 1)
        self.max_unstored_bytes = max(max_unstored_bytes, 1)
        self.held: dict[bytes, int] = {}  # leases whose pages are downloaded, not yet stored -> body bytes
        self.held_bytes = 0
        self.waiting_since: float | None = None  # at the unstored bound since
        self.unread: set[bytes] = set()  # leases whose pages are downloaded, not yet through the pipelines
        self.urgent: set[bytes] = set()  # leases of submissions taken between pops, not yet read
        self.capped = False  # a take was refused at the cap: wake the engine below it
        self.urgent_look_at = 0.0  # when to look for a submission next
        self.store_down_since: float | None = None
        self.hold_until = 0.0  # lease nothing before (a store did not take a page)

    @classmethod
    def from_settings(cls, settings, stats=None, trouble: StoreTrouble | None = None) -> Pacing:
        return cls(
            settings.getint("FRONTIER_MAX_UNREAD"),
            stats,
            max_unstored=settings.getint("FRONTIER_MAX_UNSTORED"),
            max_unstored_bytes=settings.getint("FRONTIER_MAX_UNSTORED_BYTES"),
            trouble=trouble,
        )

    @property
    def full(self) -> bool:
        """FRONTIER_MAX_UNREAD pages wait to be read."""
        return len(self.unread) >= self.max_unread

    def urgent_room(self, now: float) -> int:
        """How many submissions may be leased now between pops (0: none, or not yet)."""
        if len(self.urgent) >= self.max_unread or now < max(self.urgent_look_at, self.hold_until):
            return 0
        self.urgent_look_at = now + URGENT_LOOK_EVERY
        return self.max_unread - len(self.urgent)

    def downloaded(self, lease: bytes, size: int = 0) -> None:
        """The lease's page (``size`` bytes of body) is downloaded: unread until it leaves
        the pipelines, unstored until its lease is done with (``done``)."""
        self.unread.add(lease)
        self.held_bytes += size - self.held.get(lease, 0)
        self.held[lease] = size
        if self.stats is not None:
            self.stats.max_value("frontier/unstored_max", len(self.held))

    def unstored_full(self, now: float) -> bool:
        """At FRONTIER_MAX_UNSTORED pages, or FRONTIER_MAX_UNSTORED_BYTES, fetched and not
        yet stored (the first time: said, and counted)."""
        full = len(self.held) >= self.max_unstored or self.held_bytes >= self.max_unstored_bytes
        if full and self.waiting_since is None:
            self.waiting_since = now
            logger.warning(
                "Waiting for %s: %d pages (%.1f MB) fetched and not yet stored, at the bound "
                "(FRONTIER_MAX_UNSTORED %d, FRONTIER_MAX_UNSTORED_BYTES %d): leasing nothing new meanwhile",
                self._waited_for(),
                len(self.held),
                self.held_bytes / 1e6,
                self.max_unstored,
                self.max_unstored_bytes,
            )
            self._inc("frontier/unstored_waits")
        return full

    def waiting(self) -> dict | None:
        """What the worker waits for, as the live stats publish it (None: nothing)."""
        if self.waiting_since is None:
            return None
        waiting = {"for": "the stores", "since": self.waiting_since, "pages": len(self.held), "bytes": self.held_bytes}
        worst = self.trouble.worst()
        if worst is not None:
            waiting |= {"for": worst["store"], "why": worst["why"], "failing_since": worst["failing_since"]}
        return waiting

    def _waited_for(self) -> str:
        """``the archive (S3 503 SlowDown)``, or ``the stores`` when none fails (slow)."""
        worst = self.trouble.worst()
        return "the stores" if worst is None else f"{worst['store']} ({worst['why']})"

    def done(self, lease, now: float) -> bool:
        """The lease's page is stored, given back or let go; whether a wait for the stores
        or the unread cap just ended (the engine must be asked again)."""
        self.held_bytes -= self.held.pop(lease, 0)
        lifted = self.read(lease)
        if self.waiting_since is None:
            return lifted
        if len(self.held) >= self.max_unstored or self.held_bytes >= self.max_unstored_bytes:
            return lifted
        waited, self.waiting_since = now - self.waiting_since, None
        logger.info(
            "The stores caught up after %.1f s (%d pages not yet stored): leasing again", waited, len(self.held)
        )
        self._inc("frontier/unstored_wait_seconds", waited)
        return True

    def _inc(self, key: str, value: float = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, value)

    def read(self, lease) -> bool:
        """The lease's page is read (or the lease is no longer the worker's); whether the
        cap was just lifted (the engine must be asked again)."""
        self.urgent.discard(lease)
        if lease not in self.unread:
            return False
        self.unread.discard(lease)
        if self.capped and not self.full:
            self.capped = False
            return True
        return False

    def store_down(self, now: float) -> None:
        """A store did not take a page: hold (said once a hold, counted as
        ``frontier/store_holds``)."""
        if self.store_down_since is None:
            self.store_down_since = now
        # (jittered: workers that a throttled store refused together do not come back together)
        wait = outage_wait(now - self.store_down_since) * random.uniform(1 - JITTER, 1.0)
        if self.hold_until <= now:
            logger.warning(
                "Pages not stored for %.0f s (a store did not take them; their leases are given back): "
                "this worker leases no more for %.1f s",
                now - self.store_down_since,
                wait,
            )
            self._inc("frontier/store_holds")
        self.hold_until = max(self.hold_until, now + wait)

    def store_up(self, now: float) -> bool:
        """A page was stored: the hold ends; whether one was cut short (the engine must
        be asked again)."""
        if self.store_down_since is None:
            return False
        logger.info("Pages stored again after %.0f s", now - self.store_down_since)
        self.store_down_since = None
        held = self.hold_until > now
        self.hold_until = 0.0
        return held

    def clear(self) -> None:
        self.unread.clear()
        self.urgent.clear()
        self.held.clear()
        self.held_bytes = 0
