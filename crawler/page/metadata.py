"""A fetched HTML page's descriptive fields, as a flat ``dict[str, str]`` (the UrlStore's
open metadata map: SQLite JSON, Cassandra ``map<text, text>``), its rel=canonical among
them. Pure: no Scrapy, no Twisted, no I/O, so that a page process imports no more than
reading a page needs (the pipeline is crawler/pipelines/metadata.py).

An HTML page (``is_html``): Content-Type ``text/html`` or ``application/xhtml+xml``, or no
Content-Type and a body that starts like HTML.

Keys (each only when the page has it; the first occurrence wins):

- ``title`` (the first ``<title>`` outside inline SVG), ``description`` (meta
  name=description), ``language`` (``<html lang>``, else ``xml:lang``, else meta
  http-equiv=content-language, else the Content-Language header), ``charset`` (the label
  the page declares, lowercased: byte order mark, else the Content-Type header, else meta
  charset / http-equiv=content-type; it may name an encoding Python does not know),
  ``content_type`` (the header's media type, lowercased);
- ``canonical``: ``<link rel=canonical href>`` resolved against the final URL (and
  ``<base href>``) and normalized with :func:`crawler.urls.normalize_url` (the crawl's
  URL_STRIP_PARAMS / URL_SORT_QUERY); an invalid one is skipped;
- Open Graph ``og:title``, ``og:description``, ``og:type``, ``og:image``; Twitter card
  ``twitter:card``, ``twitter:title``, ``twitter:description``, ``twitter:image`` (meta
  ``property`` or ``name``); the two images resolved to absolute http(s) URLs;
- ``published_time``: meta article:published_time, else schema.org datePublished
  (an Article first), else the first ``<time datetime>``; ``modified_time``: meta
  article:modified_time, else og:updated_time, else schema.org dateModified;
- from JSON-LD and microdata (extruct, ``uniform=True``; every JSON-LD block, but only the
  first microdata scope of a Product, Recipe and Article type, each with what it nests;
  JSON-LD first; ``@graph``, nested nodes, lists of types and ``@id`` references
  followed): ``product:name``, ``product:price``, ``product:currency``,
  ``product:availability`` (the first schema.org Product; its Offer, the first priced Offer
  of a list, or an AggregateOffer's lowPrice; a schema.org availability IRI becomes its
  bare name, e.g. ``InStock``); ``recipe:ingredients`` (a Recipe's
  recipeIngredient as a JSON array string, e.g. ``["2 eggs", "1 cup flour"]``, always
  valid JSON: ingredients that do not fit the field length are dropped);
  ``article:headline`` and ``article:author`` (an Article, NewsArticle, BlogPosting or other
  Article type; several authors are joined with ", ").

Limits: the parsers see at most METADATA_MAX_BYTES of the body (2 MiB); every value has its
whitespace collapsed and is cut to METADATA_MAX_FIELD_LENGTH characters (1000; URLs longer
than that are dropped rather than cut; control characters and lone surrogates are removed,
so every value encodes as UTF-8); at most METADATA_MAX_FIELDS fields (64) per page. The
body is decoded with its BOM, header or meta charset (w3lib), else UTF-8 if valid, else
windows-1252; an unknown or non-text charset falls back the same way. The HTML is parsed
once (lxml); extruct reads that tree, and only when the text holds ``application/ld+json``
or ``itemscope``.

Nothing raises: malformed HTML, broken JSON-LD, bad charsets and binary bodies give what
could be read, and each problem met is named by its kind: ``charset`` (unknown or
unusable declared charset), ``truncated`` (body over METADATA_MAX_BYTES), ``parse`` (no
tree at all), ``parse_incomplete`` (the HTML parser gave up partway, e.g. nesting deeper than 256),
``jsonld`` (a JSON-LD block that is not JSON), ``microdata`` (extruct failed on a scope),
``microdata_too_large`` (a scope with over 2000 itemprops, or nested scopes of over 10,000
nodes in all: extruct's XPaths are quadratic there, so it is not read), ``canonical`` (an
invalid or over-long canonical URL), ``internal`` (a bug: an unexpected exception).

:func:`extract_metadata` is the whole extraction, for the pipeline, tests and benchmarks.
Its steps are public for a reader that shares one parse among several uses
(crawler/page/reader.py): :func:`decode_html`, :func:`parse_html`, then
:func:`metadata_from_tree`.
"""

from __future__ import annotations

import logging
from urllib.parse import urljoin

from w3lib.encoding import resolve_encoding

from crawler.page.decode import _CHARSET_PARAM, DEFAULT_MAX_BYTES, DecodedPage, _clean, decode_html, parse_html
from crawler.page.headers import header
from crawler.page.structured import _has_itemscope, _jsonld, _microdata, _StructuredData
from crawler.urls import InvalidURL, normalize_url

logger = logging.getLogger(__name__)

DEFAULT_MAX_FIELD_LENGTH = 1000
DEFAULT_MAX_FIELDS = 64


_MAX_URL_INPUT = 8192  # longer hrefs are not even resolved


# -- the pure function ---------------------------------------------------------------------


def extract_metadata(
    body: bytes,
    url: str,
    headers: dict,
    max_field_length: int = DEFAULT_MAX_FIELD_LENGTH,
    max_fields: int = DEFAULT_MAX_FIELDS,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    url_options: dict | None = None,
) -> tuple[dict[str, str], list[str]]:
    """The metadata fields of the HTML page ``body`` fetched from ``url`` (its final URL)
    with response ``headers`` ({name: [values]}, any case), and the problems met (kinds,
    see the module docstring). Never raises for any bytes, URL or headers."""
    problems: list[str] = []
    try:
        page = decode_html(body, headers or {}, problems, max_bytes)
        root = parse_html(page.text, problems)
    except Exception:  # a bug, not the page
        logger.debug("Metadata extraction of %s failed", url, exc_info=True)
        problems.append("internal")
        return {}, problems
    metadata = metadata_from_tree(
        root,
        page,
        url,
        headers,
        problems,
        max_field_length=max_field_length,
        max_fields=max_fields,
        url_options=url_options,
    )
    return metadata, problems


def metadata_from_tree(
    root,
    page: DecodedPage,
    url: str,
    headers: dict,
    problems: list[str],
    *,
    max_field_length: int = DEFAULT_MAX_FIELD_LENGTH,
    max_fields: int = DEFAULT_MAX_FIELDS,
    url_options: dict | None = None,
) -> dict[str, str]:
    """The metadata fields of a page already decoded (``decode_html``) and parsed
    (``parse_html``: ``root``, None when there was no tree), as ``extract_metadata`` gives
    them; its problems are added to ``problems``. Reads the tree without changing it.
    Never raises."""
    fields = _Fields(max_field_length, max_fields)
    try:
        _extract(root, page, url or "", headers or {}, fields, problems, url_options or {})
    except Exception:  # a bug, not the page: keep what was found
        logger.debug("Metadata extraction of %s failed", url, exc_info=True)
        problems.append("internal")
    return fields.values


class _Fields:
    """The metadata being built: first value of a key wins, values cleaned and capped."""

    def __init__(self, max_length: int, max_fields: int):
        self.max_length = max(1, max_length)
        self.max_fields = max(0, max_fields)
        self.values: dict[str, str] = {}

    def add(self, key: str, value) -> None:
        if key in self.values or len(self.values) >= self.max_fields or not isinstance(value, str):
            return
        value = _clean(value, self.max_length)
        if value:
            self.values[key] = value


def _extract(root, page, url, headers, fields, problems, url_opts) -> None:
    text, label = page.text, page.label
    media_type = page.content_type.split(";", 1)[0].strip().lower()
    head = _HeadFields()
    if root is not None:
        head.read(root)
    base = _base_url(url, head.base_href)

    data = None
    if root is not None:
        jsonld = _jsonld(root, base, problems) if "application/ld+json" in text else []
        microdata = _microdata(root, base, problems) if _has_itemscope(text) else []
        if jsonld or microdata:
            data = _StructuredData(jsonld, microdata)

    meta = head.meta
    fields.add("title", head.title)
    fields.add("description", meta.get("description"))
    language = head.lang or head.content_language or (header(headers, "content-language") or "")
    fields.add("language", language)
    if label is None and head.meta_charset and "charset" not in problems:
        if len(head.meta_charset) > 64 or resolve_encoding(head.meta_charset) is None:
            problems.append("charset")
    fields.add("charset", (label or head.meta_charset or "").lower())
    fields.add("content_type", media_type)
    if head.canonical is not None:
        fields.add("canonical", _canonical(head.canonical, base, url_opts, fields.max_length, problems))
    for key in ("og:title", "og:description", "og:type"):
        fields.add(key, meta.get(key))
    fields.add("og:image", _absolute(meta.get("og:image"), base, fields.max_length))
    for key in ("twitter:card", "twitter:title", "twitter:description"):
        fields.add(key, meta.get(key))
    fields.add("twitter:image", _absolute(meta.get("twitter:image"), base, fields.max_length))
    fields.add(
        "published_time",
        meta.get("article:published_time") or (data and data.date("datePublished")) or head.time,
    )
    fields.add(
        "modified_time",
        meta.get("article:modified_time") or meta.get("og:updated_time") or (data and data.date("dateModified")),
    )
    if data is not None:
        for key, value in data.fields(fields.max_length):
            fields.add(key, value)


# -- decoding and parsing ------------------------------------------------------------------


class _HeadFields:
    """What one pass over the title, meta, link, base and time elements finds."""

    def __init__(self):
        self.title: str | None = None
        self.meta: dict[str, str] = {}  # lowercased name or property -> first non-empty content
        self.meta_charset: str | None = None
        self.content_language: str | None = None
        self.canonical: str | None = None
        self.base_href: str | None = None
        self.time: str | None = None
        self.lang: str | None = None

    def read(self, root) -> None:
        self.lang = (root.get("lang") or "").strip() or (root.get("xml:lang") or "").strip() or None
        meta = self.meta
        for el in root.iter("title", "meta", "link", "base", "time"):
            tag = el.tag
            if tag == "meta":
                if el.get("itemprop") is not None:
                    continue  # microdata: extruct reads it
                content = el.get("content")
                charset = el.get("charset")
                if charset and self.meta_charset is None:
                    self.meta_charset = charset.strip()
                equiv = el.get("http-equiv")
                if equiv and content:
                    equiv = equiv.strip().lower()
                    if equiv == "content-type" and self.meta_charset is None:
                        match = _CHARSET_PARAM.search(content)
                        if match:
                            self.meta_charset = match.group(1)
                    elif equiv == "content-language" and self.content_language is None:
                        self.content_language = content
                if content and content.strip():
                    for attr in ("property", "name"):
                        key = el.get(attr)
                        if key:
                            key = key.strip().lower()
                            if key not in meta:
                                meta[key] = content
            elif tag == "link":
                if self.canonical is None and "canonical" in (el.get("rel") or "").lower().split():
                    href = el.get("href")
                    if href is not None:
                        self.canonical = href
            elif tag == "title":
                if self.title is None and next(el.iterancestors("svg"), None) is None:
                    self.title = "".join(el.itertext())
            elif tag == "base":
                if self.base_href is None and el.get("href"):
                    self.base_href = el.get("href")
            elif self.time is None:  # time
                self.time = el.get("datetime") or None


def _base_url(url: str, base_href: str | None) -> str:
    if base_href and len(base_href) <= _MAX_URL_INPUT:
        try:
            joined = urljoin(url, base_href.strip())
        except ValueError:
            return url
        if joined.startswith(("http://", "https://")):
            return joined
    return url


def _canonical(href: str, base: str, url_opts: dict, max_length: int, problems: list) -> str | None:
    href = href.strip()
    if not href:
        return None
    try:
        if len(href) > _MAX_URL_INPUT:
            raise InvalidURL("too long")
        canonical = normalize_url(urljoin(base, href), **url_opts)
    except (InvalidURL, ValueError):
        problems.append("canonical")
        return None
    if len(canonical) > max_length:
        problems.append("canonical")
        return None
    return canonical


def _absolute(value: str | None, base: str, max_length: int) -> str | None:
    """``value`` resolved against ``base``, if that is an http(s) URL that fits."""
    if not value or len(value) > _MAX_URL_INPUT:
        return None
    try:
        joined = urljoin(base, value.strip())
    except ValueError:
        return None
    if joined.startswith(("http://", "https://")) and len(joined) <= max_length:
        return joined
    return None


# -- structured data -----------------------------------------------------------------------
