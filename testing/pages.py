"""Pages made up for a test: articles of random words from one vocabulary, their HTML, an\nedit of a share of their words (a near copy), and a ``Page`` item of a body."""

from __future__ import annotations

import random

import scrapy

from crawler.items import Page

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


# the frame of a news site: more words than the 150 of each page's own text below
NEWS_FRAME = (
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


SHOP_URL = "https://shop.example.com/dir/page.html"  # the final URL of a metadata_page


class MetaPage(Page):
    """Page with the fields the pipeline sets, whether or not crawler/items.py has them yet."""

    metadata = scrapy.Field()
    canonical_url = scrapy.Field()


def metadata_page(status=200, body=b"", headers=None, item_class=MetaPage, **extra):
    return item_class(
        url="https://shop.example.com/start",
        final_url=SHOP_URL,
        status=status,
        headers=headers if headers is not None else {"Content-Type": ["text/html; charset=utf-8"]},
        body=body,
        outlinks=[],
        **extra,
    )
