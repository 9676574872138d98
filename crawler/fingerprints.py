"""What makes two pages the same (no I/O): the body digest (exact duplicates) and a 64-bit
SimHash of the page's text (near duplicates), with the block keys of simhash's
SimhashIndex scheme.

Block scheme (Manku et al., as simhash.SimhashIndex): a 64-bit value is cut into k + 1
blocks; two values within Hamming distance k agree on at least one whole block
(pigeonhole), so an index keyed by (block number, block value) finds every candidate
within distance k by looking up k + 1 keys and comparing only what is found there.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

import lxml.html
from simhash import Simhash

BITS = 64
_WORD = re.compile(r"\w\w+")  # words of two characters or more
_INVISIBLE = "//script|//style|//noscript|//template"


def body_digest(body: bytes) -> str:
    """The exact-duplicate key of a body: its SHA-1, hex (as WARC payload digests)."""
    return hashlib.sha1(body).hexdigest()


def page_text(body: bytes, max_bytes: int = 2 * 2**20) -> str:
    """The visible text of an HTML body (scripts and styles left out); '' when it cannot
    be parsed."""
    try:
        tree = lxml.html.fromstring(body[:max_bytes])
    except (ValueError, lxml.etree.ParserError):
        return ""
    for node in tree.xpath(_INVISIBLE):
        node.drop_tree()
    return tree.text_content()


def text_features(text: str) -> Counter:
    """The SimHash features of a text: its lowercased words, weighted by count."""
    return Counter(_WORD.findall(text.lower()))


def simhash64(features: Counter) -> int:
    """The 64-bit SimHash of weighted features (simhash's algorithm: md5 per feature)."""
    if not features:
        return 0
    return Simhash(features, f=BITS).value


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def block_keys(value: int, k: int) -> list[str]:
    """The k + 1 index keys of a SimHash, ``<block number>:<block value hex>``; block i
    starts at bit 64 // (k + 1) * i, the last one takes the remaining bits."""
    width = BITS // (k + 1)
    keys = []
    for i in range(k + 1):
        offset = width * i
        bits = BITS - offset if i == k else width
        keys.append(f"{i}:{(value >> offset) & ((1 << bits) - 1):x}")
    return keys
