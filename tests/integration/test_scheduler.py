"""The scheduler and its frontier client (real frontier, real Redis, a test's clock): the
requests of one reactor turn (a page's links) go to the frontier in one call, always before
the acknowledgement of the page they came from; landings ride on the pop that leases their
hosts' next URLs; no more is leased while pages wait to be read, but a submission; one pop a
reactor turn; a page not stored holds the worker."""

import time
from types import SimpleNamespace

from scrapy import Request
from scrapy.utils.test import get_crawler
from twisted.internet import defer, task

from crawler import meta
from crawler.frontier.client import PUSH_CHUNK
from crawler.frontier.frontier import Frontier
from crawler.frontier.shards import ShardedFrontier, server_name
from crawler.scheduler.scheduler import FrontierScheduler
from crawler.spiders.broad import BroadSpider
from testing.servers import RedisServer
from testing.services import project_settings
from testing.threads import FetchedOld, HeldThreads


def open_scheduler(redis_url, crawl_name, **settings):
    """A crawler's frontier scheduler on a test's clock (at the time of day: the frontier's
    other clients read it), opened for the broad spider: (crawler, spider, scheduler). No
    engine runs here: one that reports the downloader busy stands in, and counts the
    times it is woken (``woken``)."""
    crawler = get_crawler(BroadSpider, project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name, **settings))
    woken = []
    crawler.engine = SimpleNamespace(
        downloader=SimpleNamespace(active=True),
        _slot=SimpleNamespace(nextcall=SimpleNamespace(schedule=lambda: woken.append(1)), closing=None),
        woken=woken,
    )
    clock = task.Clock()
    clock.advance(time.time())
    # (the fetch policy's look-ups run at once, not in a thread: no reactor runs here)
    scheduler = FrontierScheduler.from_crawler(crawler, clock, in_thread=defer.maybeDeferred)
    spider = BroadSpider.from_crawler(crawler)
    scheduler.open(spider)
    scheduler.closing.worker_stop.opened()  # (the engine's spider_opened: the worker is open)
    return crawler, spider, scheduler


def asked(scheduler):
    """The engine's next ask for a request, in a reactor turn of its own (one pop a turn); when
    it gets none and the scheduler has it ask again within a millisecond (the pop said a URL
    is due now: new URLs in the inbox, which the spill round the pop started, run at once
    here, wrote out and loaded into their hosts' windows), the engine asks again then."""
    scheduler.clock.advance(0)
    request = scheduler.next_request()
    cadence = scheduler.cadence
    if request is None and 0 < cadence.next_poll - scheduler.clock.seconds() <= 0.001:
        scheduler.clock.advance(cadence.next_poll - scheduler.clock.seconds())
        request = scheduler.next_request()
    return request


def test_a_pages_links_go_in_one_call_before_its_ack(redis_url, crawl_name):
    crawler, _, scheduler = open_scheduler(redis_url, crawl_name)
    frontier = scheduler.frontier
    calls = []
    put = frontier.put
    frontier.put = lambda entries, **kw: calls.append(len(entries)) or put(entries, **kw)
    try:
        assert scheduler.enqueue_request(Request("http://seed.example/"))
        page = asked(scheduler)  # sends the seed, then leases it
        assert calls == [1] and page.url == "http://seed.example/" and page.meta[meta.LEASE]
        links = [f"http://h{i % 7}.example/p{i}" for i in range(60)] + ["http://h1.example/p1"]  # one twice
        assert all(scheduler.enqueue_request(Request(url, meta={"depth": 1})) for url in links)
        assert frontier.stats()["queued"] == 0  # nothing sent yet: they wait for the end of the turn
        assert not scheduler.enqueue_request(Request("http://a..example/"))  # invalid: refused at once
        scheduler.ack(page)  # the page is done: its links go first, in one call
        assert calls == [1, 61] and frontier.stats()["queued"] == 60
        assert crawler.stats.get_value("frontier/enqueued") == 61  # the seed and 60 links
        assert crawler.stats.get_value("frontier/seen") == 1
    finally:
        scheduler.close("finished")
    assert frontier.stats()["leased"] == 0  # the ack was delivered at close


def test_links_offered_as_urls_are_leased_as_plain_requests(redis_url, crawl_name):
    crawler, spider, scheduler = open_scheduler(redis_url, crawl_name)
    try:
        links = ["http://l.example/a", "http://l.example/a", "https://m.example/b", "ftp://n.example/c"]
        scheduler.client.offer_links(links, 2, "http://seed.example/")
        scheduler.client.flush_pushes()
        assert scheduler.frontier.stats()["queued"] == 2
        stats = crawler.stats
        assert stats.get_value("frontier/enqueued") == 2 and stats.get_value("frontier/seen") == 1
        assert stats.get_value("frontier/invalid") == 1  # not http(s)
        got = [asked(scheduler), asked(scheduler)]
        assert sorted(r.url for r in got) == ["http://l.example/a", "https://m.example/b"]
        for r in got:
            assert r.meta["depth"] == 2 and r.headers[b"Referer"] == b"http://seed.example/"
            assert r.errback == spider.errback and r.callback is None and r.meta[meta.LEASE]
            scheduler.ack(r)
    finally:
        scheduler.close("finished")
    assert scheduler.frontier.stats()["leased"] == 0


def written_out(scheduler) -> None:
    """What the worker's next spill round would do after a short pop, done now: the URLs
    pushed to the inbox written out and loaded into their hosts' windows (FRONTIER_HOST_WINDOW)."""
    now = int(scheduler.clock.seconds() * 1000)
    scheduler.client.spill.drain(now)
    scheduler.client.spill.round(now)


def counting_pops(frontier) -> list:
    """The landings each of the frontier's pops carried, one list per pop, from now on
    (looks for submissions alone, which carry none, not counted)."""
    calls, get = [], frontier.get

    def counted(*args, **kw):
        if kw.get("urgent_only"):
            assert not kw.get("landed") and not kw.get("ack")
        else:
            calls.append(list(kw.get("landed", ())))
        return get(*args, **kw)

    frontier.get = counted
    return calls


def test_a_landing_rides_on_the_pop_that_leases_its_hosts_next_url(redis_url, crawl_name):
    _, _, scheduler = open_scheduler(redis_url, crawl_name, FRONTIER_HOST_INTERVAL=0.4, FRONTIER_LOOKAHEAD=0.02)
    clock = scheduler.clock
    pops = counting_pops(scheduler.frontier)
    try:
        scheduler.client.offer_links(["http://h.example/1", "http://h.example/2"], 1, "http://seed.example/")
        scheduler.client.flush_pushes()
        written_out(scheduler)
        first = asked(scheduler)
        # one host, one in flight: the pop found fewer than it asked for, and said when
        # the next is due; the engine's next call does not ask again
        assert first is not None and asked(scheduler) is None and len(pops) == 1
        clock.advance(0.1)  # (the download)
        ended = clock.seconds()
        scheduler.landed(first)
        assert len(pops) == 1 and scheduler.frontier.stats()["in_flight"] == 1  # not sent yet
        # it goes when its host is due again (0.4 s after the download ended), less the
        # lookahead, so that the same pop leases the host's next URL
        clock.advance(0.37)
        assert len(pops) == 1
        clock.advance(0.011)
        assert len(pops) == 2 and len(pops[1]) == 1
        second = asked(scheduler)
        assert second.url == "http://h.example/2" and len(pops) == 2
        # it leaves at its host's turn, which the rate limiter waits for
        assert abs(second.meta[meta.DUE] / 1000 - (ended + 0.4)) < 0.002
        scheduler.ack(first)
        scheduler.ack(second)
    finally:
        scheduler.close("finished")


def test_a_page_of_many_links_is_pushed_in_chunks_all_before_its_ack(redis_url, crawl_name):
    _, _, scheduler = open_scheduler(redis_url, crawl_name)
    frontier = scheduler.frontier
    sizes, put = [], frontier.put
    frontier.put = lambda entries, **kw: sizes.append(len(entries)) or put(entries, **kw)
    try:
        scheduler.client.offer_links(["http://seed.example/"], 0, "")
        page = asked(scheduler)
        sizes.clear()
        scheduler.client.offer_links([f"http://m.example/{i}" for i in range(600)], 1, "http://seed.example/")
        scheduler.client.flush_pushes(everything=False)  # the end of the reactor turn: one chunk
        assert sizes == [PUSH_CHUNK]  # (the rest in the next turns)
        scheduler.ack(page)  # its links go before its ack
        assert sizes == [PUSH_CHUNK, PUSH_CHUNK, 600 - 2 * PUSH_CHUNK]
        assert frontier.stats()["queued"] == 600
    finally:
        scheduler.close("finished")


def test_every_component_of_a_crawler_shares_one_frontier_and_one_redis_client(redis_url, crawl_name):
    from crawler.middlewares.failures import FailureMiddleware
    from crawler.middlewares.ratelimit import RateLimiterMiddleware
    from crawler.middlewares.robots import RobotsMiddleware
    from crawler.pipelines.contentseen import ContentSeenPipeline

    crawler = get_crawler(BroadSpider, project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name))
    parts = [
        FrontierScheduler.from_crawler(crawler),
        RobotsMiddleware.from_crawler(crawler),
        FailureMiddleware.from_crawler(crawler),
        RateLimiterMiddleware.from_crawler(crawler),
    ]
    frontiers = {id(part.frontier) for part in parts}
    assert len(frontiers) == 1
    assert ContentSeenPipeline.from_crawler(crawler).redis is parts[0].frontier.redis
    other = get_crawler(BroadSpider, project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name))
    assert FrontierScheduler.from_crawler(other).frontier is not parts[0].frontier  # one per crawler


def test_urls_a_worker_pushed_before_are_not_sent_again(redis_url, crawl_name):
    crawler, _, scheduler = open_scheduler(redis_url, crawl_name)
    frontier = scheduler.frontier
    sent = []
    put = frontier.put
    frontier.put = lambda entries, **kw: sent.append([e.url for e in entries]) or put(entries, **kw)
    try:
        menu = [f"http://s.example/menu{i}" for i in range(5)]
        scheduler.client.offer_links(menu + ["http://s.example/a"], 1, "http://s.example/")
        scheduler.client.flush_pushes()
        scheduler.client.offer_links(menu + ["http://s.example/b"], 2, "http://s.example/a")  # the next page
        assert scheduler.enqueue_request(Request("http://s.example/menu0", dont_filter=True))  # a forced refetch
        scheduler.client.flush_pushes()
        assert sent[1] == ["http://s.example/b", "http://s.example/menu0"]  # only the new link and the forced one
        assert crawler.stats.get_value("frontier/seen") == 5 and frontier.stats()["queued"] == 8
    finally:
        scheduler.close("finished")


def test_links_for_a_host_with_an_empty_queue_are_looked_for_at_once(redis_url, crawl_name):
    _, _, scheduler = open_scheduler(redis_url, crawl_name, FRONTIER_HOST_INTERVAL=0.05, FRONTIER_POLL_INTERVAL=1.0)
    clock = scheduler.clock
    try:
        scheduler.client.offer_links(["http://e.example/1"], 1, "http://seed.example/")
        page = asked(scheduler)
        scheduler.landed(page)
        clock.advance(0.05)  # its landing's pop: the host's queue is empty, the next look a poll away
        assert asked(scheduler) is None
        scheduler.client.offer_links(["http://e.example/2"], 2, "http://e.example/1")  # the page's links
        scheduler.client.flush_pushes()
        # looked for at once, not at the next poll (a second away)
        assert asked(scheduler).url == "http://e.example/2"
    finally:
        scheduler.close("finished")


def test_no_more_is_leased_while_max_unread_pages_wait_to_be_read(redis_url, crawl_name):
    """Pages downloaded and not yet read count; pages still downloading do not (the
    downloader bounds those: CONCURRENT_REQUESTS)."""
    from scrapy import signals

    crawler, _, scheduler = open_scheduler(
        redis_url, crawl_name, FRONTIER_MAX_UNREAD=3, FRONTIER_HOST_INTERVAL=0, FRONTIER_PREFETCH=1
    )
    try:
        scheduler.client.offer_links([f"http://h{i}.example/" for i in range(20)], 0, "http://seed.example/")
        scheduler.client.flush_pushes()
        leased = [asked(scheduler) for _ in range(5)]
        assert None not in leased  # five downloading: none read, none downloaded
        for request in leased[:3]:  # three downloaded
            scheduler.landed(request)
        assert asked(scheduler) is None  # all the other hosts are due; three pages wait to be read
        assert crawler.stats.get_value("frontier/unread_full") >= 1
        page = SimpleNamespace(request=leased[0])
        crawler.signals.send_catch_log(signals.item_scraped, item={}, response=page, spider=None)
        assert asked(scheduler) is not None  # one was read: one more
        scheduler.landed(leased[3])
        assert asked(scheduler) is None
        scheduler.ack(leased[1])  # handled (acknowledged) counts as read too
        assert asked(scheduler) is not None
    finally:
        scheduler.close("finished")


def test_no_more_is_leased_while_max_unstored_pages_wait_for_the_stores(redis_url, crawl_name, caplog):
    """Pages fetched and read but not yet stored (their leases not acknowledged: a slow or
    absent archive, UrlStore) bound what a worker leases, submissions included; by pages
    and by bytes; it says when it starts waiting and when it goes on."""
    from scrapy import signals
    from scrapy.http import HtmlResponse

    from crawler.frontier import submit

    crawler, _, scheduler = open_scheduler(
        redis_url,
        crawl_name,
        FRONTIER_MAX_UNSTORED=3,
        FRONTIER_MAX_UNSTORED_BYTES=10_000,
        FRONTIER_HOST_INTERVAL=0,
        FRONTIER_PREFETCH=1,
    )

    def fetched(request, size=10):
        response = HtmlResponse(request.url, body=b"x" * size, request=request)
        crawler.signals.send_catch_log(signals.response_downloaded, response=response, request=request, spider=None)
        scheduler.landed(request)
        crawler.signals.send_catch_log(signals.item_scraped, item={}, response=response, spider=None)  # read

    try:
        scheduler.client.offer_links([f"http://h{i}.example/" for i in range(20)], 0, "http://seed.example/")
        scheduler.client.flush_pushes()
        leased = [asked(scheduler) for _ in range(3)]
        for request in leased:
            fetched(request)  # read, not stored: the archive has not taken them
        with caplog.at_level("INFO"):
            assert asked(scheduler) is None  # 17 hosts due; three pages wait for the stores
            now = int(scheduler.clock.seconds() * 1000)
            submit.submit(scheduler.frontier, [submit.Submission("http://urgent.example/")], {}, now=now)
            scheduler.clock.advance(0.05)
            assert asked(scheduler) is None  # not even a submission
            assert crawler.stats.get_value("frontier/unstored_waits") == 1
            scheduler.clock.advance(2)
            scheduler.ack(leased[0])  # one stored: one more may be leased
            assert asked(scheduler) is not None
        said = caplog.text
        assert "Waiting for the stores: 3 pages" in said and "FRONTIER_MAX_UNSTORED 3" in said
        assert "The stores caught up after 2.0 s (2 pages not yet stored)" in said
        assert crawler.stats.get_value("frontier/unstored_wait_seconds") >= 2
        for request in leased[1:]:
            scheduler.ack(request)
        big = asked(scheduler)
        fetched(big, size=10_000)  # one page of FRONTIER_MAX_UNSTORED_BYTES
        assert asked(scheduler) is None
        scheduler.give_back(big)  # not stored, given back: no longer held
        assert not scheduler.pacing.held and scheduler.pacing.held_bytes == 0
    finally:
        scheduler.close("finished")


def test_a_submission_is_leased_past_max_unread_and_before_the_next_host_is_due(redis_url, crawl_name):
    """Between pops (FRONTIER_MAX_UNREAD pages wait to be read, or no host is due yet),
    the scheduler still leases a due host's submission (read before the pages waiting),
    while fewer than FRONTIER_MAX_UNREAD pages so leased are unread."""
    from scrapy import signals

    from crawler.frontier import submit

    crawler, _, scheduler = open_scheduler(
        redis_url, crawl_name, FRONTIER_MAX_UNREAD=2, FRONTIER_HOST_INTERVAL=0, FRONTIER_PREFETCH=1
    )

    def submitted(*urls):
        now = int(scheduler.clock.seconds() * 1000)  # (the scheduler's clock, not the wall's)
        submit.submit(scheduler.frontier, [submit.Submission(url) for url in urls], {}, now=now)
        scheduler.clock.advance(0.05)  # (the scheduler looks every URGENT_LOOK_EVERY)

    try:
        scheduler.client.offer_links([f"http://h{i}.example/" for i in range(10)], 0, "http://seed.example/")
        scheduler.client.flush_pushes()
        for request in [asked(scheduler), asked(scheduler)]:
            scheduler.landed(request)
        assert asked(scheduler) is None  # two pages wait to be read
        submitted("http://new1.example/", "http://new2.example/", "http://new3.example/")
        urgent = [asked(scheduler), asked(scheduler)]
        assert [r.url for r in urgent] == ["http://new1.example/", "http://new2.example/"]
        assert all(r.meta.get(meta.URGENT) for r in urgent)
        scheduler.clock.advance(0.05)
        assert asked(scheduler) is None  # two submissions' pages not read yet
        scheduler.landed(urgent[0])
        page = SimpleNamespace(request=urgent[0])
        crawler.signals.send_catch_log(signals.item_scraped, item={}, response=page, spider=None)
        scheduler.clock.advance(0.05)
        assert asked(scheduler).url == "http://new3.example/"  # one of them was read
        assert crawler.stats.get_value("frontier/leased_urgent") == 3
        assert asked(scheduler) is None  # (still two pages unread, and nothing else submitted)
    finally:
        scheduler.close("finished")

    crawler, _, scheduler = open_scheduler(redis_url, crawl_name + "-b", FRONTIER_HOST_INTERVAL=60)
    try:
        scheduler.client.offer_links(["http://only.example/0", "http://only.example/1"], 0, "http://seed.example/")
        scheduler.client.flush_pushes()
        scheduler.ack(asked(scheduler))
        assert asked(scheduler) is None  # only.example: in 60 s
        submitted("http://new.example/")
        assert asked(scheduler).url == "http://new.example/"  # not at the next poll: now
    finally:
        scheduler.close("finished")


def test_one_pop_a_reactor_turn(redis_url, crawl_name):
    """The engine asks for requests in a loop until its downloader is full: the scheduler
    pops once a reactor turn (FRONTIER_PREFETCH requests), and has the engine woken for
    the next turn, so that one turn does not lease CONCURRENT_REQUESTS at once while
    every other event waits."""
    crawler, _, scheduler = open_scheduler(redis_url, crawl_name, FRONTIER_HOST_INTERVAL=0, FRONTIER_PREFETCH=2)
    try:
        scheduler.client.offer_links([f"http://h{i}.example/" for i in range(10)], 0, "http://seed.example/")
        scheduler.client.flush_pushes()
        written_out(scheduler)
        woken = len(crawler.engine.woken)
        turn = [scheduler.next_request() for _ in range(3)]
        assert None not in turn[:2] and turn[2] is None  # two leased in this turn
        scheduler.clock.advance(0)  # the next reactor turn: the engine is woken for it
        assert len(crawler.engine.woken) > woken
        assert scheduler.next_request() is not None and scheduler.next_request() is not None
        assert scheduler.next_request() is None
    finally:
        scheduler.close("finished")


def test_a_page_not_stored_holds_the_worker_until_one_is_stored_again(redis_url, crawl_name):
    """A store that does not take a page (page_not_stored): its lease goes back, and the
    worker leases no more for half the outage so far (0.5 s at first, at most 30 s; up to a
    quarter less at random), rather than fetching pages only to drop them; the first page stored ends the hold."""
    from crawler.signals import page_not_stored

    crawler, _, scheduler = open_scheduler(
        redis_url, crawl_name, FRONTIER_HOST_INTERVAL=0, FRONTIER_PREFETCH=1, FRONTIER_MAX_UNREAD=100
    )
    clock = scheduler.clock
    try:
        scheduler.client.offer_links([f"http://h{i}.example/" for i in range(10)], 0, "http://seed.example/")
        scheduler.client.flush_pushes()
        first, second, stored = asked(scheduler), asked(scheduler), asked(scheduler)
        crawler.signals.send_catch_log(page_not_stored, request=first)
        assert asked(scheduler) is None  # held
        assert crawler.stats.get_value("frontier/store_holds") == 1
        clock.advance(0.6)
        third = asked(scheduler)  # 0.5 s later: one try
        assert third is not None
        clock.advance(20)
        crawler.signals.send_catch_log(page_not_stored, request=second)  # down for 20 s: held 7.5-10 s
        clock.advance(7)
        assert asked(scheduler) is None
        clock.advance(4)
        assert asked(scheduler) is not None
        crawler.signals.send_catch_log(page_not_stored, request=third)
        assert asked(scheduler) is None
        scheduler.ack(stored)  # a page stored: the hold ends at once
        assert asked(scheduler) is not None
        assert crawler.stats.get_value("frontier/lease/given_back") == 3
    finally:
        scheduler.close("finished")


def test_the_fetch_policys_look_up_runs_off_the_reactor_and_its_answer_is_kept(redis_url, crawl_name):
    """The UrlStore's read for a pop's requests is handed to a thread (here one the test
    runs by hand): meanwhile next_request answers at once; then a URL fetched recently is
    acknowledged unfetched and the others reach the engine. (The store stands in for the
    UrlStore's last_fetched: what is checked is where the read runs.)"""
    from crawler.freshness.policy import FetchPolicy

    in_thread = HeldThreads()
    reads = in_thread.calls

    crawler = get_crawler(
        BroadSpider, project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name, FRONTIER_PREFETCH=4)
    )
    crawler.engine = SimpleNamespace(
        downloader=SimpleNamespace(active=True),
        _slot=SimpleNamespace(nextcall=SimpleNamespace(schedule=lambda: None), closing=None),
    )
    clock = task.Clock()
    clock.advance(time.time())
    scheduler = FrontierScheduler.from_crawler(crawler, clock, in_thread=in_thread)
    scheduler.open(BroadSpider.from_crawler(crawler))
    scheduler.use_policy(FetchPolicy(FetchedOld(), 86400, crawler.stats))
    try:
        scheduler.client.offer_links(["http://a.example/old", "http://b.example/new"], 0, "http://seed.example/")
        scheduler.client.flush_pushes()
        written_out(scheduler)
        # leased, looked up elsewhere (beside the client's round of spill and addresses,
        # when a window or politeness per address is set)
        assert asked(scheduler) is None
        looks = [i for i, (fn, _, _) in enumerate(reads) if fn != scheduler.client.upkeep]
        assert len(looks) == 1
        assert scheduler.has_pending_requests()
        in_thread.finish(looks[0])  # the thread's answer, back in the reactor
        assert [r.url for r in [asked(scheduler)]] == ["http://b.example/new"]
        assert asked(scheduler) is None
        assert crawler.stats.get_value("fetchpolicy/skipped_recent") == 1
        scheduler.client.flush_acks()
        assert scheduler.frontier.stats()["leased"] == 1  # the old one's lease acknowledged
    finally:
        scheduler.close("finished")


def test_a_spill_store_found_refused_at_a_round_stops_the_worker(redis_url, crawl_name, tmp_path):
    """A worker whose Redis was away at start checks its spill store at its first round; a
    store that is not the crawl's then stops the worker (spill_refused), and nothing of its
    is written to that store."""
    from crawler.frontier.spill import SPILL_REFUSED

    crawler, _, scheduler = open_scheduler(redis_url, crawl_name, FRONTIER_HOST_WINDOW=4, CRAWL_DIR=str(tmp_path))
    closed = []

    async def close_spider_async(reason):
        closed.append(reason)

    crawler.engine.close_spider_async = close_spider_async
    spill = scheduler.client.spill
    try:
        assert spill.bound  # (checked when the scheduler opened)
        spill.bound = False  # as if Redis had been away then: the crawl's store recorded by another
        frontier = scheduler.frontier
        frontier.redis.set(frontier.keys.spill_store, "the SQLite file /elsewhere/frontier-spill.sqlite on other")
        assert scheduler.enqueue_request(Request("http://seed.example/"))
        asked(scheduler)  # the take, then the client's round
        assert closed == [SPILL_REFUSED] and crawler.stats.get_value("frontier/error") == SPILL_REFUSED
        assert spill.chunks.size(frontier.keys.prefix) == (0, 0)
    finally:
        scheduler.close("finished")


def test_a_sharded_worker_renews_its_leases_while_a_server_is_away_since_its_start(tmp_path, crawl_name):
    """REDIS_URLS of two servers, one away from the worker's start (the crawl's epoch never
    read there): the leases the worker holds on the other are renewed all the same (they
    were not: the epoch's check failed first at each renewal, and a page slower than the
    lease was fetched again by another worker)."""
    servers = [RedisServer(tmp_path / f"r{i}").start() for i in range(2)]
    try:
        urls = [s.url for s in servers]
        ring = ShardedFrontier([Frontier(s.client, crawl_name) for s in servers], [server_name(u) for u in urls]).ring
        host = next(f"h{i}.example" for i in range(100) if ring.index(f"h{i}.example") == 0)
        servers[1].stop()
        crawler, _, scheduler = open_scheduler(urls[0], crawl_name, REDIS_URLS=urls)
        try:
            assert scheduler.enqueue_request(Request(f"http://{host}/"))
            page = asked(scheduler)
            assert page is not None and page.url == f"http://{host}/"
            leases = scheduler.frontier.shards[0].keys.leases
            [(_, expiry)] = servers[0].client.zrange(leases, 0, -1, withscores=True)
            scheduler.clock.advance(30)  # (the renewals every lease time / 3)
            [(_, renewed)] = servers[0].client.zrange(leases, 0, -1, withscores=True)
            assert renewed >= expiry + 25_000, (expiry, renewed)
        finally:
            scheduler.close("finished")
    finally:
        for s in servers:
            s.kill()


def test_a_take_that_redis_answers_sends_what_the_outbox_holds_at_once(tmp_path, crawl_name):
    """After a long outage the outbox's next try is 30 s away; a take Redis answers before
    then has the links and the ack that waited sent at the next reactor turn (they waited
    out the whole back-off: links not queued, a lease held that long after its page)."""
    with RedisServer(tmp_path, persistent=True) as server:
        crawler, _, scheduler = open_scheduler(server.url, crawl_name, FRONTIER_LEASE_SECONDS=600)
        try:
            assert scheduler.enqueue_request(Request("http://seed.example/"))
            page = asked(scheduler)
            assert page is not None
            server.stop()
            links = [f"http://h{i}.example/" for i in range(5)]
            assert all(scheduler.enqueue_request(Request(url, meta={"depth": 1})) for url in links)
            scheduler.ack(page)
            scheduler.clock.advance(0)
            assert len(scheduler.client.outbox) == len(links) + 1
            scheduler.clock.advance(61)  # (a retry fails: the next is half the outage away)
            assert scheduler.client.outbox.backoff == 30
            server.start()
            assert scheduler.client.take(1) is not None
            scheduler.clock.advance(0)
            assert len(scheduler.client.outbox) == 0
            numbers = scheduler.frontier.stats()
            assert numbers["queued"] + numbers["leased"] == len(links) and numbers["acked"] == 1
        finally:
            scheduler.close("finished")


def _read(crawler, scheduler, request):
    """``request``'s page downloaded, landed and read (its item out of the spider): stored
    only once its archive batch is (here never)."""
    from scrapy import signals
    from scrapy.http import HtmlResponse

    response = HtmlResponse(request.url, body=b"x" * 10, request=request)
    crawler.signals.send_catch_log(signals.response_downloaded, response=response, request=request, spider=None)
    scheduler.landed(request)
    crawler.signals.send_catch_log(signals.item_scraped, item={}, response=response, spider=None)


def test_a_landings_pop_keeps_the_hold_after_a_page_not_stored(redis_url, crawl_name):
    """After a page not stored the worker leases nothing for a while; the pop that carries a
    landing due meanwhile sends the landing alone (it leased the host's next URL, which the
    engine got during the hold)."""
    from crawler.signals import page_not_stored

    crawler, _, scheduler = open_scheduler(
        redis_url, crawl_name, FRONTIER_HOST_INTERVAL=0.2, FRONTIER_PREFETCH=1, FRONTIER_MAX_UNREAD=100
    )
    try:
        scheduler.client.offer_links(["http://h.example/1", "http://h.example/2", "http://g.example/1"], 0, "")
        scheduler.client.flush_pushes()
        first, second = asked(scheduler), asked(scheduler)
        h, g = (first, second) if first.url.startswith("http://h.") else (second, first)
        _read(crawler, scheduler, h)
        crawler.signals.send_catch_log(page_not_stored, request=g)  # (the stores down: a hold of some 0.4 s)
        assert asked(scheduler) is None
        scheduler.clock.advance(0.19)  # h's landing is due
        assert scheduler.clock.seconds() < scheduler.pacing.hold_until
        assert scheduler.leased.buffer == [] and asked(scheduler) is None
        assert not scheduler.client.owes_landings  # (the landing went alone)
    finally:
        scheduler.close("finished")


def test_the_unstored_bound_met_first_by_a_landing_tells_the_archive_batch_to_go(redis_url, crawl_name):
    """FRONTIER_MAX_UNSTORED reached: the open archive batch is told to be stored now
    (frontier_waiting), whether the engine's ask or a landing's pop meets the bound first
    (met by a landing, it waited for the batch's age)."""
    from crawler.signals import frontier_waiting

    crawler, _, scheduler = open_scheduler(
        redis_url, crawl_name, FRONTIER_HOST_INTERVAL=0.2, FRONTIER_PREFETCH=1, FRONTIER_MAX_UNSTORED=1
    )
    said = []
    crawler.signals.connect(lambda: said.append(1), signal=frontier_waiting, weak=False)
    try:
        scheduler.client.offer_links(["http://h.example/1", "http://h.example/2", "http://g.example/1"], 0, "")
        scheduler.client.flush_pushes()
        _read(crawler, scheduler, asked(scheduler))  # one page not stored yet: at the bound
        scheduler.clock.advance(0.19)  # its landing is due before the engine asks again
        assert said == [1]
        assert asked(scheduler) is None and said == [1]
    finally:
        scheduler.close("finished")


def test_a_page_let_go_at_the_max_hold_still_counts_until_its_store_takes_it(redis_url, crawl_name):
    """A page read and waiting for its store (an outage) past FRONTIER_LEASE_MAX_HOLD: its
    lease is let go (another worker may fetch it), but it still counts against
    FRONTIER_MAX_UNSTORED, so the worker leases nothing new until the stores catch up (it
    leased again, a round of pages fetched to wait beside it at each max hold)."""
    crawler, _, scheduler = open_scheduler(
        redis_url,
        crawl_name,
        FRONTIER_HOST_INTERVAL=0,
        FRONTIER_PREFETCH=1,
        FRONTIER_MAX_UNSTORED=1,
        FRONTIER_LEASE_MAX_HOLD=30,
        FRONTIER_LEASE_SECONDS=60,
    )
    try:
        scheduler.client.offer_links([f"http://h{i}.example/" for i in range(5)], 0, "")
        scheduler.client.flush_pushes()
        first = asked(scheduler)
        _read(crawler, scheduler, first)  # (its archive batch not stored: a store away)
        assert asked(scheduler) is None  # at the bound
        scheduler.clock.advance(41)  # (renewals at 20 s and 40 s: the second lets it go)
        assert first.meta[meta.LEASE] not in scheduler.client.held
        assert asked(scheduler) is None and len(scheduler.pacing.held) == 1
        scheduler.ack(first)  # its store took it at last
        assert asked(scheduler) is not None
    finally:
        scheduler.close("finished")
