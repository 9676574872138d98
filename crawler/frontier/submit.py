"""Real-time submission: URLs put at the top of a running crawl.

Two ways in, one outcome (``Entry.urgent``: the URL skips the front queues and goes to
the head of its host's back queue, so it is fetched at its host's next turn, whatever
the crawl has queued; URL-seen, the trap guards and the per-host limit apply as to any
URL, politeness too):

``submit(frontier, urls, force=)``
    ``scrapy submit`` (and any Python program of the project): normalizes each URL,
    puts it through ``Frontier.put`` and says what became of it (``added``, ``seen``,
    ``invalid``, ``trap:<name>``, ``host_full``). A URL the crawl has seen but not
    fetched (within FETCH_POLICY_MAX_AGE, by the UrlStore) nor leased is still queued,
    perhaps hours away in a busy host's queue: it jumps to the head of its host's queue
    (``Frontier.promote``, ``promoted``), and is fetched once. Then it moves the ``submitted``
    counter, which every worker reads every FRONTIER_SUBMIT_INTERVAL: a worker that
    sees it move looks for due hosts at once instead of at its next idle poll.

The submission list (``crawl:{NAME}:submit``, keys.py), for programs in any language
    RPUSH one value per URL: the URL itself, or a JSON object
    ``{"url": "https://...", "force": true, "priority": 5}`` (``force``: fetched even if
    seen or fetched recently; ``priority``: an integer, Scrapy's sense, higher is
    sooner: the URL then goes through the front queues like a seed, instead of to the
    head of its host's queue). Each worker takes up to FRONTIER_SUBMIT_BATCH values every
    FRONTIER_SUBMIT_INTERVAL (``take``, one round trip with the counter) and puts them
    as ``submit`` does; values that are not a URL or such an object are counted
    (``submit/invalid``) and dropped. With REDIS_URLS the list is on the first server;
    on a Redis Cluster it is the first shard's, ``crawl:{NAME#0}:submit``. A value is
    taken by one worker, and a take sent again gets the same values (TAKE); a worker that
    dies between taking a value and its put (a few milliseconds) loses it: the list is
    at-most-once, ``scrapy submit`` is not.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from crawler.frontier import codec
from crawler.frontier.frontier import Entry
from crawler.frontier.keys import Keys
from crawler.frontier.scripts import TAKE
from crawler.frontier.words import ADDED, PROMOTED, SEEN
from crawler.scope.scope import CrawlScope
from crawler.urls import InvalidURL, normalize_url

logger = logging.getLogger(__name__)

INVALID = "invalid"
TAKE_KEPT_MS = 3_600_000  # ms a take's values are kept for the take sent again (TAKE)


@dataclass
class Submission:
    url: str  # as given
    force: bool = False
    priority: int | None = None  # None: the head of its host's queue


def parse(value: bytes | str) -> Submission:
    """A value of the submission list: a URL, or a JSON object with ``url`` and
    optionally ``force`` (a boolean) and ``priority`` (an integer). ValueError otherwise."""
    text = value.decode("utf-8") if isinstance(value, bytes) else value
    text = text.strip()
    if not text.startswith("{"):
        if not text or any(c.isspace() for c in text):
            raise ValueError("not a URL")
        return Submission(text)
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        raise ValueError('a JSON submission needs "url"')
    force, priority = data.get("force", False), data.get("priority")
    if not isinstance(force, bool):
        raise ValueError('"force" must be true or false')
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        raise ValueError('"priority" must be an integer')
    return Submission(data["url"], force, priority)


def entry(submission: Submission, url_options: dict) -> Entry:
    """The frontier entry of a submission (InvalidURL when its URL cannot be crawled)."""
    url = normalize_url(submission.url, **url_options)
    if not url.startswith(("http://", "https://")):
        raise InvalidURL(url)
    urgent = submission.priority is None
    return Entry(
        url=url,
        payload=codec.encode_url(url, force=submission.force, urgent=urgent),
        priority=0 if urgent else submission.priority,
        dont_filter=submission.force,
        urgent=urgent,
        outside=True,
    )


def submit(
    frontier, submissions: list[Submission], url_options: dict, fetched: Callable | None = None, now: int | None = None
) -> list[tuple[str, str]]:
    """Put submissions into the frontier: (normalized URL or the URL as given, status) for
    each, in order; moves the ``submitted`` counter when any was added or promoted.

    A submission (without a priority) that the crawl has seen is promoted when it is still
    queued: ``fetched(urls)`` names those of ``urls`` fetched within the fetch policy's
    age (the UrlStore; None: none known), which stay ``seen``, as does one in flight."""
    out: list[tuple[str, str] | None] = [None] * len(submissions)
    entries, where = [], []
    for i, submission in enumerate(submissions):
        try:
            e = entry(submission, url_options)
        except InvalidURL:
            out[i] = (submission.url, INVALID)
            continue
        entries.append(e)
        where.append(i)
    if entries:
        statuses = put(frontier, entries, fetched, now)
        for i, e, status in zip(where, entries, statuses, strict=True):
            out[i] = (e.url, status)
        moved = statuses.count(ADDED) + statuses.count(PROMOTED)
        if moved:
            frontier.redis.incrby(frontier.keys.submitted, moved)
    return out  # type: ignore[return-value]


def put(frontier, entries: list[Entry], fetched: Callable | None = None, now: int | None = None) -> list[str]:
    """``frontier.put(entries)``, then the urgent entries found seen promoted when they
    are still queued (see ``submit``); one status per entry (``now``: ms, the clock's time)."""
    statuses = frontier.put(entries, now=now)
    seen = seen_urgent(entries, statuses)
    recent = fetched([entries[i].url for i in seen]) if seen and fetched is not None else set()
    return promote_queued(frontier, entries, statuses, seen, recent, now=now)


def seen_urgent(entries: list[Entry], statuses: list[str]) -> list[int]:
    """The indexes of the urgent entries the crawl had seen already: promoted unless fetched
    recently (``promote_queued``)."""
    return [i for i, (e, status) in enumerate(zip(entries, statuses, strict=True)) if status == SEEN and e.urgent]


def promote_queued(
    frontier, entries: list[Entry], statuses: list[str], seen: list[int], recent: set[str], now: int | None = None
) -> list[str]:
    """``statuses`` with the ``seen`` entries not fetched ``recent``ly promoted (PROMOTE:
    those still queued)."""
    queued = [i for i in seen if entries[i].url not in recent]
    if queued:
        for i, status in zip(queued, frontier.promote([entries[i] for i in queued], now=now), strict=True):
            statuses[i] = status
    return statuses


def take(frontier, n: int, token: str, number: int) -> tuple[list[bytes], int]:
    """Up to ``n`` values from the submission list, and the ``submitted`` counter: one
    round trip (TAKE). ``token``: the worker's; ``number``: how many of its takes it got
    the reply of. A take sent again under the same number (the client's retry after a lost
    reply, or the next look after a call that failed) gets the same values, not the next
    ones: the caller counts a take once it has its reply."""
    script = frontier.redis.register_script(TAKE)
    keys = frontier.keys
    values, counter = script(keys=[keys.submit], args=[keys.prefix, token, number, n, TAKE_KEPT_MS])
    return list(values), int(counter)


# The crawl's scope in its Redis (``scope``, a hash on the first shard, beside the submission
# list): each worker writes its own at start and again when its crawl rules change
# (crawler/extensions/submissions.py), so that ``scrapy submit``, run anywhere, holds a URL to
# the scope of the workers that would fetch it. The last worker to write it sets it: the
# workers of a crawl are meant to share one scope.


def publish_scope(client, keys: Keys, scope: CrawlScope) -> None:
    """Write ``scope`` as the crawl's (every field, so none of an earlier one stays)."""
    client.hset(keys.scope, mapping=scope.fields())


def read_scope(client, keys: Keys) -> CrawlScope | None:
    """The scope the crawl's workers published; None when none did, or when what is there
    cannot be read (logged)."""
    fields = client.hgetall(keys.scope)
    if not fields:
        return None
    try:
        return CrawlScope.from_fields(fields)
    except ValueError as exc:
        logger.warning("The crawl's published scope cannot be read (%s); using this command's settings", exc)
        return None


def use_published_scope(frontier) -> CrawlScope:
    """Hold what a command (``scrapy seed``, ``submit``, ``recrawl``) offers ``frontier`` to
    the scope its running workers published, when they did (else to the command's own
    settings'); the scope it is held to."""
    published = read_scope(frontier.redis, frontier.keys)
    if published is not None:
        frontier.use_scope(published)
    return frontier.current_scope()
