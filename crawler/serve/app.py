"""``scrapy serve``: what the crawl knows, over HTTP (JSON), and a live dashboard.

An aiohttp application (aiohttp: a maintained asyncio web framework with its own HTTP
server, already a dependency of Scrapy's, so no second server such as uvicorn to run).
Endpoints, all GET unless said (CRAWL: a crawl name; errors are JSON ``{"error",
"status"}``):

/api/crawls                          the crawls there are, and the default one
/api/crawls/CRAWL/record?url=U       U's record: normalized the crawler's way and followed
                                     to its canonical (``&raw=1``: U's own row, as given)
/api/crawls/CRAWL/content?url=U      the archived body, the exact bytes, with the
                                     Content-Type the site sent
/api/crawls/CRAWL/outlinks?url=U     its outlinks, paged (``offset``, ``limit``)
/api/crawls/CRAWL/inlinks?url=U      links to it, paged by a cursor (``after``, ``limit``)
POST /api/crawls/CRAWL/lookup        ``{"urls": [...]}``: up to SERVE_BATCH_MAX records
/api/crawls/CRAWL/frontier           ``scrapy frontier stats --json``
/api/crawls/CRAWL/activity           the workers' live numbers (crawler/observe/livestats.py)
POST /api/crawls/CRAWL/pause         ``scrapy frontier pause``: ``{"host": H}`` (optional) for
                                     one host; the answer is the frontier's ``paused``
POST /api/crawls/CRAWL/resume        ``scrapy frontier resume``, the same way
/                                    the dashboard (static/dashboard.html), /static/ its files

Blocking reads (the UrlStore, the archive, Redis) run on a pool of threads for each
(SERVE_THREADS for the UrlStore, two for each of the others), each read bounded by SERVE_TIMEOUT: a store, an archive or a Redis that is down or hangs gives
503 with Retry-After within that time, never a hang. SQLite is read through
SqliteReader (read-only, a connection per thread: nothing is created, no write waits).

A crawl is known when it has a UrlStore (SQLite: its file under CRAWL_DIR) or a frontier
(keys in Redis, or an embedded Redis's file); an unknown one is 404, naming the known.
With SERVE_TOKEN set, every /api/ request carries ``Authorization: Bearer <token>``;
without one the server listens on a loopback address only (the command refuses another),
and the write endpoints (pause, resume) answer 403: they need a token always.
"""

from __future__ import annotations

import hmac
import logging
import time
from importlib import resources

from aiohttp import web
from scrapy.settings import Settings

from crawler.archive.warc import read_payload
from crawler.frontier.steering import host_key
from crawler.observe import livestats
from crawler.observe.report import numbers
from crawler.serve.server import Crawl, Server, Unavailable, error, int_param, json_answer, settle_heap
from crawler.urls import InvalidURL, normalize_url
from crawler.urlstore.record import with_iso_times

logger = logging.getLogger(__name__)

STATIC = resources.files("crawler.serve").joinpath("static")
MAX_LINKS_PAGE = 1000  # links per page of outlinks / inlinks at most


def record_json(record: dict) -> dict:

    return with_iso_times(record)


# -- handlers ----------------------------------------------------------------------------

SERVER = web.AppKey("server", Server)


async def crawls(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    names = await server.blocking("The list of crawls", server.known_crawls)
    return json_answer({"crawls": names, "default": server.settings.get("CRAWL_NAME")})


async def stored(request: web.Request) -> tuple[Server, Crawl, dict]:
    """The server, the crawl and the stored record the request names (``url``, and
    ``raw``: the URL's own row, neither normalized nor followed); 404 when not stored."""
    server = request.app[SERVER]
    crawl = await server.crawl(request)
    url = server.url_param(request)
    raw = bool(request.query.get("raw"))
    store = await server.store(crawl)
    found = await server.reading("The UrlStore", store, "get", url, not raw, not raw)
    if found is None:
        raise error(404, f"{url} is not in the store")
    return server, crawl, found


async def record(request: web.Request) -> web.Response:
    _, _, found = await stored(request)
    return json_answer(record_json(found))


async def content(request: web.Request) -> web.Response:
    server, crawl, found = await stored(request)
    pointer = found.get("archive")
    if not pointer:
        raise error(404, f"{found['url']} has no archived body (fate: {found.get('fate')})")
    content_type, body = await server.blocking("The archive", _read_body, crawl, pointer)
    response = web.Response(body=body)
    response.headers["Content-Type"] = content_type or "application/octet-stream"
    response.headers["X-Crawled-Url"] = found["url"]
    return response


def _read_body(crawl: Crawl, pointer: dict) -> tuple[str | None, bytes]:
    def pointer_of(url: str) -> dict | None:
        return (crawl.store().get(url) or {}).get("archive")

    try:
        return read_payload(crawl.storage().get_range, pointer, pointer_of, crawl.collection().pointer_of_payload)
    except LookupError as exc:
        raise error(404, str(exc)) from None


async def outlinks(request: web.Request) -> web.Response:
    offset = int_param(request, "offset", 0, 0, 10**9)
    limit = int_param(request, "limit", 100, 1, MAX_LINKS_PAGE)
    _, _, found = await stored(request)
    links = found.get("outlinks") or []
    page = links[offset : offset + limit]
    more = offset + limit < len(links)
    return json_answer(
        {"url": found["url"], "outlinks": page, "total": len(links), "next": offset + limit if more else None}
    )


async def inlinks(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    crawl = await server.crawl(request)
    url = server.url_param(request)
    limit = int_param(request, "limit", 100, 1, MAX_LINKS_PAGE)
    after = request.query.get("after") or None
    store = await server.store(crawl)
    # one more than asked: whether there is a next page
    links = await server.blocking("The UrlStore", store.inlinks, url, limit + 1, after)
    more = len(links) > limit
    links = links[:limit]
    return json_answer({"url": store.normalize(url), "inlinks": links, "next": links[-1]["url"] if more else None})


async def lookup(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    crawl = await server.crawl(request)
    if request.method == "POST":
        try:
            payload = await request.json()
        except (ValueError, UnicodeDecodeError, LookupError, RecursionError):  # (an unknown charset, a deep nest)
            raise error(400, 'the body must be JSON: {"urls": [...]}') from None
        urls = payload.get("urls") if isinstance(payload, dict) else None
    else:
        urls = request.query.getall("url", [])
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
        raise error(400, 'give the URLs: {"urls": ["http://...", ...]}')
    if len(urls) > server.batch_max:
        raise error(413, f"at most {server.batch_max} URLs in one lookup, not {len(urls)}")
    store = await server.store(crawl)
    out: list[dict | None] = []
    valid = []  # (place in out, url)
    for url in urls:
        try:
            normalize_url(url, **server.url_options)
        except InvalidURL as exc:
            out.append({"url": url, "record": None, "error": f"not a valid URL ({exc})"})
            continue
        valid.append((len(out), url))
        out.append(None)
    records = await server.reading("The UrlStore", store, "get_many", [u for _, u in valid])
    for (place, url), found in zip(valid, records, strict=True):
        out[place] = {"url": url, "record": record_json(found) if found else None}
    return json_answer({"results": out})


async def store_totals(request: web.Request) -> web.Response:
    """The crawl's records by fate, from its UrlStore (what a crawl whose Redis is gone
    still knows)."""
    server = request.app[SERVER]
    crawl = await server.crawl(request)
    fates = await server.blocking("The UrlStore", lambda: crawl.store().fate_counts())
    if fates is None:
        raise error(404, "this UrlStore does not count its records (Cassandra: it would read every row)")
    return json_answer({"records": sum(fates.values()), "fates": fates})


async def frontier(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    crawl = await server.crawl(request)
    hosts = int_param(request, "hosts", 10, 0, 100)
    max_wait = crawl.settings.getfloat("FRONTIER_MAX_WAIT")
    found = await server.blocking("Redis", crawl.read_frontier, numbers, max_wait, hosts)
    if found is None:
        raise error(404, f"crawl {crawl.name!r} has no frontier")
    return json_answer(found)


async def activity(request: web.Request) -> web.Response:
    server = request.app[SERVER]
    crawl = await server.crawl(request)
    minutes = int_param(request, "minutes", 30, 1, 120)
    found = await server.blocking("Redis", crawl.read_frontier, _activity, minutes)
    if found is None:
        raise error(404, f"crawl {crawl.name!r} has no frontier")
    return json_answer(found)


def _activity(frontier, minutes: int) -> dict:
    # (with shards: the first's client and keys, where the workers publish)
    return livestats.activity(frontier.redis, frontier.keys, time.time(), minutes)


async def hold(request: web.Request) -> web.Response:
    """POST pause or resume: the crawl, or ``{"host": H}``; needs SERVE_TOKEN."""
    server = request.app[SERVER]
    if not server.token:
        raise error(403, "pause and resume need a token: start scrapy serve with SERVE_TOKEN set")
    crawl = await server.crawl(request)
    verb = request.path.rstrip("/").rsplit("/", 1)[1]
    host = None
    if request.can_read_body:
        try:
            payload = await request.json()
        except (ValueError, UnicodeDecodeError, LookupError, RecursionError):  # (an unknown charset, a deep nest)
            raise error(400, 'the body must be JSON: {"host": "example.com"} or nothing') from None
        host = payload.get("host") if isinstance(payload, dict) else None
        if host is not None and not isinstance(host, str):
            raise error(400, 'give the host as text: {"host": "example.com"}')
    found = await server.blocking("Redis", crawl.read_frontier, _hold, verb, host)
    if found is None:
        raise error(404, f"crawl {crawl.name!r} has no frontier")
    if "error" in found:
        raise error(400, found["error"])
    return json_answer(found)


def _hold(frontier, verb: str, host: str | None) -> dict:
    if host is not None:
        try:
            host = host_key(frontier, host)
        except ValueError as exc:
            return {"error": f"host: {exc}"}
    changed = getattr(frontier, verb)(host)
    return {"changed": changed, "host": host, "paused": frontier.paused()}


async def dashboard(request: web.Request) -> web.Response:
    return web.Response(body=STATIC.joinpath("dashboard.html").read_bytes(), content_type="text/html")


# -- the application ---------------------------------------------------------------------


@web.middleware
async def guard(request: web.Request, handler):
    """The token (when SERVE_TOKEN is set), and JSON for every error of /api/."""
    server = request.app[SERVER]
    api = request.path.startswith("/api/")
    given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
    if api and server.token and not hmac.compare_digest(given, f"Bearer {server.token}".encode()):  # (constant time)
        raise error(401, "this server needs a token: Authorization: Bearer <SERVE_TOKEN>")
    try:
        return await handler(request)
    except Unavailable as exc:
        raise error(503, f"{exc}; try again", **{"Retry-After": server.retry_after}) from None
    except web.HTTPException as exc:
        if api and exc.content_type != "application/json" and exc.status >= 400:
            raise error(exc.status, exc.reason) from None
        raise


def make_app(settings: Settings) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=1024**2)
    server = Server(settings)
    app[SERVER] = server
    base = "/api/crawls/{crawl}"
    app.add_routes(
        [
            web.get("/", dashboard),
            web.get("/api/crawls", crawls),
            web.get(f"{base}/record", record),
            web.get(f"{base}/content", content),
            web.get(f"{base}/outlinks", outlinks),
            web.get(f"{base}/inlinks", inlinks),
            web.get(f"{base}/lookup", lookup),
            web.post(f"{base}/lookup", lookup),
            web.get(f"{base}/frontier", frontier),
            web.get(f"{base}/store", store_totals),
            web.get(f"{base}/activity", activity),
            web.post(f"{base}/pause", hold),
            web.post(f"{base}/resume", hold),
            web.static("/static", str(STATIC)),
        ]
    )

    async def _settle(app: web.Application) -> None:
        settle_heap()

    async def _close(app: web.Application) -> None:
        server.close()

    app.on_startup.append(_settle)
    app.on_cleanup.append(_close)
    return app
