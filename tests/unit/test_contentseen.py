"""Content seen: exact copies by body digest, near copies by the MinHash sketch of the
main text's words (an LSH index in Redis proposes, the sketches decide), shared by all
workers through Redis.

Here: the unit tests (pure: no service, no process); the others of this subject:
tests/integration/test_contentseen.py."""

import lxml.html
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from simhash import Simhash

from crawler.contentseen import fingerprints as fp
from testing.pages import NEWS_FRAME, article, edit, html


def bag(words) -> np.ndarray:
    return fp.word_bag(fp.word_hashes(" ".join(words)))


def exact_resemblance(a: np.ndarray, b: np.ndarray) -> float:
    return 2 * len(np.intersect1d(a, b)) / (len(a) + len(b))


def test_word_hashes_ignore_case_and_punctuation_and_keep_order():
    h = fp.word_hashes("Crawler, crawler! CRAWLER; a élan élan")
    assert len(h) == 5 and len(set(h[:3].tolist())) == 1 and h[3] == h[4] != h[0]  # "a" is too short
    assert fp.word_hashes("élan crawler").tolist() == [h[3], h[0]]


def test_the_word_bag_counts_repeats_and_leaves_stop_words_out():
    assert len(bag(["alpha", "beta", "alpha", "the", "of", "alpha"])) == 4
    assert np.array_equal(bag(["alpha", "beta", "alpha"]), bag(["beta", "alpha", "alpha"]))  # order-free
    assert not np.array_equal(bag(["alpha", "beta", "alpha"]), bag(["alpha", "beta", "beta"]))
    assert len(bag(["the", "of", "and"])) == 0


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(200, 3000), st.floats(0.0, 0.5), st.integers(0, 2**32))
def test_sketches_estimate_the_share_of_words_in_common(size, changed, seed):
    words = article(seed, size)
    a, b = bag(words), bag(edit(words, changed, seed + 1))
    sa, sb = fp.sketch_bytes(fp.minhash(a)), fp.sketch_bytes(fp.minhash(b))
    dice = exact_resemblance(a, b)
    jaccard = dice / (2 - dice)
    estimate = fp.resemblance(sa, sb) / (2 - fp.resemblance(sa, sb))
    # each of the 128 bins agrees with probability J: the estimate's standard error is
    # sqrt(J (1 - J) / 128) (at most 0.044); 5 of them, and a little for the byte collisions
    assert abs(estimate - jaccard) < 5 * (max(jaccard * (1 - jaccard), 0.01) / fp.BINS) ** 0.5 + 0.01
    assert fp.resemblance(sa, sa) == 1.0


def test_resemblance_separates_copies_from_other_pages():
    words = article(1)
    copies = [edit(words, share, seed) for seed, share in enumerate((0.01, 0.03, 0.05))]
    sketch = fp.sketch_bytes(fp.minhash(bag(words)))
    for copy in copies:
        assert fp.resemblance(sketch, fp.sketch_bytes(fp.minhash(bag(copy)))) >= 0.9
    for seed in range(2, 12):
        assert fp.resemblance(sketch, fp.sketch_bytes(fp.minhash(bag(article(seed))))) < 0.5


def test_matches_for_is_the_threshold_of_resemblance_of_matches():
    for r in (0.5, 0.8, 0.9, 0.95, 1.0):
        m = fp.matches_for(r)
        assert fp.resemblance_of_matches(m) >= r > fp.resemblance_of_matches(m - 1)


def test_band_keys_change_only_with_their_own_bins():
    values = fp.minhash(bag(article(5)))
    keys = fp.band_keys(values)
    assert len(keys) == fp.BANDS == len(set(keys))
    other = values.copy()
    other[fp.ROWS * 3 + 2] ^= 1  # one bin of band 3
    changed = [i for i, (x, y) in enumerate(zip(keys, fp.band_keys(other), strict=True)) if x != y]
    assert changed == [3]


def test_a_small_bag_fills_its_empty_bins_alike_on_both_sides():
    words = article(9, 60)  # far fewer words than bins: most bins are empty
    a, b = bag(words), bag(words[:-1])  # one word less
    empty = np.ones(fp.BINS, dtype=bool)
    empty[(b >> np.uint64(64 - 7)).astype(np.intp)] = False  # the bins b's own words fill
    assert empty.sum() > fp.BINS / 3
    # the bins empty in b take their values along the same paths as in a: nearly all agree
    agree = fp.minhash(a)[empty] == fp.minhash(b)[empty]
    assert agree.mean() > 0.9


def test_main_text_leaves_the_frame_out():
    text = fp.main_text(lxml.html.fromstring(html(["story", "text", "here"], frame=NEWS_FRAME)))
    assert text.split() == ["story", "text", "here"]
    main = b"<html><body><div>menu words</div><main><p>the story</p><nav>in main</nav></main></body></html>"
    assert fp.main_text(lxml.html.fromstring(main)).split() == ["the", "story"]
    # a wrapper named after a frame part but holding the page is kept
    wrapped = b'<html><body><div class="with-sidebar"><p>the whole story is here</p></div></body></html>'
    assert fp.main_text(lxml.html.fromstring(wrapped)).split() == ["the", "whole", "story", "is", "here"]
    aspnet = (
        b'<html><body><form id="aspnetForm"><nav>menu</nav><p>all of the page is in the form</p></form></body></html>'
    )
    assert fp.main_text(lxml.html.fromstring(aspnet)).split() == ["all", "of", "the", "page", "is", "in", "the", "form"]
    # a post's taxonomy classes say what it is about, not which part of the frame it is
    for taxonomy in ("category-cookies", "tag-social-media", "has-sidebar", "category-main-menu"):
        post = f'<html><body><nav>menu</nav><div class="post type-post {taxonomy}"><p>the recipe</p></div>'
        post += "<footer>copyright notice of the site</footer></body></html>"
        assert fp.main_text(lxml.html.fromstring(post)).split() == ["the", "recipe"], taxonomy
    named = b'<html><body><div class="site-header main-nav">menu words</div><p>the story</p></body></html>'
    assert fp.main_text(lxml.html.fromstring(named)).split() == ["the", "story"]
    # a list of links inside the text is navigation; a list of prose is text
    lists = (
        b"<html><body><p>intro</p><ul><li><a href=a>one</a></li><li><a href=b>two</a></li></ul>"
        b"<ol><li>first step, see <a href=c>this</a></li></ol></body></html>"
    )
    assert fp.main_text(lxml.html.fromstring(lists)).split() == ["intro", "first", "step,", "see", "this"]


def test_page_fingerprints_need_enough_words_and_survive_garbage():
    assert fp.page_fingerprints(html(["few", "words"]), min_words=50).sketch is None
    prints = fp.page_fingerprints(html(article(3)), min_words=50)
    assert len(prints.sketch) == fp.BINS and len(prints.bands) == fp.BANDS and prints.simhash is not None
    assert prints.digest == fp.body_digest(html(article(3)))
    for junk in (b"", b"<html><body>" + b"<div>" * 5000, b"<html><body><p>" + b"&nbsp; &copy; &mdash; &#8203; " * 500):
        assert fp.page_fingerprints(junk, min_words=50).sketch is None
    binary = fp.page_fingerprints(bytes(range(256)) * 100, min_words=50)  # read as text of a kind
    assert binary.digest == fp.body_digest(bytes(range(256)) * 100)
    # non-ASCII spaces, dashes and marks separate words as ASCII ones do
    assert fp.word_hashes("foo\xa0bar\u2014baz\u200bqux ©").tolist() == fp.word_hashes("foo bar baz qux").tolist()


def test_main_text_of_a_hostile_page_takes_bounded_time():
    import time

    # 120 nested lists of links, 40,000 links in all, and a paragraph of text: measuring
    # every list's link text with XPath took minutes
    links = "".join(f'<li><a href="/{i}">link number {i}</a></li>' for i in range(40_000 // 120))
    nested = "<ul>" * 120 + links * 120 + "</ul>" * 120
    body = f"<html><body><p>{' '.join(article(4, 300))}</p>{nested}</body></html>".encode()
    started = time.process_time()
    prints = fp.page_fingerprints(body, min_words=50)
    assert time.process_time() - started < 10
    assert prints.words == 300  # the lists are navigation; the paragraph is the text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=1, max_size=300))
def test_the_stored_simhash_is_the_simhash_packages_of_the_same_word_hashes(hashes):
    # the simhash package is the reference (Charikar's majority vote); the crawler votes
    # with numpy over the hashes it already has (docs/decisions/0001-simhash.md)
    bag = np.array(hashes, dtype=np.uint64)
    reference = Simhash([str(h) for h in hashes], hashfunc=lambda data: int(data) if data.isdigit() else 0)
    assert fp.simhash(bag) == reference.value
