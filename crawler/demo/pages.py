"""The demo site's page contents: a page's own text, the frame a real site puts around it,
the long article and its near copy, an HTML page (crawler/demo/plan.py says which page
has which)."""

from __future__ import annotations

import random


def article_text(printed: bool) -> str:
    """About 600 words of text; the printed version changes one of them."""
    words = [f"w{(i * 7919) % 997}" for i in range(600)]
    if printed:
        words[300] = "printed"
    return "".join(f"<p>{' '.join(words[i : i + 60])}</p>" for i in range(0, len(words), 60))


_COMMON = (
    "the of and to a in is it that for as with on be by this are or an from at not which if can you was but all "
    "has have will its their they one also more other than then these when there so no may into only such"
).split()


def page_text(host_index: int, i: int, copied: bool = False) -> str:
    """About 250 words of a page's own (its words drawn at random, a third common words);
    the copy changes 3% of them and adds a "printed on" line."""
    rng = random.Random(host_index * 100_003 + i)
    words = [rng.choice(_COMMON) if rng.random() < 0.35 else f"term{rng.randrange(3000)}" for _ in range(250)]
    if copied:
        for n, k in enumerate(rng.sample(range(len(words)), len(words) * 3 // 100)):
            words[k] = f"changed{n}"
    text = "".join(f"<p>{' '.join(words[k : k + 50])}.</p>\n" for k in range(0, len(words), 50))
    return text + ("<p>Printed on 3 May 2026 from the web edition.</p>" if copied else "")


def framed(title: str, content: str, pages: int, copied: bool = False) -> str:
    """A page's content inside a site's frame (the same on every page but the tagline)."""
    menu = "".join(f'<li><a href="/p{k}.html">Section {k}</a></li>' for k in range(min(8, pages)))
    tagline = "Printer-friendly edition, no pictures" if copied else "News and notes from the demo site since 1999"
    frame_top = (
        f'<div class="site-header"><a href="/p0.html">The Demo Site</a> <span>{tagline}</span></div>'
        f"<nav><ul>{menu}</ul></nav>"
        '<div class="cookie-banner">We use cookies to remember your preferences and to count visits to '
        "our pages. By using this site you agree to that.</div>"
    )
    sidebar = (
        "<aside><h3>About us</h3><p>The Demo Site is written by a small team of editors who care about "
        "what happens in the world and in your town. Write to us with your questions, tips and corrections; "
        "we read every letter and answer most of them within a week.</p></aside>"
    )
    frame_bottom = (
        "<div>The opinions expressed in the articles are those of their authors and not necessarily those "
        "of the editors. Articles may be shared for private use as long as their source is named.</div>"
        "<footer><p>Copyright 2026 The Demo Site, 12 Main Street, Springfield. All rights reserved.</p>"
        '<p><a href="/p0.html">Home</a> <a href="/p1.html">Contact</a> <a href="/p2.html">Privacy</a></p></footer>'
    )
    return html(title, f'{frame_top}<div class="content">{content}</div>{sidebar}{frame_bottom}')


def html(title: str, body: str, head: str = "") -> str:
    return (
        f"<!doctype html><html><head><title>{title}</title>{head}</head>"
        f"<body><h1>{title}</h1>\n{body}\n</body></html>\n"
    )
