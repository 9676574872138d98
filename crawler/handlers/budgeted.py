"""Scrapy's HTTP/1.1 download handler, with the one step between a response's headers
and its body made to wait for the crawler's BodyBudget (crawler/page/budget.py):
``_cb_bodyready`` of Scrapy's agent, a private class (crawler/scrapy_private.py names it)."""

from __future__ import annotations

import logging
import time

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.exceptions import ResponseDataLossError
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import reactor
from twisted.internet.defer import CancelledError, maybeDeferred
from twisted.web.iweb import UNKNOWN_LENGTH

from crawler import meta
from crawler.handlers.connections import AddressedPool
from crawler.page.budget import BodyBudget, Charge
from crawler.scrapy_private import ScrapyAgent, agent_options, get_dataloss_msg, use_pool, wrap_twisted_exceptions
from crawler.services import recorded_address, services

logger = logging.getLogger(__name__)


class _BudgetAgent(ScrapyAgent):
    """Scrapy's agent, whose body reading waits for the budget when the response
    announces a big body."""

    def __init__(self, *, budget: BodyBudget, **kwargs):
        super().__init__(**kwargs)
        self.budget = budget
        self.charge: Charge | None = None

    def _cb_bodyready(self, txresponse, request):
        size = txresponse.length
        maxsize = request.meta.get(meta.DOWNLOAD_MAXSIZE, self._maxsize)
        if size == UNKNOWN_LENGTH or not self.budget.big(size) or (maxsize and size > maxsize):
            return super()._cb_bodyready(txresponse, request)
        wait = self.budget.reserve(size)
        if wait.called:  # room at once
            self.charge = wait.result
            return super()._cb_bodyready(txresponse, request)
        since = time.monotonic()

        def admitted(charge: Charge):
            self.charge = charge
            waited = time.monotonic() - since
            timeout = getattr(self, "_timeout_cl", None)
            if timeout is not None and timeout.active():
                timeout.delay(waited)  # the wait is not download time
            return maybeDeferred(super(_BudgetAgent, self)._cb_bodyready, txresponse, request)

        def gave_up(failure):
            failure.trap(CancelledError)
            producer = getattr(txresponse._transport, "_producer", None)
            if producer is not None:  # its body will not be read
                producer.abortConnection()
            return failure

        wait.addCallbacks(admitted, gave_up)
        return wait

    def release(self) -> None:
        if self.charge is not None:
            self.charge.release()
            self.charge = None


class BudgetedDownloadHandler(HTTP11DownloadHandler):
    """HTTP(S) downloads whose big bodies keep within the crawler's BodyBudget."""

    def __init__(self, crawler):
        super().__init__(crawler)
        self.budget = services(crawler).body_budget
        if crawler.settings.getbool("FRONTIER_ADDRESS_POLITENESS"):  # (connections.py)
            use_pool(self, AddressedPool(reactor, lambda name: recorded_address(crawler, name)))

    async def download_request(self, request):
        if self.budget.max_bytes <= 0:
            return await super().download_request(request)
        agent = _BudgetAgent(budget=self.budget, **agent_options(self))
        try:
            with wrap_twisted_exceptions():
                response = await maybe_deferred_to_future(agent.download_request(request))
        except ResponseDataLossError:
            agent.release()
            if not self._fail_on_dataloss_warned:
                logger.warning(get_dataloss_msg(request.url))
                self._fail_on_dataloss_warned = True
            raise
        except BaseException:
            agent.release()
            raise
        self.budget.hold(response, agent.charge)
        return response
