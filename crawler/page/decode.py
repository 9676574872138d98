"""An HTML page's body as text and as a tree, without I/O: whether a response is HTML, its
decoding (byte order mark, Content-Type, meta charset, w3lib's resolution), lxml's parse
with lxml.html's element classes, and a value's cleaning (crawler/page/metadata.py and
the page reader use them).
"""

from __future__ import annotations

import re
from typing import NamedTuple

import lxml.etree
import lxml.html
from w3lib.encoding import html_body_declared_encoding, read_bom, resolve_encoding, to_unicode

from crawler.page.headers import header

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
