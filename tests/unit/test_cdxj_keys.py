"""The CDXJ index's SURT keys (crawler/urls.py ``url_key``, the CDXJ index's) against the ``surt``
package, which cdxj-indexer and pywb key by: a plain URL keyed without it must get the key
``surt`` gives, for every URL; the others go to ``surt`` itself."""

from __future__ import annotations

import socket

import pytest
import surt
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.archive import cdxj
from testing.servers import local_resolver


def surt_key(url: str) -> str:
    try:
        return surt.surt(url)
    except Exception:
        return url


@pytest.fixture(autouse=True)
def no_resolver(monkeypatch):
    """surt asks the system's resolver for a host of numbers and dots: answered here as
    the resolver answers an address it can read (inet_aton), and refused otherwise, so that
    no name lookup leaves the machine."""

    monkeypatch.setattr(socket, "gethostbyname_ex", local_resolver)


LABEL = st.text("abcxyzXYZ0129-", min_size=1, max_size=6)
HOST = st.one_of(
    st.lists(LABEL, min_size=1, max_size=4).map(".".join),
    st.sampled_from(["www", "www2", "wwwx", "WWW", "ww"]).flatmap(
        lambda w: st.lists(LABEL, min_size=1, max_size=3).map(lambda labels: ".".join([w, *labels]))
    ),
    st.lists(st.integers(0, 300).map(str), min_size=1, max_size=5).map(".".join),  # addresses, and not quite
    st.lists(st.sampled_from(["0", "00", "010", "255", "256", "1"]), min_size=4, max_size=4).map(".".join),
    st.sampled_from(["http", "https", "example.com.", "a..b", "xn--bcher-kva.example", "Ex.COM", "b\u00fccher.de"]),
)
PORT = st.one_of(
    st.just(""), st.sampled_from([":80", ":443", ":8080", ":0", ":080", ":65535", ":65536", ":99999", ":"])
)
SEGMENT = st.one_of(
    st.text("abcXYZ019._~-", min_size=0, max_size=6),
    st.sampled_from(
        [".", "..", "", ".well-known", "a;jsessionid=0123456789abcdef0123456789abcdef", "%41b", "a b", "\u00e9", "(x)"]
    ),
)
PATH = st.lists(SEGMENT, max_size=5).map(lambda parts: "".join("/" + p for p in parts))
TAIL = st.sampled_from(["", "", "", "?", "?b=2&a=1", "#frag", "?q=1#f", "/"])


@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(["http", "https", "HTTP", "ftp"]), HOST, PORT, PATH, TAIL)
def test_every_url_gets_the_key_surt_gives(scheme, host, port, path, tail):
    url = f"{scheme}://{host}{port}{path}{tail}"
    assert cdxj.url_key(url) == surt_key(url)


def test_plain_urls_of_a_crawl_are_keyed_without_surt(monkeypatch):
    urls = [
        "http://docs.python.org/3.11/library/asyncio.html",
        "https://www.example.com/A/B/",
        "http://www2.example.org:8080/",
        "http://example.com",
        "https://example.com:443/x",
        "http://sub.example.co.uk/a-b_c~d/e.f",
        "http://127.0.0.4/core/cell/struct.BorrowMutError.html",
        "http://10.0.255.1:8000/",
    ]
    expected = [surt_key(u) for u in urls]
    assert expected[1] == "com,example)/a/b" and expected[2] == "org,example:8080)/"

    def refused(url, *args, **kwargs):
        raise AssertionError(f"surt called for {url}")

    monkeypatch.setattr(surt, "surt", refused)
    assert [cdxj.url_key(u) for u in urls] == expected


def test_urls_surt_cannot_read_are_their_own_key():
    assert cdxj.url_key("http://example.com:99999/") == "http://example.com:99999/"
