"""Content seen: exact duplicates by body digest and near duplicates by SimHash, shared
by all workers through Redis."""

import random
import socket

from hypothesis import given
from hypothesis import strategies as st
from scrapy.utils.test import get_crawler

from crawler.fingerprints import block_keys, distance, page_text, text_simhash, word_hashes
from crawler.items import Page
from crawler.pipelines.contentseen import ContentSeenPipeline
from tests.conftest import project_settings

VOCABULARY = [f"word{i}" for i in range(3000)]


def article(seed: int, words: int = 800) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(VOCABULARY) for _ in range(words)]


def html(words: list[str], extra: str = "") -> bytes:
    paragraphs = "".join(f"<p>{' '.join(words[i : i + 40])}</p>" for i in range(0, len(words), 40))
    script = "<script>var tracking = 'x' + Math.random();</script>"
    return f"<html><head><title>t</title>{script}</head><body>{extra}{paragraphs}</body></html>".encode()


def page(url: str, body: bytes, status: int = 200, ctype: str = "text/html; charset=utf-8") -> Page:
    return Page(url=url, final_url=url, status=status, body=body, headers={"Content-Type": [ctype]})


@given(st.integers(min_value=0, max_value=2**64 - 1), st.sets(st.integers(0, 63), max_size=3))
def test_values_within_distance_k_share_a_block(value, flips):
    other = value
    for bit in flips:
        other ^= 1 << bit
    assert distance(value, other) == len(flips)
    assert set(block_keys(value, 3)) & set(block_keys(other, 3))


def test_word_hashes_ignore_case_and_punctuation():
    h = word_hashes("Crawler, crawler! CRAWLER; a élan élan")
    assert len(h) == 5 and len(set(h[:3].tolist()) | set(h[3:].tolist())) == 2  # "a" is too short
    assert set(word_hashes("crawler élan").tolist()) == set(h.tolist())
    assert text_simhash("too few words", min_words=50) is None


def test_simhash_is_close_for_small_edits_and_far_for_other_texts():
    words = article(1)
    edited = list(words)
    edited[100], edited[500] = "changed", "edited"
    a = text_simhash(page_text(html(words)))
    b = text_simhash(page_text(html(edited, extra="<div>Updated today</div>")))
    c = text_simhash(page_text(html(" ".join(article(2, 800)).replace("word", "term").split())))
    assert distance(a, b) <= 3
    assert distance(a, c) > 10
    assert "tracking" not in page_text(html(words))  # scripts are not text


def _pipeline(redis_url, crawl_name):
    crawler = get_crawler(settings_dict=project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name))
    return ContentSeenPipeline.from_crawler(crawler), crawler.stats


def test_two_workers_see_each_others_pages(redis_url, crawl_name):
    one, stats_one = _pipeline(redis_url, crawl_name)
    two, stats_two = _pipeline(redis_url, crawl_name)  # another worker: its own client
    words = article(7)
    edited = list(words)
    edited[10] = "different"
    first = one.process_now(page("http://a.example/story", html(words)))
    assert "duplicate_of" not in first and first["content_digest"].startswith("sha1:")
    copy = two.process_now(page("http://mirror.example/story", html(words)))
    assert (copy["duplicate_of"], copy["duplicate_kind"]) == ("http://a.example/story", "exact")
    near = two.process_now(page("http://a.example/story?print=1", html(edited, extra="<b>print</b>")))
    assert (near["duplicate_of"], near["duplicate_kind"]) == ("http://a.example/story", "near")
    other = one.process_now(page("http://b.example/other", html(article(8))))
    assert "duplicate_of" not in other
    again = one.process_now(page("http://a.example/story", html(words)))  # a recrawl of the same URL
    assert "duplicate_of" not in again
    assert stats_two.get_value("contentseen/exact") == 1 and stats_two.get_value("contentseen/near") == 1
    assert stats_one.get_value("contentseen/new") == 3


def test_only_successful_html_pages_are_looked_at(redis_url, crawl_name):
    pipeline, _ = _pipeline(redis_url, crawl_name)
    body = html(article(3))
    for item in (
        page("http://a.example/404", body, status=404),
        page("http://a.example/img", b"\x89PNG...", ctype="image/png"),
        Page(url="http://a.example/failed", status=None, error="DNSLookupError: x", body=b""),
        page("http://a.example/junk", bytes(range(256)) * 10, ctype="text/html"),
    ):
        out = pipeline.process_now(item)
        assert "duplicate_of" not in out
    assert "simhash" not in pipeline.process_now(page("http://a.example/404b", body, status=404))


def test_short_pages_are_only_checked_for_exact_copies(redis_url, crawl_name):
    pipeline, _ = _pipeline(redis_url, crawl_name)
    a = pipeline.process_now(page("http://a.example/1", b"<html><body>page 1 of host a, next, other</body></html>"))
    b = pipeline.process_now(page("http://a.example/2", b"<html><body>page 2 of host a, next, other</body></html>"))
    assert a["simhash"] is None and "duplicate_of" not in b
    c = pipeline.process_now(page("http://a.example/3", b"<html><body>page 1 of host a, next, other</body></html>"))
    assert c["duplicate_kind"] == "exact"


def test_a_near_duplicate_is_found_in_a_full_bucket(redis_url, crawl_name):
    # the index buckets are packed 8-byte strings scanned by the script: index a page, fill
    # its buckets past their cap with far-away simhashes sharing a block, then look up copies
    crawler = get_crawler(
        settings_dict=project_settings(REDIS_URL=redis_url, CRAWL_NAME=crawl_name, CONTENT_SEEN_BUCKET_SIZE=64)
    )
    pipeline = ContentSeenPipeline.from_crawler(crawler)
    rng = random.Random(3)
    value = rng.getrandbits(64)
    assert pipeline.check("first", "http://a.example/first", value) is None
    for i in range(4 * 70):  # each shares one 16-bit block with value and is ~24 bits away elsewhere
        mask = 0xFFFF << (16 * (i % 4))
        other = (rng.getrandbits(64) & ~mask) | (value & mask)
        assert pipeline.check(f"d{i}", f"http://fill.example/{i}", other) is None
    sizes = [pipeline.redis.strlen(pipeline.keys.simhash_bucket(key)) for key in block_keys(value, 3)]
    assert sizes == [64 * 8] * 4  # full: the last entries were not indexed
    assert pipeline.check("near", "http://a.example/near", value ^ 0b1011) == ("near", "http://a.example/first", 3)
    assert pipeline.check("far", "http://a.example/far", value ^ 0b11011) is None  # 4 bits: not near
    assert pipeline.check("copy", "http://b.example/copy", value ^ 1 << 40) == ("near", "http://a.example/first", 1)
    assert pipeline.check("again", "http://a.example/first", value) is None  # a recrawl of the same URL


def test_redis_away_keeps_the_page_as_new_and_counts_it(crawl_name):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    crawler = get_crawler(
        settings_dict=project_settings(REDIS_URL=f"redis://127.0.0.1:{port}/0", CRAWL_NAME=crawl_name)
    )
    pipeline = ContentSeenPipeline.from_crawler(crawler)
    item = pipeline.process_now(page("http://a.example/story", html(article(9))))
    assert "duplicate_of" not in item and item["simhash"] is not None
    assert crawler.stats.get_value("contentseen/redis_errors") == 1
