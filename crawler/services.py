"""The shared services of one crawler, reached one way: ``services(crawler)``.

A worker has one frontier (one Redis client and pool, its scripts loaded once), one
UrlStore, one set of page worker processes and one body budget, whichever components ask
for them (scheduler, middlewares, pipelines, extensions, the spider's seeding). Each is
opened by the first component that asks, and this object closes what has to be closed,
once and in one place: at ``engine_stopped``, after every component's own closing (the
scheduler's last acknowledgements, the pipelines' last writes, the extensions' closing
summary) is done.
"""

from __future__ import annotations

import logging
import os
import pickle
from functools import partial

from scrapy import signals
from scrapy.settings import Settings
from scrapy.utils.misc import load_object

from crawler.exceptions import StoreRefused
from crawler.frontier.addresses import HostAddresses
from crawler.frontier.chunks import SqliteChunks
from crawler.frontier.connection import frontier_from_settings
from crawler.frontier.spill import Spill, bind_spill
from crawler.items import PageStates
from crawler.observe.trouble import StoreTrouble
from crawler.page.budget import BodyBudget
from crawler.page.workers import PageWorkers
from crawler.urlstore.backends import urlstore_from_settings
from crawler.urlstore.cassandra_chunks import CassandraChunks

logger = logging.getLogger(__name__)

_ATTRIBUTE = "_crawler_services"  # where a crawler keeps its Services
SPILL_FILE = "frontier-spill.sqlite"  # the local spill store, in CRAWL_DIR/<crawl name>/


def spill_from_settings(settings, frontier, stats=None, urlstore=None, bind: bool = True) -> Spill | None:
    """The crawl's spill (crawler/frontier/spill.py) when FRONTIER_HOST_WINDOW is set, else
    None: its chunks in the UrlStore's Cassandra keyspace with URLSTORE_BACKEND cassandra
    (``urlstore()``: the caller's UrlStore; without it one is opened here, and closed with
    the spill), else in an SQLite file beside the embedded Redis. ``bind``: the store is
    checked against the one the crawl recorded (``bind_spill``: StoreRefused if another, or
    none on a crawl that spills)."""
    spill = _spill(settings, frontier, stats, urlstore)
    if bind:
        try:
            bind_spill(frontier, spill)
        except StoreRefused:
            if spill is not None:
                spill.close()
            raise
    return spill


def spill_remake(settings) -> partial:
    """What makes the crawl's spill again in another process (PusherRounds' ``remake``,
    for ``scrapy seed``'s rounds): ``spill_remade`` with the settings as a dict, those that
    pickle (an object set by hand that does not is left out: the spill needs none such)."""
    values = {}
    for name, value in settings.copy_to_dict().items():
        try:
            pickle.dumps(value)
        except Exception:
            continue
        values[name] = value
    return partial(spill_remade, values)


def spill_remade(values: dict) -> Spill | None:
    """The crawl's spill made again from its settings (``spill_remake``'s), on a frontier of
    its own: the same Redis (an embedded one is joined, not started again) and the same
    spill store."""
    settings = Settings(values)
    return spill_from_settings(settings, frontier_from_settings(settings))


def _spill(settings, frontier, stats, urlstore) -> Spill | None:
    if settings.getint("FRONTIER_HOST_WINDOW") <= 0:
        return None
    if settings.get("URLSTORE_BACKEND").lower() == "cassandra":
        store = urlstore() if urlstore is not None else urlstore_from_settings(settings)
        spill = Spill(frontier, CassandraChunks(store, owned=urlstore is None), stats)
    else:
        folder = os.path.join(os.path.abspath(settings.get("CRAWL_DIR")), settings.get("CRAWL_NAME"))
        os.makedirs(folder, exist_ok=True)
        spill = Spill(frontier, SqliteChunks(os.path.join(folder, SPILL_FILE)), stats)
    return spill


def services(crawler) -> Services:
    """The crawler's services (made at the first call)."""
    found = getattr(crawler, _ATTRIBUTE, None)
    if found is None:
        found = Services(crawler)
        setattr(crawler, _ATTRIBUTE, found)
    return found


def services_of(crawler) -> Services | None:
    """The crawler's services if any component asked for them yet, else None."""
    return getattr(crawler, _ATTRIBUTE, None)


def recorded_address(crawler, name: str) -> str | None:
    """The address the crawler's frontier recorded for host ``name`` when it last handed the
    worker one of its URLs (FRONTIER_ADDRESS_POLITENESS; FrontierClient.address_of), else None."""
    found = services_of(crawler)
    client = found.frontier_client if found is not None else None
    return client.address_of(name) if client is not None else None


class Services:
    def __init__(self, crawler):
        self.crawler = crawler
        self._frontier = None
        self._urlstore = None
        self._spill: Spill | None | bool = False  # (False: not asked yet)
        self._addresses: HostAddresses | None | bool = False  # (likewise)
        self._page_workers: PageWorkers | None = None
        self._body_budget: BodyBudget | None = None
        self._frontier_scheduled: bool | None = None
        # the worker's FrontierClient (crawler/frontier/client.py), set by the frontier's
        # scheduler when it is made; None with another scheduler
        self.frontier_client = None
        # the scheduler's Pacing (crawler/scheduler/pacing.py): what the worker waits for,
        # which the live stats publish; None with another scheduler
        self.pacing = None
        # what goes along with a page through the pipelines but is no field of it (its
        # reading, its storing): kept by the page's URL and fetch time
        self.pages = PageStates()
        # the stores' failures not yet followed by a success (crawler/observe/trouble.py)
        self.trouble = StoreTrouble()
        crawler.signals.connect(self.close, signal=signals.engine_stopped)

    @property
    def frontier_scheduled(self) -> bool:
        """Whether the crawler's scheduler (SCHEDULER) is the frontier's: a class that says
        ``uses_frontier`` (crawler/scheduler/scheduler.py's)."""
        if self._frontier_scheduled is None:
            scheduler = load_object(self.crawler.settings["SCHEDULER"])
            self._frontier_scheduled = bool(getattr(scheduler, "uses_frontier", False))
        return self._frontier_scheduled

    @property
    def frontier(self):
        """The crawl's frontier (Frontier, or ShardedFrontier over REDIS_URLS or a cluster)."""
        if self._frontier is None:
            self._frontier = frontier_from_settings(self.crawler.settings)
            if self.frontier_scheduled:
                self._open_spill()  # (its store checked when the scheduler opens: Spill.bind)
        return self._frontier

    def _open_spill(self) -> Spill | None:
        if self._spill is False:
            self._spill = spill_from_settings(
                self.crawler.settings, self.frontier, self.crawler.stats, lambda: self.urlstore, bind=False
            )
        return self._spill

    @property
    def addresses(self) -> HostAddresses | None:
        """The hosts' addresses looked up for every worker (FRONTIER_ADDRESS_POLITENESS),
        None without."""
        if self._addresses is False:
            self._addresses = HostAddresses.from_settings(self.crawler.settings, self.frontier, self.crawler.stats)
        return self._addresses

    @property
    def spill(self) -> Spill | None:
        """The crawl's spill (FRONTIER_HOST_WINDOW), None without one."""
        return self._open_spill()

    @property
    def urlstore(self):
        """The crawl's UrlStore (URLSTORE_BACKEND)."""
        if self._urlstore is None:
            self._urlstore = urlstore_from_settings(self.crawler.settings)
        return self._urlstore

    @property
    def page_workers(self) -> PageWorkers:
        """The page worker processes (PAGE_PROCESSES), started at the first ask: while the
        rest of the crawler is built, not at the first page."""
        if self._page_workers is None:
            s = self.crawler.settings
            self._page_workers = PageWorkers(
                s.getint("PAGE_PROCESSES"), s.getint("PAGE_PROCESS_NICE"), s.getfloat("PAGE_READ_TIMEOUT")
            )
            self._page_workers.start()
        return self._page_workers

    @property
    def body_budget(self) -> BodyBudget:
        """The bytes of big bodies held at once (BODY_BUDGET_BYTES), shared by the download handlers."""
        if self._body_budget is None:
            s = self.crawler.settings
            self._body_budget = BodyBudget(
                s.getint("BODY_BUDGET_BYTES"),
                s.getint("BODY_BUDGET_MIN_SIZE"),
                s.getfloat("BODY_BUDGET_MAX_WAIT"),
                self.crawler.stats,
            )
            self.crawler.signals.connect(self._body_budget.response_received, signal=signals.response_received)
        return self._body_budget

    def close(self) -> None:
        """Close what was opened: the page processes, then the UrlStore (its pending
        writes waited for). The frontier holds nothing to close but its Redis clients'
        pools, which go with the process."""
        if self._page_workers is not None:
            self._page_workers.close()
        if self._spill:
            self._spill.close()
        if self._urlstore is not None:
            self._urlstore.close()
