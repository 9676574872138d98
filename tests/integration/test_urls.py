"""Tests for crawler.urls: table of rules, error cases and hypothesis properties: the tests on
real services in this process (Redis, Cassandra, S3, page processes) (the others:
tests/unit/test_urls.py)."""

from __future__ import annotations

import pytest

from crawler.urls import normalize_url

NORMALIZED = [
    # whitespace, scheme and host case
    ("  http://example.com/a \n", "http://example.com/a"),
    ("HTTP://WWW.EXAMPLE.COM/Path", "http://www.example.com/Path"),
    ("HtTpS://Example.Com", "https://example.com/"),
    # IDNA and trailing dot
    ("http://bücher.de/", "http://xn--bcher-kva.de/"),
    ("http://BÜCHER.de./x", "http://xn--bcher-kva.de/x"),
    ("http://ｅｘａｍｐｌｅ.com/", "http://example.com/"),
    ("http://xn--bcher-kva.de/", "http://xn--bcher-kva.de/"),
    # ß and final sigma are kept, as browsers and IDNA 2008 keep them (IDNA 2003 made faß.de
    # fass.de, another domain): UTS 46 without its transitional mappings
    ("http://faß.de/a", "http://xn--fa-hia.de/a"),
    ("http://user@FAß.de:8080/a", "http://user@xn--fa-hia.de:8080/a"),
    ("http://fass.de/a", "http://fass.de/a"),
    ("http://ελλάς.example/", "http://xn--hxarsa0b.example/"),
    ("http://example.com./", "http://example.com/"),
    ("http://my_host.example.com/", "http://my_host.example.com/"),
    # ports
    ("http://example.com:80/", "http://example.com/"),
    ("https://example.com:443/", "https://example.com/"),
    ("http://example.com:443/", "http://example.com:443/"),
    ("https://example.com:80/", "https://example.com:80/"),
    ("http://example.com:0080/", "http://example.com/"),
    ("http://example.com:8080", "http://example.com:8080/"),
    ("http://example.com:/", "http://example.com/"),
    # userinfo is kept
    ("http://user:pw@Example.com:80/", "http://user:pw@example.com/"),
    ("http://User@example.com/", "http://User@example.com/"),
    ("http://@example.com/", "http://example.com/"),
    # dot segments and empty path
    ("http://example.com/a/./b/../c", "http://example.com/a/c"),
    ("http://example.com/a/b/..", "http://example.com/a/"),
    ("http://example.com/../../a", "http://example.com/a"),
    ("http://example.com/a/%2e%2E/b", "http://example.com/b"),
    ("http://example.com", "http://example.com/"),
    ("http://example.com?x=1", "http://example.com/?x=1"),
    ("http://example.com/a//b/", "http://example.com/a//b/"),
    # percent-encoding
    ("http://example.com/%7euser", "http://example.com/~user"),
    ("http://example.com/%41%62c", "http://example.com/Abc"),
    ("http://example.com/a%2fb", "http://example.com/a%2Fb"),
    ("http://example.com/a b", "http://example.com/a%20b"),
    ("http://example.com/é", "http://example.com/%C3%A9"),
    ("http://example.com/%e9", "http://example.com/%E9"),
    ("http://example.com/100%", "http://example.com/100%25"),
    ("http://example.com/a|b[c]", "http://example.com/a%7Cb%5Bc%5D"),
    ("http://example.com/?q=a b&r=é", "http://example.com/?q=a%20b&r=%C3%A9"),
    ("http://example.com/?q=%7e%3d+x", "http://example.com/?q=~%3D+x"),
    ("http://example.com/?q='x'", "http://example.com/?q=%27x%27"),
    ("http:\\\\example.com\\a\\b", "http://example.com/a/b"),
    # fragment and empty query
    ("http://example.com/a#frag", "http://example.com/a"),
    ("http://example.com/a?", "http://example.com/a"),
    ("http://example.com/a?#x", "http://example.com/a"),
    ("http://example.com/a?&&", "http://example.com/a"),
    ("http://example.com/a?b=1&&a=2", "http://example.com/a?a=2&b=1"),
    # tracking / session parameters
    ("http://example.com/?utm_source=x&utm_medium=y", "http://example.com/"),
    ("http://example.com/?UTM_Source=x&id=3&GCLID=y", "http://example.com/?id=3"),
    ("http://example.com/?fbclid=1&q=a#f", "http://example.com/?q=a"),
    ("http://example.com/?%75tm_x=1&q=a", "http://example.com/?q=a"),
    ("http://example.com/?PHPSESSID=1&sessionid=2", "http://example.com/"),
    ("http://example.com/modules.php?name=News&sid=2", "http://example.com/modules.php?name=News&sid=2"),
    ("http://example.com/?ASPSESSIONIDQQ=1&a=1", "http://example.com/?a=1"),
    ("http://example.com/?utm=keep", "http://example.com/?utm=keep"),
    ("http://example.com/a;jsessionid=ABC?x=1", "http://example.com/a?x=1"),
    ("http://example.com/a;JSESSIONID=ABC;v=2", "http://example.com/a;v=2"),
    ("http://example.com/a;x=1/b", "http://example.com/a;x=1/b"),
    # query sorting
    ("http://example.com/?c=3&b=2&a=1", "http://example.com/?a=1&b=2&c=3"),
    ("http://example.com/?b=2&a=9&a=1", "http://example.com/?a=9&a=1&b=2"),
    ("http://example.com/?a=&b=1", "http://example.com/?a=&b=1"),
    ("http://example.com/?b&a", "http://example.com/?a&b"),
    # IPv4 / IPv6
    ("http://127.0.0.1:80/", "http://127.0.0.1/"),
    ("http://[::1]/", "http://[::1]/"),
    ("http://[2001:DB8:0:0::1]:8080/x", "http://[2001:db8::1]:8080/x"),
    ("https://[FE80::A]:443", "https://[fe80::a]/"),
]


@pytest.mark.parametrize(("raw", "expected"), NORMALIZED)
def test_normalize_table(raw: str, expected: str) -> None:
    assert normalize_url(raw) == expected
    assert normalize_url(expected) == expected
