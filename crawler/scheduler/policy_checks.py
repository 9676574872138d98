"""The fetch policy's look-ups of a pop's requests (crawler/freshness/policy.py), off the
reactor: the requests of each pop are looked up in the UrlStore at once (one batch read), in
a thread (a store 20 ms away would hold every download meanwhile); at most MAX_CHECKS pops
wait for theirs. Those fetched within FETCH_POLICY_MAX_AGE are done with (their leases are
acknowledged, which lands them); the others go to the engine."""

from __future__ import annotations

import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

MAX_CHECKS = 4  # pops whose look-ups may run at once


class PolicyChecks:
    def __init__(self, policy, client, in_thread, then: Callable[[list, bool], None]):
        self.policy = policy
        self.client = client
        self.in_thread = in_thread  # how a store is read off the reactor (deferToThread's way)
        self.then = then  # the requests kept, and whether they are submissions taken between pops
        self.running = 0  # pops whose requests are being looked up

    @property
    def behind(self) -> bool:
        return self.running >= MAX_CHECKS

    def check(self, leases: list, requests: list, urgent: bool) -> None:
        self.running += 1
        d = self.in_thread(self.policy.skip, requests)
        d.addBoth(self._checked, leases, requests, urgent)

    def _checked(self, skipped, leases, requests, urgent: bool) -> None:
        self.running -= 1
        if not isinstance(skipped, set):  # (a failure: skip() says the store's own; fetch them)
            logger.error("Fetch policy look-up failed: %s", skipped)
            skipped = set()
        kept = []
        for i, (lease, request) in enumerate(zip(leases, requests, strict=True)):
            if i in skipped:
                self.client.ack(lease.id)
            elif lease.id in self.client.held:  # (not given back by a close meanwhile)
                kept.append(request)
        self.then(kept, urgent)
