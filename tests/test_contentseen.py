"""Content seen: exact copies by body digest, near copies by the MinHash sketch of the
main text's words (an LSH index in Redis proposes, the sketches decide), shared by all
workers through Redis."""

import random

import lxml.html
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy.utils.test import get_crawler
from simhash import Simhash

from crawler.contentseen import fingerprints as fp
from crawler.items import Page
from crawler.pipelines.contentseen import ContentSeenPipeline
from testing.servers import free_port
from testing.services import project_settings

VOCABULARY = [f"word{i}" for i in range(3000)]


def article(seed: int, words: int = 800) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(VOCABULARY) for _ in range(words)]


def html(words: list[str], extra: str = "", frame: str = "") -> bytes:
    paragraphs = "".join(f"<p>{' '.join(words[i : i + 40])}</p>" for i in range(0, len(words), 40))
    script = "<script>var tracking = 'x' + Math.random();</script>"
    return f"<html><head><title>t</title>{script}</head><body>{frame}{extra}{paragraphs}</body></html>".encode()


def edit(words: list[str], share: float, seed: int) -> list[str]:
    """``words`` with ``share`` of them replaced by words of another vocabulary."""
    rng = random.Random(seed)
    out = list(words)
    for i in rng.sample(range(len(out)), round(share * len(out))):
        out[i] = f"other{rng.randrange(10**6)}"
    return out


def page(url: str, body: bytes, status: int = 200, ctype: str = "text/html; charset=utf-8") -> Page:
    return Page(url=url, final_url=url, status=status, body=body, headers={"Content-Type": [ctype]})


def bag(words) -> np.ndarray:
    return fp.word_bag(fp.word_hashes(" ".join(words)))


def exact_resemblance(a: np.ndarray, b: np.ndarray) -> float:
    return 2 * len(np.intersect1d(a, b)) / (len(a) + len(b))


# -- the pure parts --------------------------------------------------------------------


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


# the frame of a news site: more words than the 150 of each page's own text below
FRAME = (
    '<header class="site"><a href="/">Example News</a> the best news on the web since 1999</header>'
    '<nav><ul><li><a href="/a">World</a></li><li><a href="/b">Business</a></li></ul></nav>'
    '<div id="sidebar"><h3>About us</h3><p>Example News is written by a team of editors in Springfield '
    "who care about what happens in the world and in your town.</p></div>"
    '<div class="cookie-notice">We use cookies to remember your settings and to count visits.</div>'
    '<ul class="tags"><li><a href="/t/1">politics</a></li><li><a href="/t/2">economy</a></li>'
    '<li><a href="/t/3">weather and climate</a></li></ul>'
    '<div role="contentinfo">Copyright 2026 Example News, 12 Main Street, Springfield</div>'
    + "<footer>"
    + " ".join(article(999, 250))  # a long legal notice, the same on every page
    + "</footer>"
)


def test_main_text_leaves_the_frame_out():
    text = fp.main_text(lxml.html.fromstring(html(["story", "text", "here"], frame=FRAME)))
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


# -- the pipeline, against Redis -------------------------------------------------------


def _pipeline(redis_url, crawl_name, **overrides):
    crawler = get_crawler(settings_dict=project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name, **overrides))
    return ContentSeenPipeline.from_crawler(crawler), crawler.stats


def test_two_workers_see_each_others_pages(redis_url, crawl_name):
    one, stats_one = _pipeline(redis_url, crawl_name)
    two, stats_two = _pipeline(redis_url, crawl_name)  # another worker: its own client
    words = article(7)
    first = one.process_now(page("http://a.example/story", html(words)))
    assert "duplicate_of" not in first and "near_duplicate_of" not in first
    assert first["content_digest"].startswith("sha1:")
    copy = two.process_now(page("http://mirror.example/story", html(words)))
    assert copy["duplicate_of"] == "http://a.example/story" and "near_duplicate_of" not in copy
    printed = html(edit(words, 0.02, 1), extra="<b>printed on 3 May 2026</b>")
    near = two.process_now(page("http://a.example/story?print=1", printed))
    assert near["near_duplicate_of"] == "http://a.example/story" and 0.9 <= near["resemblance"] < 1
    assert "duplicate_of" not in near
    # an exact copy of the near copy names the near copy (its bytes are archived)
    again = one.process_now(page("http://b.example/printed", printed))
    assert again["duplicate_of"] == "http://a.example/story?print=1"
    other = one.process_now(page("http://b.example/other", html(article(8))))
    assert "duplicate_of" not in other and "near_duplicate_of" not in other
    recrawl = one.process_now(page("http://a.example/story", html(words)))  # the same URL again
    assert "duplicate_of" not in recrawl and "near_duplicate_of" not in recrawl
    assert stats_two.get_value("contentseen/exact") == 1 and stats_two.get_value("contentseen/near") == 1
    assert stats_one.get_value("contentseen/new") == 3 and stats_one.get_value("contentseen/exact") == 1


def test_distinct_pages_on_one_frame_are_not_near_copies(redis_url, crawl_name):
    pipeline, stats = _pipeline(redis_url, crawl_name)
    for i in range(40):  # 40 pages of 150 words each inside the same frame of ~70 words
        item = pipeline.process_now(page(f"http://news.example/{i}", html(article(100 + i, 150), frame=FRAME)))
        assert "near_duplicate_of" not in item and "duplicate_of" not in item
    assert stats.get_value("contentseen/new") == 40


def test_a_near_copy_is_the_one_it_resembles_most(redis_url, crawl_name):
    pipeline, _ = _pipeline(redis_url, crawl_name)
    words = article(11)
    pipeline.process_now(page("http://a.example/v1", html(words)))
    v2 = edit(words, 0.05, 2)
    assert pipeline.process_now(page("http://a.example/v2", html(v2)))["near_duplicate_of"] == "http://a.example/v1"
    v3 = edit(v2, 0.01, 3)  # much nearer v2 than v1
    assert pipeline.process_now(page("http://a.example/v3", html(v3)))["near_duplicate_of"] == "http://a.example/v2"
    far = edit(words, 0.3, 4)  # 30% of the words replaced: another page
    assert "near_duplicate_of" not in pipeline.process_now(page("http://a.example/far", html(far)))


def test_only_successful_html_pages_are_looked_at(redis_url, crawl_name):
    pipeline, _ = _pipeline(redis_url, crawl_name)
    body = html(article(3))
    for item in (
        page("http://a.example/404", body, status=404),
        page("http://a.example/img", b"\x89PNG...", ctype="image/png"),
        Page(url="http://a.example/failed", status=None, error="DNSLookupError: x", body=b""),
    ):
        out = pipeline.process_now(item)
        assert "content_digest" not in out and "duplicate_of" not in out and "near_duplicate_of" not in out
    junk = pipeline.process_now(page("http://a.example/junk", bytes(range(256)) * 10, ctype="text/html"))
    assert junk["content_digest"].startswith("sha1:") and "near_duplicate_of" not in junk
    assert "simhash" not in pipeline.process_now(page("http://a.example/404b", body, status=404))


def test_short_pages_are_only_checked_for_exact_copies(redis_url, crawl_name):
    pipeline, _ = _pipeline(redis_url, crawl_name)
    a = pipeline.process_now(page("http://a.example/1", b"<html><body>page 1 of host a, next, other</body></html>"))
    b = pipeline.process_now(page("http://a.example/2", b"<html><body>page 2 of host a, next, other</body></html>"))
    assert a["simhash"] is None and "near_duplicate_of" not in b
    c = pipeline.process_now(page("http://a.example/3", b"<html><body>page 1 of host a, next, other</body></html>"))
    assert c["duplicate_of"] == "http://a.example/1"


def test_buckets_stop_growing_at_their_cap_and_old_entries_are_still_found(redis_url, crawl_name):
    pipeline, _ = _pipeline(redis_url, crawl_name, CONTENT_SEEN_BUCKET_SIZE=2)
    words = article(21)
    first = fp.page_fingerprints(html(words), 50)
    assert pipeline.check(first, "http://a.example/first") is None
    buckets = [pipeline.keys.near_bucket(key) for key in first.bands]
    # other pages whose band keys fall in the same buckets fill them (a third entry is refused)
    for n in range(2):
        other = first._replace(
            digest=f"other{n}", sketch=bytes(fp.BINS), bands=[k ^ ((n + 1) << 16) for k in first.bands]
        )
        assert pipeline.check(other, f"http://fill.example/{n}") is None
    assert {pipeline.redis.strlen(b) for b in buckets} == {16}  # 2 entries of 8 bytes
    copy = fp.page_fingerprints(html(edit(words, 0.02, 5)), 50)
    assert pipeline.check(copy, "http://b.example/copy")[:2] == ("near", "http://a.example/first")


def test_redis_away_keeps_the_page_as_new_and_counts_it(crawl_name):
    port = free_port()  # nobody listens there
    crawler = get_crawler(
        settings_dict=project_settings(REDIS_URL=f"redis://127.0.0.1:{port}/0", CRAWL_NAME=crawl_name)
    )
    pipeline = ContentSeenPipeline.from_crawler(crawler)
    item = pipeline.process_now(page("http://a.example/story", html(article(9))))
    assert "duplicate_of" not in item and item["simhash"] is not None
    assert crawler.stats.get_value("contentseen/redis_errors") == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=1, max_size=300))
def test_the_stored_simhash_is_the_simhash_packages_of_the_same_word_hashes(hashes):
    # the simhash package is the reference (Charikar's majority vote); the crawler votes
    # with numpy over the hashes it already has (docs/decisions/0001-simhash.md)
    bag = np.array(hashes, dtype=np.uint64)
    reference = Simhash([str(h) for h in hashes], hashfunc=lambda data: int(data) if data.isdigit() else 0)
    assert fp.simhash(bag) == reference.value
