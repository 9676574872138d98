"""Reading a fetched HTML page once: one decode, one lxml parse, and from that one tree
everything the crawl wants of the page (no Scrapy engine, no I/O).

    reading = read_page(body, final_url, headers, url_options=url_options(settings))

- **links**: what the broad spider follows, exactly as Scrapy's link extractor gives them
  (Scrapy's ``LinkExtractor(deny_extensions=IGNORED_EXTENSIONS, canonicalize=False,
  unique=True, tags=("a", "area"))``, then ``crawler.urls.normalize_url``): the ``href``
  of every ``<a>`` and ``<area>`` in page order, HTML whitespace stripped, resolved
  against the ``<base href>`` of the first 4096 characters (as Scrapy finds it) and the
  final URL, made safe with the page's encoding; only http, https, file and ftp URLs
  whose path does not end in an ignored extension (.pdf, .jpg...); the first of equal
  URLs, before and after normalization. Each is ``{"url", "text", "nofollow"}``: the link
  text stripped and cut to 200 characters, and whether ``rel`` says nofollow. A page whose
  ``<meta name=robots>`` says nofollow or none has no links (``nofollow_page``);
  ``invalid_links`` counts the URLs normalize_url refused.
- **metadata** and **problems**: what ``crawler.page.metadata.extract_metadata``
  gives (its steps ``decode_html``, ``parse_html`` and ``metadata_from_tree``).
- **prints**: what ``crawler.contentseen.fingerprints.page_fingerprints`` gives: the SHA-1 of the
  whole body, and the main text's word count, sketch, band keys and SimHash. The main text
  is read last, since reading it changes the tree.
- **timings**: CPU seconds of the reading thread by stage: ``decode``, ``parse``,
  ``links``, ``metadata``, ``text`` (main text and word hashing), ``sketch`` (digest,
  MinHash, band keys, SimHash).

The decode is the metadata pipeline's (byte order mark, Content-Type charset, meta
charset, else UTF-8 if valid, else windows-1252) and the tree is its parse of the first
``max_bytes`` (comments left out, libxml2's default limits). The links come from that
same tree unless it could differ from the one Scrapy's selector builds: then the whole
body is parsed again as Scrapy's selector parses it (parsel: NUL characters removed, the
text stripped, libxml2's huge-tree limits). That is a body over ``max_bytes``, a parse
stopped by a limit (``parse_incomplete``: nesting deeper than 256...), a NUL character,
or Unicode whitespace that ``str.strip`` takes from either end. For a body over
``max_bytes`` that parse comes first, and its links are read from the parser's events as
it goes, each part of the tree dropped once read: the process holds the path to where the
parser is instead of the tree of the whole page, and never that and the shared tree at
once (Node.js's 5.6 MB ``all.html``: 50 MB over the process's size at the peak, 107 MB
before; its ``links`` stage counts that parse). Where this differs from the separate
reads it replaces (the spider's link extractor, ``page_fingerprints``,
``extract_metadata``), by design:

- a page without a charset declaration that is neither ASCII nor valid UTF-8: Scrapy
  guessed its encoding (charset-normalizer), the reader takes windows-1252; likewise a
  page whose declaration Scrapy reads otherwise (a meta charset of UTF-16 in an ASCII
  page: Scrapy decodes UTF-16, the reader UTF-8);
- the main text: ``page_fingerprints`` let libxml2 decode the bytes (it reads a meta
  charset but no header, and takes undeclared bytes for Latin-1) and kept comments, which
  part a word in two where one stood (``foo<!-- -->bar``); the reader decodes with the
  header too and the parse has no comments. bench/near_duplicates.py ``--reader`` gives
  the same precision and recall either way;
- ``max_bytes`` caps what both metadata and fingerprints read (page_fingerprints had its
  own 2 MiB, the same default).

Links are made cheaper three ways, each giving what the libraries give (tests compare
them): a plain href (ASCII that needs no escaping) is joined to a plain base here, as
urljoin joins it, without urljoin and safe_url_string; an href's result is remembered
across the pages a process reads (``KNOWN_LINKS`` of them) when it depends on the page
only through the base's scheme, host and directory; and of the links to the page's own
fragments (``#...``) only the first is worked out, since they all normalize alike.

Never raises for any bytes, URL or headers: a bug met in a part is reported as
``internal`` in ``problems`` and the other parts are still returned. The result pickles
(page worker processes send it back).
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from typing import NamedTuple
from urllib.parse import urljoin, urlparse, urlsplit

import lxml.etree
import lxml.html
from w3lib.encoding import html_body_declared_encoding, http_content_type_encoding, read_bom, resolve_encoding
from w3lib.html import HTML5_WHITESPACE, get_base_url
from w3lib.url import safe_url_string

from crawler.contentseen import fingerprints as fp
from crawler.page.metadata import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_FIELD_LENGTH,
    DEFAULT_MAX_FIELDS,
    DecodedPage,
    decode_html,
    html_parser,
    metadata_from_tree,
    parse_html,
)
from crawler.urls import InvalidURL, normalize_url

logger = logging.getLogger(__name__)

STAGES = ("decode", "parse", "links", "metadata", "text", "sketch")
MAX_LINK_TEXT = 200  # characters of a link's text kept

_LINK_SCHEMES = frozenset({"http", "https", "file", "ftp"})  # Scrapy's _is_valid_url
# Scrapy's scrapy.linkextractors.IGNORED_EXTENSIONS (2.19), which a test keeps equal:
# importing it would bring Scrapy and Twisted into every page process (26 MB)
IGNORED_EXTENSIONS = (
    "7z 7zip bz2 rar tar tar.gz xz zip "  # archives
    "mng pct bmp gif jpg jpeg png pst psp tif tiff ai drw dxf eps ps svg cdr ico webp "  # images
    "mp3 wma ogg wav ra aac mid au aiff "  # audio
    "3gp asf asx avi mov mp4 mpg qt rm swf wmv m4a m4v flv webm "  # video
    "xls xlsm xlsx xltm xltx potm potx ppt pptm pptx pps doc docb docm docx dotm dotx odt ods odg odp "  # office
    "css pdf exe bin rss dmg iso apk "  # other
    "jar sh rb js hta bat cpl msi msp py"  # scripts and executables
).split()
_IGNORED = tuple("." + e for e in IGNORED_EXTENSIONS)
_ROBOTS = lxml.etree.XPath("//meta[translate(@name,'ROBTS','robts')='robots']/@content")
_ROBTS = str.maketrans("ROBTS", "robts")  # _ROBOTS's translate()
_STRING = lxml.etree.XPath("string()")
_BASE_SCAN = 4096  # characters Scrapy's get_base_url reads


class Reading(NamedTuple):
    links: list[dict]  # [{"url", "text", "nofollow"}], normalized, in page order
    nofollow_page: bool  # meta robots nofollow or none: links is []
    invalid_links: int  # links normalize_url refused
    prints: fp.Fingerprints | None  # None when not asked for
    metadata: dict[str, str]
    problems: list[str]  # metadata's problem kinds (decoding and parsing ones also without metadata), "internal"
    timings: dict[str, float]  # CPU seconds by stage (STAGES)


def read_page(
    body: bytes,
    url: str,
    headers: dict,
    *,
    links: bool = True,
    fingerprints: bool = True,
    metadata: bool = True,
    min_words: int = 100,
    url_options: dict | None = None,
    max_field_length: int = DEFAULT_MAX_FIELD_LENGTH,
    max_fields: int = DEFAULT_MAX_FIELDS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Reading:
    """Read the HTML page ``body`` fetched from ``url`` (the final URL) with response
    ``headers`` ({name: [values]}, any case) once (see the module docstring). ``links``,
    ``fingerprints`` and ``metadata`` False leave that part out (empty, or prints None);
    ``min_words`` is content seen's CONTENT_SEEN_MIN_WORDS, ``url_options``
    normalize_url's keyword arguments, the rest the metadata pipeline's limits."""
    reader = _Reader(body, url, headers)
    try:
        reader.read(
            links, fingerprints, metadata, min_words, url_options or {}, max_field_length, max_fields, max_bytes
        )
    except Exception:  # a bug, not the page: what was read is kept
        reader.failed("reading")
    return Reading(
        reader.links,
        reader.nofollow_page,
        reader.invalid_links,
        reader.prints,
        reader.metadata,
        reader.problems,
        reader.timings,
    )


class _Reader:
    """One page being read; each part sets its fields, a part that fails leaves them empty."""

    def __init__(self, body, url, headers):
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogatepass")
        elif not isinstance(body, (bytes, bytearray, memoryview)):
            body = b""
        self.body = bytes(body)
        self.url = url  # as extract_metadata takes it
        self.link_url = url if isinstance(url, str) else ""
        self.headers = headers
        self.links: list[dict] = []
        self.nofollow_page = False
        self.invalid_links = 0
        self.prints: fp.Fingerprints | None = None
        self.metadata: dict[str, str] = {}
        self.problems: list[str] = []
        self.timings = dict.fromkeys(STAGES, 0.0)
        self._started = time.thread_time()

    def lap(self, stage: str) -> None:
        """Count the CPU time since the last lap to ``stage``."""
        now = time.thread_time()
        self.timings[stage] += now - self._started
        self._started = now

    def failed(self, part: str) -> None:
        logger.debug("Reading %s of %s failed", part, self.url, exc_info=True)
        if "internal" not in self.problems:
            self.problems.append("internal")

    def read(self, links, fingerprints, metadata, min_words, url_opts, max_field_length, max_fields, max_bytes):
        body = self.body
        self.headers = self.headers or {}
        page = root = None
        shared = False  # whether the links can be read from the shared tree
        whole = len(body) <= max(0, max_bytes)  # whether the shared tree holds the whole body
        if links and not whole:  # first, so that its parse and the shared one are not held at once
            try:
                self._streamed_links(url_opts)
            except Exception:
                self.failed("links")
            self.lap("links")
        if metadata or fingerprints:
            try:
                page = decode_html(body, self.headers, self.problems, max_bytes)
                self.lap("decode")
                incomplete = self.problems.count("parse_incomplete")
                root = parse_html(page.text, self.problems)
                self.lap("parse")
                shared = (
                    whole
                    and self.problems.count("parse_incomplete") == incomplete
                    and "\x00" not in page.text
                    and _strips_alike(page.text)
                )
            except Exception:
                self.failed("page")
                page = root = None
        if links and whole:
            try:
                self._read_links(page if shared else None, root, url_opts)
            except Exception:
                self.failed("links")
            self.lap("links")
        if metadata and page is not None:
            self.metadata = metadata_from_tree(
                root,
                page,
                self.url,
                self.headers,
                self.problems,
                max_field_length=max_field_length,
                max_fields=max_fields,
                url_options=url_opts,
            )
            self.lap("metadata")
        if fingerprints:
            digest = fp.body_digest(body)
            self.prints = fp.Fingerprints(digest, 0, None, None, None)
            self.lap("sketch")
            if root is not None:
                try:
                    bag = fp.main_words(fp.parsed_root(root, memoryview(body)[: max(0, max_bytes)]))
                    self.lap("text")
                    self.prints = fp.fingerprints_of(digest, bag, min_words)
                except Exception:
                    self.failed("fingerprints")
                self.lap("sketch")

    def _read_links(self, page: DecodedPage | None, root, url_opts) -> None:
        """The page's links from the shared tree (``page``), or from a parse of their own."""
        if page is None:  # the whole body, as Scrapy's selector reads it
            page = decode_html(self.body, self.headers, [], len(self.body))
            self.lap("decode")
            root = _selector_tree(page.text)
            self.lap("parse")
        if root is None:
            return
        robots = ",".join(_ROBOTS(root))
        if {"nofollow", "none"} & {t.strip() for t in robots.lower().split(",")}:
            self.nofollow_page = True
            return
        encoding = _link_encoding(self.body, page)
        try:
            base = get_base_url(page.text[:_BASE_SCAN], self.link_url, encoding)
        except ValueError:  # a URL w3lib cannot read (Scrapy's extractor fails on it): no links
            return
        self.links, self.invalid_links = _links(root.iter("a", "area"), base, self.link_url, encoding, url_opts)

    def _streamed_links(self, url_opts) -> None:
        """The links of a body over max_bytes, which the shared tree does not hold whole:
        the links of Scrapy's parse of the whole body, read from the parser's events as it
        goes, each part of the tree dropped once read (the tree of a 5 MB page is 55 MB:
        the page process would keep the size of the largest page it read)."""
        page = decode_html(self.body, self.headers, [], len(self.body))
        self.lap("decode")
        encoding = _link_encoding(self.body, page)
        try:
            base = get_base_url(page.text[:_BASE_SCAN], self.link_url, encoding)
        except ValueError:  # a URL w3lib cannot read (Scrapy's extractor fails on it): no links
            base = None
        data = _selector_bytes(page.text)
        del page
        if not data:
            return
        robots: list[str] = []
        elements = _streamed_link_elements(data, robots)
        try:
            if base is None:
                found: tuple[list[dict], int] = ([], 0)
                for _ in elements:
                    pass
            else:
                found = _links(elements, base, self.link_url, encoding, url_opts)
        except (lxml.etree.LxmlError, ValueError):  # no tree (Scrapy's selector has none either)
            return
        if {"nofollow", "none"} & {t.strip() for t in ",".join(robots).lower().split(",")}:
            self.nofollow_page = True
            return
        self.links, self.invalid_links = found


def _strips_alike(text: str) -> bool:
    """Whether ``text.strip()`` (Scrapy's selector) takes from the ends of ``text`` only
    what the HTML parser skips anyway: no other Unicode whitespace at either end."""
    start = 0
    while start < len(text) and text[start] in HTML5_WHITESPACE:
        start += 1
    end = len(text) - 1
    while end > start and text[end] in HTML5_WHITESPACE:
        end -= 1
    return start >= len(text) or not (text[start].isspace() or text[end].isspace())


def _selector_bytes(text: str) -> bytes:
    """What Scrapy's selector (parsel) parses of a response's text."""
    return text.strip().replace("\x00", "").encode("utf-8", "surrogatepass")


def _selector_tree(text: str):
    """The tree Scrapy's selector (parsel) builds from a response's text; None for none."""
    data = _selector_bytes(text)
    if not data:
        return None
    parser = html_parser(recover=True, encoding="utf-8", huge_tree=True)
    try:
        return lxml.etree.fromstring(data, parser=parser)
    except (lxml.etree.LxmlError, ValueError):
        return None


STREAM_CHUNK = 64 * 1024  # bytes fed to the parser at a time


def _streamed_link_elements(data: bytes, robots: list[str]):
    """The ``<a>`` and ``<area>`` elements of the tree ``_selector_tree`` builds of
    ``data``, in document order, each once the parser has passed its end (its text is
    whole); the ``content`` of the robots meta tags (as ``_ROBOTS`` finds them) go to
    ``robots``. While no link is open, every element the parser has passed is emptied
    and dropped: the tree held is the path to where the parser is. Raises what the
    parser raises for a body that gives no tree."""
    parser = lxml.etree.HTMLPullParser(events=("start", "end"), recover=True, encoding="utf-8", huge_tree=True)
    waiting: deque = deque()  # links started and not yet given, in document order
    ended: set = set()  # those of them whose end the parser has passed
    open_links = 0

    def passed():
        nonlocal open_links
        for event, el in parser.read_events():
            tag = el.tag
            if event == "start":
                if tag == "a" or tag == "area":
                    waiting.append(el)
                    open_links += 1
                elif tag == "meta":
                    name = el.get("name")
                    if name is not None and name.translate(_ROBTS) == "robots" and el.get("content") is not None:
                        robots.append(el.get("content"))
                continue
            if tag == "a" or tag == "area":
                open_links -= 1
                ended.add(el)
            while waiting and waiting[0] in ended:
                ended.discard(waiting[0])
                yield waiting.popleft()
            if not open_links and not waiting:  # nothing read will be needed again
                el.clear(keep_tail=True)
                parent = el.getparent()
                if parent is not None:
                    while el.getprevious() is not None:
                        del parent[0]

    for start in range(0, len(data), STREAM_CHUNK):
        parser.feed(data[start : start + STREAM_CHUNK])
        yield from passed()
    parser.close()
    yield from passed()


def _link_encoding(body: bytes, page: DecodedPage) -> str:
    """The encoding Scrapy gives the response (``TextResponse.encoding``), which makes the
    links' queries safe: byte order mark, Content-Type charset, meta charset, else ASCII
    (as windows-1252) or UTF-8; for other bytes Scrapy guessed, the reader's decode."""
    declared = read_bom(body)[0] or http_content_type_encoding(page.content_type) or html_body_declared_encoding(body)
    if declared:
        return declared
    if body.isascii():
        return resolve_encoding("ascii")
    return page.encoding


def _links(elements, base: str, url: str, encoding: str, url_opts: dict) -> tuple[list[dict], int]:
    """(links, URLs normalize_url refused) of a page's ``<a>`` and ``<area>`` elements, in
    document order (see the module docstring)."""
    page = _PageLinks(base, url, encoding, url_opts)
    followed: dict[str, tuple] = {}  # href -> what _PageLinks.follow gave
    seen_raw: set[str] = set()
    seen: set[str] = set()
    out: list[dict] = []
    invalid = 0
    first_in_page = None  # what the first link to a fragment of the page itself gave
    for el in elements:
        href = el.get("href")
        if href is None:
            continue
        got = followed.get(href)
        if got is None:
            in_page = _IN_PAGE_HREF.fullmatch(href.strip(HTML5_WHITESPACE)) is not None
            if in_page and first_in_page is not None and first_in_page[1] is not _INVALID:
                continue  # the same normalized URL as the first such link, or dropped like it
            got = followed[href] = page.follow(href)
            if in_page and first_in_page is None:
                first_in_page = got
        link, normal = got
        if link is None or link in seen_raw:
            continue
        seen_raw.add(link)
        if normal is _DROPPED:
            continue
        if normal is _INVALID:
            invalid += 1
            continue
        if normal in seen:
            continue
        seen.add(normal)
        rel = el.get("rel")
        out.append(
            {
                "url": normal,
                "text": str(_STRING(el) or "").strip()[:MAX_LINK_TEXT],
                "nofollow": rel is not None and "nofollow" in rel.lower().replace(",", " ").split(),
            }
        )
    return out, invalid


_DROPPED, _INVALID = object(), object()
# A link to a fragment of the page itself: whatever the fragment (printable ASCII), urljoin
# keeps the base but for the fragment, which neither makes safe_url_string fail nor counts
# for _followable or normalize_url; so all give what the first gave.
_IN_PAGE_HREF = re.compile(r"#[!-~]*")

# What follow gave, shared by the pages a process reads: the links of a site's pages
# repeat (menus, tables of contents). An href's result depends on the page only through
# what its key holds (_PageLinks.key), and a key is made only for hrefs where that is so.
KNOWN_LINKS = 20_000  # entries kept (about 500 bytes each: 10 MB when full, then all are dropped)
_KNOWN: dict[tuple, tuple] = {}
# an absolute URL: urljoin keeps it whatever the base, but for the base's scheme
_ABSOLUTE_HREF = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9\[]")
# a relative reference with a path (not a network path, which may have an empty host):
# urljoin reads of the base only its scheme, host and directory (a path without ":" cannot
# be taken for a scheme, without ";" holds no parameters, without spaces or controls loses
# nothing to urlsplit)
_RELATIVE_HREF = re.compile(r"(?!//)[A-Za-z0-9._~!$&'()*+,=@%/-]+(?:[?#]|\Z)")

# Plain URLs, which safe_url_string leaves as they are and urljoin (with the page's URL)
# too: a lowercase ASCII host (its labels begin with a letter, none holds "--"; or an IPv4
# address), no userinfo, a port that is not the scheme's, a path, query and fragment of
# characters that need no escaping (no "%", "'", ";" or "\\"), and no empty "?" or "#".
# A plain href against a plain base is joined here, as urljoin joins it (tests check
# both against the libraries).
_LABEL = r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_PATH_CHARS = r"[A-Za-z0-9._~!$&()*+,=@/-]"
_TAIL_CHARS = r"[A-Za-z0-9._~!$&()*+,=@/?:-]"
_PLAIN_URL = re.compile(
    rf"(https?)://((?:{_LABEL}\.)*{_LABEL}|(?:{_OCTET}\.){{3}}{_OCTET})(?::([1-9][0-9]{{0,4}}))?"
    rf"(/{_PATH_CHARS}*)(?:\?{_TAIL_CHARS}+)?(?:#{_TAIL_CHARS}+)?"
)
_PLAIN_HREF = re.compile(rf"(?!//)({_PATH_CHARS}+)(?:\?({_TAIL_CHARS}+))?(?:#({_TAIL_CHARS}+))?")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_ASCII_PROBE = "".join(chr(c) for c in range(0x21, 0x7F))


class _PageLinks:
    """How the hrefs of one page become links: its base URL, final URL, encoding and
    normalize_url options."""

    def __init__(self, base: str, url: str, encoding: str, url_opts: dict):
        self.base, self.url, self.encoding, self.url_opts = base, url, encoding, url_opts
        self.absolute = self.relative = None  # what keys of the page's hrefs hold
        self.plain = False  # whether plain hrefs are joined here
        self.prefix: str | None = None  # scheme://host[:port] of a plain base
        self.base_parts: list[str] = []  # its directory's segments, as urljoin splits them
        try:
            parts = urlsplit(base)
            url_scheme = urlsplit(url).scheme
            options = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in url_opts.items()))
            hash(options)
        except (ValueError, TypeError):  # an unusable URL or unhashable options: the slow way
            return
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return
        page = (url_scheme, encoding, options)
        self.absolute = ("absolute", parts.scheme, *page)
        self.relative = ("relative", parts.scheme, parts.netloc, parts.path[: parts.path.rfind("/") + 1], *page)
        self.plain = _ascii_safe(encoding)
        match = _plain_url(base)
        if self.plain and match is not None:
            self.prefix = f"{match[1]}://{parts.netloc}"
            self.base_parts = match[4].split("/")
            if self.base_parts[-1] != "":
                del self.base_parts[-1]

    def follow(self, href: str) -> tuple:
        """(the absolute URL Scrapy's link extractor makes of an href, or None when it
        skips it; the URL normalized, or _DROPPED when the extractor drops it, or _INVALID
        when normalize_url refuses it), from the links already known when it can."""
        href = href.strip(HTML5_WHITESPACE)
        key = self.key(href)
        got = _KNOWN.get(key) if key is not None else None
        if got is None:
            got = (self.plain and self.plain_link(href)) or _follow_slowly(href, self.base, self.url, self.encoding)
            if got[1] is None:
                try:
                    got = got[0], normalize_url(got[0], **self.url_opts)
                except InvalidURL:
                    got = got[0], _INVALID
            if key is not None:
                if len(_KNOWN) >= KNOWN_LINKS:
                    _KNOWN.clear()
                _KNOWN[key] = got
        return got

    def key(self, href: str) -> tuple | None:
        """The key of a (stripped) href's result among the pages read; None: not shared."""
        if self.absolute is None:
            return None
        if _ABSOLUTE_HREF.match(href):
            return (*self.absolute, href)
        if _RELATIVE_HREF.match(href):
            return (*self.relative, href)
        return None

    def plain_link(self, href: str) -> tuple | None:
        """``_follow_slowly`` of a plain href, joined here: a plain URL is its own link, a
        plain relative reference against a plain base is joined as urljoin joins it. None
        for any other href, or a join that is not a plain URL."""
        match = _plain_url(href)
        link = href
        if match is None:
            link = self.join(href) if self.prefix is not None else None
            match = _plain_url(link) if link is not None else None
            if match is None:
                return None
        return link, (_DROPPED if match[4].lower().endswith(_IGNORED) else None)

    def join(self, href: str) -> str | None:
        """urljoin(base, href) for a plain relative href (None for another href)."""
        match = _PLAIN_HREF.fullmatch(href)
        if match is None:
            return None
        path, query, fragment = match.groups()
        # urllib.parse.urljoin's merge of the paths, step by step
        if path[:1] == "/":
            segments = path.split("/")
        else:
            segments = self.base_parts + path.split("/")
            segments[1:-1] = filter(None, segments[1:-1])
        resolved: list[str] = []
        for segment in segments:
            if segment == "..":
                if resolved:
                    resolved.pop()
            elif segment != ".":
                resolved.append(segment)
        if segments[-1] in (".", ".."):
            resolved.append("")
        path = "/".join(resolved) or "/"
        if path[:1] != "/":
            path = "/" + path
        link = self.prefix + path
        if query:
            link += "?" + query
        if fragment:
            link += "#" + fragment
        return link


def _plain_url(url: str):
    """The match of a plain URL (scheme, host, port, path), None for any other."""
    match = _PLAIN_URL.fullmatch(url)
    if match is None or "--" in match[2]:
        return None
    port = match[3]
    if port is not None and (int(port) > 65535 or int(port) == _DEFAULT_PORTS[match[1]]):
        return None
    return match


def _ascii_safe(encoding: str) -> bool:
    """Whether ``encoding`` writes printable ASCII as ASCII (safe_url_string encodes the
    query and fragment with it)."""
    try:
        return _ASCII_PROBE.encode(encoding) == _ASCII_PROBE.encode("ascii")
    except (LookupError, UnicodeError, ValueError, TypeError):
        return False


def _follow_slowly(href: str, base: str, url: str, encoding: str) -> tuple:
    """(the absolute URL Scrapy's link extractor makes of a (stripped) href, None when it
    skips it; _DROPPED when it drops it, else None)."""
    try:
        link = urljoin(url, safe_url_string(urljoin(base, href), encoding=encoding))
    except Exception:  # ValueError: a bogus link
        return None, _DROPPED
    return link, (None if _followable(link) else _DROPPED)


def _followable(link: str) -> bool:
    """Whether Scrapy's link extractor keeps an absolute URL: its scheme, and its path's
    extension."""
    if link.split("://", 1)[0] not in _LINK_SCHEMES:
        return False
    try:
        return not urlparse(link).path.lower().endswith(_IGNORED)
    except ValueError:
        return False
