"""The metadata pipeline: page fields from real HTML (lxml and extruct, nothing mocked),
hostile bodies that must never raise, and the pipeline's pass-through and stats.

Here: the unit tests (pure: no service, no process); the others of this subject:
tests/integration/test_metadata.py."""

import codecs
import json

import pytest

from crawler.pipelines.metadata import extract_metadata, is_html

URL = "https://shop.example.com/dir/page.html"

HTML = {"Content-Type": ["text/html; charset=utf-8"]}


def extract(html, headers=HTML, url=URL, **kwargs):
    body = html.encode("utf-8") if isinstance(html, str) else html
    metadata, problems = extract_metadata(body, url, headers, **kwargs)
    assert_flat(metadata, kwargs.get("max_field_length", 1000), kwargs.get("max_fields", 64))
    return metadata, problems


def assert_flat(metadata, max_length=1000, max_fields=64):
    """What the UrlStore can hold: a flat map of short text, valid UTF-8, no empty value."""
    assert isinstance(metadata, dict) and len(metadata) <= max_fields
    for key, value in metadata.items():
        assert isinstance(key, str) and isinstance(value, str)
        assert 0 < len(value) <= max_length, (key, len(value))
        value.encode("utf-8")  # no lone surrogates
        assert value == value.strip() and "  " not in value and "\n" not in value and "\x00" not in value


def ld(data) -> str:
    return f'<script type="application/ld+json">{json.dumps(data)}</script>'


def test_head_fields():
    html = """<!DOCTYPE html>
    <html lang="en-GB"><head>
      <meta charset="utf-8">
      <title>
         Blue   widgets
         &amp; more | Shop </title>
      <meta name="Description" content="  All the   widgets
         you need. ">
    </head><body><svg><title>Close icon</title></svg><p>hi</p></body></html>"""
    metadata, problems = extract(html)
    assert problems == []
    assert metadata == {
        "title": "Blue widgets & more | Shop",
        "description": "All the widgets you need.",
        "language": "en-GB",
        "charset": "utf-8",
        "content_type": "text/html",
    }


def test_title_inside_svg_is_not_the_page_title():
    metadata, _ = extract("<html><body><svg><title>Close</title></svg></body></html>")
    assert "title" not in metadata


def test_charset_from_the_header_wins_over_meta():
    body = '<html><head><meta charset="utf-8"><title>Café crème</title></head></html>'.encode("latin-1")
    metadata, problems = extract(body, {"content-type": ["text/html; charset=ISO-8859-1"]})
    assert metadata["title"] == "Café crème"
    assert metadata["charset"] == "iso-8859-1"
    assert problems == []


@pytest.mark.parametrize(
    "declaration",
    ['<meta charset="windows-1251">', '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'],
)
def test_charset_from_meta(declaration):
    body = f"<html><head>{declaration}<title>Привет, мир</title></head></html>".encode("cp1251")
    metadata, problems = extract(body, {"Content-Type": ["text/html"]})
    assert metadata["title"] == "Привет, мир"
    assert metadata["charset"] == "windows-1251"
    assert problems == []


def test_undeclared_charset_falls_back_to_windows_1252():
    body = "<html><title>naïve café</title></html>".encode("cp1252")
    metadata, problems = extract(body, {"Content-Type": ["text/html"]})
    assert metadata["title"] == "naïve café" and "charset" not in metadata and problems == []


def test_language_fallbacks():
    meta = '<html><head><meta http-equiv="content-language" content="de-AT"></head></html>'
    assert extract(meta)[0]["language"] == "de-AT"
    header = {"Content-Type": ["text/html"], "Content-Language": ["fr"]}
    assert extract("<html><head><title>x</title></head></html>", header)[0]["language"] == "fr"
    assert extract('<html xml:lang="nl"><title>x</title></html>', header)[0]["language"] == "nl"
    assert extract('<html lang="pt-BR"><meta http-equiv="content-language" content="de">')[0]["language"] == "pt-BR"


def test_canonical_resolved_against_base_href_and_normalized():
    html = """<html><head><base href="https://cdn.Example.com/shop/">
      <link rel="alternate" href="/other">
      <link rel="Canonical" href="../items/Widget?utm_source=news&b=2&a=1#top">
    </head></html>"""
    metadata, problems = extract(html, url="https://shop.example.com/x/y")
    assert metadata["canonical"] == "https://cdn.example.com/items/Widget?a=1&b=2"
    assert problems == []


def test_relative_canonical_without_base_and_the_item_field():
    metadata, _ = extract('<link rel="canonical" href="/p/1?sessionid=abc">', url="https://shop.example.com/p/1?x=1")
    assert metadata["canonical"] == "https://shop.example.com/p/1"


@pytest.mark.parametrize("href", ["javascript:void(0)", "http://exa mple.com/", "mailto:a@b.c", "x" * 20_000])
def test_an_invalid_canonical_is_skipped(href):
    metadata, problems = extract(f'<html><title>t</title><link rel="canonical" href="{href}"></html>')
    assert "canonical" not in metadata and problems == ["canonical"]
    assert metadata["title"] == "t"


def test_open_graph_and_twitter_card():
    html = """<html><head>
      <meta property="og:title" content="OG title"><meta property="og:description" content="OG description">
      <meta property="og:type" content="article"><meta property="og:image" content="/img/a.jpg">
      <meta property="og:image" content="/img/second.jpg">
      <meta name="twitter:card" content="summary_large_image"><meta name="twitter:title" content="TW title">
      <meta property="twitter:description" content="TW description">
      <meta name="twitter:image" content="//images.example.net/t.png">
    </head></html>"""
    metadata, problems = extract(html)
    assert problems == []
    assert {k: v for k, v in metadata.items() if k.startswith(("og:", "twitter:"))} == {
        "og:title": "OG title",
        "og:description": "OG description",
        "og:type": "article",
        "og:image": "https://shop.example.com/img/a.jpg",
        "twitter:card": "summary_large_image",
        "twitter:title": "TW title",
        "twitter:description": "TW description",
        "twitter:image": "https://images.example.net/t.png",
    }


def test_an_image_that_is_not_an_http_url_is_dropped():
    metadata, _ = extract('<meta property="og:image" content="data:image/png;base64,AAAA">')
    assert "og:image" not in metadata


def test_times_from_meta():
    html = """<html><head>
      <meta property="article:published_time" content="2024-03-01T10:00:00+01:00">
      <meta property="article:modified_time" content="2024-03-02T11:00:00+01:00">
    </head><body><time datetime="1999-01-01">old</time></body></html>"""
    metadata, _ = extract(html)
    assert metadata["published_time"] == "2024-03-01T10:00:00+01:00"
    assert metadata["modified_time"] == "2024-03-02T11:00:00+01:00"


def test_time_element_is_the_last_resort_for_published():
    metadata, _ = extract('<html><body><p>By Ann</p><time>now</time><time datetime="2023-05-06">May 6</time></body>')
    assert metadata["published_time"] == "2023-05-06" and "modified_time" not in metadata


def test_news_article_in_a_graph_with_author_reference():
    data = {
        "@context": "https://schema.org",
        "@graph": [
            {"@type": "WebSite", "@id": "https://news.example/#site", "name": "News"},
            {"@type": "WebPage", "@id": "https://news.example/a#page", "datePublished": "2020-01-01"},
            {
                "@type": ["NewsArticle", "Article"],
                "headline": "  Big   story ",
                "author": {"@id": "https://news.example/#/person/1"},
                "datePublished": "2024-06-01T08:00:00Z",
                "dateModified": "2024-06-02T09:00:00Z",
                "isPartOf": {"@id": "https://news.example/a#page"},
            },
            {"@type": "Person", "@id": "https://news.example/#/person/1", "name": "Jane Doe"},
        ],
    }
    metadata, problems = extract(f"<html><head>{ld(data)}<time datetime='1990-01-01'></time></head></html>")
    assert problems == []
    assert metadata["article:headline"] == "Big story"
    assert metadata["article:author"] == "Jane Doe"
    assert metadata["published_time"] == "2024-06-01T08:00:00Z"
    assert metadata["modified_time"] == "2024-06-02T09:00:00Z"


@pytest.mark.parametrize(
    "author, expected",
    [
        ("Ann Smith", "Ann Smith"),
        ({"@type": "Person", "name": "Ann Smith"}, "Ann Smith"),
        (
            [{"@type": "Person", "name": "Ann"}, "Bob", {"@type": "Organization", "name": "Reuters"}],
            "Ann, Bob, Reuters",
        ),
    ],
)
def test_article_author_shapes(author, expected):
    data = {"@context": "http://schema.org", "@type": "BlogPosting", "headline": "Post", "author": author}
    metadata, _ = extract(ld(data))
    assert metadata["article:author"] == expected and metadata["article:headline"] == "Post"


def test_meta_published_time_wins_over_json_ld():
    data = {"@context": "https://schema.org", "@type": "Article", "datePublished": "2001-01-01"}
    html = f'<meta property="article:published_time" content="2024-01-01">{ld(data)}'
    assert extract(html)[0]["published_time"] == "2024-01-01"


def product(offers, **extra):
    return {"@context": "https://schema.org/", "@type": "Product", "name": "Widget 3000", "offers": offers, **extra}


def test_product_with_a_single_offer():
    offer = {"@type": "Offer", "price": 19.99, "priceCurrency": "EUR", "availability": "https://schema.org/InStock"}
    metadata, problems = extract(f"<html><head>{ld(product(offer))}</head><body></body></html>")
    assert problems == []
    assert metadata["product:name"] == "Widget 3000"
    assert metadata["product:price"] == "19.99"
    assert metadata["product:currency"] == "EUR"
    assert metadata["product:availability"] == "InStock"


def test_product_with_a_list_of_offers():
    offers = [
        {"@type": "Offer", "availability": "http://schema.org/OutOfStock"},
        {
            "@type": "Offer",
            "priceSpecification": {"@type": "UnitPriceSpecification", "price": "7.50", "priceCurrency": "GBP"},
        },
        {"@type": "Offer", "price": "9.00", "priceCurrency": "GBP"},
    ]
    metadata, _ = extract(ld(product(offers)))
    assert (metadata["product:price"], metadata["product:currency"]) == ("7.50", "GBP")
    assert metadata["product:availability"] == "OutOfStock"


def test_product_with_an_aggregate_offer():
    offers = {"@type": "AggregateOffer", "lowPrice": "5", "highPrice": "15", "priceCurrency": "USD", "offerCount": 3}
    data = {"@context": "https://schema.org", "@graph": [{"@type": "BreadcrumbList"}, product(offers)]}
    metadata, _ = extract(ld(data))
    assert (metadata["product:price"], metadata["product:currency"]) == ("5", "USD")


def test_product_types_as_list_and_iri():
    data = product({"@type": "Offer", "price": 3, "priceCurrency": "USD"})
    data["@type"] = ["http://schema.org/Product", "Thing"]
    assert extract(ld(data))[0]["product:price"] == "3"


def test_microdata_product():
    html = """<html><body>
    <div itemscope itemtype="https://schema.org/Product">
      <h1 itemprop="name">  Retro   Lamp </h1>
      <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
        <span itemprop="priceCurrency" content="USD">$</span><span itemprop="price" content="49.00">49</span>
        <link itemprop="availability" href="https://schema.org/PreOrder">Pre-order
      </div>
    </div>
    <div itemscope itemtype="https://schema.org/Product"><span itemprop="name">Other</span></div>
    </body></html>"""
    metadata, problems = extract(html)
    assert problems == []
    assert metadata["product:name"] == "Retro Lamp"
    assert (metadata["product:price"], metadata["product:currency"]) == ("49.00", "USD")
    assert metadata["product:availability"] == "PreOrder"


def test_json_ld_product_comes_before_microdata():
    html = ld(product({"@type": "Offer", "price": "1"})) + (
        '<div itemscope itemtype="http://schema.org/Product"><span itemprop="name">Micro</span></div>'
    )
    assert extract(html)[0]["product:name"] == "Widget 3000"


def test_recipe_ingredients_as_a_json_array():
    data = {
        "@context": "https://schema.org",
        "@type": "Recipe",
        "name": "Pancakes",
        "recipeIngredient": ["2 eggs", " 1 cup\n flour ", "", "a pinch of salt"],
    }
    metadata, _ = extract(ld(data))
    assert json.loads(metadata["recipe:ingredients"]) == ["2 eggs", "1 cup flour", "a pinch of salt"]


def test_recipe_ingredients_stay_valid_json_when_capped():
    data = {"@type": "Recipe", "recipeIngredient": [f'ingredient "{i}" ' + "é" * 30 for i in range(100)]}
    metadata, _ = extract(ld(data), max_field_length=200)
    ingredients = json.loads(metadata["recipe:ingredients"])
    assert 1 <= len(ingredients) < 100 and ingredients[0].startswith('ingredient "0"')
    long_one = {"@type": "Recipe", "recipeIngredient": ['"' * 500]}
    metadata, _ = extract(ld(long_one), max_field_length=50)
    assert json.loads(metadata["recipe:ingredients"])[0] == '"' * 23


def test_binary_junk():
    junk = bytes(range(256)) * 200 + b"\x89PNG\r\n\x1a\n\x00\x00" * 100
    metadata, problems = extract(junk)
    assert metadata.get("content_type") == "text/html"


def test_empty_and_whitespace_bodies():
    assert extract(b"")[0] == {"charset": "utf-8", "content_type": "text/html"}
    assert extract(b" \n\t ")[1] == []


def test_truncated_html():
    html = '<html lang="en"><head><title>Cut short</title><meta name="description" content="never closed'
    metadata, problems = extract(html)
    assert metadata["title"] == "Cut short" and metadata["language"] == "en"


def test_a_five_megabyte_attribute():
    huge = "word " * (5 * 2**20 // 5)
    html = f'<html><head><title>ok</title><meta name="description" content="{huge}"></head></html>'
    metadata, problems = extract(html, max_bytes=8 * 2**20)
    assert metadata["title"] == "ok" and 995 <= len(metadata["description"]) <= 1000 and problems == []
    metadata, problems = extract(html)  # past the 2 MiB the parser sees: cut, never closed
    assert metadata["title"] == "ok" and problems == ["truncated"]
    metadata, _ = extract(f'<meta property="og:title" content="{"x" * 5 * 2**20}">', max_bytes=8 * 2**20)
    assert metadata["og:title"] == "x" * 1000


def test_invalid_json_ld_costs_only_its_block():
    broken = '<script type="application/ld+json">{"@type": "Product", "name": "Bro</script>'
    html = f"<html><head>{broken}{ld(product({'@type': 'Offer', 'price': '2'}))}<title>T</title></head></html>"
    metadata, problems = extract(html)
    assert problems == ["jsonld"]
    assert metadata["title"] == "T" and metadata["product:price"] == "2"


def test_json_ld_too_deep_or_odd():
    deep = '<script type="application/ld+json">' + "[" * 100_000 + "]" * 100_000 + "</script>"
    scalars = '<script type="application/ld+json">[1, "x", null, {"@type": 5}]</script>'
    lone = '<script type="application/ld+json">{"@type": "Article", "headline": "a\\ud800b\\u0000c"}</script>'
    metadata, problems = extract(f"<html><head><title>T</title>{deep}{scalars}{lone}</head></html>")
    assert problems == ["jsonld"]
    assert metadata["title"] == "T" and metadata["article:headline"] == "abc"


@pytest.mark.parametrize("charset", ["x-bogus", "hex", "rot13", "utf-7", "a" * 300])
def test_unknown_or_unusable_charset_in_the_header(charset):
    body = "<html><head><title>Grüße</title></head></html>".encode()
    metadata, problems = extract(body, {"Content-Type": [f"text/html; charset={charset}"]})
    assert metadata["title"] == "Grüße"
    assert "charset" in problems
    assert metadata["charset"] == charset.lower()[:1000]


def test_unknown_charset_in_meta():
    metadata, problems = extract(b'<meta charset="x-bogus"><title>caf\xc3\xa9</title>', {"Content-Type": ["text/html"]})
    assert metadata["title"] == "café" and metadata["charset"] == "x-bogus" and problems == ["charset"]


@pytest.mark.parametrize("bom", [codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE])
def test_utf16_page_with_bom(bom):
    codec = "utf-16-le" if bom == codecs.BOM_UTF16_LE else "utf-16-be"
    body = bom + '<html lang="ja"><head><title>日本語のページ</title></head></html>'.encode(codec)
    metadata, problems = extract(body, {"Content-Type": ["text/html; charset=utf-8"]})
    assert metadata["title"] == "日本語のページ" and metadata["language"] == "ja"
    assert metadata["charset"] == codec and problems == []


def test_ten_thousand_nested_divs():
    html = "<html><head><title>Deep</title></head><body>" + "<div>" * 10_000 + "x" + "</div>" * 10_000 + "</body>"
    metadata, problems = extract(html)
    assert metadata["title"] == "Deep"
    assert problems == ["parse_incomplete"]  # libxml2 stops at depth 256: the head is read


def test_nested_itemscopes():
    html = (
        '<html><head><title>Scopes</title></head><body><div itemscope itemtype="http://schema.org/Product">'
        + '<div itemprop="isRelatedTo" itemscope itemtype="http://schema.org/Product">' * 240
        + '<span itemprop="name">inner</span>'
        + "</div>" * 241
        + "</body></html>"
    )
    metadata, problems = extract(html)
    assert metadata["title"] == "Scopes" and problems == ["microdata_too_large"]


def test_a_microdata_scope_too_large_for_extruct_is_skipped():
    offer = (
        '<div itemprop="offers" itemscope itemtype="http://schema.org/Offer"><meta itemprop="price" content="1"></div>'
    )
    scope = '<div itemscope itemtype="http://schema.org/Product"><span itemprop="name">Many</span>{}</div>'
    metadata, problems = extract(scope.format(offer * 3000))  # extruct alone: seconds (quadratic XPaths)
    assert "product:name" not in metadata and problems == ["microdata_too_large"]
    metadata, problems = extract(ld(product({"price": "4"})) + scope.format(offer * 3000))
    assert metadata["product:price"] == "4"
    metadata, problems = extract(scope.format(offer * 100))
    assert metadata["product:name"] == "Many" and problems == []


def test_a_large_broken_json_ld_block():
    block = '<script type="application/ld+json">{"@type": "Product", "name": "' + "x" * 500_000 + '", }}</script>'
    metadata, problems = extract(f"<title>T</title>{block}{ld(product({'price': '8'}))}")
    assert problems == ["jsonld"] and metadata["product:price"] == "8"


def test_control_characters_and_whitespace_runs():
    html = "<title>a\x01b\x0bc\x1f" + " " * 100_000 + "d\u00a0\u00a0e \x7f f\x08</title>"
    assert extract(html)[0]["title"] == "ab c d e f"


def test_field_caps():
    html = (
        '<html lang="en"><title>' + "t" * 5000 + '</title><meta name="description" content="d">'
        '<meta property="og:title" content="o"><meta name="twitter:card" content="c"></html>'
    )
    metadata, _ = extract(html, max_field_length=10, max_fields=3)
    assert metadata == {"title": "t" * 10, "description": "d", "language": "en"}


def test_urls_longer_than_the_field_cap_are_dropped_not_cut():
    long_path = "/p/" + "a" * 200
    html = f'<link rel="canonical" href="{long_path}"><meta property="og:image" content="{long_path}.jpg">'
    metadata, problems = extract(html, max_field_length=100)
    assert "canonical" not in metadata and "og:image" not in metadata and problems == ["canonical"]


def test_any_input_type_never_raises():
    for body, headers in [(None, None), ("<title>str body</title>", {b"content-type": [b"text/html"]}), (42, 42)]:
        metadata, problems = extract_metadata(body, None, headers)
        assert_flat(metadata)
    assert extract_metadata("<title>str body</title>", URL, {})[0]["title"] == "str body"


@pytest.mark.parametrize(
    "headers, body, expected",
    [
        ({"Content-Type": ["text/html; charset=utf-8"]}, b"anything", True),
        ({"content-type": ["application/xhtml+xml"]}, b"<html/>", True),
        ({"Content-Type": ["application/pdf"]}, b"<html>", False),
        ({"Content-Type": ["text/plain"]}, b"<html>", False),
        ({}, b"  \n<!DOCTYPE html><html>", True),
        ({}, b"\xef\xbb\xbf<html><head>", True),
        ({}, codecs.BOM_UTF16_LE + "<html>".encode("utf-16-le"), True),
        ({}, b"<!-- comment --><p>x", True),
        ({}, b"%PDF-1.7\n<html>", False),
        ({}, b"<?xml version='1.0'?><rss>", False),
        ({}, b"", False),
    ],
)
def test_is_html(headers, body, expected):
    assert is_html(headers, body) is expected
