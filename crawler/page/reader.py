"""Reading a fetched HTML page once: one decode, one lxml parse, and from that one tree
everything the crawl wants of the page (no Scrapy engine, no I/O).

    reading = read_page(body, final_url, headers, url_options=url_options(settings))

- **links**: what the broad spider follows, exactly as Scrapy's link extractor gives them
  (Scrapy's ``LinkExtractor(deny_extensions=IGNORED_EXTENSIONS, canonicalize=False,
  unique=True, tags=("a", "area"))``, then ``crawler.urls.normalize_url``): the ``href``
  of every ``<a>`` and ``<area>`` in page order, HTML whitespace stripped, resolved
  against the page's first ``<base href>`` (w3lib's, as a browser reads it: Scrapy reads
  only the first 4096 characters, so a base after a long head of inline styles was missed
  and every relative link resolved against the page's URL) and the final URL, made safe
  with the page's encoding; only http, https, file and ftp URLs whose path does not end
  in an ignored extension (.pdf, .jpg...); the first of equal
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
import time
from typing import NamedTuple

import lxml.etree
import lxml.html
from w3lib.html import get_base_url

from crawler.contentseen import fingerprints as fp
from crawler.page.decode import DEFAULT_MAX_BYTES, DecodedPage, decode_html, parse_html
from crawler.page.links import (
    _ROBOTS,
    _link_encoding,
    _links,
    _selector_bytes,
    _selector_tree,
    _streamed_link_elements,
    _strips_alike,
)
from crawler.page.metadata import DEFAULT_MAX_FIELD_LENGTH, DEFAULT_MAX_FIELDS, metadata_from_tree

logger = logging.getLogger(__name__)

STAGES = ("decode", "parse", "links", "metadata", "text", "sketch")


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
    max_links: int = 0,
) -> Reading:
    """Read the HTML page ``body`` fetched from ``url`` (the final URL) with response
    ``headers`` ({name: [values]}, any case) once (see the module docstring). ``links``,
    ``fingerprints`` and ``metadata`` False leave that part out (empty, or prints None);
    ``min_words`` is content seen's CONTENT_SEEN_MIN_WORDS, ``url_options``
    normalize_url's keyword arguments, ``max_links`` the page's first links read at most
    (LINKS_MAX_PER_PAGE; 0: all), the rest the metadata pipeline's limits."""
    reader = _Reader(body, url, headers)
    reader.max_links = max_links
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
        self.max_links = 0  # links read at most (0: all)
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
            self.prints = fp.digest_only(digest)
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
            base = get_base_url(page.text, self.link_url, encoding)
        except ValueError:  # a URL w3lib cannot read (Scrapy's extractor fails on it): no links
            return
        self.links, self.invalid_links = _links(
            root.iter("a", "area"), base, self.link_url, encoding, url_opts, self.max_links
        )

    def _streamed_links(self, url_opts) -> None:
        """The links of a body over max_bytes, which the shared tree does not hold whole:
        the links of Scrapy's parse of the whole body, read from the parser's events as it
        goes, each part of the tree dropped once read (the tree of a 5 MB page is 55 MB:
        the page process would keep the size of the largest page it read)."""
        page = decode_html(self.body, self.headers, [], len(self.body))
        self.lap("decode")
        encoding = _link_encoding(self.body, page)
        try:
            base = get_base_url(page.text, self.link_url, encoding)
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
                found = _links(elements, base, self.link_url, encoding, url_opts, self.max_links)
        except (lxml.etree.LxmlError, ValueError):  # no tree (Scrapy's selector has none either)
            return
        if {"nofollow", "none"} & {t.strip() for t in ",".join(robots).lower().split(",")}:
            self.nofollow_page = True
            return
        self.links, self.invalid_links = found
