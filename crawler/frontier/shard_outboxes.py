"""What a sharded frontier (crawler/frontier/shards.py) owes its servers while some are away:
one outbox a server, so that a server that is away holds back its own hosts only.

- **Pushes** to a server that is away wait in its outbox, in order (new pushes to it go
  after them), and are delivered in one call once it answers (at the frontier's next call
  to it after its wait); the others' pushes go on meanwhile.
- **Acknowledgements** wait for the pushes owed when they were made, whichever server those
  go to: a page's links are in the frontier before its lease ends, so a worker killed
  meanwhile loses nothing (its page's lease expires, and the page is fetched again). An
  acknowledgement made while no push is owed goes at once.
- **Acknowledgements and landings a server could not take** (it was away) wait for its next
  call.

Everything here is in the worker's memory: a worker killed during an outage loses what its
outboxes held, which only its unacknowledged pages carried (their leases bring them back).
"""

from __future__ import annotations

from crawler.frontier.frontier import Entry


class ShardOutboxes:
    def __init__(self, count: int):
        self.pushes: dict[int, list[Entry]] = {}  # server -> entries owed, in order
        self.owed_total = [0] * count  # entries ever owed to each server
        self.delivered = [0] * count  # of those, delivered
        self.held_acks: list[tuple[dict[int, int], list]] = []  # (the pushes they wait for, lease ids)
        self.owed: dict[int, tuple[list, list]] = {}  # server -> (acks, landings) it could not take

    def __bool__(self) -> bool:
        return bool(self.pushes or self.held_acks or self.owed)

    def owe_pushes(self, s: int, entries: list[Entry]) -> None:
        self.pushes.setdefault(s, []).extend(entries)
        self.owed_total[s] += len(entries)

    def delivered_pushes(self, s: int) -> None:
        """Server ``s`` took what it was owed (its outbox is empty now)."""
        self.delivered[s] += len(self.pushes.pop(s, []))

    def acks_to_send(self, lease_ids) -> list:
        """Of ``lease_ids`` (acknowledgements made now) and those held before, the ones that
        may go now: those made while no push was owed, and those whose pushes are delivered."""
        if lease_ids:
            waiting = {s: self.owed_total[s] for s, entries in self.pushes.items() if entries}
            if waiting:
                self.held_acks.append((waiting, list(lease_ids)))
                lease_ids = []
        ready = list(lease_ids)
        still = []
        for waiting, ids in self.held_acks:
            if all(self.delivered[s] >= n for s, n in waiting.items()):
                ready += ids
            else:
                still.append((waiting, ids))
        self.held_acks = still
        return ready

    def owe(self, s: int, acks: list, landed: list) -> None:
        """Server ``s`` did not take these acknowledgements and landings: for its next call."""
        before = self.owed.get(s, ([], []))
        self.owed[s] = (before[0] + list(acks), before[1] + list(landed))

    def take_owed(self) -> dict[int, tuple[list, list]]:
        owed, self.owed = self.owed, {}
        return owed

    def count(self) -> int:
        """Pushes and acknowledgements waiting."""
        pushes = sum(len(entries) for entries in self.pushes.values())
        return pushes + sum(len(ids) for _, ids in self.held_acks) + sum(len(a) for a, _ in self.owed.values())
