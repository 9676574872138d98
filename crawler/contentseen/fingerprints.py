"""What makes two pages the same (no I/O).

- **Exact copies:** the SHA-1 of the body (``body_digest``).
- **Near copies:** the words of the page's *main text* (``main_text``: scripts,
  navigation, headers, footers, asides and link lists left out), stop words left out, as
  a multiset (``word_bag``: the k-th occurrence of a word is an element of its own), summed
  up in a MinHash sketch (``minhash``: one 32-bit minimum in each of ``BINS`` bins,
  one-permutation hashing).

Two pages' sketches agree in a bin with probability J, the Jaccard similarity of their
word bags. ``resemblance`` is the share of the main text's words the two pages have in
common, Dice = 2J / (1 + J): a copy with 5% of its words replaced has 0.95, with a
section moved 1.0, whether the changes are scattered or in one block; two pages of one
site on different subjects, well below 0.9. Word n-grams (n = 3) were measured too
(bench/near_duplicates.py): with a resemblance calibrated for scattered changes, Dice ^
(1/n), they overrated pages that share one long block (generated API pages with the same
list of inherited methods: 0.97 for 91% of words in common), and uncalibrated they
missed most copies with 5% of words changed (measured on the same corpus while choosing).

The sketch stored for a page keeps one byte of each bin's minimum (b-bit minwise
hashing, Li and König 2010: unequal minima share a byte with probability 1/256, which
``resemblance`` corrects for). Candidates are found by LSH banding (``band_keys``): the
bins are cut into ``BANDS`` bands of ``ROWS``; pages whose minima agree on a whole band
share that band's key: a page of resemblance 0.9 (J = 0.82) with another shares a key
with it with probability 1 - (1 - J^ROWS)^BANDS = 0.97, one of 0.95 with 0.9999, and
unrelated pages (J < 0.1) with about 2e-7.

Every hash is computed for all words at once with numpy (no Python loop per word).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import NamedTuple

import lxml.etree
import lxml.html
import lxml.html.defs
import numpy as np

BINS = 128  # MinHash bins (one byte each in the stored sketch)
ROWS = 8  # bins per LSH band
BANDS = BINS // ROWS  # 16 bands

# -- exact copies ----------------------------------------------------------------------


def body_digest(body: bytes) -> str:
    """The exact-duplicate key of a body: its SHA-1, hex (as WARC payload digests)."""
    return hashlib.sha1(body).hexdigest()


# -- main text -------------------------------------------------------------------------

_INVISIBLE = ("script", "style", "noscript", "template", "svg")
# the site's frame around a page's content: by tag, by ARIA role, by class or id name
_FRAME_TAGS = {"nav", "header", "footer", "aside", "menu", "select", "form"}
_FRAME_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar"}
_FRAME_NAME = re.compile(
    r"\b(?:nav|navbar|navigation|menu|sidebar|footer|header|masthead|breadcrumbs?|cookies?|banner|topbar"
    r"|toc|related|share|social)\b",
    re.IGNORECASE,
)
# a class or id token that says what the element's content is about, or what the element
# has, not which part of the frame it is: a post's category or tag (WordPress's post_class:
# ``category-cookies``, ``tag-social-media``), its format, type or status, a wrapper's
# ``has-sidebar``: never a frame name, whatever words follow
_NOT_A_PART = re.compile(r"(?:category|tag|post|format|type|status|author|has|with|no|is)[-_]", re.IGNORECASE)
_LIST_TAGS = {"ul", "ol", "dl", "table"}
_BLOCK_TAGS = (*_FRAME_TAGS, *_LIST_TAGS, "main", "div", "section")
LINK_DENSITY = 0.5  # a list or table whose text is mostly link text is navigation
WRAPPER_SHARE = 0.9  # a frame part holding more of the text than this wraps the content: kept
MAX_TEXT = 500_000  # characters of main text hashed (hashing holds ~70 bytes per character)
MAX_BYTES = 2 * 2**20  # bytes of a body parsed
WORK_LIMIT = 20  # characters measured by main_text, at most, per character of the page's text


def parse(body: bytes, max_bytes: int = MAX_BYTES):
    """The lxml tree of an HTML body (its first ``max_bytes``), None when it cannot be parsed."""
    try:
        return lxml.html.fromstring(body[:max_bytes])
    except (ValueError, lxml.etree.ParserError):
        return None


_FULL_DOCUMENT = re.compile(rb"^\s*<(?:html|!doctype)", re.IGNORECASE)  # lxml.html.fromstring's test


def parsed_root(document, body):
    """The element ``parse(body)`` returns, from ``document``, the root of the same body
    already parsed as a whole document (as ``lxml.html.document_fromstring``): a body that
    does not start like a whole document and has no head is taken for a fragment, its
    one element or its body renamed to a div or span. Changes that body's tag."""
    if _FULL_DOCUMENT.match(body) or document.find("head") is not None:
        return document
    element = document.find("body")
    if element is None:
        return document
    if (
        len(element) == 1
        and (not element.text or not element.text.strip())
        and (not element[-1].tail or not element[-1].tail.strip())
    ):
        return element[0]
    blocks = lxml.html.defs.block_tags
    element.tag = "div" if any(el.tag in blocks for el in element.iter(lxml.etree.Element)) else "span"
    return element


def page_text(body: bytes) -> str:
    """The visible text of an HTML body (scripts and styles left out); '' when it cannot
    be parsed."""
    tree = parse(body)
    if tree is None:
        return ""
    lxml.etree.strip_elements(tree, *_INVISIBLE, with_tail=False)
    return " ".join(tree.itertext())


def _frame_named(names: str) -> bool:
    """Whether a class or id token of ``names`` names a part of the frame (``_FRAME_NAME``;
    a token of ``_NOT_A_PART`` never does)."""
    if not _FRAME_NAME.search(names):  # (most elements: one search)
        return False
    return any(_FRAME_NAME.search(token) for token in names.split() if not _NOT_A_PART.match(token))


def main_text(tree) -> str:
    """The text of a page's content, without the site's frame around it (changes the tree).

    - The content is the first ``<main>`` element (or ``role=main``) when there is one.
    - Left out of it: scripts and styles; ``nav``, ``header``, ``footer``, ``aside``,
      ``menu``, forms, and the ARIA roles of the same parts, and elements whose class or
      id names such a part (``sidebar``, ``breadcrumb``, ``cookie``...), unless they hold
      nearly all of the text (``WRAPPER_SHARE``: a wrapper named ``with-sidebar``, a form
      around the whole page as ASP.NET makes them); lists and tables whose text is mostly
      link text (menus, tables of contents, tag clouds).

    One pass over the block elements (filtered in C): about 3.5 ms per 100 KB of HTML,
    and never more than WORK_LIMIT readings of the page's text.
    """
    lxml.etree.strip_elements(tree, *_INVISIBLE, with_tail=False)
    body = tree.find("body") if tree.tag == "html" else None
    tree = body if body is not None else tree  # the head's title is the site's as much as the page's
    root, frame, lists = tree, [], []
    for el in tree.iter(_BLOCK_TAGS):
        tag, role = el.tag, el.get("role")
        if (tag == "main" or role == "main") and root is tree:
            root = el
        elif (
            tag in _FRAME_TAGS or role in _FRAME_ROLES or _frame_named(f"{el.get('class') or ''} {el.get('id') or ''}")
        ):
            frame.append(el)
        elif tag in _LIST_TAGS:
            lists.append(el)
    around = set(root.iterancestors())  # a frame element never takes the content with it
    around.add(root)
    top = tree.getroottree().getroot()
    total = len(root.text_content())
    # Measuring an element reads its whole subtree: nested frames or lists (hostile pages
    # nest hundreds) would read the page hundreds of times. What is inside a dropped
    # element is not measured, and the measuring stops after WORK_LIMIT times the text.
    budget = WORK_LIMIT * total + 100_000
    for el in frame:
        if el in around or el.getroottree().getroot() is not top:
            continue
        size = len(el.text_content())
        budget -= size
        if budget < 0:
            break
        if size <= WRAPPER_SHARE * total:
            _drop(el)
    for el in lists:
        if budget < 0 or el.getroottree().getroot() is not top:
            continue
        text = len(el.text_content().strip())
        links = 0
        for a in el.iter("a"):  # not XPath: libxml2's .//a//text() grows with the square of the links
            links += len(a.text_content())
        budget -= text + links
        if text and links > LINK_DENSITY * text:
            _drop(el)
    return " ".join(root.itertext())  # text_content() would glue the words of two blocks


def _drop(el) -> None:
    """Remove an element and its subtree, keeping the text after it, unless that text holds
    control characters, which lxml parses but refuses to set again (then it goes too)."""
    try:
        el.drop_tree()
    except ValueError:
        el.tail = None
        el.drop_tree()


# -- words ---------------------------------------------------------------------------------

# A 64-bit hash of every word at once (numpy): the polynomial hash sum (byte + 1) * P^k of
# each word (k counting from its last byte), from one running sum over the whole text:
# with Q = 1/P (mod 2^64), S[i] = sum over j < i of (byte_j + 1) * Q^j, a word [s, e) is
# (S[e] - S[s]) * P^(e-1); then splitmix64's finalizer spreads the bits.
_P = np.uint64(0x100000001B3)
_Q = np.uint64(pow(0x100000001B3, -1, 2**64))
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_C1, _C2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
# non-ASCII spaces, punctuation, symbols and format marks (no-break space, dashes, ©, zero
# width spaces, soft hyphens...) separate words as ASCII ones do
_SEPARATOR_CHARS = "".join(
    chr(c)
    for c in range(0x80, 0x10000)
    if unicodedata.category(chr(c))[0] in "ZPS" or unicodedata.category(chr(c)) == "Cf"
)
_SEPARATORS = re.compile(f"[{re.escape(_SEPARATOR_CHARS)}]")
_WORD_BYTE = np.zeros(256, dtype=bool)
for _lo, _hi in ((0x30, 0x39), (0x61, 0x7A), (0x5F, 0x5F), (0x80, 0xFF)):
    _WORD_BYTE[_lo : _hi + 1] = True


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise (a new array)."""
    with np.errstate(over="ignore"):
        h = h ^ (h >> _S30)
        h *= _C1
        h ^= h >> _S27
        h *= _C2
        h ^= h >> _S31
    return h


def word_hashes(text: str) -> np.ndarray:
    """A 64-bit hash of each word of ``text`` in order (lowercased; runs of two or more
    ASCII letters, digits, '_' or other characters that are neither spaces, punctuation,
    symbols nor format marks), as a uint64 array."""
    text = text.lower()
    if not text.isascii():
        text = _SEPARATORS.sub(" ", text)
    b = np.frombuffer(text.encode("utf-8", "ignore"), dtype=np.uint8)
    edges = np.diff(_WORD_BYTE[b].view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    keep = ends - starts >= 2
    starts, ends = starts[keep], ends[keep]
    if not len(starts):
        return np.empty(0, dtype=np.uint64)
    with np.errstate(over="ignore"):
        q_powers = np.multiply.accumulate(np.full(len(b), _Q))
        q_powers[1:] = q_powers[:-1]
        q_powers[0] = 1
        running = np.zeros(len(b) + 1, dtype=np.uint64)
        np.cumsum((b.astype(np.uint64) + np.uint64(1)) * q_powers, out=running[1:])
        p_powers = np.multiply.accumulate(np.full(len(b), _P))  # P^(k+1)
        last = ends - 1
        p_last = np.where(last > 0, p_powers[np.maximum(last - 1, 0)], np.uint64(1))  # P^(e-1)
        return _mix((running[ends] - running[starts]) * p_last)


# Common words, left out: they are half of any English text, whatever its subject.
STOP_WORDS = (
    "a about above after again all also am an and any are as at be because been before being below between "
    "both but by can could did do does doing down during each few for from further had has have having he her "
    "here hers him his how if in into is it its itself just may me might more most must my no nor not now of "
    "off on once one only or other our ours out over own same she should so some such than that the their "
    "theirs them then there these they this those through to too under until up very was we were what when "
    "where which while who whom why will with would you your yours"
).split()
_STOP_HASHES = np.unique(word_hashes(" ".join(STOP_WORDS)))


def word_bag(words: np.ndarray) -> np.ndarray:
    """The multiset of a sequence of word hashes as a set of distinct uint64 (in no
    particular order): the k-th occurrence of a word is an element of its own, so that a
    word counts as often as it occurs; stop words left out."""
    at = np.searchsorted(_STOP_HASHES, words) % len(_STOP_HASHES)
    s = np.sort(words[_STOP_HASHES[at] != words])
    if not len(s):
        return s
    index = np.arange(len(s))
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    occurrence = index - np.maximum.accumulate(np.where(new, index, 0))
    with np.errstate(over="ignore"):
        return _mix(s + occurrence.astype(np.uint64) * _GOLDEN)


# -- MinHash sketch, resemblance and LSH bands -----------------------------------------

_BIN_SHIFT = np.uint64(64 - BINS.bit_length() + 1)  # the top log2(BINS) bits pick the bin
_VALUE_SHIFT = np.uint64(64 - BINS.bit_length() + 1 - 32)  # the next 32 bits are the value
_NO_VALUE = np.uint64(1 << 32)
# where an empty bin looks for a value: 32 bins in an order fixed for each bin
_PROBES = (_mix(np.arange(BINS * 32, dtype=np.uint64) + np.uint64(0x5EED)).reshape(BINS, 32) % np.uint64(BINS)).astype(
    np.intp
)


def minhash(bag: np.ndarray) -> np.ndarray:
    """The MinHash of a non-empty ``word_bag``: for each of ``BINS`` bins (a hash's top
    bits), the least 32-bit value (the next bits) of the hashes that fall in it:
    one-permutation hashing (Li, Owen and Zhang 2012). An empty bin takes the value of the
    first non-empty bin on a path of bins that depends only on the bin's number (optimal
    densification, Shrivastava 2017), so two similar bags fill their empty bins alike."""
    values = np.full(BINS, _NO_VALUE, dtype=np.uint64)
    np.minimum.at(values, (bag >> _BIN_SHIFT).astype(np.intp), (bag >> _VALUE_SHIFT) & np.uint64(0xFFFFFFFF))
    empty = values == _NO_VALUE
    if empty.any():
        paths = _PROBES[empty]
        found = ~empty[paths]
        first = np.where(found.any(axis=1), paths[np.arange(len(paths)), found.argmax(axis=1)], int(np.argmin(empty)))
        values[empty] = values[first]
    return values.astype(np.uint32)


def sketch_bytes(values: np.ndarray) -> bytes:
    """The stored sketch of a MinHash: the low byte of each bin (``BINS`` bytes)."""
    return (values & 0xFF).astype(np.uint8).tobytes()


def band_keys(values: np.ndarray) -> list[int]:
    """The 64-bit LSH key of each of the ``BANDS`` bands of a MinHash (the band's number
    and its ``ROWS`` values, hashed): two pages share band i's key when their minima
    agree on all of band i's bins."""
    rows = values[: BANDS * ROWS].astype(np.uint64).reshape(BANDS, ROWS)
    h = np.arange(1, BANDS + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for r in range(ROWS):
            h = _mix(h * _P + rows[:, r])
    return h.tolist()


def resemblance_of_matches(matches: int) -> float:
    """The resemblance (share of words in common) of two pages whose stored sketches
    agree in ``matches`` of the ``BINS`` bytes."""
    jaccard = max(0.0, (matches / BINS - 1 / 256) / (1 - 1 / 256))
    return 2 * jaccard / (1 + jaccard)


def matches_for(resemblance: float) -> int:
    """The fewest agreeing sketch bytes that mean at least ``resemblance``."""
    return next(m for m in range(BINS + 1) if resemblance_of_matches(m) >= resemblance - 1e-12)


def resemblance(a: bytes, b: bytes) -> float:
    """The resemblance of two stored sketches."""
    return resemblance_of_matches(sum(x == y for x, y in zip(a, b, strict=True)))


# -- SimHash ---------------------------------------------------------------------------


def simhash(hashes: np.ndarray) -> int:
    """The 64-bit SimHash (Charikar) of an array of 64-bit hashes: each bit is the
    majority vote of that bit over the hashes. The UrlStore keeps the SimHash of a page's
    word bag, a compact fingerprint of its main text for other programs; the crawl's own
    near-copy test is the sketch's."""
    bits = np.unpackbits(hashes.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    votes = bits.sum(axis=0, dtype=np.int64) * 2 > len(hashes)
    return int.from_bytes(np.packbits(votes, bitorder="little").tobytes(), "little")


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()


# -- a page ----------------------------------------------------------------------------


class Fingerprints(NamedTuple):
    digest: str  # hex SHA-1 of the body
    words: int  # words of main text, stop words left out
    sketch: bytes | None  # BINS bytes; None: too short (or unreadable) for near copies
    bands: list[int] | None  # BANDS 64-bit LSH keys
    simhash: int | None


def digest_only(digest: str) -> Fingerprints:
    """The fingerprints of a page known by its digest alone (not read, or not readable):
    exact copies only."""
    return Fingerprints(digest, 0, None, None, None)


def page_fingerprints(body: bytes, min_words: int = 0) -> Fingerprints:
    """What the content-seen pipeline needs of an HTML page (run in a page worker
    process): its digest, and for a page with at least ``min_words`` words of main text
    (stop words left out) its sketch, band keys and SimHash."""
    digest = body_digest(body)
    tree = parse(body)
    if tree is None:
        return digest_only(digest)
    return fingerprints_of(digest, main_words(tree), min_words)


def main_words(tree) -> np.ndarray:
    """The ``word_bag`` of a parsed page's main text (its first MAX_TEXT characters).
    Changes the tree (``main_text``)."""
    return word_bag(word_hashes(main_text(tree)[:MAX_TEXT]))


def fingerprints_of(digest: str, bag: np.ndarray, min_words: int = 0) -> Fingerprints:
    """A page's Fingerprints from its body's digest and its ``main_words``: sketch, band
    keys and SimHash only with at least ``min_words`` words."""
    if len(bag) < max(min_words, 1):
        return Fingerprints(digest, len(bag), None, None, None)
    values = minhash(bag)
    return Fingerprints(digest, len(bag), sketch_bytes(values), band_keys(values), simhash(bag))
