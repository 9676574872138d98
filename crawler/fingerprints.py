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
from functools import lru_cache

import lxml.html
import numpy as np
from simhash import Simhash, SimhashIndex

BITS = 64
_INVISIBLE = "//script|//style|//noscript|//template"


def body_digest(body: bytes) -> str:
    """The exact-duplicate key of a body: its SHA-1, hex (as WARC payload digests)."""
    return hashlib.sha1(body).hexdigest()


def page_fingerprints(body: bytes, min_words: int = 0) -> tuple[str, int | None]:
    """(body digest, SimHash of the visible text or None) of an HTML page: what the
    content-seen pipeline needs of it (run in a page worker process)."""
    return body_digest(body), text_simhash(page_text(body), min_words)


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


# A 64-bit hash of every word at once (numpy): a polynomial hash of the word's first
# _MAX_WORD bytes, then splitmix64's finalizer to spread the bits.
_MAX_WORD = 32
_P = np.uint64(0x100000001B3)
_C1, _C2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_WORD_BYTE = np.zeros(256, dtype=bool)
for _lo, _hi in ((0x30, 0x39), (0x61, 0x7A), (0x5F, 0x5F), (0x80, 0xFF)):
    _WORD_BYTE[_lo : _hi + 1] = True


def word_hashes(text: str) -> np.ndarray:
    """A 64-bit hash of each word of ``text`` (lowercased; runs of two or more ASCII
    letters, digits, '_' or non-ASCII bytes), as a uint64 array (in no particular order)."""
    b = np.frombuffer(text.lower().encode("utf-8", "ignore"), dtype=np.uint8)
    edges = np.diff(_WORD_BYTE[b].view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    lengths = np.minimum(ends - starts, _MAX_WORD)
    keep = lengths >= 2
    starts, lengths = starts[keep], lengths[keep]
    if not len(starts):
        return np.empty(0, dtype=np.uint64)
    # longest first: the words still going at byte k are a prefix, so step k only
    # touches those (the work is about one operation per byte)
    order = np.argsort(-lengths, kind="stable")
    starts, lengths = starts[order], lengths[order]
    longer = len(lengths) - np.cumsum(np.bincount(lengths, minlength=_MAX_WORD + 1))  # words longer than k
    h = np.zeros(len(starts), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(int(lengths[0])):
            m = longer[k]
            h[:m] = h[:m] * _P + b[starts[:m] + k] + np.uint64(1)
        h ^= h >> _S30
        h *= _C1
        h ^= h >> _S27
        h *= _C2
        h ^= h >> _S31
    return h


def text_simhash(text: str, min_words: int = 0) -> int | None:
    """The 64-bit SimHash of a text (Charikar: each bit is the majority vote of that bit
    over the hashes of all its words, so a word counts as often as it occurs); None when
    the text has fewer than ``min_words`` words. The fingerprint simhash's ``Simhash``
    computes from weighted word features, up to the choice of word hash, computed for all
    words at once: simhash's per-feature md5 loop (``Simhash(features)``) takes about
    13 ms for 100 KB of text here, this about 2 ms."""
    hashes = word_hashes(text)
    if len(hashes) < max(min_words, 1):
        return None
    bits = np.unpackbits(hashes.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    votes = bits.sum(axis=0, dtype=np.int64) * 2 > len(hashes)
    return int.from_bytes(np.packbits(votes, bitorder="little").tobytes(), "little")


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()


@lru_cache(maxsize=4)
def _index(k: int) -> SimhashIndex:
    return SimhashIndex([], f=BITS, k=k)


def block_keys(value: int, k: int) -> list[str]:
    """The k + 1 index keys of a SimHash, as simhash's SimhashIndex makes them
    (``<block value hex>:<block number>``; block i starts at bit 64 // (k + 1) * i, the
    last one takes the remaining bits)."""
    return list(_index(k).get_keys(Simhash(value, f=BITS)))
