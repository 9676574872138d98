"""The demo site's plan, without I/O: its hosts and pages, what each answers, and what a
correct crawl must fetch (crawler/demo/site.py serves it).

Host ``i`` (0-based) is ``127.0.0.(2+i)``; every host is served by its own
ThreadingHTTPServer, all on one port. Each host has:

``/p0.html`` .. ``/p{P-1}.html``  pages; each links to two pages of its host and to a
    page of the next host (absolute URL), to fragment (``#x``) and tracking-parameter
    (``?utm_source=x``) variants of a page it also links plainly, and, every fourth
    page, to things a crawler must not fetch: a ``rel=nofollow`` link to
    ``/nofollow-target.html``, ``/doc.pdf``, ``/img.jpg``, ``mailto:`` and
    ``javascript:`` links. ``/p0.html`` of host 0 (the seed) links to ``/p0.html`` of
    every host. Every page is reachable from the seed; about 27 requests per host.
``/old.html``  301 to ``/p1.html``. No page links ``/p1.html`` itself, so ``/p1.html`` is
    fetched only through the redirect and its Page always carries the redirect chain.
``/meta-nofollow.html``  ``<meta name="robots" content="nofollow">``, linked from
    ``/p2.html``; its only links point to ``/meta-nofollow-target.html``.
``/robots.txt``  404, unless ``robots`` gives host ``i`` an answer: a body (answered
    200; ``{port}`` in it becomes the site's port), a status code, a ``(status,
    headers, body)`` tuple, ``"drop"`` (the connection is closed unanswered), or a list
    of those, answered in turn (the last one repeats). ``routes`` answers other paths
    of every host the same way (e.g. the targets of a redirected robots.txt).
``/s0.html`` .. ``/s{S-1}.html``  sitemap-only pages (``sitemap_pages``): no page links
    them; ``/sitemap-index.xml`` (a sitemap index) names ``/sitemap-pages.xml.gz`` (a
    gzipped sitemap) that lists them.

``articles``: ``/p0.html`` of every host also links ``/article.html``, a long text page that
is the same on every host (exact duplicates of each other), and ``/article-print.html``, the
same text with a few words changed (a near duplicate).

``framed``: every ``/p{i}.html`` also carries a text of its own (about 250 words) inside the
frame a real site puts around its pages (a header with a tagline, a navigation menu, a
sidebar, a cookie notice, a disclaimer in a plain ``<div>``, a footer: some 150 words,
the same on every page), and every page ``i`` with ``i % 4 == 1`` links
``/p{i}-copy.html``: its text with 3% of the words changed, another tagline and a
"printed on" line (a near copy; ``near_copies()`` lists them).

``throttle`` gives host ``i`` a Retry-After (seconds): its first page request is
answered 429 with that header, every later one normally.

Failure behaviours, per host index (answered at once, without ``delay``; robots.txt,
``routes`` and sitemaps are not affected: ``robots`` and ``routes`` say how those fail):

``fail_pages={i: {path: spec}}``  requests of ``path`` (query and fragment aside) on host
    ``i`` answer ``spec``: a status code (``503``: answered 503, no Retry-After), a
    ``(status, headers)`` tuple (``(503, {"Retry-After": "3600"})``), or a list of those
    answered in turn, the last one repeating, where ``None`` is the page itself:
    ``[503, 503, None]`` fails the first two requests and answers the third normally.
``fail_all={i: status}``  every page request of host ``i`` answers ``status`` (e.g. 500).
``throttle_for={i: seconds}``  every page request of host ``i`` answers 429 (no
    Retry-After) until that many seconds after the host's first page request.
``refuse={i, ...}``  host ``i`` refuses connections: its socket is bound (the port stays
    reserved) but not listening. Host 0 serves the seed and cannot refuse.

``heal(robots=None)`` turns every failure behaviour off while the site runs, e.g. between
two crawls: ``fail_pages``, ``fail_all``, ``throttle_for`` and ``throttle`` are cleared;
failing answers (5xx, 429, ``"drop"``) of ``robots`` and ``routes`` are dropped (a list
keeps its last good answer; none left: robots.txt answers 404 and a route is answered as
any other path); ``robots`` then sets new answers; refused hosts start listening on the
same port.

What a correct crawl must fetch: ``outlinks(i, path)`` are the (host index, path) a
crawler follows from a page (nofollow, binaries, ``mailto:``/``javascript:`` and pages
with meta nofollow aside; fragments and ``utm_*`` parameters removed);
``robots_allows(i, path)`` reads host ``i``'s robots.txt as RFC 9309 says once its
answers settle (None: unreachable); ``fetch_plan(held, failed, attempts)`` walks the site
from the seed under the current behaviours: the (host, path) requested at least once by
a crawl that obeys robots.txt and waits out every temporary failure (sitemaps aside).
On a site built with any failure behaviour, ``expected_fetches()``,
``expected_page_urls()`` and ``redirects()`` follow ``fetch_plan()``; otherwise they are
what they always were (every host, every page).
"""

from __future__ import annotations

import gzip
from collections import deque
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

from crawler.demo.pages import article_text, framed, html, page_text

REDIRECT_FROM = "/old.html"
REDIRECT_TO = "/p1.html"
META_PAGE = "/meta-nofollow.html"
NOFOLLOW_TARGET = "/nofollow-target.html"
META_NOFOLLOW_TARGET = "/meta-nofollow-target.html"
BINARIES = ("/doc.pdf", "/img.jpg")
# requested by nothing a correct crawler does
FORBIDDEN_PATHS = frozenset({NOFOLLOW_TARGET, META_NOFOLLOW_TARGET, *BINARIES})


class SitePlan:
    def __init__(
        self,
        hosts: int = 4,
        pages: int = 25,
        delay: float = 0.0,
        robots: dict[int, str | int] | None = None,
        sitemap_pages: int = 0,
        throttle: dict[int, int] | None = None,
        routes: dict[str, object] | None = None,
        articles: bool = False,
        framed: bool = False,
        fail_pages: dict[int, dict[str, object]] | None = None,
        fail_all: dict[int, int] | None = None,
        throttle_for: dict[int, float] | None = None,
        refuse=(),
        port: int = 0,
        on_hit=None,
    ):
        if not 2 <= hosts <= 200:
            raise ValueError("hosts must be 2..200")
        if pages < 5:
            raise ValueError("pages must be at least 5")
        self.fail_pages = {i: dict(paths) for i, paths in (fail_pages or {}).items()}
        self.fail_all = dict(fail_all or {})
        self.throttle_for = dict(throttle_for or {})
        self.refuse = set(refuse)
        for i in (*self.fail_pages, *self.fail_all, *self.throttle_for, *self.refuse):
            if not 0 <= i < hosts:
                raise ValueError(f"no host {i}: hosts are 0..{hosts - 1}")
        if 0 in self.refuse:
            raise ValueError("host 0 serves the seed: it cannot refuse connections")
        # expectations follow fetch_plan() on a site built with failure behaviours
        self._planned = bool(self.fail_pages or self.fail_all or self.throttle_for or self.refuse)
        self.n_hosts = hosts
        self.n_pages = pages
        self.delay = delay
        self.robots = robots or {}
        self.sitemap_pages = sitemap_pages
        self.throttle = dict(throttle or {})
        self.routes = routes or {}
        self.articles = articles
        self.framed = framed
        self.hosts = [f"127.0.0.{2 + i}" for i in range(hosts)]

    # -- addresses and expectations --------------------------------------------------

    def url(self, host: int | str, path: str) -> str:
        addr = self.hosts[host] if isinstance(host, int) else host
        return f"http://{addr}:{self.port}{path}"

    @property
    def seeds(self) -> list[str]:
        return [self.url(0, "/p0.html")]

    def page_paths(self) -> list[str]:
        """Paths of one host that a correct crawl fetches (each exactly once)."""
        paths = [f"/p{i}.html" for i in range(self.n_pages)] + [REDIRECT_FROM, META_PAGE]
        return paths + [copy for _, copy in self.near_copies()]

    def near_copies(self) -> list[tuple[str, str]]:
        """(path of a page, path of its near copy) of one host (``framed`` only)."""
        if not self.framed:
            return []
        return [(f"/p{i}.html", f"/p{i}-copy.html") for i in range(1, self.n_pages, 4)]

    def expected_fetches(self) -> set[tuple[str, str]]:
        """(host, path) of every request a correct crawl makes, robots.txt aside (on a
        site with failure behaviours: ``fetch_plan()``, the requests made at least once)."""
        if self._planned:
            return self.fetch_plan()
        return {(h, p) for h in self.hosts for p in self.page_paths()}

    def expected_page_urls(self) -> set[str]:
        """The ``url`` of every Page a correct crawl outputs: every fetched URL but the
        redirect targets (their Page has the url it was linked under, /old.html); URLs
        robots.txt disallows, recorded without a request, aside."""
        if self._planned:
            return {self.url(h, p) for h, p in self.fetch_plan() if p != REDIRECT_TO}
        return {self.url(h, p) for h in self.hosts for p in self.page_paths() if p != REDIRECT_TO}

    def redirects(self) -> dict[str, str]:
        hosts = self.hosts
        if self._planned:
            plan = self.fetch_plan()
            hosts = [h for h in hosts if (h, REDIRECT_TO) in plan]
        return {self.url(h, REDIRECT_FROM): self.url(h, REDIRECT_TO) for h in hosts}

    def outlinks(self, host_index: int, path: str) -> list[tuple[int, str]]:
        """(host index, path) of the links a crawler follows from a page of this site, in
        page order: nofollow links, binaries, ``mailto:`` and ``javascript:`` links and
        every link of a meta-nofollow page aside; fragments and ``utm_*`` parameters
        removed; links off the site dropped. Empty for a path that is not a page."""
        html = self.page(host_index, path)
        if html is None:
            return []
        parser = _Links()
        parser.feed(html)
        if parser.nofollow_page:
            return []
        base = self.url(host_index, path)
        out = []
        for href, rel in parser.links:
            if "nofollow" in rel.lower().split():
                continue
            parts = urlsplit(urljoin(base, href))
            if parts.scheme not in ("http", "https") or parts.path in BINARIES:
                continue
            host, _, port = parts.netloc.rpartition(":")
            if host not in self.hosts or port != str(self.port):
                continue
            query = urlencode([(k, v) for k, v in parse_qsl(parts.query, True) if not k.startswith("utm_")])
            out.append((self.hosts.index(host), parts.path + (f"?{query}" if query else "")))
        return out

    def robots_allows(self, host_index: int, path: str, agent: str = "crawler") -> bool | None:
        """Whether host ``host_index``'s robots.txt, read as RFC 9309 says once its
        answers settle (the last answer of a list; redirects followed through ``routes``,
        at most five), lets ``agent`` fetch ``path``: None when it is unreachable (5xx,
        429, dropped: nothing else of the host is fetched), True when unavailable (4xx,
        too many redirects) or allowing."""
        rules = self._robots_rules(host_index)
        return None if rules is None else rules(self.url(host_index, path), agent)

    def _robots_rules(self, host_index: int):
        """``can_fetch(url, agent)`` of host ``host_index``'s settled robots.txt, or None
        when it is unreachable (see robots_allows)."""
        from protego import Protego

        where, spec = "/robots.txt", self.robots.get(host_index, 404)
        for _ in range(6):
            if isinstance(spec, list):
                spec = spec[-1]
            if spec == "drop":
                return None
            status, headers, body = _answer_parts(spec)
            if status == 429 or status >= 500:
                return None
            if 300 <= status < 400 and headers.get("Location"):
                where = urlsplit(urljoin(self.url(host_index, where), headers["Location"])).path
                spec = self.robots.get(host_index, 404) if where == "/robots.txt" else self.routes.get(where, 404)
                continue
            if not 200 <= status < 300:
                break
            if isinstance(body, bytes):
                body = body.decode("utf-8", "replace")
            return Protego.parse(body.replace("{port}", str(self.port))).can_fetch
        return lambda url, agent: True  # unavailable (4xx, more than five redirects): all allowed

    def fails_for_good(self, host_index: int, path: str, attempts: int | None = None) -> bool:
        """Whether the last answer a crawler gets for ``path`` is a failure rather than
        the page (``fail_all``; a ``fail_pages`` spec, or a list of them whose last answer,
        or whose first ``attempts`` answers when given, are failures). 429s of
        ``throttle``/``throttle_for`` end: not failures."""
        if host_index in self.fail_all:
            return True
        spec = self.fail_pages.get(host_index, {}).get(path)
        if spec is None:
            return False
        if not isinstance(spec, list):
            return True
        if attempts is not None:
            return all(spec[min(k, len(spec) - 1)] is not None for k in range(attempts))
        return spec[-1] is not None

    def fetch_plan(self, held=(), failed=(), attempts: int | None = None, agent: str = "crawler") -> set:
        """(host, path) of every request (robots.txt and sitemaps aside) a correct crawl
        makes at least once, under the site's current behaviours, if it waits out every
        temporary failure: the walk from the seed over ``outlinks`` and the redirect,
        skipping refused hosts, hosts whose robots.txt is unreachable and ``held`` hosts
        (addresses or indexes: hosts a crawl holds back, e.g. after a Retry-After),
        leaving out what robots.txt disallows for ``agent``, and following no link of a
        page that fails for good (``fails_for_good``, or listed in ``failed`` as (host,
        path): e.g. URLs a crawler gave up on in an earlier run)."""
        skip = set(self.refuse) | {h if isinstance(h, int) else self.hosts.index(h) for h in held}
        failed = set(failed)
        rules: dict[int, object] = {}  # host index -> can_fetch, or None (unreachable)
        plan: set[tuple[str, str]] = set()
        todo = deque([(0, "/p0.html")])
        seen = set(todo)
        while todo:
            i, path = todo.popleft()
            if i in skip:
                continue
            if i not in rules:
                rules[i] = self._robots_rules(i)
            if rules[i] is None or not rules[i](self.url(i, path), agent):
                continue
            key = (self.hosts[i], path)
            plan.add(key)
            if key in failed or self.fails_for_good(i, path, attempts):
                continue
            for link in [(i, REDIRECT_TO)] if path == REDIRECT_FROM else self.outlinks(i, path):
                if link not in seen:
                    seen.add(link)
                    todo.append(link)
        return plan

    def host_of(self, url: str) -> str:
        return url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[0]

    def _link_path(self, i: int) -> str:
        """The path pages use to link page i (p1 only through the redirect)."""
        i %= self.n_pages
        return REDIRECT_FROM if f"/p{i}.html" == REDIRECT_TO else f"/p{i}.html"

    def sitemap_paths(self) -> list[str]:
        """Paths of one host's sitemap-only pages."""
        return [f"/s{i}.html" for i in range(self.sitemap_pages)]

    def page(self, host_index: int, path: str) -> str | None:
        """HTML of a page, or None when the path is not a page of the site."""
        if self.articles and path in ARTICLES:
            return html("an article", article_text(printed=path == ARTICLES[1]))
        if path in self.sitemap_paths():
            return html(f"sitemap page {path} of host {host_index}", f'<a href="{self._link_path(0)}">home</a>')
        if path == META_PAGE:
            return html(
                "meta nofollow",
                f'<a href="{META_NOFOLLOW_TARGET}">target</a> <a href="{META_NOFOLLOW_TARGET}?x=1">target 2</a>',
                head='<meta name="robots" content="nofollow">',
            )
        if path in (NOFOLLOW_TARGET, META_NOFOLLOW_TARGET):
            return html("target", "must never be fetched")
        copy_of = dict((c, p) for p, c in self.near_copies())
        if path in copy_of:
            i = int(copy_of[path][2:-5])
            text = page_text(host_index, i, copied=True)
            return framed(f"page {i} of host {host_index}", text, self.n_pages, copied=True)
        if not (path.startswith("/p") and path.endswith(".html") and path[2:-5].isdigit()):
            return None
        i = int(path[2:-5])
        if i >= self.n_pages:
            return None
        nxt = self._link_path(i + 1)
        other = self._link_path(i * 7 + 3)
        peer = self.url((host_index + 1) % self.n_hosts, self._link_path(i))
        links = [
            f'<a href="{nxt}">next</a>',
            f'<a href="{other}">other</a>',
            f'<a href="{peer}">peer</a>',
            f'<a href="{nxt}#x">next, fragment</a>',
            f'<a href="{self.url(host_index, other)}?utm_source=x&amp;utm_medium=y">other, tracked</a>',
            f'<a href="{peer}?utm_campaign=z#frag">peer, tracked</a>',
        ]
        if i % 4 == 0:
            links += [
                f'<a rel="nofollow" href="{NOFOLLOW_TARGET}">nofollow</a>',
                f'<a href="{BINARIES[0]}">pdf</a>',
                f'<a href="{self.url(host_index, BINARIES[1])}">jpg</a>',
                '<a href="mailto:someone@example.invalid">mail</a>',
                '<a href="javascript:void(0)">js</a>',
            ]
        if i == 2:
            links.append(f'<a href="{META_PAGE}">meta nofollow page</a>')
        if self.articles and i == 0:
            links += [f'<a href="{ARTICLES[0]}">article</a>', f'<a href="{ARTICLES[1]}">printable</a>']
        if host_index == 0 and i == 0:
            links += [f'<a href="{self.url(h, "/p0.html")}">host {h}</a>' for h in range(self.n_hosts)]
        if self.framed:
            if i % 4 == 1:
                links.append(f'<a href="/p{i}-copy.html">printable version</a>')
            body = page_text(host_index, i) + "<ul>" + "".join(f"<li>{link}</li>" for link in links) + "</ul>"
            return framed(f"page {i} of host {host_index}", body, self.n_pages)
        return html(f"page {i} of host {host_index}", "\n".join(links))

    def sitemap(self, host_index: int, path: str) -> bytes:
        ns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
        if path == "/sitemap-index.xml":
            loc = self.url(host_index, "/sitemap-pages.xml.gz")
            return (
                f'<?xml version="1.0"?><sitemapindex {ns}><sitemap><loc>{loc}</loc></sitemap></sitemapindex>'.encode()
            )
        urls = "".join(f"<url><loc>{self.url(host_index, p)}</loc></url>" for p in self.sitemap_paths())
        return gzip.compress(f'<?xml version="1.0"?><urlset {ns}>{urls}</urlset>'.encode())


ARTICLES = ("/article.html", "/article-print.html")


class _Links(HTMLParser):
    """The ``<a href>`` links (href, rel) of a page, and whether it has meta nofollow."""

    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self.nofollow_page = False

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag == "a" and a.get("href"):
            self.links.append((a["href"], a.get("rel", "")))
        elif tag == "meta" and a.get("name", "").lower() == "robots" and "nofollow" in a.get("content", "").lower():
            self.nofollow_page = True


def _answer_parts(spec) -> tuple[int, dict, str | bytes]:
    """(status, headers, body) of a robots/routes answer (a body, a status or a tuple)."""
    if isinstance(spec, tuple):
        return spec
    if isinstance(spec, int):
        return spec, {}, ""
    return 200, {}, spec


def _failing(spec) -> bool:
    """Whether a robots/routes answer is a failure (5xx, 429, a dropped connection)."""
    if spec == "drop":
        return True
    if isinstance(spec, list):
        return any(_failing(a) for a in spec)
    status = _answer_parts(spec)[0]
    return status == 429 or status >= 500
