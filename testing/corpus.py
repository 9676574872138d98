"""A corpus of realistic generated pages (50-200 KB each: news articles, products,
recipes, plain pages) with the frames, scripts, styles, JSON-LD and links of real sites,
and a share of near and exact copies; deterministic for a seed (bench/pipelines.py)."""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass, field

_ONSETS = ["b", "br", "c", "ch", "cl", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "l", "m", "n", "p", "pl"]
_ONSETS += ["pr", "qu", "r", "s", "sc", "sh", "sl", "st", "t", "th", "tr", "v", "w", "wh", "y", "z", ""]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ee", "ou", "io", "y"]
_CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng", "rk", "ck", "x"]
_STOP_WORDS = (
    "the of and to a in is that for it on was with as be by at this are from or have an they which one you had"
    " not but what all were when we there can been has more if will would who so no its out into than them only"
).split()
_SECTIONS = ["world", "politics", "business", "tech", "science", "health", "sport", "culture", "travel", "food"]
_SECTIONS += ["opinion", "money", "climate", "education", "books", "music", "film", "style", "cars", "property"]
_TRACKING_JS = """
  window.dataLayer = window.dataLayer || [];
  function gtag(){dataLayer.push(arguments);}
  gtag('js', new Date()); gtag('config', 'G-%(tag)s', {'anonymize_ip': true, 'page_type': '%(kind)s'});
  (function(w,d,s,l,i){w[l]=w[l]||[];w[l].push({'gtm.start': new Date().getTime(),event:'gtm.js'});
  var f=d.getElementsByTagName(s)[0], j=d.createElement(s), dl=l!='dataLayer'?'&l='+l:'';
  j.async=true; j.src='https://www.googletagmanager.com/gtm.js?id='+i+dl; f.parentNode.insertBefore(j,f);
  })(window,document,'script','dataLayer','GTM-%(tag)s');
  var _paq = window._paq = window._paq || []; _paq.push(['trackPageView']); _paq.push(['enableLinkTracking']);
"""
_AD_JS = "googletag.cmd.push(function(){googletag.defineSlot('/1234/%s', [[300,250],[728,90]], 'ad-%d')"
_AD_JS += ".addService(googletag.pubads()); googletag.display('ad-%d');});"


def vocabulary(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct made-up words (1-4 syllables), the most frequent (stop words) first."""
    words, seen = list(_STOP_WORDS), set(_STOP_WORDS)
    while len(words) < n:
        syllables = rng.choice((1, 1, 2, 2, 2, 3, 3, 4))
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))
        if len(w) >= 2 and w not in seen:
            seen.add(w)
            words.append(w)
    return words[: len(_STOP_WORDS)] + sorted(words[len(_STOP_WORDS) :], key=len)  # frequent words are short


class Words:
    """Word text: Zipf-distributed word frequencies over a vocabulary of ``n`` words (cut
    from one long pre-drawn stream: much faster than drawing every word), with a share
    ``TOPIC_SHARE`` of the words drawn from the page's own topic (``set_topic``: 80 words
    of the vocabulary, Zipf among themselves), as real pages' content words are.

    Without topics every page has the same word distribution, and a count-weighted SimHash
    of the words then gives every page nearly the same fingerprint (median distance 1 bit
    between unrelated pages). With 30% topic words, unrelated pages of ~4,000 words are a
    median 17 bits apart, about what real English text gives with the same SimHash: 679
    man pages of 1,500-8,000 words (/usr/share/man) are a median 18 bits apart, 33 pydoc
    topics of ~1,000 words 17."""

    TOPIC_SHARE = 0.3
    TOPIC_WORDS = 80

    def __init__(self, seed: int, n: int = 5000, stream: int = 500_000):
        rng = random.Random(seed)
        self.vocab = vocabulary(rng, n)
        cum, total = [], 0.0
        for rank in range(n):
            total += 1.0 / (rank + 1) ** 1.05
            cum.append(total)
        topic_cum, total = [], 0.0
        for rank in range(self.TOPIC_WORDS):
            total += 1.0 / (rank + 1)
            topic_cum.append(total)
        # the stream: words, and at TOPIC_SHARE of the places the rank (an int) of a topic
        # word, which each page fills in from its own topic
        self.stream: list = rng.choices(self.vocab, cum_weights=cum, k=stream)
        ranks = rng.choices(range(self.TOPIC_WORDS), cum_weights=topic_cum, k=int(stream * self.TOPIC_SHARE))
        for pos, rank in zip(rng.choices(range(stream), k=len(ranks)), ranks):
            self.stream[pos] = rank
        self.set_topic(rng)

    def set_topic(self, rng: random.Random) -> None:
        self.topic = rng.sample(self.vocab[150:], self.TOPIC_WORDS)

    def words(self, rng: random.Random, k: int) -> list[str]:
        start = rng.randrange(len(self.stream) - k)
        topic = self.topic
        return [topic[w] if w.__class__ is int else w for w in self.stream[start : start + k]]

    def sentence(self, rng: random.Random, lo: int = 6, hi: int = 24) -> str:
        ws = self.words(rng, rng.randint(lo, hi))
        return " ".join(ws).capitalize() + rng.choice(".....?!")

    def title(self, rng: random.Random, lo: int = 4, hi: int = 10) -> str:
        ws = [w.capitalize() for w in self.words(rng, rng.randint(lo, hi)) if w not in _STOP_WORDS[:6]]
        return " ".join(ws) or rng.choice(self.vocab[200:]).capitalize()


def _slug(ws: list[str]) -> str:
    return "-".join(ws)[:80]


def _css(rng: random.Random, rules: int) -> str:
    out = []
    for i in range(rules):
        sel = rng.choice([".c-", ".o-", "#m-", ".article__", ".nav-", ".footer-"]) + "".join(
            rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9))
        )
        props = "; ".join(
            rng.choice(
                [
                    f"margin: {rng.randint(0, 40)}px {rng.randint(0, 40)}px",
                    f"padding: {rng.randint(0, 24)}px",
                    f"color: #{rng.randrange(16**6):06x}",
                    f"font-size: {rng.randint(10, 32)}px",
                    f"line-height: {rng.randint(10, 18) / 10}",
                    "display: flex",
                    f"max-width: {rng.randint(300, 1400)}px",
                    f"border: 1px solid #{rng.randrange(16**6):06x}",
                    f"transition: opacity .{rng.randint(1, 9)}s ease-in-out",
                ]
            )
            for _ in range(rng.randint(2, 6))
        )
        out.append(f"{sel}{i}{{{props}}}")
    return "\n".join(out)


def _jsonld(rng: random.Random, kind: str, words: Words, url: str, title: str, date: str) -> str:
    author = {"@type": "Person", "name": words.title(rng, 2, 3), "url": url.split("/", 3)[0] + "//authors"}
    if kind == "article":
        data = {
            "@context": "https://schema.org",
            "@type": rng.choice(["NewsArticle", "Article", "BlogPosting"]),
            "headline": title,
            "datePublished": date,
            "dateModified": date,
            "author": [author] if rng.random() < 0.5 else author,
            "image": [f"{url.rsplit('/', 1)[0]}/img/{rng.randrange(10**6)}.jpg"],
            "publisher": {"@type": "Organization", "name": words.title(rng, 1, 3), "logo": {"@type": "ImageObject"}},
            "mainEntityOfPage": {"@type": "WebPage", "@id": url},
        }
    elif kind == "product":
        data = {
            "@context": "https://schema.org/",
            "@type": "Product",
            "name": title,
            "sku": f"SKU-{rng.randrange(10**8)}",
            "description": words.sentence(rng, 20, 40),
            "offers": {
                "@type": "Offer",
                "price": f"{rng.randint(3, 900)}.{rng.randint(0, 99):02d}",
                "priceCurrency": rng.choice(["EUR", "USD", "GBP"]),
                "availability": "https://schema.org/InStock",
            },
            "aggregateRating": {"@type": "AggregateRating", "ratingValue": "4.3", "reviewCount": rng.randint(1, 900)},
        }
    else:  # recipe
        data = {
            "@context": "https://schema.org",
            "@type": "Recipe",
            "name": title,
            "author": author,
            "recipeIngredient": [f"{rng.randint(1, 500)} g {' '.join(words.words(rng, 2))}" for _ in range(12)],
            "recipeInstructions": [{"@type": "HowToStep", "text": words.sentence(rng)} for _ in range(8)],
        }
    crumbs = {
        "@context": "https://schema.org",
        "@type": "BreadcrumbList",
        "itemListElement": [{"@type": "ListItem", "position": i + 1, "name": words.title(rng, 1, 2)} for i in range(3)],
    }
    return json.dumps({"@graph": [data, crumbs]} if rng.random() < 0.3 else data, indent=1)


@dataclass
class CorpusPage:
    url: str
    body: bytes
    kind: str  # "article", "product", "recipe", "plain" (no JSON-LD), "near"/"exact" (a copy of page ``of``)
    of: int | None = None
    links: int = 0  # <a href> in the markup
    extra: dict = field(default_factory=dict)


def make_page(
    rng: random.Random,
    words: Words,
    target: int,
    url: str,
    href,
    kind: str = "article",
    embed: str = "",
) -> tuple[str, int]:
    """HTML of about ``target`` bytes: an article page of a news/shop/recipe site, with its
    head (meta, Open Graph, Twitter card, canonical, CSS, tracking scripts, JSON-LD unless
    ``kind`` is "plain"), header and navigation, breadcrumbs, the article (paragraphs with
    inline links, headings, lists, quotes, ad slots, in wrapper elements), share buttons
    (inline SVG), related links, footer, a JSON state blob (the article's text again, as
    client-side frameworks ship it); visible text is about a third of it. ``href(rng,
    where)`` gives each link's target ("nav", "inline", "related", "footer", "tag");
    ``embed`` (HTML) goes at the top of the article. Returns (html, number of links)."""
    words.set_topic(rng)
    title = words.title(rng)
    site = words.title(rng, 1, 2)
    date = (
        f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z"
    )
    desc = words.sentence(rng, 20, 35)
    image = f"{url.rsplit('/', 1)[0]}/img/{rng.randrange(10**6)}-1200x630.jpg"
    links = 0

    def a(where: str, text: str, cls: str = "") -> str:
        nonlocal links
        links += 1
        c = f' class="{cls}"' if cls else ""
        return f'<a href="{href(rng, where)}"{c}>{text}</a>'

    tag = "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(8))
    head = [
        "<!DOCTYPE html>",
        f'<html lang="{rng.choice(["en", "en-GB", "en-US"])}">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title} | {site}</title>",
        f'<meta name="description" content="{desc}">',
        f'<link rel="canonical" href="{url}">',
        f'<meta property="og:title" content="{title}">',
        f'<meta property="og:description" content="{desc}">',
        f'<meta property="og:type" content="{"product" if kind == "product" else "article"}">',
        f'<meta property="og:url" content="{url}">',
        f'<meta property="og:image" content="{image}">',
        f'<meta property="og:site_name" content="{site}">',
        '<meta name="twitter:card" content="summary_large_image">',
        f'<meta name="twitter:title" content="{title}">',
        f'<meta name="twitter:description" content="{desc}">',
        f'<meta name="twitter:image" content="{image}">',
        f'<meta property="article:published_time" content="{date}">',
        f'<link rel="stylesheet" href="/static/css/main.{rng.randrange(16**8):08x}.css">',
        '<link rel="preconnect" href="https://fonts.gstatic.example" crossorigin>',
        '<link rel="icon" href="/favicon.ico">',
        f"<style>{_css(rng, rng.randint(30, 120))}</style>",
        f'<script async src="https://www.googletagmanager.com/gtag/js?id=G-{tag}"></script>',
        f"<script>{_TRACKING_JS % {'tag': tag, 'kind': kind}}</script>",
    ]
    if kind in ("article", "product", "recipe"):
        head.append(f'<script type="application/ld+json">{_jsonld(rng, kind, words, url, title, date)}</script>')
    head.append("</head>")
    top = [
        f'<body class="page page--{kind}">',
        '<header class="site-header"><div class="logo"><a href="/">' + site + "</a></div>",
        '<nav class="main-nav" aria-label="Main"><ul>',
        *(f"<li>{a('nav', words.title(rng, 1, 2), 'nav-link')}</li>" for _ in range(rng.randint(40, 80))),
        "</ul></nav>",
        '<form class="search" action="/search" method="get"><input type="search" name="q" placeholder="Search">'
        "<button>Go</button></form></header>",
        '<ol class="breadcrumbs">',
        *(f"<li>{a('nav', words.title(rng, 1, 2))}</li>" for _ in range(3)),
        "</ol>",
        '<main id="content"><article class="article">',
        embed,
        f'<h1 class="article__title">{title}</h1>',
        f'<p class="article__standfirst">{desc}</p>',
        f'<div class="byline">By {a("nav", words.title(rng, 2, 3), "author")} '
        f'<time datetime="{date}">{date[:10]}</time></div>',
        f'<figure><img src="{image}" alt="{words.sentence(rng, 4, 8)}" width="1200" height="630" loading="lazy">'
        f"<figcaption>{words.sentence(rng)}</figcaption></figure>",
    ]
    related = [
        '</article><aside class="related"><h2>Related</h2><ul>',
        *(f"<li>{a('related', words.title(rng))}</li>" for _ in range(rng.randint(20, 40))),
        '</ul></aside><div class="tags">',
        *(a("tag", words.words(rng, 1)[0], "tag") for _ in range(rng.randint(8, 20))),
        "</div></main>",
    ]
    footer = ['<footer class="site-footer">']
    for _ in range(rng.randint(4, 6)):
        footer.append(f'<div class="footer-col"><h3>{words.title(rng, 1, 2)}</h3><ul>')
        footer += [f"<li>{a('footer', words.title(rng, 1, 3))}</li>" for _ in range(rng.randint(8, 14))]
        footer.append("</ul></div>")
    footer += [
        f'<p class="copyright">&copy; 2024 {site}. {words.sentence(rng)}</p></footer>',
        '<script src="/static/js/app.js" defer></script>',
        f"<script>window.__STATE__ = {json.dumps({'id': rng.randrange(10**9), 'tags': words.words(rng, 12)})};</script>",
        "</body></html>",
    ]
    fixed = sum(len(x) + 1 for x in head + top + related + footer)
    # the article takes a share of what is left; the rest is markup a modern page carries:
    # a JSON state blob (the article again, as a client-side framework ships it), inline
    # SVG icons, wrapper elements with data attributes
    article_budget = fixed + int((target - fixed) * rng.uniform(0.25, 0.4))
    body: list[str] = []
    size, ads, para = fixed, 0, 0
    texts: list[str] = []
    while size < article_budget:
        r = rng.random()
        if para and para % 7 == 0 and r < 0.3:
            block = f"<h2>{words.title(rng)}</h2>"
        elif r < 0.06:
            items = "".join(f"<li>{words.sentence(rng, 4, 12)}</li>" for _ in range(rng.randint(3, 8)))
            block = f"<ul>{items}</ul>"
        elif r < 0.09:
            block = f"<blockquote><p>{words.sentence(rng, 12, 30)}</p></blockquote>"
        elif r < 0.12:
            ads += 1
            block = f'<div class="ad-slot" id="ad-{ads}"><script>{_AD_JS % (tag, ads, ads)}</script></div>'
        else:
            sentences = [words.sentence(rng) for _ in range(rng.randint(3, 7))]
            texts.append(" ".join(sentences))
            if rng.random() < 0.6:  # an inline link
                i = rng.randrange(len(sentences))
                sentences[i] = (
                    sentences[i][:-1] + " " + a("inline", " ".join(words.words(rng, rng.randint(1, 4)))) + "."
                )
            if rng.random() < 0.2:
                sentences[0] = f"<strong>{sentences[0]}</strong>"
            block = f"<p>{' '.join(sentences)}</p>"
        para += 1
        block = (
            f'<div class="article__block article__block--{para % 3}" data-component="rich-text" '
            f'data-block-id="{rng.randrange(16**12):012x}" data-analytics="{{&quot;pos&quot;:{para}}}">{block}</div>'
        )
        body.append(block)
        size += len(block) + 1
    icons = []
    for name in ("facebook", "x", "linkedin", "whatsapp", "email", "print", "bookmark", "comments"):
        path = " ".join(f"{rng.choice('MLCQ')}{rng.uniform(0, 24):.3f} {rng.uniform(0, 24):.3f}" for _ in range(40))
        icons.append(
            f'<button class="share share--{name}" aria-label="Share on {name}"><svg viewBox="0 0 24 24" '
            f'width="24" height="24" aria-hidden="true"><path d="{path}Z"/></svg></button>'
        )
    body.append(f'<div class="share-bar">{"".join(icons)}</div>')
    size += sum(len(i) for i in icons) + 30
    state = {"props": {"pageProps": {"article": {"id": rng.randrange(10**9), "title": title, "body": []}}}}
    blocks = state["props"]["pageProps"]["article"]["body"]
    blob_budget = max(0, target - size - 200)
    i, used = 0, 0
    while used < blob_budget:
        piece = texts[i % len(texts)] if texts else words.sentence(rng)
        entry = {"type": "paragraph", "id": f"{rng.randrange(16**10):010x}", "text": piece, "marks": []}
        blocks.append(entry)
        used += len(piece) + 60
        i += 1
    footer.insert(-1, f'<script id="__NEXT_DATA__" type="application/json">{json.dumps(state)}</script>')
    return "\n".join(head + top + body + related + footer), links


def corpus_href(site: int):
    """Link targets of a corpus page of site ``site``: its own site mostly, some others."""

    def href(rng: random.Random, where: str) -> str:
        if where == "inline" and rng.random() < 0.4 or where == "footer" and rng.random() < 0.2:
            host = f"www.site{rng.randrange(5000)}.example"
        else:
            host = f"www.site{site}.example"
        section = rng.choice(_SECTIONS)
        if where == "nav":
            return f"https://{host}/{section}/"
        if where == "tag":
            return f"/tag/{rng.randrange(10**5)}/"
        return (
            f"https://{host}/{section}/{rng.randrange(10**7)}-{_slug([rng.choice(_SECTIONS) for _ in range(3)])}.html"
        )

    return href


KINDS = ["article", "article", "article", "product", "recipe", "plain", "plain"]


def build_corpus(n: int, seed: int, lo_kb: int = 50, hi_kb: int = 200, near: float = 0.08, exact: float = 0.02):
    """``n`` pages, sizes spread evenly over lo_kb..hi_kb (shuffled), deterministic for a
    seed. About ``near`` of them are near copies of an earlier page (a few words and the
    date changed, another URL) and ``exact`` byte-for-byte copies under another URL."""
    rng = random.Random(seed)
    words = Words(seed)
    sizes = [int((lo_kb + (hi_kb - lo_kb) * i / max(1, n - 1)) * 1024) for i in range(n)]
    rng.shuffle(sizes)
    pages: list[CorpusPage] = []
    for i, target in enumerate(sizes):
        r = rng.random()
        if i > 5 and r < exact:
            j = rng.randrange(len(pages))
            src = pages[j]
            pages.append(CorpusPage(src.url.replace("www.", "mirror."), src.body, "exact", j, src.links))
            continue
        if i > 5 and r < exact + near:
            j = rng.randrange(len(pages))
            src = pages[j]
            text = src.body.decode()
            vocab = words.vocab[200:]
            for _ in range(3):  # a few words changed, as a page updated or with a different ad
                pos = text.find(" ", rng.randrange(len(text) // 3, len(text) * 2 // 3))
                text = text[: pos + 1] + rng.choice(vocab) + text[pos + 1 :]
            text = text.replace("2024-", "2025-", 1)
            pages.append(CorpusPage(src.url + "?print=1", text.encode(), "near", j, src.links))
            continue
        site = rng.randrange(1000)
        kind = KINDS[i % len(KINDS)]
        url = f"https://www.site{site}.example/{rng.choice(_SECTIONS)}/{rng.randrange(10**7)}-{_slug(words.words(rng, 5))}.html"
        html, links = make_page(random.Random(rng.random()), words, target, url, corpus_href(site), kind)
        pages.append(CorpusPage(url, html.encode(), kind, None, links))
    return pages
