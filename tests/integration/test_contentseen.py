"""Content seen: exact copies by body digest, near copies by the MinHash sketch of the main
text's words (an LSH index in Redis proposes, the sketches decide), shared by all workers
through Redis: the tests on real services in this process (Redis, Cassandra, S3, page
processes) (the others: tests/unit/test_contentseen.py)."""

from scrapy.utils.test import get_crawler

from crawler.contentseen import fingerprints as fp
from crawler.items import Page
from crawler.pipelines.contentseen import ContentSeenPipeline
from testing.pages import NEWS_FRAME, article, edit, html, page
from testing.servers import free_port
from testing.services import project_settings


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
        item = pipeline.process_now(page(f"http://news.example/{i}", html(article(100 + i, 150), frame=NEWS_FRAME)))
        assert "near_duplicate_of" not in item and "duplicate_of" not in item
    assert stats.get_value("contentseen/new") == 40


def test_posts_whose_taxonomy_classes_hold_frame_words_are_not_near_copies(redis_url, crawl_name):
    """Blog posts (WordPress's post_class: ``category-cookies``, ``tag-social-media``) of 400
    words of their own each, beside the site's frame and an author's note of 150 words on
    every post: the post's div was taken for a frame part (``cookies``, ``social``), only
    the author's note was left, and every post of such a category was a near copy of the
    first (resemblance 1.0)."""
    pipeline, stats = _pipeline(redis_url, crawl_name)
    note = " ".join(article(999, 150))
    for i, taxonomy in enumerate(["category-cookies"] * 3 + ["tag-social-media"] * 3):
        body = (
            f'<html><body><header><nav><a href="/">Home</a> <a href="/about">About</a></nav></header>'
            f'<div id="post-{i}" class="post-{i} post type-post status-publish hentry {taxonomy}">'
            f"<h1>Recipe {i}</h1><p>{' '.join(article(300 + i, 400))}</p></div>"
            f'<div class="author-bio"><p>{note}</p></div><footer>Copyright</footer></body></html>'
        )
        item = pipeline.process_now(page(f"http://blog.example/{i}", body.encode()))
        assert "near_duplicate_of" not in item and "duplicate_of" not in item, (i, item.get("resemblance"))
    assert stats.get_value("contentseen/new") == 6


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
