"""Reading a page once (crawler/page/reader.py): its links are the ones Scrapy's link
extractor and the URL normalizer give (run here as the reference), its metadata what
extract_metadata gives, its fingerprints what page_fingerprints gives; hostile bodies never
make it raise.

Here: the unit tests (pure: no service, no process); the others of this subject:
tests/integration/test_pagereader.py."""

import html
import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy.http import HtmlResponse
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor

from crawler.contentseen.fingerprints import page_fingerprints
from crawler.demo import plan as demoplan
from crawler.demo import site as demosite
from crawler.page import links as pagelinks
from crawler.page import reader as pagereader
from crawler.page.metadata import extract_metadata
from crawler.page.reader import STAGES, Reading, read_page
from crawler.spiders.broad import extracted_links
from crawler.urls import DEFAULT_STRIP_PARAMS

HTML = {"Content-Type": ["text/html; charset=utf-8"]}

DEFAULT_OPTIONS = {"strip_params": DEFAULT_STRIP_PARAMS, "sort_query": True}


def old_links(body: bytes, url: str, headers: dict, url_options: dict) -> tuple[list[dict], bool, int]:
    """(links, meta nofollow, invalid links) as the broad spider read them before the reader:
    an HtmlResponse, Scrapy's LinkExtractor, then normalize_url."""
    response = HtmlResponse(url, body=body, headers=headers)
    extractor = LinkExtractor(deny_extensions=IGNORED_EXTENSIONS, canonicalize=False, unique=True, tags=("a", "area"))
    return extracted_links(response, extractor, url_options)


def assert_like_old(body: bytes, url: str, headers: dict = HTML, url_options: dict = DEFAULT_OPTIONS) -> Reading:
    reading = read_page(body, url, headers, url_options=url_options)
    assert (reading.links, reading.nofollow_page, reading.invalid_links) == old_links(body, url, headers, url_options)
    metadata, problems = extract_metadata(body, url, headers, url_options=url_options)
    assert reading.metadata == metadata
    assert reading.problems == problems
    assert set(reading.timings) == set(STAGES)
    assert pickle.loads(pickle.dumps(reading)) == reading
    return reading


def test_the_reader_ignores_the_extensions_scrapy_ignores():
    # the reader keeps its own copy (a page process imports no Scrapy): it must not drift
    assert pagelinks.IGNORED_EXTENSIONS == IGNORED_EXTENSIONS


def demo_pages():
    """(URL, body) of every HTML page of the demo site, in its plain and framed forms."""
    pages = []
    for options in ({"articles": True, "sitemap_pages": 2}, {"framed": True}):
        site = demosite.Site(hosts=3, pages=12, **options)
        site.port = 8081
        for host in range(site.n_hosts):
            paths = [*site.page_paths(), *site.sitemap_paths(), *demoplan.ARTICLES]
            for path in paths:
                page = site.page(host, path)
                if page is not None:
                    pages.append((site.url(host, path), page.encode()))
    return pages


def test_demo_site_pages_read_as_before():
    pages = demo_pages()
    assert len(pages) > 80
    for url, body in pages:
        reading = assert_like_old(body, url)
        assert reading.prints == page_fingerprints(body, 100)
    nofollow = [url for url, body in pages if read_page(body, url, HTML).nofollow_page]
    assert nofollow and all(url.endswith(demoplan.META_PAGE) for url in nofollow)
    framed = [read_page(body, url, HTML).prints for url, body in pages if "-copy" in url]
    assert framed and all(prints.sketch is not None for prints in framed)


def test_demo_site_pages_read_as_before_with_links_known():
    """A second reading of the same pages takes most links from what the first one found."""
    pages = demo_pages()
    first = [read_page(body, url, HTML) for url, body in pages]
    assert pagelinks._KNOWN
    second = [read_page(body, url, HTML) for url, body in pages]
    assert [r.links for r in second] == [r.links for r in first]
    for url, body in pages[:20]:
        assert_like_old(body, url)


def test_links_known_are_dropped_when_full(monkeypatch):
    monkeypatch.setattr(pagelinks, "KNOWN_LINKS", 5)
    monkeypatch.setattr(pagelinks, "_KNOWN", {})  # (whatever the tests before it left)
    for url, body in demo_pages()[:15]:
        assert_like_old(body, url)
        assert len(pagelinks._KNOWN) <= 5


CRAFTED = {
    "base href": """<html><head><base href="/docs/v2/"><title>t</title></head><body>
        <a href="intro.html">Intro</a> <a href="../v1/old.html">Old</a> <a href="/top">Top</a>
        <a href="?page=2">Next</a> <a href="#toc">Contents</a></body></html>""",
    "absolute base": """<html><head><base href="https://cdn.example.org/assets/"></head><body>
        <a href="a.html">a</a><a href="//other.example.net/x">protocol-relative</a></body></html>""",
    "relative and absolute": """<body>
        <a href="page.html">same dir</a> <a href="./sub/page.html">sub</a> <a href="../up.html">up</a>
        <a href="../../../../too-far.html">too far</a> <a href="/root.html">root</a>
        <a href="//example.org/proto">protocol relative</a> <a href="http://Example.COM:80/a/./b/../c">abs</a>
        <a href="https://example.com/a?b=2&amp;a=1&amp;utm_source=x">query</a>
        <a href="HTTPS://EXAMPLE.COM/Case">upper</a> <a href="http://b&#252;cher.de/">idn</a>
        <a href="http://[2001:db8::1]:8080/v6">v6</a> <a href="http://exa mple.com/">bad host</a>
        <a href="http://example.com:99999/">bad port</a> <a href="http://[::1/broken">broken v6</a>
        <a href="page.html;jsessionid=1?x=1">params</a> <a href="a%2fb%7e.html">escapes</a>
        <a href="caf&#233; cr&#232;me.html">spaces and accents</a> <a href="a\\b.html">backslash</a>
        <a href="?only=query">query only</a> <a href="">empty</a> <a>no href</a></body>""",
    "areas and rel": """<body><map name="m"><area href="/area1" alt="one"><area href="/area2" rel="nofollow">
        </map><a href="/n1" rel="nofollow noopener">n1</a><a href="/n2" rel="NoFollow,noreferrer">n2</a>
        <a href="/n3" rel="external">n3</a><a href="/n4" rel="">n4</a></body>""",
    "schemes": """<body><a href="javascript:void(0)">js</a><a href="mailto:a@example.com">mail</a>
        <a href="data:text/html,hi">data</a><a href="ftp://ftp.example.com/f.txt">ftp</a>
        <a href="file:///etc/passwd">file</a><a href="tel:+100">tel</a><a href="about:blank">about</a>
        <a href="http:relative">scheme, no host</a><a href="https:">scheme only</a></body>""",
    "fragments": """<body><a href="#a">a</a><a href="#b">b</a><a href="#">empty</a><a href="#caf&#233;">e</a>
        <a href="#a b">space</a><a href="#%zz">bad escape</a><a href="page.html#x">x</a>
        <a href="page.html#y">y</a><a href="#\tz">tab</a><a href="#&quot;q&quot;">quoted</a></body>""",
    "whitespace in href": """<body><a href="  /a.html  ">a</a><a href="\n/b\n.html\n">b</a>
        <a href="\t/c.html">c</a><a href="/d&#10;e.html">newline entity</a><a href="&#12288;/f.html">ideographic</a>
        <a href="/g.html&#11;">vertical tab</a><a href="   ">blank</a></body>""",
    "ignored extensions": """<body><a href="/doc.pdf">pdf</a><a href="/img.JPG">jpg</a><a href="/a.tar.gz">tgz</a>
        <a href="/page.pdf?download=1">pdf query</a><a href="/x.png;v=1">png params</a>
        <a href="/y.html#z.jpg">fragment</a><a href="/pdf">no dot</a><a href="/a.jpg/">dir</a></body>""",
    "duplicates": """<body><a href="/same">first text</a><a href="/same">second text</a>
        <a href="/same#frag">third</a><a href="/other?utm_source=a">tracked</a><a href="/other">plain</a>
        <a href="/b?y=1&amp;x=2">unsorted</a><a href="/b?x=2&amp;y=1">sorted</a></body>""",
    "link text": """<body><a href="/t1">  spaced
        text  </a><a href="/t2"><img alt="img"> <b>bold</b> and <i>italic</i></a>
        <a href="/t3">"""
    + "long " * 100
    + """</a><a href="/t4"><script>var s = 1;</script>script</a><a href="/t5"><!-- c -->commented</a></body>""",
    "meta nofollow": """<html><head><meta name="robots" content="noindex, nofollow"></head>
        <body><a href="/a">a</a></body></html>""",
    "meta none": """<html><head><meta name="ROBOTS" content="NONE"></head><body><a href="/a">a</a></body></html>""",
    "meta nofollow without comma": """<html><head><meta name="robots" content="noindex nofollow"></head>
        <body><a href="/a">a</a></body></html>""",
    "meta nofollow in two": """<html><head><meta name="robots" content="noarchive"><meta name="Robots"
        content="NoFollow"></head><body><a href="/a">a</a></body></html>""",
    "meta googlebot": """<html><head><meta name="googlebot" content="nofollow"></head>
        <body><a href="/a">a</a></body></html>""",
    "xml declaration and comments": """<?xml version="1.0" encoding="utf-8"?>
        <!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">
        <!-- a comment --><html xmlns="http://www.w3.org/1999/xhtml"><head><title>x</title></head>
        <body><?php echo 1; ?><a href="/x">x<!-- in --> y</a><!-- <a href="/commented">no</a> --></body></html>""",
    "fragment page": """<div><a href="/one">one</a></div>""",
    "svg and math": """<body><svg><a href="/in-svg">svg</a><a xlink:href="/xlink">xlink</a></svg>
        <math><a href="/in-math">m</a></math><A HREF="/upper">upper</A></body>""",
}


@pytest.mark.parametrize("name", CRAFTED)
def test_crafted_pages_read_as_before(name):
    body = CRAFTED[name].encode()
    reading = assert_like_old(body, "https://www.example.com/dir/page.html?x=1")
    if name.startswith("meta nofollow") and "without comma" not in name or name == "meta none":
        assert reading.nofollow_page and reading.links == []
    if name == "duplicates":
        assert reading.links[0]["text"] == "first text"


def test_crafted_pages_from_other_urls():
    for url in ("http://example.com", "http://example.com/a/b/", "https://user:pw@example.com:8443/x?q#f"):
        for body in CRAFTED.values():
            assert_like_old(body.encode(), url)


def test_url_options_strip_params():
    options = {"strip_params": ("ref", "session*"), "sort_query": False}
    body = b"""<body><a href="/a?z=1&amp;ref=x&amp;sessionid=2&amp;utm_source=y">a</a>
        <a href="/a?z=1">same once stripped</a><a href="/b;ref=3">path param</a></body>"""
    reading = assert_like_old(body, "http://example.com/", url_options=options)
    assert reading.links[0]["url"] == "http://example.com/a?z=1&utm_source=y"


ENCODED = {
    "windows-1252 by header": ("windows-1252", {"Content-Type": ["text/html; charset=windows-1252"]}, ""),
    "windows-1252 by meta": ("windows-1252", {"Content-Type": ["text/html"]}, '<meta charset="windows-1252">'),
    "shift_jis by header": ("shift_jis", {"Content-Type": ["text/html; charset=Shift_JIS"]}, ""),
    "shift_jis by meta": (
        "shift_jis",
        {"Content-Type": ["text/html"]},
        '<meta http-equiv="Content-Type" content="text/html; charset=shift_jis">',
    ),
    "latin-1 quoted in header": ("latin-1", {"content-type": ['text/html; charset="ISO-8859-1"']}, ""),
    "utf-8 undeclared": ("utf-8", {"Content-Type": ["text/html"]}, ""),
    "no content type": ("utf-8", {}, ""),
}


@pytest.mark.parametrize("name", ENCODED)
def test_pages_in_other_encodings(name):
    encoding, headers, meta = ENCODED[name]
    words = "日本語のページ" if encoding in ("shift_jis", "utf-8") else "Café crème brûlée"
    page = f"""<html><head>{meta}<title>{words}</title></head><body>
        <a href="/search?q={words}">{words}</a> <a href="/{words}.html">path</a>
        <a href="/q?e=&eacute;&amp;y=&yen;">entities</a></body></html>"""
    reading = assert_like_old(page.encode(encoding), "http://example.jp/a/", headers)
    assert reading.links[0]["text"] == words
    assert reading.metadata["title"] == words


def test_byte_order_marks():
    page = '<html><head><title>Été</title></head><body><a href="/été?q=é">été</a></body></html>'
    for bom, encoding in ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        reading = assert_like_old(bom + page.encode(encoding), "http://example.fr/", {"Content-Type": ["text/html"]})
        assert reading.links[0]["text"] == "été"


def test_ascii_page_makes_entities_safe_as_scrapy_does():
    """An ASCII page without a charset is windows-1252 to Scrapy: a query's &eacute; becomes %E9."""
    body = b'<body><a href="/q?x=&eacute;">e</a><a href="/p/&eacute;">path</a></body>'
    reading = assert_like_old(body, "http://example.com/", {"Content-Type": ["text/html"]})
    assert reading.links[0]["url"] == "http://example.com/q?x=%E9"


def test_where_the_reader_parses_links_again():
    """A body over max_bytes, a parse stopped at depth 256, a NUL character, Unicode
    whitespace at an end: the links are still Scrapy's, from a parse of their own."""
    link = '<a href="/after">after</a>'
    pages = {
        "over max_bytes": "<body>" + "<p>filler</p>" * 3000 + link + "</body>",
        "deep": "<body>" + "<div>" * 300 + '<a href="/deep">deep</a>' + "</div>" * 300 + link + "</body>",
        "nul": "<body><a href='/a\x00b'>a\x00b</a>" + link + "</body>",
        "ideographic space": "\u3000<body><a href='/x'>x\u3000" + link,
    }
    for name, page in pages.items():
        body = page.encode()
        max_bytes = 20_000 if name == "over max_bytes" else 2 * 2**20
        reading = read_page(body, "http://example.com/", HTML, max_bytes=max_bytes)
        assert (reading.links, reading.nofollow_page, reading.invalid_links) == old_links(
            body, "http://example.com/", HTML, DEFAULT_OPTIONS
        ), name
        assert "http://example.com/after" in [link["url"] for link in reading.links], name
        metadata, problems = extract_metadata(body, "http://example.com/", HTML, max_bytes=max_bytes)
        assert (reading.metadata, reading.problems) == (metadata, problems), name


def test_links_of_a_body_over_max_bytes_are_scrapys():
    """A body over max_bytes has its links read as the parser goes (no tree kept): the
    same links as Scrapy's, nofollow pages and hostile bodies included."""
    bodies = [(url, body) for url, body in demo_pages()]
    bodies += [("http://example.com/", b) for b in (b"", b"   ", b"<!-- only a comment -->", b"\x00\xff<a href=x>")]
    bodies += [("http://example.com/", b'<meta name="ROBOTS" content="nofollow"><a href="/x">x</a>')]
    bodies += [("http://example.com/", b"<a href='/a'><span>in</span><area href='/b'>a</a><p>" * 3000)]
    for url, body in bodies:
        reading = read_page(body, url, HTML, max_bytes=0)
        expected = old_links(body, url, HTML, DEFAULT_OPTIONS)
        assert (reading.links, reading.nofollow_page, reading.invalid_links) == expected, url
        assert "internal" not in reading.problems, url


def test_metadata_pages():
    """A few of the metadata tests' pages: fields, canonical, structured data."""
    jsonld = '{"@context": "https://schema.org", "@type": "Product", "name": "Widget", "offers": {"price": "9.99"}}'
    page = f"""<!DOCTYPE html><html lang="de"><head><meta charset="utf-8"><title>Widget</title>
        <meta name="description" content="A widget."><link rel="canonical" href="/widget?utm_source=x">
        <meta property="og:image" content="/img/w.png"><script type="application/ld+json">{jsonld}</script>
        </head><body><div itemscope itemtype="https://schema.org/Recipe"><span itemprop="recipeIngredient">salt
        </span></div><time datetime="2024-05-01">May</time><a href="/shop">shop</a></body></html>"""
    reading = assert_like_old(page.encode(), "https://shop.example.com/p/1")
    assert reading.metadata["canonical"] == "https://shop.example.com/widget"
    assert reading.metadata["product:price"] == "9.99"
    assert reading.metadata["recipe:ingredients"] == '["salt"]'


def long_page(seed: int, words: int = 600, extra: str = "") -> bytes:
    rng = random.Random(seed)
    text = [f"word{rng.randrange(2000)}" for _ in range(words)]
    paragraphs = "".join(f"<p>{' '.join(text[i : i + 50])}</p>" for i in range(0, words, 50))
    menu = "".join(f'<li><a href="/s{i}.html">Section {i}</a></li>' for i in range(20))
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Page {seed}</title></head><body>"
        f"<nav><ul>{menu}</ul></nav><main>{extra}{paragraphs}</main><footer>Copyright</footer></body></html>"
    ).encode()


def test_fingerprints_as_page_fingerprints():
    pages = [long_page(seed) for seed in range(20)]
    pages += [long_page(99, extra="<table><tr><td><a href='/x'>link text</a></td></tr></table>")]
    pages += [b"<div>" + long_page(100) + b"</div>", long_page(101)[15:], long_page(102, words=50)]
    pages += [b"<p>" + b" ".join(b"w%d" % i for i in range(300)) + b"</p>"]  # a fragment: no html element
    pages += [b"<p>one</p><p>" + b" ".join(b"w%d" % i for i in range(300)) + b"</p>"]  # a body renamed div
    pages += [b"<b>one</b> " + b" ".join(b"w%d" % i for i in range(300))]  # renamed span
    for min_words in (0, 100, 1000):
        for body in pages:
            reading = read_page(body, "http://example.com/", HTML, min_words=min_words)
            assert reading.prints == page_fingerprints(body, min_words)
    assert read_page(pages[0], "http://example.com/", HTML).prints.sketch is not None


def test_parts_left_out():
    body = long_page(1)
    reading = read_page(body, "http://example.com/", HTML, links=False, fingerprints=False, metadata=False)
    assert reading.links == [] and reading.prints is None and reading.metadata == {} and reading.problems == []
    only_links = read_page(body, "http://example.com/", HTML, fingerprints=False, metadata=False)
    assert only_links.links == read_page(body, "http://example.com/", HTML).links and only_links.prints is None
    only_prints = read_page(body, "http://example.com/", HTML, links=False, metadata=False)
    assert only_prints.prints == page_fingerprints(body, 100) and only_prints.links == []
    only_metadata = read_page(body, "http://example.com/", HTML, links=False, fingerprints=False)
    assert only_metadata.metadata == extract_metadata(body, "http://example.com/", HTML)[0]


_HREF = st.builds(
    str.__add__,
    st.sampled_from(["", "", "/", "../", "./", "#", "?", "//", "http://", "HTTPS://", "https:", "ftp://", "mailto:"]),
    st.text(alphabet="aZ09./:;?#%&=@+-_~!$'() \t\n\\[]é\u3000", max_size=14),
)


@settings(max_examples=150, deadline=None)
@given(hrefs=st.lists(_HREF, min_size=1, max_size=12), base=st.sampled_from(["", "/base/", "https://other.org/x/y"]))
def test_random_hrefs_from_pages_of_one_site(hrefs, base):
    """The same hrefs on pages at other places of a site (links known from one page serve
    the next): each page's links are the reference's."""
    pagelinks._KNOWN.clear()
    head = f'<base href="{html.escape(base)}">' if base else ""
    body = ("<html><head>" + head + "</head><body>").encode()
    body += "".join(f'<a href="{html.escape(h)}">{i}</a>' for i, h in enumerate(hrefs)).encode()
    for url in (
        "http://site.example/a/b/page.html",
        "http://site.example/a/b/other.html?q=1",
        "http://site.example/a/b/",
        "http://site.example/a/c/page.html",
        "https://site.example/a/b/page.html",
        "http://site.example",
        "http://site.example/a/b/page.html;p=1",
        "http://Site.example:80/a/b/page.html",
    ):
        reading = read_page(body, url, {"Content-Type": ["text/html"]}, metadata=False, fingerprints=False)
        expected = old_links(body, url, {"Content-Type": ["text/html"]}, DEFAULT_OPTIONS)
        assert (reading.links, reading.nofollow_page, reading.invalid_links) == expected, url


@settings(max_examples=100, deadline=None)
@given(hrefs=st.lists(_HREF, min_size=1, max_size=12), nesting=st.sampled_from(["", "<div>", "<a>", "<table><tr><td>"]))
def test_random_links_of_a_body_over_max_bytes(hrefs, nesting):
    body = "".join(f'{nesting}<a href="{html.escape(h)}">{i}<b>{i}</b></a>' for i, h in enumerate(hrefs)).encode()
    reading = read_page(body, "http://site.example/a/b.html", HTML, metadata=False, fingerprints=False, max_bytes=0)
    expected = old_links(body, "http://site.example/a/b.html", HTML, DEFAULT_OPTIONS)
    assert (reading.links, reading.nofollow_page, reading.invalid_links) == expected


def test_bad_input_does_not_raise():
    rng = random.Random(7)
    bodies = [
        b"",
        b"   \n ",
        bytes(rng.randrange(256) for _ in range(50_000)),
        b"\x00" * 1000,
        b"<html>" + b"<div>" * 5000 + b"<a href='/deep'>deep</a>" + b"</div>" * 5000,
        b"<html><body>" + b"<p><a href='/p'>word " * 150_000 + b"</body></html>",  # 3 MB
        b"<a href='" + b"x" * 100_000 + b"'>long</a>",
        b"\xff\xfe" + b"<\x00a\x00",
        "<a href='/\ud800'>lone surrogate</a>".encode("utf-8", "surrogatepass"),
        b"<meta charset='hex'><a href='/x'>x</a>",
        b"<meta charset='utf-16'><a href='/x'>x</a>",
    ]
    assert len(bodies[5]) > 3_000_000
    for body in bodies:
        for url, headers in (
            ("http://example.com/", HTML),
            ("", {}),
            (None, None),
            ("not a url", {"Content-Type": ["text/html; charset=nonsense"]}),
            ("http://[::1/", {b"content-type": [b"text/html"]}),
        ):
            reading = read_page(body, url, headers)
            assert isinstance(reading, Reading)
            assert "internal" not in reading.problems
            assert reading.prints is not None and reading.prints.digest
            pickle.dumps(reading)
    for body in (None, "<a href='/s'>str body</a>", 12, bytearray(b"<a href='/b'>b</a>"), memoryview(b"<p>m</p>")):
        reading = read_page(body, "http://example.com/", HTML)
        assert isinstance(reading, Reading) and "internal" not in reading.problems


def test_a_bug_is_reported_and_the_rest_returned(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("bug")

    body = long_page(3)
    monkeypatch.setattr(pagereader, "_links", broken)
    reading = read_page(body, "http://example.com/", HTML)
    assert reading.problems == ["internal"] and reading.links == []
    assert reading.metadata == extract_metadata(body, "http://example.com/", HTML)[0]
    assert reading.prints == page_fingerprints(body, 100)


_SEGMENT = st.sampled_from(
    ["a", "B", "..", ".", "", "x.html", "a-b_c~", "!$&()*+,=@", "...", "a.pdf", "%41", "'", ";p"]
)

_TAIL = st.text(alphabet="aZ09._~!$&()*+,=@/?:-#%'", max_size=8)

_HOSTS = ["example.com", "a-b.example", "127.0.0.2", "xn--bcher-kva.de", "1.2.3", "b1.c2", "Upper.example", "a_b.c"]

_PORTS = ["", ":80", ":443", ":8080", ":99999", ":0"]


@st.composite
def _plain_ish_href(draw):
    path = "/".join(draw(st.lists(_SEGMENT, min_size=1, max_size=6)))
    if draw(st.booleans()):
        path = "/" + path
    if draw(st.integers(0, 3)) == 0:
        scheme = draw(st.sampled_from(["http", "https", "HTTP", "ftp"]))
        path = f"{scheme}://{draw(st.sampled_from(_HOSTS))}{draw(st.sampled_from(_PORTS))}/{path.lstrip('/')}"
    for mark in "?#":
        if draw(st.booleans()):
            path += mark + draw(_TAIL)
    return path


@settings(max_examples=1500, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https"]),
    host=st.sampled_from(_HOSTS),
    port=st.sampled_from(_PORTS),
    base_path=st.lists(_SEGMENT, max_size=4).map(lambda parts: "/" + "/".join(parts)),
    base_tail=st.sampled_from(["", "?q=1", "#f", "?", "?a'b"]),
    href=_plain_ish_href(),
    encoding=st.sampled_from(["utf-8", "cp1252", "cp932", "utf-16", "iso-8859-15"]),
)
def test_plain_links_are_joined_as_urljoin_and_safe_url_string_join_them(
    scheme, host, port, base_path, base_tail, href, encoding
):
    """The reader's own join of a plain href gives what urljoin, safe_url_string and the
    link extractor's filter give."""
    base = f"{scheme}://{host}{port}{base_path}{base_tail}"
    url = f"{scheme}://{host}{port}/page.html"
    links = pagelinks._PageLinks(base, url, encoding, DEFAULT_OPTIONS)
    if links.plain:
        got = links.plain_link(href)
        if got is not None:
            assert got == pagelinks._follow_slowly(href, base, url, encoding)


def test_a_page_gives_its_first_max_links_links_at_most():
    """LINKS_MAX_PER_PAGE: a page of hundreds of thousands of links (a trap, or a crawl's
    memory: 450,000 links of a 10 MB page took 19 s and 400 MB to read) gives its first
    ``max_links``, in page order, on both of the reader's ways (the shared tree, and the
    stream of a body too large for it)."""
    from crawler.page.reader import read_page

    anchors = "".join(f'<a href="/p{i}">{i}</a>' for i in range(3000))
    for pad in ("", "<!--" + "x" * 2_200_000 + "-->"):  # (over METADATA_MAX_BYTES: streamed)
        body = f"<html><body>{pad}{anchors}</body></html>".encode()
        reading = read_page(body, "http://example.com/", {"Content-Type": ["text/html"]}, max_links=1000)
        assert [link["url"] for link in reading.links] == [f"http://example.com/p{i}" for i in range(1000)]
        assert len(read_page(body, "http://example.com/", {"Content-Type": ["text/html"]}).links) == 3000


@pytest.mark.parametrize("max_bytes", [None, 2000])
def test_a_base_href_after_a_long_head_resolves_the_links(max_bytes):
    """A ``<base href>`` after 4096 characters of head (inline styles) is the page's base,
    as a browser reads it (Scrapy reads only the first 4096 characters, and resolves every
    relative link of such a page against its URL instead), whole tree or streamed."""
    style = "<style>" + ".c{color:red}\n" * 400 + "</style>"
    body = f"""<html><head>{style}<base href="https://cdn.example.org/docs/v2/"></head><body>
        <a href="intro.html">Intro</a> <a href="/top">Top</a></body></html>""".encode()
    assert body.index(b"<base") > 4096
    options = {} if max_bytes is None else {"max_bytes": max_bytes}
    reading = read_page(body, "https://www.example.com/dir/page.html", HTML, **options)
    assert [link["url"] for link in reading.links] == [
        "https://cdn.example.org/docs/v2/intro.html",
        "https://cdn.example.org/top",
    ]
