"""The one header look-up (crawler/page/headers.py) answers as Scrapy's Headers does."""

from hypothesis import given
from hypothesis import strategies as st
from scrapy.http.headers import Headers

from crawler.page.headers import header

NAMES = st.sampled_from(["ETag", "etag", "ETAG", "Last-Modified", "last-modified", "Content-Type", "X-Other"])
VALUES = st.lists(
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=12), min_size=1, max_size=3
)  # (a Page keeps no empty list)


@given(st.dictionaries(NAMES, VALUES, max_size=5), st.sampled_from(["ETag", "last-modified", "CONTENT-TYPE", "X-None"]))
def test_the_look_up_is_scrapys(headers, name):
    expected = Headers(headers, encoding="latin-1").get(name)
    assert header(headers, name) == (None if expected is None else expected.decode("latin-1"))


def test_keys_and_values_as_bytes_too():
    assert header({b"Content-Type": [b"text/html", b"text/plain"]}, "content-type") == "text/plain"
    assert header({"ETag": '"x"'}, "etag") == '"x"' and header(None, "etag") is None
