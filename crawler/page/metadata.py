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

import json
import logging
import re
from collections import deque
from typing import NamedTuple
from urllib.parse import urljoin

import lxml.etree
import lxml.html
from w3lib.encoding import html_body_declared_encoding, read_bom, resolve_encoding, to_unicode

from crawler.page.headers import header
from crawler.urls import InvalidURL, normalize_url

logger = logging.getLogger(__name__)

DEFAULT_MAX_FIELD_LENGTH = 1000
DEFAULT_MAX_FIELDS = 64
DEFAULT_MAX_BYTES = 2 * 2**20

_HTML_TYPES = ("text/html", "application/xhtml+xml")
# WHATWG MIME sniffing's HTML patterns (after leading whitespace), plus <meta and <link
_HTML_START = re.compile(
    rb"<(?:!doctype\s+html|html|head|script|iframe|h1|div|font|table|a|style|title|b|body|br|p|!--|meta|link)[\s>/]",
    re.IGNORECASE,
)
_CHARSET_PARAM = re.compile(r"""charset\s*=\s*["']?\s*([^\s"';,]+)""", re.IGNORECASE)
_NON_SPACE = re.compile(r"\S+")
_UNSAFE_CHARS = re.compile("[\x00-\x08\x0e-\x1f\x7f\ud800-\udfff]")
_JSONLD_XPATH = lxml.etree.XPath('//script[@type="application/ld+json"]')
_ITEMTYPE_XPATH = lxml.etree.XPath("//*[@itemscope][@itemtype]")
# extruct's microdata XPaths are quadratic in the itemprops of a scope (set:difference) and
# in the nesting of scopes: a scope past these bounds is not read (hostile or absurd pages)
_MAX_ITEMPROPS = 2000
_MAX_NESTED_SCOPES = 500
_MAX_NESTED_NODES = 10_000  # summed over the nested scopes (a node under k of them counts k times)
_COUNT_ITEMPROPS = lxml.etree.XPath("count(descendant-or-self::*[@itemprop])")
_NESTED_SCOPES = lxml.etree.XPath(f"(descendant::*[@itemscope])[position() <= {_MAX_NESTED_SCOPES + 1}]")
_COUNT_NODES = lxml.etree.XPath("count(descendant-or-self::node())")
# a JSON-LD block bigger than this is checked with json.loads first: extruct retries a
# broken block with jstyleson, pure Python, ~0.2 s per MB
_JSONLD_PRECHECK = 64 * 1024

_ARTICLE_TYPES = frozenset(
    {
        "Article",
        "NewsArticle",
        "BlogPosting",
        "TechArticle",
        "ScholarlyArticle",
        "MedicalScholarlyArticle",
        "Report",
        "SatiricalArticle",
        "LiveBlogPosting",
        "SocialMediaPosting",
        "DiscussionForumPosting",
        "AnalysisNewsArticle",
        "AskPublicNewsArticle",
        "BackgroundNewsArticle",
        "OpinionNewsArticle",
        "ReportageNews",
        "ReviewNewsArticle",
    }
)
_PRODUCT_TYPES = frozenset({"Product", "ProductModel", "IndividualProduct", "SomeProducts", "ProductGroup"})
_RECIPE_TYPES = frozenset({"Recipe"})
_MAX_NODES = 5000  # structured-data values visited per page
_MAX_URL_INPUT = 8192  # longer hrefs are not even resolved
_MAX_AUTHORS = 20


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


def _clean(value: str, max_length: int) -> str:
    """``value`` with whitespace runs collapsed to one space, stripped, cut to
    ``max_length`` characters, without control characters or lone surrogates."""
    if len(value) <= 4 * max_length:
        value = " ".join(value.split())[:max_length].rstrip()
    else:  # a huge value: collapse only as much as is kept
        parts, size = [], 0
        for match in _NON_SPACE.finditer(value):
            parts.append(match.group())
            size += len(parts[-1]) + 1
            if size > max_length:
                break
        value = " ".join(parts)[:max_length].rstrip()
    if _UNSAFE_CHARS.search(value):
        value = " ".join(_UNSAFE_CHARS.sub("", value).split())
    return value


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


def is_html(headers, body) -> bool:
    """Whether a response is HTML: its Content-Type says so, or it has none and ``body``
    starts like an HTML document."""
    content_type = (header(headers, "content-type") or "").split(";", 1)[0].strip().lower()
    if content_type:
        return content_type in _HTML_TYPES
    if not isinstance(body, (bytes, bytearray)) or not body:
        return False
    head = bytes(body[:1024])
    bom_encoding, bom = read_bom(head)
    if bom_encoding and bom_encoding != "utf-8":
        head = head[len(bom) :].decode(bom_encoding, "ignore").encode("utf-8", "ignore")
    elif bom:
        head = head[len(bom) :]
    return bool(_HTML_START.match(head.lstrip()))


class DecodedPage(NamedTuple):
    """An HTML body as text (``decode_html``)."""

    text: str  # the body (its first max_bytes) decoded
    label: str | None  # the charset label its byte order mark or Content-Type header declares
    encoding: str  # the codec the text was decoded with
    content_type: str  # the Content-Type header ("" if none)


def decode_html(body, headers, problems: list, max_bytes: int = DEFAULT_MAX_BYTES) -> DecodedPage:
    """The first ``max_bytes`` of ``body`` as text: byte order mark, else the Content-Type
    header's charset, else the meta charset, else UTF-8 if valid, else windows-1252.
    Problems met (``truncated``, ``charset``) are added to ``problems``."""
    content_type = header(headers, "content-type") or ""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    elif not isinstance(body, (bytes, bytearray, memoryview)):
        body = b""
    if len(body) > max(0, max_bytes):
        body = body[: max(0, max_bytes)]
        problems.append("truncated")
    label, encoding, text = _decode(bytes(body), content_type, problems)
    return DecodedPage(text, label, encoding, content_type)


def parse_html(text: str, problems: list):
    """The lxml.html tree of a decoded page (comments and processing instructions left
    out), None when there is none (an empty page, or ``parse`` added to ``problems``)."""
    return None if not text or text.isspace() else _parse(text, problems)


def _decode(body: bytes, content_type: str, problems: list) -> tuple[str | None, str, str]:
    """(the charset label the BOM or header declares, the codec used, the text). The meta
    charset's label is read from the tree later."""
    bom_encoding, bom = read_bom(body)
    if bom_encoding:
        return bom_encoding, bom_encoding, to_unicode(body[len(bom) :], bom_encoding)
    label = None
    match = _CHARSET_PARAM.search(content_type)
    encoding = None
    if match:
        label = match.group(1)
        encoding = resolve_encoding(label)
        if encoding is None:
            problems.append("charset")
    if encoding is None:
        declared = html_body_declared_encoding(body)
        if declared and declared.startswith(("utf-16", "utf-32")):
            declared = "utf-8"  # an ASCII-compatible page cannot declare UTF-16 in itself (HTML spec)
        encoding = declared
    if encoding is not None:
        try:
            return label, encoding, to_unicode(body, encoding)
        except (LookupError, UnicodeError, ValueError, TypeError):  # e.g. charset=hex, rot13
            if "charset" not in problems:
                problems.append("charset")
    try:
        return label, "utf-8", body.decode("utf-8")
    except UnicodeDecodeError:
        return label, "cp1252", body.decode("cp1252", "replace")


# lxml.html's own parsers ask a Python function for the class of every element they hand
# to Python (a form, an input and a label have their own): some 1,500 calls a page of the
# documentation sites. Nothing here uses those classes; this lookup, in C, gives every
# element lxml.html's HtmlElement: the same readings of 1,000 documentation pages, 5-9%
# less CPU a read_page (more on the bigger pages).
HTML_CLASSES = lxml.etree.ElementDefaultClassLookup(
    element=lxml.html.HtmlElement,
    comment=lxml.html.HtmlComment,
    pi=lxml.html.HtmlProcessingInstruction,
    entity=lxml.html.HtmlEntity,
)


def html_parser(**options) -> lxml.etree.HTMLParser:
    """An lxml HTML parser with ``options`` whose elements are lxml.html's (HTML_CLASSES)."""
    parser = lxml.etree.HTMLParser(**options)
    parser.set_element_class_lookup(HTML_CLASSES)
    return parser


def _parse(text: str, problems: list):
    """The lxml.html tree of ``text`` (None if there is none)."""
    parser = html_parser(encoding="utf-8", remove_comments=True, remove_pis=True)
    try:
        root = lxml.etree.fromstring(text.encode("utf-8", "surrogatepass"), parser=parser)
    except (lxml.etree.LxmlError, ValueError):
        root = None
    if root is None:
        problems.append("parse")
        return None
    error = parser.error_log.last_error
    if error is not None and error.level_name == "FATAL":
        problems.append("parse_incomplete")
    return root


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


def _jsonld(root, base: str, problems: list) -> list:
    """The JSON-LD items of the page, one block at a time (a broken block costs only itself)."""
    out = []
    for script in _JSONLD_XPATH(root):
        try:
            if len(script.text or "") > _JSONLD_PRECHECK:
                json.loads(script.text, strict=False)  # ValueError: not JSON, and no slow retry
            out.extend(_structured(script, base, "json-ld"))
        except Exception:  # not JSON (ValueError), nested too deep (RecursionError)...
            problems.append("jsonld")
    return out


def _structured(element, base: str, syntax: str) -> list:
    """extruct's items of ``syntax`` in ``element``. extruct (and rdflib, which it
    imports) is imported when first needed: a worker whose pages are read in page
    processes never needs it (10 MB); a page process imports it when it starts."""
    import extruct

    return extruct.extract(element, base_url=base, syntaxes=[syntax], uniform=True)[syntax]


def _has_itemscope(text: str) -> bool:
    return "itemscope" in text or "itemscope" in text.lower()  # (a case-insensitive regex is 10x slower)


def _microdata(root, base: str, problems: list) -> list:
    """The microdata items of the first Product, Recipe and Article scopes of the page
    (each with what it nests). Only those: extruct's cost grows with every itemscope, and a
    product listing can have hundreds. A scope too costly for extruct is skipped."""
    chosen: list = []
    wanted = [_PRODUCT_TYPES, _RECIPE_TYPES, _ARTICLE_TYPES]
    seen_types: set[str] = set()  # a listing repeats the same itemtype many times
    for el in _ITEMTYPE_XPATH(root):
        itemtype = el.get("itemtype") or ""
        if itemtype in seen_types:
            continue
        seen_types.add(itemtype)
        names = _type_names(itemtype.split())
        for group in wanted:
            if group.intersection(names):
                wanted.remove(group)
                chosen.append(el)
                break
        if not wanted:
            break
    out = []
    for el in chosen:
        if _microdata_too_large(el):
            problems.append("microdata_too_large")
            continue
        try:
            out.extend(_structured(el, base, "microdata"))
        except Exception:  # e.g. RecursionError on absurdly nested scopes
            problems.append("microdata")
    return out


def _microdata_too_large(scope) -> bool:
    """Whether extruct would take too long on ``scope``: its XPaths merge the node sets of
    the nested scopes (quadratic in their summed size) and compare the itemprops of each
    scope with those of its nested scopes (quadratic in their number)."""
    if _COUNT_ITEMPROPS(scope) > _MAX_ITEMPROPS:
        return True
    nested = _NESTED_SCOPES(scope)
    if len(nested) > _MAX_NESTED_SCOPES:
        return True
    total = 0
    for el in nested:  # outer scopes first: the sum passes the bound early on a deep chain
        total += _COUNT_NODES(el)
        if total > _MAX_NESTED_NODES:
            return True
    return False


def _type_names(value) -> list[str]:
    """schema.org type names of an @type value: "Product", ["Product", "Thing"],
    "http://schema.org/Product", "schema:Product" all give "Product"."""
    if isinstance(value, str):
        value = [value]
    elif not isinstance(value, list):
        return []
    return [_short_name(v) for v in value if isinstance(v, str)]


def _short_name(value: str) -> str:
    value = value.strip().rstrip("/")
    return value[max(value.rfind("/"), value.rfind(":"), value.rfind("#")) + 1 :]


def _availability(value: str) -> str:
    """ "https://schema.org/InStock", "schema:InStock" -> "InStock"; other text as it is."""
    return _short_name(value) if "schema.org/" in value or value.startswith("schema:") else value


def _text(value) -> str | None:
    """A string of a schema.org value: strings, numbers, {"@value"}, {"name"}, or the
    first of a list."""
    for _ in range(8):  # bounded unwrapping
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            return repr(value) if value == value and abs(value) != float("inf") else None
        if isinstance(value, dict):
            value = value.get("@value", value.get("name"))
        elif isinstance(value, list):
            value = next((v for v in value if v not in (None, "", [], {})), None)
        else:
            return None
    return None


class _StructuredData:
    """The typed nodes of a page's JSON-LD, then of its microdata, each breadth first
    (top-level items and the members of an @graph before what they nest), with @id
    references resolvable."""

    def __init__(self, *sources: list):
        self.nodes: list[tuple[list[str], dict]] = []
        self.ids: dict[str, dict] = {}
        visited = 0
        for items in sources:
            queue = deque(items)
            while queue and visited < _MAX_NODES:
                value = queue.popleft()
                visited += 1
                if isinstance(value, dict):
                    node_id = value.get("@id")
                    if isinstance(node_id, str) and len(value) > 1:
                        self.ids.setdefault(node_id, value)
                    types = _type_names(value.get("@type"))
                    if types:
                        self.nodes.append((types, value))
                    graph = value.get("@graph")
                    if isinstance(graph, list):  # its members are top-level nodes
                        queue.extendleft(reversed([v for v in graph if isinstance(v, (dict, list))]))
                    queue.extend(v for k, v in value.items() if k != "@graph" and isinstance(v, (dict, list)))
                elif isinstance(value, list):
                    queue.extend(v for v in value if isinstance(v, (dict, list)))

    def first(self, types: frozenset) -> dict | None:
        return next((node for names, node in self.nodes if types.intersection(names)), None)

    def deref(self, value):
        if isinstance(value, dict) and isinstance(value.get("@id"), str) and len(value) == 1:
            return self.ids.get(value["@id"], value)
        return value

    def date(self, key: str) -> str | None:
        article = self.first(_ARTICLE_TYPES)
        if article is not None and _text(article.get(key)):
            return _text(article.get(key))
        return next((_text(node[key]) for _, node in self.nodes if _text(node.get(key))), None)

    def fields(self, max_length: int):
        product = self.first(_PRODUCT_TYPES)
        if product is not None:
            yield "product:name", _text(product.get("name"))
            yield from self._offer(product.get("offers"))
        recipe = self.first(_RECIPE_TYPES)
        if recipe is not None:
            ingredients = recipe.get("recipeIngredient") or recipe.get("ingredients")
            yield "recipe:ingredients", _json_list(ingredients, max_length)
        article = self.first(_ARTICLE_TYPES)
        if article is not None:
            yield "article:headline", _text(article.get("headline")) or _text(article.get("name"))
            yield "article:author", self._author(article.get("author"))

    def _offer(self, offers):
        """product:price, :currency, :availability of the first priced offer (depth first
        through lists and AggregateOffers)."""
        stack, price, currency, availability, seen = [offers], None, None, None, 0
        while stack and seen < 200:
            seen += 1
            offer = self.deref(stack.pop())
            if isinstance(offer, list):
                stack.extend(reversed(offer))
                continue
            if not isinstance(offer, dict):
                continue
            aggregate = "AggregateOffer" in _type_names(offer.get("@type"))
            keys = ("lowPrice", "price") if aggregate else ("price", "lowPrice")
            spec = self.deref(offer.get("priceSpecification"))
            if isinstance(spec, list):
                spec = next((self.deref(s) for s in spec if isinstance(self.deref(s), dict)), None)
            spec = spec if isinstance(spec, dict) else {}
            offer_price = next((_text(offer.get(k)) for k in keys if _text(offer.get(k))), None)
            offer_price = offer_price or _text(spec.get("price"))
            offer_currency = _text(offer.get("priceCurrency")) or _text(spec.get("priceCurrency"))
            if availability is None and _text(offer.get("availability")):
                availability = _availability(_text(offer.get("availability")))
            if price is None and offer_price:
                price, currency = offer_price, offer_currency
            if price is not None and availability is not None:
                break
            if offer.get("offers") is not None:
                stack.append(offer["offers"])
        yield "product:price", price
        yield "product:currency", currency
        yield "product:availability", availability

    def _author(self, value) -> str | None:
        value = self.deref(value)
        if not isinstance(value, list):
            value = [value]
        names: list[str] = []
        for author in value[:_MAX_AUTHORS]:
            author = self.deref(author)
            name = _text(author.get("name")) if isinstance(author, dict) else _text(author)
            name = " ".join(name.split()) if name else ""
            if name and name not in names:
                names.append(name)
        return ", ".join(names) or None


def _json_list(values, max_length: int) -> str | None:
    """A JSON array of the strings in ``values`` that fits in ``max_length`` characters."""
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        return None
    out: list[str] = []
    size = 2
    for value in values:
        text = _text(value) if not isinstance(value, list) else None
        text = _clean(text, max_length) if text else ""
        if not text:
            continue
        encoded = len(json.dumps(text, ensure_ascii=False)) + (2 if out else 0)
        if size + encoded > max_length:
            if not out:  # a first ingredient too long on its own: its longest prefix that fits
                low, high = 0, len(text)
                while low < high:
                    mid = (low + high + 1) // 2
                    if len(json.dumps([text[:mid]], ensure_ascii=False)) <= max_length:
                        low = mid
                    else:
                        high = mid - 1
                if text[:low].strip():
                    out.append(text[:low].rstrip())
            break
        out.append(text)
        size += encoded
    return json.dumps(out, ensure_ascii=False) if out else None
