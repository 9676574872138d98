"""A page's links as Scrapy's LinkExtractor gives them, without Scrapy: the elements and
attributes it reads, its ignored extensions and schemes, the base URL, each href made
absolute, safe and normalized (the crawler's one normalizer), nofollow marked; hrefs
seen on earlier pages of the process answered from a bounded cache (crawler/page/reader.py
reads a page once and calls it).
"""

from __future__ import annotations

import re
from collections import deque
from urllib.parse import urljoin, urlparse, urlsplit

import lxml.etree
import lxml.html
from w3lib.encoding import html_body_declared_encoding, http_content_type_encoding, read_bom, resolve_encoding
from w3lib.html import HTML5_WHITESPACE
from w3lib.url import safe_url_string

from crawler.page.decode import DecodedPage, html_parser
from crawler.urls import InvalidURL, normalize_url

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


def _links(elements, base: str, url: str, encoding: str, url_opts: dict, most: int = 0) -> tuple[list[dict], int]:
    """(links, URLs normalize_url refused) of a page's ``<a>`` and ``<area>`` elements, in
    document order (see the module docstring); the first ``most`` (0: all)."""
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
        if len(out) == most:
            break
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
