"""What ``scrapy serve`` holds while it serves: the crawls it can read (each opened on first
ask: its frontier in Redis, its UrlStore, its archive) and the thread pools their reads run
in (a UrlStore that ``reads_async``, Cassandra's, is read on the server's own loop), each
read bounded by SERVE_TIMEOUT (else 503 with Retry-After); the JSON error answers; what a
request's parameters may be (crawler/serve/app.py routes to them).
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import json
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

import orjson
from aiohttp import web
from scrapy.settings import Settings

from crawler.archive.collection import Collection
from crawler.archive.storage import storage_from_settings
from crawler.config.crawldir import crawls_holding
from crawler.frontier.connection import crawl_exists, frontier_from_settings, known_crawls
from crawler.urls import InvalidURL, normalize_url, url_options
from crawler.urlstore.backends import urlstore_from_settings
from crawler.urlstore.sqlite import SQLITE_FILE, sqlite_path

logger = logging.getLogger(__name__)


KNOWN_FOR = 5.0  # seconds the list of known crawls is reused
# allocations between two passes of the collector's youngest generation (Python's: 700): a
# record read makes a few hundred objects (its outlinks), a batch of 100 tens of thousands
YOUNG_PASS_EVERY = 10_000


def settle_heap() -> None:
    """The objects made so far (modules, the application, a store's driver and its
    cluster's metadata) moved to the collector's permanent generation (``gc.freeze``),
    where its passes do not walk them, and the youngest generation's passes made rarer:
    a server's objects are made at start and when a crawl's store is opened, a request's
    are gone with its answer. With the collector as it was, a Cassandra record read cost
    the server's process about twice the CPU."""
    gc.collect()
    gc.freeze()
    _, middle, full = gc.get_threshold()
    gc.set_threshold(YOUNG_PASS_EVERY, middle, full)


class Unavailable(Exception):
    """A store, an archive or Redis did not answer within SERVE_TIMEOUT."""


def error(status: int, message: str, **headers) -> web.HTTPException:
    """An HTTP error with a JSON body ``{"error", "status"}``."""
    cls = web.HTTPException
    for c in (
        web.HTTPBadRequest,
        web.HTTPUnauthorized,
        web.HTTPForbidden,
        web.HTTPNotFound,
        web.HTTPRequestEntityTooLarge,
        web.HTTPServiceUnavailable,
    ):
        if c.status_code == status:
            cls = c
            break
    body = json.dumps({"error": message, "status": status})
    if cls is web.HTTPRequestEntityTooLarge:
        exc = cls(max_size=0, actual_size=0, text=body, content_type="application/json", headers=headers)
    else:
        exc = cls(text=body, content_type="application/json", headers=headers)
    return exc


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Crawl:
    """One crawl's readers, opened at first use: its UrlStore, its archive, its frontier."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.name = settings.get("CRAWL_NAME")
        self._store = self._storage = self._frontier = None

    def store(self):
        if self._store is None:
            self._store = urlstore_from_settings(self.settings, readonly=True)
        return self._store

    @property
    def opened_store(self):
        """The UrlStore once ``store()`` has opened it, else None."""
        return self._store

    def storage(self):
        if self._storage is None:
            self._storage = storage_from_settings(self.settings)
        return self._storage

    def collection(self) -> Collection:
        """The crawl's archive read as a collection (its stored indexes: an exact copy's
        capture when its original was fetched again with another body)."""
        return Collection(self.storage(), self.name, self.settings.get("ARCHIVE_PREFIX"))

    def read_frontier(self, read, *args):
        """``read(frontier, *args)`` on the crawl's frontier, or None when the crawl has none
        (creating nothing)."""
        if not crawl_exists(self.settings):
            return None
        if self._frontier is None:
            self._frontier = frontier_from_settings(self.settings)
        return read(self._frontier, *args)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


class Server:
    """The application's state: the settings, the thread pool, the crawls."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.timeout = settings.getfloat("SERVE_TIMEOUT")
        self.retry_after = str(max(1, round(self.timeout)))
        self.batch_max = settings.getint("SERVE_BATCH_MAX")
        self.token = settings.get("SERVE_TOKEN") or ""
        self.url_options = url_options(settings)
        # a pool per dependency: reads of an archive or a Redis that hangs (their clients
        # retry for a while) do not hold up the UrlStore's
        self.pools = {
            "The UrlStore": ThreadPoolExecutor(settings.getint("SERVE_THREADS"), thread_name_prefix="serve-store"),
            "The archive": ThreadPoolExecutor(2, thread_name_prefix="serve-archive"),
            "Redis": ThreadPoolExecutor(2, thread_name_prefix="serve-redis"),
        }
        self.crawls: dict[str, Crawl] = {}
        self._known: tuple[float, list[str]] = (0.0, [])

    async def blocking(self, what: str, fn, *args):
        """``fn(*args)`` on the pool of ``what`` (the UrlStore, the archive, Redis), within
        SERVE_TIMEOUT; Unavailable if it fails or takes longer (the thread finishes on its
        own)."""
        loop = asyncio.get_running_loop()
        pool = self.pools.get(what, self.pools["Redis"])
        return await self.awaiting(what, loop.run_in_executor(pool, fn, *args))

    async def store(self, crawl: Crawl):
        """The crawl's UrlStore, opened on the UrlStore's pool the first time (a Cassandra
        store connects to its cluster; what that made is then settled: ``settle_heap``)."""
        store = crawl.opened_store
        if store is None:
            store = await self.blocking("The UrlStore", crawl.store)
            settle_heap()
        return store

    async def reading(self, what: str, store, method: str, *args):
        """``store.<method>(*args)`` of a UrlStore: awaited on this loop when the store
        ``reads_async`` (``a<method>``), else on the UrlStore's pool; as ``blocking``."""
        if store.reads_async:
            return await self.awaiting(what, getattr(store, f"a{method}")(*args))
        return await self.blocking(what, getattr(store, method), *args)

    async def awaiting(self, what: str, awaitable):
        """What ``awaitable`` gives, within SERVE_TIMEOUT; Unavailable if it fails or takes
        longer."""
        try:
            async with asyncio.timeout(self.timeout):  # (no task of its own, as wait_for makes)
                return await awaitable
        except TimeoutError:
            logger.warning("%s did not answer within %.1f s", what, self.timeout)
            raise Unavailable(f"{what} did not answer within {self.timeout:g} s") from None
        except FileNotFoundError as exc:  # a crawl with a frontier but no UrlStore yet, an archive object gone
            # (the system's own message names a path of this machine: not said to the caller)
            raise error(404, f"{what}: not found" if exc.filename else str(exc)) from None
        except (ValueError, TypeError, KeyError, LookupError, web.HTTPException):  # (an answer of its own: a 404)
            raise
        except Exception as exc:
            logger.warning("%s is unavailable: %s: %s", what, type(exc).__name__, exc)
            raise Unavailable(f"{what} is unavailable ({type(exc).__name__})") from None

    def settings_for(self, name: str) -> Settings:
        s = self.settings.copy()
        s.set("CRAWL_NAME", name, priority="cmdline")
        return s

    def exists(self, name: str) -> bool:
        """Whether crawl ``name`` has a UrlStore file or a frontier (creating nothing)."""
        settings = self.settings_for(name)
        if settings.get("URLSTORE_BACKEND").lower() == "sqlite" and os.path.exists(sqlite_path(settings)):
            return True
        try:
            return crawl_exists(settings)
        except ValueError:  # (not a crawl name)
            return False
        except Exception as exc:  # Redis away: the stores still answer
            logger.warning("Whether crawl %r is in Redis is unknown for now: %s: %s", name, type(exc).__name__, exc)
            return False

    def known_crawls(self) -> list[str]:
        """Crawls with a UrlStore file or a frontier (reused for KNOWN_FOR seconds)."""
        at, names = self._known
        if time.monotonic() - at < KNOWN_FOR:
            return names
        found = set()
        if self.settings.get("URLSTORE_BACKEND").lower() == "sqlite":
            found.update(crawls_holding(self.settings, SQLITE_FILE))
        try:
            found.update(known_crawls(self.settings))
        except Exception as exc:  # Redis away: the stores still answer
            logger.warning("The crawls in Redis are unknown for now: %s: %s", type(exc).__name__, exc)
        names = sorted(found)
        self._known = (time.monotonic(), names)
        return names

    async def crawl(self, request: web.Request) -> Crawl:
        name = request.match_info["crawl"]
        crawl = self.crawls.get(name)
        if crawl is not None:
            return crawl
        known = await self.blocking("The list of crawls", self.known_crawls)
        if name not in known and not await self.blocking("The crawl", self.exists, name):
            # (the list holds the first crawls alone: a crawl past them is asked for by name)
            self._known = (0.0, [])  # (a crawl that starts later is seen at once)
            known = await self.blocking("The list of crawls", self.known_crawls)
            there = ", ".join(known) if known else "none yet"
            raise error(404, f"no crawl {name!r} (crawls: {there})")
        crawl = self.crawls[name] = Crawl(self.settings_for(name))
        return crawl

    def url_param(self, request: web.Request) -> str:
        url = request.query.get("url", "")
        if not url:
            raise error(400, "give the URL: ?url=...")
        if not request.query.get("raw"):
            self.check_url(url)
        return url

    def check_url(self, url: str) -> None:
        try:
            normalize_url(url, **self.url_options)
        except InvalidURL as exc:
            raise error(400, f"{url!r} is not a valid URL ({exc})") from None

    def close(self) -> None:
        for crawl in self.crawls.values():
            try:
                crawl.close()
            except Exception:
                pass
        for pool in self.pools.values():
            pool.shutdown(wait=False, cancel_futures=True)


def int_param(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise error(400, f"{name} must be a whole number from {low} to {high}") from None
    if not low <= value <= high:
        raise error(400, f"{name} must be a whole number from {low} to {high}")
    return value


def json_answer(obj) -> web.Response:
    """``obj`` as a JSON answer, encoded by orjson (a record with its outlinks in a tenth of
    the json module's time); a value JSON has no type for is given as its text, a key that
    is not text (a number) as its text, as the json module does."""
    try:
        body = orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:  # text it refuses (a lone surrogate a request's JSON gave): json escapes it
        body = json.dumps(obj, default=str).encode()
    return web.Response(body=body, content_type="application/json")
