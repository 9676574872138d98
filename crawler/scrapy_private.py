"""Scrapy's private APIs the crawler uses, each named here and nowhere else, for the Scrapy
versions the crawler is tested with (SCRAPY_TESTED; requirements.txt pins them). Each is
used where Scrapy has no public way to do the same:

- ``wake_engine``: the engine asks its scheduler for requests after each download and on
  a 5-second heartbeat; a host due sooner needs it to ask now (``engine._slot.nextcall``).
- ``engine_closing``: whether the engine has begun closing the spider (``engine._slot.closing``),
  so that an archive batch is stored before the close waits on it.
- ``ScrapyAgent`` and ``agent_options``: the HTTP/1.1 handler's agent, whose step between a
  response's headers and its body (``_cb_bodyready``) the body budget makes wait
  (crawler/handlers/budgeted.py), and the handler's options it is built with;
  ``get_dataloss_msg`` and ``wrap_twisted_exceptions``, what the handler does with its
  agent's errors (and ``_fail_on_dataloss_warned``, the handler's own flag, which the
  budgeted handler keeps as Scrapy's does).
- ``use_pool``: the handler's connection pool (``_pool``, with the protocol factory Scrapy
  gives it, ``_factory``) replaced by one that keys connections by the host's recorded
  address too (crawler/handlers/connections.py).

A Scrapy release that changes one of these fails the tests that use it (tests/e2e/
test_bodybudget.py, the crawls that wake their engine); then this module changes, and
SCRAPY_TESTED with it.
"""

from __future__ import annotations

from scrapy.core.downloader.handlers.http11 import _ScrapyAgent as ScrapyAgent
from scrapy.utils._download_handlers import get_dataloss_msg, wrap_twisted_exceptions

SCRAPY_TESTED = ("2.19",)  # the minor versions tested (requirements.txt: scrapy>=2.19,<2.20)

__all__ = [
    "ScrapyAgent",
    "agent_options",
    "engine_closing",
    "get_dataloss_msg",
    "use_pool",
    "wake_engine",
    "wrap_twisted_exceptions",
]


def wake_engine(engine) -> None:
    """Have the engine ask its scheduler for a request at its next reactor turn."""
    slot = getattr(engine, "_slot", None)
    if slot is not None:
        slot.nextcall.schedule()


def engine_closing(engine) -> bool:
    """Whether the engine has begun closing the spider."""
    slot = getattr(engine, "_slot", None)
    return slot is not None and slot.closing is not None


def agent_options(handler) -> dict:
    """The options Scrapy's HTTP/1.1 handler builds its agent with."""
    return {
        "contextFactory": handler._contextFactory,
        "bindAddress": handler._bind_address,
        "pool": handler._pool,
        "maxsize": handler._default_maxsize,
        "warnsize": handler._default_warnsize,
        "fail_on_dataloss": handler._fail_on_dataloss,
        "crawler": handler._crawler,
        "tls_verbose_logging": handler._tls_verbose_logging,
    }


def use_pool(handler, pool) -> None:
    """Have the HTTP/1.1 handler keep its connections in ``pool``, as it keeps them in its own
    (its size and Scrapy's lenient protocol factory)."""
    pool.maxPersistentPerHost = handler._pool.maxPersistentPerHost
    pool._factory = handler._pool._factory
    handler._pool = pool
