"""Bad input, generated: any page, robots.txt, URL or seed line gives a result or a counted
rejection, never an unhandled exception (Hypothesis). The readers catch their own errors
and record them as an "internal" problem, so these tests assert that none was recorded:
an exception inside would fail them."""

import io
import zlib

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scrapy.utils.test import get_crawler

from crawler.middlewares.robots import RobotsMiddleware
from crawler.page.reader import read_page
from crawler.pipelines.metadata import extract_metadata
from crawler.seeds.files import BadLine, SeedLine, read_stream
from crawler.spiders.broad import BroadSpider
from crawler.urls import InvalidURL, normalize_url
from testing.services import project_settings

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# pieces that hostile pages are made of
HREFS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "javascript:alert(1)",
            "data:text/html,<b>x</b>",
            "mailto:a@b.c",
            "//evil.example/%zz",
            "http://[::1/",
            "http://xn--nxasmq6b.example/ü?q=%FF",
            "http://ünïcödé.example/päth",
            "https://a.example:99999/",
            "http://a.example/" + "x/" * 300,
            "../../../etc/passwd",
            "#frag",
            " \t\nhttp://spaces.example/ ",
            "http://a.example/\x00null",
            "http:\\\\backslash.example\\p",
        ]
    ),
)
ATTRS = st.dictionaries(
    st.sampled_from(["href", "src", "rel", "content", "name", "property", "charset", "lang", "itemprop", "itemtype"]),
    st.one_of(HREFS, st.sampled_from(["nofollow", "canonical", "og:title", "description", "utf-16", "x-bogus"])),
    max_size=4,
)
TAGS = st.sampled_from(["a", "link", "meta", "base", "div", "script", "title", "html", "body", "table", "main", "nav"])


@st.composite
def hostile_pages(draw) -> bytes:
    """Markup of random tags, attributes and text, nested, unclosed, in random encodings,
    or plain random bytes."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=2000))
    parts = []
    for _ in range(draw(st.integers(0, 40))):
        tag, attrs = draw(TAGS), draw(ATTRS)
        attr_text = " ".join(f'{k}="{v}"' for k, v in attrs.items())
        parts.append(f"<{tag} {attr_text}>{draw(st.text(max_size=30))}")
        if draw(st.booleans()):
            parts.append(f"</{tag}>")
    if draw(st.booleans()):
        parts.append('<script type="application/ld+json">' + draw(st.text(max_size=80)) + "</script>")
    text = "".join(parts)
    encoding = draw(st.sampled_from(["utf-8", "latin-1", "utf-16", "cp1252"]))
    return text.encode(encoding, errors="replace")


CONTENT_TYPES = st.sampled_from(
    ["text/html", "text/html; charset=utf-8", "text/html; charset=bogus", "application/octet-stream", "", "text/html;;"]
)


@FUZZ
@given(
    body=hostile_pages(),
    content_type=CONTENT_TYPES,
    url=st.sampled_from(["http://a.example/", "https://b.example/x/y?z"]),
)
@example(body=b"<a ><nav ></nav><html >\x1f", content_type="text/html", url="http://a.example/")  # found so
def test_reading_any_page_gives_a_reading(body, content_type, url):
    reading = read_page(body, url, {"Content-Type": [content_type]}, min_words=5)
    assert "internal" not in reading.problems
    for link in reading.links:  # only http(s) links, normalized
        assert link["url"].startswith(("http://", "https://"))
        assert normalize_url(link["url"]) == link["url"]


@FUZZ
@given(body=hostile_pages(), content_type=CONTENT_TYPES)
def test_metadata_of_any_page(body, content_type):
    fields, problems = extract_metadata(body, "http://a.example/", {"content-type": [content_type]})
    assert "internal" not in problems
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in fields.items())


@FUZZ
@given(raw=st.one_of(st.text(max_size=80), HREFS))
def test_any_url_is_normalized_or_refused_as_invalid(raw):
    try:
        url = normalize_url(raw)
    except InvalidURL:
        return
    assert url.startswith(("http://", "https://")) and normalize_url(url) == url


ROBOTS_LINES = st.sampled_from(
    [
        "User-agent: *",
        "User-agent: crawler",
        "Disallow: /",
        "Disallow: /private*$",
        "Allow: /private/ok",
        "Crawl-delay: 5",
        "Crawl-delay: -1",
        "Crawl-delay: abc",
        "Sitemap: http://a.example/s.xml",
        "Sitemap: not a url",
        "Disallow: /%zz%",
        "Allow: *",
        "\x00\xff",
    ]
)


@FUZZ
@given(
    lines=st.lists(st.one_of(ROBOTS_LINES, st.text(max_size=40)), max_size=30),
    garbage=st.binary(max_size=200),
    path=st.one_of(st.text(max_size=30), HREFS),
)
def test_any_robots_txt_gives_rules_that_answer_for_any_url(lines, garbage, path):
    crawler = get_crawler(BroadSpider, project_settings(REDIS_URL="redis://127.0.0.1:1/0"))
    middleware = RobotsMiddleware.from_crawler(crawler)
    body = "\n".join(lines).encode("utf-8", errors="replace") + garbage
    rules = middleware._parse("http://a.example", 200, zlib.compress(body), 0.0)
    url = "http://a.example/" + path.lstrip("/")
    assert rules.allowed(url, "crawler") in (True, False)
    assert all(isinstance(s, str) for s in rules.sitemaps)


@FUZZ
@given(data=st.lists(st.one_of(st.binary(max_size=60), st.text(max_size=60).map(str.encode)), max_size=20))
def test_any_seed_file_gives_seed_lines_and_counted_bad_lines(data):
    raw = b"\n".join(data)
    lines = list(read_stream(io.BytesIO(raw), "fuzz"))
    assert all(isinstance(line, SeedLine | BadLine) for line in lines)
    for line in lines:
        if isinstance(line, SeedLine):
            try:
                normalize_url(line.url)
            except InvalidURL:
                pass  # counted as invalid by ingestion
        else:
            assert line.reason and line.lineno >= 1
