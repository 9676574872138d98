"""Why a request was not fetched, as its errback sees it (each an IgnoreRequest: never
retried). Kept apart from the middlewares so that spiders can import them without
importing Twisted's reactor."""

from scrapy.exceptions import DropItem, IgnoreRequest


class AddressRefused(IgnoreRequest):
    """The target address is one the crawler must not connect to (network guard)."""


class RobotsDisallowed(IgnoreRequest):
    """robots.txt disallows this URL for the crawler's user-agent token."""


class HostDropped(IgnoreRequest):
    """The operator dropped this URL's host (``scrapy frontier drop``): recorded, not fetched."""


class HostGivenUp(IgnoreRequest):
    """This URL's host was down (or its robots.txt unreachable) for HOST_GIVE_UP_AFTER."""


class OverQuota(IgnoreRequest):
    """This URL's host reached its page quota (FRONTIER_HOST_MAX_PAGES) before it came."""


class StoreUnavailable(DropItem):
    """A store (the UrlStore) could not take a page's record after its retries: the
    page's lease is given back, so that the page is fetched and stored again later. A
    pipeline raises it to drop the page: one warning line (crawler/observe/logformatter.py), not
    an error with a traceback, since nothing is wrong with the page or the code."""

    def __init__(self, message: str):
        super().__init__(message, log_level="WARNING")


class ServiceUnreachable(ConnectionError):
    """A store the crawl needs did not answer within its patience (a Cassandra none of
    whose contact points answered at start): its message says which, where and why, in
    one line, which is what a command prints (no traceback: nothing is wrong with the code)."""


class StoreRefused(ValueError):
    """A store the crawl needs refuses what the settings name (a Cassandra keyspace that
    does not exist, and no worker makes it): only a person can mend it. Its message says
    which store, where, and the setting to look at, in one line; ``scrapy crawl`` says it
    and exits with 2 before anything is fetched."""
