"""The metadata pipeline: page fields from real HTML (lxml and extruct, nothing mocked),
hostile bodies that must never raise, and the pipeline's pass-through and stats: the tests
on real services in this process (Redis, Cassandra, S3, page processes) (the others:
tests/unit/test_metadata.py)."""

import pytest
import scrapy
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from crawler.pipelines.metadata import MetadataPipeline
from testing.pages import metadata_page as page
from testing.services import project_settings

URL = "https://shop.example.com/dir/page.html"


def assert_flat(metadata, max_length=1000, max_fields=64):
    """What the UrlStore can hold: a flat map of short text, valid UTF-8, no empty value."""
    assert isinstance(metadata, dict) and len(metadata) <= max_fields
    for key, value in metadata.items():
        assert isinstance(key, str) and isinstance(value, str)
        assert 0 < len(value) <= max_length, (key, len(value))
        value.encode("utf-8")  # no lone surrogates
        assert value == value.strip() and "  " not in value and "\n" not in value and "\x00" not in value


def pipeline(**settings):
    crawler = get_crawler(settings_dict=project_settings(**settings))
    return MetadataPipeline.from_crawler(crawler), crawler.stats


PAGE = (
    '<html lang="en"><head><title>Widget</title><link rel="canonical" href="/widget?utm_medium=x">'
    '<meta property="og:title" content="The widget"></head><body>' + "<p>text</p>" * 100 + "</body></html>"
).encode()


def test_pipeline_sets_metadata_canonical_and_stats():
    pipe, stats = pipeline()
    item = pipe.process_now(page(body=PAGE, metadata={"earlier": "kept"}))
    assert item["metadata"] == {
        "earlier": "kept",
        "title": "Widget",
        "language": "en",
        "charset": "utf-8",
        "content_type": "text/html",
        "canonical": "https://shop.example.com/widget",
        "og:title": "The widget",
    }
    assert item["canonical_url"] == "https://shop.example.com/widget"
    assert stats.get_value("metadata/pages") == 1 and stats.get_value("metadata/fields") == 6
    broken = page(
        body=b'<meta charset="x-bogus"><link rel="canonical" href="javascript:x"><title>t</title>',
        headers={"Content-Type": ["text/html"]},
    )
    assert "canonical_url" not in pipe.process_now(broken)
    assert stats.get_value("metadata/errors/charset") == 1 and stats.get_value("metadata/errors/canonical") == 1
    assert stats.get_value("metadata/pages") == 2


def test_pipeline_reads_its_settings():
    pipe, stats = pipeline(METADATA_MAX_FIELD_LENGTH=5, METADATA_MAX_FIELDS=2, METADATA_MAX_BYTES=100)
    item = pipe.process_now(page(body=b"<title>A long title</title>" + b"<p>x</p>" * 100))
    assert item["metadata"] == {"title": "A lon", "charset": "utf-8"}
    assert stats.get_value("metadata/errors/truncated") == 1
    with pytest.raises(NotConfigured):
        pipeline(METADATA_ENABLED=False)


@pytest.mark.parametrize(
    "item",
    [
        page(status=None, error="DNSLookupError: no such host"),
        page(status="robots_disallowed"),
        page(status=404, body=PAGE),
        page(status=301, body=PAGE, headers={"Location": ["/x"]}),
        page(body=b"%PDF-1.4 <html><title>x</title>", headers={"Content-Type": ["application/pdf"]}),
        page(body=b"\x89PNG\r\n\x1a\n", headers={}),
        page(body=None),
    ],
)
def test_pipeline_passes_other_items_through_unchanged(item):
    pipe, stats = pipeline()
    before = dict(item)
    assert pipe.process_now(item) is item
    assert dict(item) == before and "metadata" not in item
    assert stats.get_value("metadata/pages") is None


def test_pipeline_sniffs_html_without_content_type():
    pipe, _ = pipeline()
    assert pipe.process_now(page(body=PAGE, headers={}))["metadata"]["title"] == "Widget"


def test_pipeline_never_raises_on_hostile_pages():
    pipe, stats = pipeline()
    bodies = [
        bytes(range(256)) * 100,
        b"<html>" + b"<div>" * 10_000,
        b'<script type="application/ld+json">{not json</script><title>x</title>',
        b'<meta name="description" content="' + b"A" * (5 * 2**20) + b'">',
    ]
    for body in bodies:
        item = pipe.process_now(page(body=body))
        assert_flat(item["metadata"])
    assert stats.get_value("metadata/pages") == 4
    assert stats.get_value("metadata/errors/jsonld") == 1 and stats.get_value("metadata/errors/truncated") == 1


def test_an_item_class_without_the_fields_is_counted_not_raised():
    class Bare(scrapy.Item):
        url = scrapy.Field()
        status = scrapy.Field()
        headers = scrapy.Field()
        body = scrapy.Field()

    pipe, stats = pipeline()
    item = Bare(url=URL, status=200, headers={"Content-Type": ["text/html"]}, body=PAGE)
    assert pipe.process_now(item) is item
    assert stats.get_value("metadata/errors/undeclared_field") == 1
