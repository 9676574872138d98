"""The broad-crawl spider: fetch pages from the frontier, yield one Page each, follow links.

    scrapy crawl broad -a seeds=seeds.txt -o pages.jsonl

Arguments (``-a``), each also a setting:
    seeds            seed files or seed URLs, comma separated, ingested before crawling (``scrapy seed``)
    allowed_domains  comma separated; links outside these domains (and subdomains) are dropped
    allowed_prefixes comma separated URL prefixes; links not starting with one are dropped
    follow           "0" to fetch only the seeds
    (``crawl`` and ``profile`` are the crawl command's: crawler/commands/crawl.py)

Reading a page: a 2xx HTML page is read once, in a page worker process
(crawler/page/workers.py), by crawler/page/reader.py: one decode and one parse give its
links, and what the content-seen and metadata pipelines need (they take it from the
Page, and read the page themselves only for items of other spiders). The CPU time of
each stage is counted in the stats (``pagereader/ms/<stage>``, ``pagereader/pages``).

Links: only http(s), not binary files (Scrapy's IGNORED_EXTENSIONS); a page's links are
listed in its Page (``outlinks``, nofollow flagged) and followed by the links pipeline
after content seen (crawler/pipelines/links.py): not ``rel=nofollow`` links, none at all
from a page with ``<meta name=robots content=nofollow>``, none from an exact duplicate.
Text that is not HTML (XML, plain text) has its links read by Scrapy's link extractor.

Sitemaps (``parse_sitemap``; the robots middleware queues the ``Sitemap:`` URLs of
robots.txt): a sitemap index queues its sitemaps, a sitemap its page URLs (in scope, at
most SITEMAP_MAX_URLS each, with their ``changefreq`` and ``lastmod`` for the page's
recrawl schedule); gzipped sitemaps are read too. A sitemap is not a Page.

A recrawl (a due URL put back, ``meta.RECRAWL``) is sent with If-None-Match /
If-Modified-Since; its Page carries the stored state (``recrawl``) and a 304 answer is a
Page like any other, which the UrlStore pipeline records as unchanged.

A URL robots.txt disallows becomes a Page with status "robots_disallowed".
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from functools import partial

import redis
import scrapy
from scrapy import signals
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor
from scrapy.utils.conf import build_component_list
from scrapy.utils.defer import deferred_to_future, maybe_deferred_to_future
from scrapy.utils.gz import gunzip
from scrapy.utils.sitemap import Sitemap
from twisted.internet import threads

from crawler import meta
from crawler.contentseen import fingerprints as fp
from crawler.exceptions import RobotsDisallowed
from crawler.items import Page
from crawler.page.decode import is_html
from crawler.page.reader import STAGES, Reading, read_page
from crawler.page.workers import PageReadTimedOut, PageWorkerCrashed
from crawler.scope.addresses import guard_hint
from crawler.scope.reasons import PRIVATE_ADDRESS
from crawler.scope.rules import EMPTY
from crawler.scope.scope import CrawlScope
from crawler.services import services
from crawler.stopping import WorkerStop
from crawler.urls import InvalidURL, normalize_url, url_options

logger = logging.getLogger(__name__)

SEEDS_FAILED = "seeds_failed"  # close reason: the seeds could not all be added (exit code 1)
SEEDS_REFUSED = "seeds_refused"  # close reason: no seed was usable, nothing to crawl (exit code 2)


def split_arg(value) -> list[str]:
    """A comma-separated argument (``-a seeds=a.txt,b.txt``) or a list, as a list."""
    if not value:
        return []
    if isinstance(value, str):
        value = value.split(",")
    return [v.strip() for v in value if v.strip()]


class _PatientFrontier:
    """The two frontier verbs seed ingestion uses, waiting out Redis outages."""

    def __init__(self, frontier, patient):
        self.frontier, self.patient = frontier, patient

    def prepare(self, entries):
        return self.patient.call(self.frontier.prepare, entries)

    def send(self, prepared):
        return self.patient.call(self.frontier.send, prepared)


def _headers(headers) -> dict[str, list[str]]:
    return {k.decode("latin-1"): [v.decode("latin-1") for v in vs] for k, vs in headers.items()}


# its -a arguments and what each does (scrapy crawl refuses others, and its -h lists these)
ARGUMENTS = {
    "seeds": "seed files or seed URLs, comma separated, added before crawling (as scrapy seed adds them)",
    "allowed_domains": "comma separated (CRAWL_ALLOWED_DOMAINS): only these domains and their subdomains",
    "allowed_prefixes": "comma separated URL prefixes (CRAWL_ALLOWED_PREFIXES): only URLs starting with one",
    "follow": "0 to fetch the seeds alone, no link followed (CRAWL_FOLLOW_LINKS)",
}


class BroadSpider(scrapy.Spider):
    name = "broad"
    # its -a arguments (scrapy crawl refuses others; a leading _ is a scrapyd job's own)
    arguments = tuple(ARGUMENTS)

    def __init__(self, *args, seeds=None, allowed_domains=None, allowed_prefixes=None, follow=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.seed_files = split_arg(seeds)
        self._arg_domains = split_arg(allowed_domains)
        self._arg_prefixes = split_arg(allowed_prefixes)
        self._arg_follow = follow

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        s = crawler.settings
        # the crawl's scope (its rules are the frontier's, read again as they change)
        spider.scope = CrawlScope.from_settings(s, spider._arg_domains, spider._arg_prefixes, rules=EMPTY)
        spider.follow = (
            s.getbool("CRAWL_FOLLOW_LINKS")
            if spider._arg_follow is None
            else spider._arg_follow not in ("0", "false", "no")
        )
        spider.url_options = url_options(s)
        spider._seeding_stop = threading.Event()  # set at close: seed ingestion stops (and stops waiting for Redis)
        spider.worker_stop = WorkerStop(crawler)  # closes the worker when its seeds fail (start)
        crawler.signals.connect(spider._stop_seeding, signal=signals.engine_stopped)
        crawler.signals.connect(spider._stop_seeding, signal=signals.spider_closed)
        spider.link_extractor = LinkExtractor(
            deny_extensions=IGNORED_EXTENSIONS, canonicalize=False, unique=True, tags=("a", "area")
        )
        spider.page_workers = services(crawler).page_workers
        # the crawl starts once the page processes are up (the engine awaits the handler)
        crawler.signals.connect(spider.page_workers.ready, signal=signals.spider_opened)
        spider.read = partial(  # picklable: it goes to the page workers
            read_page,
            links=spider.follow,
            fingerprints=_pipeline_on(s, "crawler.pipelines.contentseen.ContentSeenPipeline", "CONTENT_SEEN_ENABLED"),
            metadata=_pipeline_on(s, "crawler.pipelines.metadata.MetadataPipeline", "METADATA_ENABLED"),
            min_words=s.getint("CONTENT_SEEN_MIN_WORDS"),
            url_options=spider.url_options,
            max_field_length=s.getint("METADATA_MAX_FIELD_LENGTH"),
            max_fields=s.getint("METADATA_MAX_FIELDS"),
            max_bytes=s.getint("METADATA_MAX_BYTES"),
            max_links=s.getint("LINKS_MAX_PER_PAGE"),
        )
        return spider

    async def start(self):
        if self.seed_files:
            reason = await deferred_to_future(threads.deferToThread(self._seed))
            if reason:  # seeds_failed (exit code 1) or seeds_refused (exit code 2)
                self.worker_stop.close(reason)
        for request in []:  # every URL comes from the frontier
            yield request

    def _stop_seeding(self, **kwargs) -> None:
        self._seeding_stop.set()

    def _seed(self) -> str | None:
        """``_ingest_seeds``; None, or the reason the crawl closes with. When the seeds were
        not all added, one clear line and the stat seeds/error, said in this thread: a crawl
        stopped meanwhile (Ctrl-C while Redis is away) says it too, and exits 1
        (crawler/commands/crawl.py). When no seed was usable (each invalid, or refused by
        the network guard or the frontier) and the crawl has nothing queued either, one line
        saying why and SEEDS_REFUSED: there is nothing to crawl (exit 2, as for a seed file
        that cannot be read)."""
        error, report = self._ingest_seeds()
        if error:
            logger.error("Seeds not added: %s", error)
            self.crawler.stats.set_value("seeds/error", error)
            return SEEDS_FAILED
        if report is not None and not (report.added or report.seen) and self._nothing_queued():
            guarded = report.refused_by.get(PRIVATE_ADDRESS)
            line = f"No seed added, nothing to crawl: {report.summary()}" + (
                f"; {guard_hint(guarded)}" if guarded else ""
            )
            logger.error("%s", line)
            return SEEDS_REFUSED
        if report is not None and report.refused_by.get(PRIVATE_ADDRESS):
            logger.warning("%s", guard_hint(report.refused_by[PRIVATE_ADDRESS]))
        return None

    def _nothing_queued(self) -> bool:
        try:
            numbers = services(self.crawler).frontier.stats()
        except redis.RedisError:  # (the scheduler waits for it, and says so)
            return False
        return not numbers["queued"] and not numbers["leased"]

    def _ingest_seeds(self):
        """Ingest the seed files (in a thread), waiting out a Redis outage as the
        scheduler does: (None, the ingestion's report), or (why the seeds were not all
        added, None)."""
        from crawler.frontier.connection import Patient
        from crawler.seeds.files import SeedFileError
        from crawler.seeds.ingest import Every, IngestStopped, ingest

        s = self.settings
        patient = Patient(self._seeding_stop, "seed ingestion")
        try:
            crawl = services(self.crawler)
            frontier, spill = crawl.frontier, crawl.spill
            report = ingest(
                _PatientFrontier(frontier, patient),
                self.seed_files,
                batch_size=s.getint("SEED_BATCH_SIZE"),
                **self.url_options,
                progress=Every(
                    lambda report: logger.info("Seeding: %s", report.progress_text()),
                    s.getfloat("SEED_PROGRESS_INTERVAL"),
                ),
                spill=spill.beside() if spill is not None else None,  # (its rounds claim apart from the worker's)
                group_urls=s.getint("SEED_GROUP_URLS"),
                spool_dir=s.get("SEED_SPOOL_DIR") or None,
                stop=self._seeding_stop,
            )
        except SeedFileError as exc:
            return str(exc), None
        except IngestStopped as exc:  # (the crawl stopped while seeding: it does not wait for the rest)
            done = exc.report.summary() if exc.report is not None else "nothing"
            return f"stopped with the crawl after {done}; run the same command again to add the rest", None
        except redis.RedisError as exc:  # stopped while Redis was away
            return f"Redis unreachable ({type(exc).__name__}: {exc}); run the same command again", None
        except Exception as exc:
            logger.exception("Seed ingestion failed")
            return f"{type(exc).__name__}: {exc}", None
        logger.info("Seeds: %s", report.summary())
        for where, reason in report.invalid_examples:  # each with its reason, as scrapy seed says them
            logger.warning("Seed line invalid: %s: %s", where, reason)
        if report.invalid > len(report.invalid_examples):
            logger.warning("Seed lines invalid: ... %d more", report.invalid - len(report.invalid_examples))
        for key in ("added", "seen", "invalid", "refused"):
            self.crawler.stats.inc_value(f"seeds/{key}", getattr(report, key))
        return None, report

    # -- pages ---------------------------------------------------------------------

    async def parse(self, response):
        reading = None
        headers = _headers(response.headers)
        if _readable(response, headers):
            try:
                reading = await maybe_deferred_to_future(
                    self.page_workers.run(
                        self.read,
                        response.body,
                        response.url,
                        headers,
                        urgent=bool(response.request.meta.get(meta.URGENT)),
                    )
                )
            except PageReadTimedOut:  # read as far as its bytes: the pipelines do not try again
                self.crawler.stats.inc_value("pagereader/timed_out")
                reading = self.unread(response.body)
            except PageWorkerCrashed:  # the pipelines try once more, each for its part
                self.crawler.stats.inc_value("pagereader/crashed")
        yield self.page(response, reading)  # its links are followed by crawler.pipelines.links

    def unread(self, body: bytes) -> Reading:
        """The reading of a page that could not be read in time: no links, no metadata, its
        body's digest alone (exact copies), problem ``timeout``."""
        prints = None
        if self.read.keywords.get("fingerprints"):
            prints = fp.digest_only(fp.body_digest(body))
        return Reading([], False, 0, prints, {}, ["timeout"], {})

    def read_now(self, response) -> Reading | None:
        """The reading ``parse`` gets from a page worker, in the calling thread (tests,
        benchmarks); None for a response that is not read."""
        headers = _headers(response.headers)
        if not _readable(response, headers):
            return None
        return self.read(response.body, response.url, headers)

    def page(self, response, reading: Reading | None) -> Page:
        """The Page of a response, with the page's reading (None: not read)."""
        page = self._page(response.request, response)
        outlinks = []
        ok = 200 <= response.status < 300
        if reading is not None:
            services(self.crawler).pages.set_reading(page, reading)  # for the pipelines; never exported
            stats = self.crawler.stats
            stats.inc_value("pagereader/pages")
            for stage in STAGES:
                stats.inc_value(f"pagereader/ms/{stage}", round(1000 * reading.timings.get(stage, 0.0), 3))
            if self.follow:
                outlinks = reading.links
                if reading.nofollow_page:
                    stats.inc_value("links/meta_nofollow_pages")
                if reading.invalid_links:
                    stats.inc_value("links/invalid", reading.invalid_links)
        elif self.follow and ok and _has_links(response):
            try:
                outlinks = self._outlinks(response)
            finally:
                _drop_selector(response)
        most = self.read.keywords.get("max_links", 0)
        if most and len(outlinks) >= most:  # (the page's first LINKS_MAX_PER_PAGE links)
            outlinks = outlinks[:most]
            self.crawler.stats.inc_value("links/capped_pages")
        page["outlinks"] = outlinks
        return page

    def errback(self, failure):
        request = failure.request
        page = self._page(request, getattr(failure.value, "response", None))
        page["error"] = f"{type(failure.value).__name__}: {failure.value}"[:500]
        if isinstance(failure.value, RobotsDisallowed):
            page["status"] = "robots_disallowed"
        page["outlinks"] = []
        self.crawler.stats.inc_value(f"pages/error/{type(failure.value).__name__}")
        yield page

    def parse_sitemap(self, response):
        body = response.body
        if body[:2] == b"\x1f\x8b":  # a .xml.gz file (not a Content-Encoding)
            try:
                body = gunzip(body, max_size=self.settings.getint("DOWNLOAD_MAXSIZE"))
            except Exception as exc:  # corrupt or too large
                self.crawler.stats.inc_value("sitemap/invalid")
                logger.warning("Sitemap %s could not be decompressed: %s", response.url, exc)
                return
        try:
            sitemap = Sitemap(body)
            entries = list(itertools.islice(sitemap, self.settings.getint("SITEMAP_MAX_URLS")))
        except Exception as exc:  # not XML at all: lxml recovers from the rest
            self.crawler.stats.inc_value("sitemap/invalid")
            logger.warning("Sitemap %s could not be read: %s", response.url, exc)
            return
        index = sitemap.type == "sitemapindex"
        self.crawler.stats.inc_value("sitemap/" + ("indexes" if index else "sitemaps"))
        for entry in entries:
            try:
                url = normalize_url(entry.get("loc", ""), **self.url_options)
            except InvalidURL:
                self.crawler.stats.inc_value("sitemap/invalid_urls")
                continue
            if index:
                yield scrapy.Request(url, callback=self.parse_sitemap, errback=self.errback, meta={meta.SITEMAP: True})
            elif self.in_scope(url):
                self.crawler.stats.inc_value("sitemap/urls")
                hints = {k: str(entry[k]).strip() for k in ("changefreq", "lastmod") if entry.get(k)}
                # the hints reach the page's schedule (crawler/freshness/schedule.py) through its Page
                yield scrapy.Request(url, errback=self.errback, meta={meta.SITEMAP_HINTS: hints} if hints else {})

    def _page(self, request, response) -> Page:
        info = request.meta
        chain = list(info.get(meta.REDIRECT_URLS, []))
        referer = request.headers.get(b"Referer")
        page = Page(
            url=chain[0] if chain else request.url,
            final_url=response.url if response is not None else request.url,
            redirect_chain=chain,
            status=response.status if response is not None else None,
            error=None,
            headers={},
            body=b"",
            fetch_latency=info.get(meta.DOWNLOAD_LATENCY),
            depth=info.get(meta.DEPTH, 0),
            referrer=referer.decode("latin-1") if referer else None,
            fetched_at=time.time(),
            method=request.method,
            request_headers=_headers(request.headers),
        )
        if meta.RECRAWL in info:
            page["recrawl"] = info[meta.RECRAWL]
        if info.get(meta.IMPORTANCE):
            page["importance"] = info[meta.IMPORTANCE]
        if info.get(meta.SITEMAP_HINTS):
            page["sitemap"] = info[meta.SITEMAP_HINTS]
        if response is not None:
            page["headers"] = _headers(response.headers)
            page["body"] = response.body
            page["protocol"] = response.protocol
            page["ip_address"] = str(response.ip_address) if response.ip_address is not None else None
        return page

    def _outlinks(self, response) -> list[dict]:
        out, nofollow_page, invalid = extracted_links(response, self.link_extractor, self.url_options)
        if nofollow_page:
            self.crawler.stats.inc_value("links/meta_nofollow_pages")
        if invalid:
            self.crawler.stats.inc_value("links/invalid", invalid)
        return out

    def in_scope(self, url: str) -> bool:
        """Whether ``url`` is within the crawl's allowed domains and prefixes (one outside
        is counted as ``links/out_of_scope``)."""
        inside = self.scope.within(url)
        if not inside:
            self.crawler.stats.inc_value("links/out_of_scope")
        return inside


def extracted_links(response, extractor, url_options: dict) -> tuple[list[dict], bool, int]:
    """A text response's links as Scrapy's link extractor gives them, normalized, the first
    of equal URLs kept: (links, whether meta robots says nofollow, links refused as
    invalid). What crawler/page/reader.py gives for HTML, from its own parse."""
    robots = ",".join(response.xpath("//meta[translate(@name,'ROBTS','robts')='robots']/@content").getall())
    if {"nofollow", "none"} & {t.strip() for t in robots.lower().split(",")}:
        return [], True, 0
    out, seen, invalid = [], set(), 0
    for link in extractor.extract_links(response):
        try:
            url = normalize_url(link.url, **url_options)
        except InvalidURL:
            invalid += 1
            continue
        if url in seen:
            continue
        seen.add(url)
        out.append({"url": url, "text": (link.text or "").strip()[:200], "nofollow": bool(link.nofollow)})
    return out, False, invalid


def _readable(response, headers: dict) -> bool:
    """A 2xx HTML page (is_html: its Content-Type, or none and a body like HTML)."""
    return 200 <= response.status < 300 and is_html(headers, response.body)


def _pipeline_on(settings, path: str, enabled: str) -> bool:
    """Whether the item pipeline ``path`` runs in this crawl (listed and enabled)."""
    return settings.getbool(enabled) and path in build_component_list(settings.getwithbase("ITEM_PIPELINES"))


def _has_links(response) -> bool:
    """Whether links are read from a response: HTML or XML (a JSON or binary body has none
    that the link extractor could read). Told by its class, and for other text by its
    selector, never for JSON: a JSON body's selector is the whole document parsed into
    Python objects (node's all.json, 5.5 MB, came to some 100 MB of lists and dicts)."""
    if isinstance(response, (scrapy.http.HtmlResponse, scrapy.http.XmlResponse)):
        return True
    if not isinstance(response, scrapy.http.TextResponse) or isinstance(response, scrapy.http.JsonResponse):
        return False
    if response.body[:1024].lstrip()[:1] in (b"{", b"["):  # JSON sent as text
        return False
    return response.selector.type in ("html", "xml")


def _drop_selector(response) -> None:
    """Forget the selector a response keeps once its links are read: the response and its
    selector refer to each other, so the pair (and the parsed document) would wait for a
    full pass of the garbage collector, which GarbageCollection makes rare. In
    bench/memory.py the JSON pages' pairs held the worker at 290-400 MB between passes."""
    if getattr(response, "_cached_selector", None) is not None:
        response._cached_selector = None
