"""Tests for crawler.urls: table of rules, error cases and hypothesis properties.

Here: the unit tests (pure: no service, no process); the others of this subject:
tests/integration/test_urls.py."""

from __future__ import annotations

import doctest
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crawler import urls
from crawler.urls import DEFAULT_STRIP_PARAMS, InvalidURL, normalize_url, url_host

INVALID = [
    "",
    "   ",
    "example.com",
    "www.example.com/a",
    "//example.com/a",
    "/relative/path",
    "a/b?c",
    "javascript:alert(1)",
    "mailto:someone@example.com",
    "data:text/plain,hello",
    "ftp://example.com/",
    "file:///etc/passwd",
    "ws://example.com/",
    "http://",
    "http:///path",
    "http:example.com",
    "http:/example.com",
    "http://./",
    "http://a..b/",
    "http://exa mple.com/",
    "http://exa_mple!.com/",
    "http://ex%61mple.com/",
    "http://" + "a" * 64 + ".com/",
    "http://example.com:0/",
    "http://example.com:65536/",
    "http://example.com:-1/",
    "http://example.com:http/",
    "http://example.com:８０/",
    "http://[::1/",
    "http://[1.2.3.4]/",
    "http://[v1.x]/",
    "http://[fe80::1%25eth0]/",
    "http://a\u2100b.com/",
    "http://example.com/\ud800",
    "\x00http://example.com/",
]


@pytest.mark.parametrize("raw", INVALID)
def test_invalid(raw: str) -> None:
    with pytest.raises(InvalidURL):
        normalize_url(raw)


@pytest.mark.parametrize("raw", [None, b"http://example.com/", 42, ["http://x/"]])
def test_non_str_is_invalid(raw: object) -> None:
    with pytest.raises(InvalidURL):
        normalize_url(raw)  # type: ignore[arg-type]


def test_error_message_is_truncated() -> None:
    with pytest.raises(InvalidURL) as info:
        normalize_url("ftp://" + "x" * 10_000)
    assert len(str(info.value)) < 300


def test_custom_strip_params_and_no_sort() -> None:
    url = "http://example.com/p;Tok=1?z=1&Tok=2&tok_a=3&utm_source=4&a=5"
    assert (
        normalize_url(url, strip_params=("tok", "tok_*"), sort_query=False)
        == "http://example.com/p?z=1&utm_source=4&a=5"
    )
    assert normalize_url(url, strip_params=()) == ("http://example.com/p;Tok=1?Tok=2&a=5&tok_a=3&utm_source=4&z=1")
    assert normalize_url(url, strip_params=None, sort_query=False) == (
        "http://example.com/p;Tok=1?z=1&Tok=2&tok_a=3&utm_source=4&a=5"
    )
    assert normalize_url(url, strip_params="utm_*") == ("http://example.com/p;Tok=1?Tok=2&a=5&tok_a=3&z=1")


def test_default_strip_params_shape() -> None:
    assert "utm_*" in DEFAULT_STRIP_PARAMS
    for name in ("gclid", "fbclid", "jsessionid", "phpsessid", "_ga"):
        assert name in DEFAULT_STRIP_PARAMS
    assert "sid" not in DEFAULT_STRIP_PARAMS  # (a story's id on PHP-Nuke and Slashdot sites)
    assert all(p == p.lower() for p in DEFAULT_STRIP_PARAMS)


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://example.com/", "example.com"),
        ("https://user@xn--bcher-kva.de:8443/x", "xn--bcher-kva.de"),
        ("http://[2001:db8::1]:8080/", "2001:db8::1"),
        ("http://Example.COM./", "example.com"),
        ("http://bücher.de/", "xn--bcher-kva.de"),
    ],
)
def test_url_host(url: str, host: str) -> None:
    assert url_host(url) == host


_AUTHORITY_PIECES = st.sampled_from(
    ["a", "b", "Z", "0", "9", "-", "_", ".", ":", "@", "[", "]", "/", "?", "#", "%", " ", "\t", "é", "8080", "xn--"]
)


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(scheme=st.sampled_from(["http://", "https://", "ftp://", "http:/", ""]), pieces=st.lists(_AUTHORITY_PIECES))
@example(scheme="http://", pieces=["a", ".", "b", ":", "80", "@", "c"])
@example(scheme="http://", pieces=["a", ".", "b", ".", "/"])
@example(scheme="https://", pieces=["1", "2", "7", ".", "0", ":", "99999", "9"])
@example(scheme="http://", pieces=["a", ":", "0", "8", "0"])
def test_url_host_and_port_read_by_slicing_are_urlsplits(scheme: str, pieces: list[str]) -> None:
    # the sliced read of a plain authority (urls._PLAIN_AUTHORITY) gives what the full parse
    # gives for every URL, plain or not
    url = scheme + "".join(pieces) + "/p?q=1"
    try:
        host = url_host(url)
    except InvalidURL:
        assert urls._PLAIN_AUTHORITY.match(url) is None
        return
    parsed = urlsplit(url)
    if urls._PLAIN_AUTHORITY.match(url):
        assert host == parsed.hostname
        written = parsed.netloc.rpartition(":")[2] if ":" in parsed.netloc else ""
        assert urls.url_authority(url) == (host, written)
    else:
        assert urls.url_authority(url)[0] == host


@pytest.mark.parametrize("url", ["", "/path", "http:///x", "mailto:a@b", "http://[::1/"])
def test_url_host_invalid(url: str) -> None:
    with pytest.raises(InvalidURL):
        url_host(url)


def test_the_rules_examples() -> None:
    # the rules and their examples: docs/URL_NORMALIZATION.md (and any left in the module)
    result = doctest.testfile(
        str(Path(__file__).resolve().parents[2] / "docs" / "URL_NORMALIZATION.md"),
        module_relative=False,
        optionflags=doctest.ELLIPSIS,
    )
    assert result.attempted > 10
    assert result.failed == 0
    assert doctest.testmod(urls, optionflags=doctest.ELLIPSIS).failed == 0


_exact = {p for p in DEFAULT_STRIP_PARAMS if not p.endswith("*")}

_prefixes = tuple(p[:-1] for p in DEFAULT_STRIP_PARAMS if p.endswith("*"))


def _is_tracking(name: str) -> bool:
    name = name.lower()
    return name in _exact or name.startswith(_prefixes)


schemes = st.sampled_from(["http", "https", "HTTP", "HtTpS", "ftp"])

separators = st.sampled_from(["://", "://", "://", ":/", ":", ":\\\\", "://@"])

userinfos = st.sampled_from(["", "", "", "user@", "u:p@", "@", "a%41:b%zz@", "é@"])

hosts = st.one_of(
    st.sampled_from(
        [
            "example.com",
            "Example.COM.",
            "WWW.example.co.uk",
            "bücher.de",
            "BÜCHER.DE.",
            "xn--bcher-kva.de",
            "ｅｘａｍｐｌｅ.com",
            "127.0.0.1",
            "[::1]",
            "[2001:DB8:0:0::1]",
            "[::ffff:1.2.3.4]",
            "[v1.x]",
            "a..b",
            "",
            "exa mple.com",
            "my_host.local",
            "☃.net",
            "ex%61mple.com",
        ]
    ),
    st.from_regex(r"[A-Za-z0-9-]{1,12}(\.[A-Za-z0-9-]{1,12}){0,3}\.?", fullmatch=True),
    st.text(min_size=1, max_size=12),
)

ports = st.one_of(
    st.just(""),
    st.integers(min_value=-1, max_value=70_000).map(lambda p: f":{p}"),
    st.sampled_from([":", ":80", ":443", ":0080", ":abc", ":８０"]),
)

path_segments = st.one_of(
    st.sampled_from(
        [
            ".",
            "..",
            "%2e",
            "%2E%2e",
            ".%2E",
            "a",
            "B",
            "%7e",
            "%41",
            "%2f",
            "%2F",
            "%zz",
            "%",
            "%e9",
            "é",
            " ",
            "a b",
            ";jsessionid=1",
            "x;SID=2;k=v",
            "..;jsessionid=x",
            "",
            "[",
            "|",
            "~",
            "+",
            "%3B",
            "\\",
            "a?b",
            "a#b",
        ]
    ),
    st.text(max_size=6),
)

paths = st.lists(path_segments, max_size=6).map(lambda s: "/" + "/".join(s))

param_names = st.one_of(
    st.sampled_from(
        [
            "utm_source",
            "UTM_Medium",
            "utm_",
            "gclid",
            "FbClId",
            "%75tm_x",
            "sid",
            "jsessionid",
            "aspsessionidXY",
            "a",
            "b",
            "A",
            "",
            "q",
            "x y",
            "é",
            "%41",
            "a%3D",
        ]
    ),
    st.text(max_size=5),
)

params = st.tuples(param_names, st.sampled_from(["=", "=", ""]), st.text(max_size=5)).map("".join)

queries = st.one_of(
    st.just(""),
    st.just("?"),
    st.lists(params, max_size=6).map(lambda ps: "?" + "&".join(ps)),
)

fragments = st.one_of(st.just(""), st.text(max_size=6).map(lambda f: "#" + f))

url_like = st.tuples(
    st.sampled_from(["", "", " ", "\t\n"]),
    schemes,
    separators,
    userinfos,
    hosts,
    ports,
    paths,
    queries,
    fragments,
    st.sampled_from(["", "", " ", "\n"]),
).map("".join)

any_input = st.one_of(url_like, st.text(), st.text().map(lambda t: "http://" + t))

property_settings = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _try(raw: str) -> str | None:
    try:
        result = normalize_url(raw)
    except InvalidURL:
        return None
    assert isinstance(result, str)
    return result


@property_settings
@given(st.one_of(st.text(), url_like))
@example("http://[v1.x]/")
@example("http://example.com/a/..;jsessionid=1/%2e%2e/b?&&utm_a=1#x")
def test_only_invalidurl_is_raised(raw: str) -> None:
    _try(raw)  # any exception other than InvalidURL fails the test


@property_settings
@given(any_input)
@example("http://BÜCHER.de.:0443/%7e/a/./../b;SID=1?b=2&a=%zz&UTM_x=1#f")
def test_idempotent(raw: str) -> None:
    once = _try(raw)
    if once is not None:
        assert normalize_url(once) == once
        assert normalize_url(once, sort_query=False) == once


@property_settings
@given(any_input)
def test_result_shape(raw: str) -> None:
    result = _try(raw)
    if result is None:
        return
    assert result.startswith(("http://", "https://"))
    assert "#" not in result
    assert result.isascii()
    assert not any(c.isspace() for c in result)
    parts = urlsplit(result)
    assert parts.scheme in ("http", "https")
    assert parts.path.startswith("/")
    assert not parts.fragment
    assert url_host(result) == url_host(result).lower()
    if parts.query:
        fields = parts.query.split("&")
        assert "" not in fields
        names = [field.partition("=")[0] for field in fields]
        assert not any(_is_tracking(name) for name in names)
        assert names == sorted(names)
    for segment in parts.path.split("/"):
        for param in segment.split(";")[1:]:
            assert not _is_tracking(param.partition("=")[0])
        assert segment not in (".", "..")


_plain_label = st.from_regex(r"[a-z0-9_](?:[a-z0-9_-]{0,8}[a-z0-9_])?", fullmatch=True)

_plain_path = st.from_regex(r"(/[A-Za-z0-9._~!$'()*+,=:@/-]{0,12}){0,4}", fullmatch=True)

_plain_query = st.from_regex(r"[A-Za-z0-9._~!$()*+,=:@/?&-]{0,30}", fullmatch=True)

_plain_fragment = st.from_regex(r"[!-~]{0,20}", fullmatch=True)


def _in_some_case(text: str, upper: list[bool]) -> str:
    return "".join(c.upper() if up else c for c, up in zip(text, upper + [False] * len(text)))


@settings(max_examples=400, deadline=None)
@given(
    scheme=st.sampled_from(["http", "https"]),
    labels=st.lists(_plain_label, min_size=1, max_size=4),
    port=st.one_of(st.none(), st.integers(0, 70000)),
    path=_plain_path,
    query=st.one_of(st.none(), _plain_query),
    fragment=st.one_of(st.none(), _plain_fragment),
    upper=st.lists(st.booleans(), max_size=60),
)
def test_plain_fast_path_matches_full_path(scheme, labels, port, path, query, fragment, upper):
    # the scheme and host in any case (HTTPS://WWW.Example.COM/)
    authority = _in_some_case(f"{scheme}://{'.'.join(labels)}", upper)
    url = authority + (f":{port}" if port is not None else "") + path
    if query is not None:
        url += "?" + query
    if fragment is not None:
        url += "#" + fragment
    matcher = urls._strip_matcher(urls.DEFAULT_STRIP_PARAMS)
    try:
        full = urls._normalize_parsed(url, url, matcher, True)
    except Exception:
        full = None
    try:
        fast = urls.normalize_url(url)
    except urls.InvalidURL:
        fast = None
    assert fast == full


def _outcome(normalize, raw):
    try:
        return normalize(raw)
    except InvalidURL as exc:
        return ("invalid", str(exc))


@property_settings
@given(any_input, st.sampled_from([DEFAULT_STRIP_PARAMS, (), ("ref", "utm_*")]), st.booleans())
@example("HTTPS://WWW.A.Example/x/?utm_source=1&b=2&a=1#f", DEFAULT_STRIP_PARAMS, True)
@example("http://a.example", (), False)
def test_a_normalizer_is_normalize_url_with_its_options(raw, strip, sort_query) -> None:
    normalize = urls.normalizer(strip, sort_query)
    assert _outcome(normalize, raw) == _outcome(
        lambda u: normalize_url(u, strip_params=strip, sort_query=sort_query), raw
    )
    for bad in (None, b"http://a.example/"):
        assert _outcome(normalize, bad) == _outcome(normalize_url, bad)
