"""The frontier's words: what became of a URL offered (``put``), why a host waits, and
where a crawl stands. Every module that speaks of them imports them from here."""

import time

# why a URL is not admitted: crawler/scope/reasons.py (put answers with its codes)
from crawler.scope.reasons import HOST_FULL as HOST_FULL
from crawler.scope.reasons import REJECTED as REJECTED
from crawler.scope.reasons import stat

ADDED, SEEN, PROMOTED = "added", "seen", "promoted"
DEFERRED = "deferred"  # a put to a server of a sharded frontier that is away: in its outbox
# why a host waits (hback reasons, and RETRY for URLs in the delayed set)
THROTTLED, ROBOTS, DOWN, RETRY, INTERVAL = "throttled", "robots", "down", "retry", "interval"
PAUSED = "paused"  # a host the operator paused (a reason why it waits), or the whole crawl (a state)
REASONS = {
    ROBOTS: "robots.txt unreachable",
    DOWN: "host down",
    THROTTLED: "asked to wait (429 / Retry-After)",
    RETRY: "URL retry pending",
    INTERVAL: "host interval",
    PAUSED: "paused by the operator",
}
FINISHED, RUNNING, WAITING = "finished", "running", "waiting"  # and PAUSED
# why a URL is handed out to be recorded as not fetched (the scripts' 'drops'; POP hands it out
# due -code): its host dropped by the operator, its host given up (DOWN for HOST_GIVE_UP_AFTER),
# over its host's page quota; the scripts read them as DROP.<name>
OPERATOR, QUOTA = "operator", "quota"
DROP_CODES = {OPERATOR: 1, DOWN: 2, QUOTA: 3}


def put_stat(status: str) -> str:
    """The stats key counting a put's status: ``frontier/enqueued`` for an added URL,
    ``frontier/seen``, ``frontier/<reason>`` for a URL not admitted (crawler/scope/reasons.py:
    ``frontier/out_of_scope``, ``frontier/trap/<guard>``, ``frontier/host_full`` ...)."""
    return "frontier/enqueued" if status == ADDED else stat("frontier", status)


def now_ms() -> int:
    """The time in ms since the epoch: what every frontier verb takes as ``now``."""
    return int(time.time() * 1000)


def text(value) -> str:
    """A Redis reply (bytes) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)
