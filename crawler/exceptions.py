"""Why a request was not fetched, as its errback sees it (each an IgnoreRequest: never
retried). Kept apart from the middlewares so that spiders can import them without
importing Twisted's reactor."""

from scrapy.exceptions import IgnoreRequest


class AddressRefused(IgnoreRequest):
    """The target address is one the crawler must not connect to (network guard)."""


class RobotsDisallowed(IgnoreRequest):
    """robots.txt disallows this URL for the crawler's user-agent token."""


class StoreUnavailable(Exception):
    """A store (the UrlStore) could not take a page's record after its retries: the
    page's lease is given back, so that the page is fetched and stored again later."""
