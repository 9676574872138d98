"""The one URL normalizer used everywhere (seeds, extracted links, frontier keys,
store look-ups).

``normalize_url`` turns any http(s) URL into a canonical string so that two
spellings of the same resource compare equal. It is built on
:func:`w3lib.url.safe_url_string` (percent-encoding of unsafe characters, IDNA,
port parsing) and :func:`urllib.parse.urlsplit`; everything else is small
string work on the already-split components.

The rules, each with its examples, are docs/URL_NORMALIZATION.md (doctested by
tests/*/test_urls.py).
"""

from __future__ import annotations

import functools
import ipaddress
import operator
import re
import string
from collections.abc import Iterable
from urllib.parse import urlsplit

import idna
import surt
from w3lib.url import parse_url, safe_url_string

__all__ = ["DEFAULT_STRIP_PARAMS", "InvalidURL", "normalize_url", "normalizer", "url_host"]


class InvalidURL(ValueError):
    """The one error normalize_url raises for input it cannot turn into an
    http(s) URL."""


DEFAULT_STRIP_PARAMS: tuple[str, ...] = (
    # campaign / analytics tagging
    "utm_*",
    "mtm_*",
    "hsa_*",
    "pk_campaign",
    "pk_kwd",
    "pk_source",
    "pk_medium",
    "pk_content",
    "_ga",
    "_gl",
    "_hsenc",
    "_hsmi",
    "__hssc",
    "__hstc",
    "__hsfp",
    "_openstat",
    "mc_cid",
    "mc_eid",
    "mkt_tok",
    "vero_id",
    "vero_conv",
    "oly_anon_id",
    "oly_enc_id",
    "wickedid",
    "s_kwcid",
    "ef_id",
    # ad click identifiers
    "gclid",
    "gclsrc",
    "gbraid",
    "wbraid",
    "dclid",
    "fbclid",
    "msclkid",
    "yclid",
    "ymclid",
    "twclid",
    "ttclid",
    "li_fat_id",
    "igshid",
    # session identifiers
    "jsessionid",
    "phpsessid",
    # (not "sid": a story's id on PHP-Nuke and Slashdot sites, each story a page of its own)
    "sessionid",
    "session_id",
    "aspsessionid*",
    "cfid",
    "cftoken",
)

_ALLOWED_SCHEMES = {"http": 80, "https": 443}

_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
_HEX = "0123456789abcdefABCDEF"


def _build_pct_map() -> dict[str, str]:
    table = {"%": "%25"}  # a lone "%" that does not start a valid escape
    for hi in _HEX:
        for lo in _HEX:
            char = chr(int(hi + lo, 16))
            table[f"%{hi}{lo}"] = char if char in _UNRESERVED else f"%{hi}{lo}".upper()
    return table


_PCT_MAP = _build_pct_map()
_PCT_RE = re.compile(r"%(?:[0-9A-Fa-f]{2})?")

# Host names: letters, digits, "-" and "_" (seen in real sub-domains), labels of
# 1..63 characters. Matched against the lowercased, IDNA-encoded host.
_HOST_RE = re.compile(r"(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}")

_TRUNCATE = 200


def _pct_replace(match: re.Match[str]) -> str:
    return _PCT_MAP[match[0]]


def _normalize_escapes(text: str) -> str:
    return _PCT_RE.sub(_pct_replace, text) if "%" in text else text


@functools.lru_cache(maxsize=32)
def _compile_strip(params: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    exact = frozenset(p.lower() for p in params if not p.endswith("*"))
    prefixes = tuple(p[:-1].lower() for p in params if p.endswith("*"))
    return exact, prefixes


def _strip_matcher(
    strip_params: Iterable[str] | str | None,
) -> tuple[frozenset[str], tuple[str, ...]] | None:
    if strip_params is DEFAULT_STRIP_PARAMS:
        return _DEFAULT_MATCHER
    if not strip_params:
        return None
    if isinstance(strip_params, str):
        strip_params = (strip_params,)
    compiled = _compile_strip(tuple(strip_params))
    return compiled if compiled[0] or compiled[1] else None


_DEFAULT_MATCHER = _compile_strip(DEFAULT_STRIP_PARAMS)


def _is_stripped(name: str, exact: frozenset[str], prefixes: tuple[str, ...]) -> bool:
    name = name.lower()
    return name in exact or name.startswith(prefixes)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for a path that starts with "/"."""
    if "/." not in path:
        return path
    segments = path.split("/")[1:]
    output: list[str] = []
    for segment in segments[:-1]:
        if segment == "..":
            if output:
                output.pop()
        elif segment != ".":
            output.append(segment)
    last = segments[-1]
    if last == "..":
        if output:
            output.pop()
        output.append("")
    elif last == ".":
        output.append("")
    else:
        output.append(last)
    return "/" + "/".join(output)


def _strip_path_params(path: str, exact: frozenset[str], prefixes: tuple[str, ...]) -> str:
    segments = path.split("/")
    for index, segment in enumerate(segments):
        if ";" not in segment:
            continue
        base, *params = segment.split(";")
        kept = [p for p in params if not _is_stripped(p.partition("=")[0], exact, prefixes)]
        segments[index] = ";".join([base, *kept])
    return "/".join(segments)


_first = operator.itemgetter(0)


def _short(url: str) -> str:
    text = repr(url)
    return text if len(text) <= _TRUNCATE else text[:_TRUNCATE] + "..."


def _normalize_host(hostname: str | None, url: str) -> str:
    if not hostname:
        raise InvalidURL(f"empty host in URL: {_short(url)}")
    if ":" in hostname:  # IPv6 literal (urlsplit removed the brackets)
        if "%" in hostname:
            raise InvalidURL(f"IPv6 zone id in URL: {_short(url)}")
        try:
            address = ipaddress.IPv6Address(hostname)
        except ValueError:
            raise InvalidURL(f"invalid IPv6 host in URL: {_short(url)}") from None
        return f"[{address.compressed}]"
    host = hostname.rstrip(".")
    if len(host) > 253 or not _HOST_RE.fullmatch(host):
        raise InvalidURL(f"invalid host in URL: {_short(url)}")
    return host


# URLs already in plain form (ASCII scheme and host, in any case, the host with no "--";
# only characters that need no escaping, a fragment, which is dropped, of printable ASCII)
# skip w3lib's parse; the rest of the rules still apply (the scheme and host lowercased, as
# urlsplit gives them to the full path). The fast and full paths give the same result
# (tests/*/test_urls.py checks it).
_PLAIN_RE = re.compile(
    r"([Hh][Tt][Tt][Pp][Ss]?)://"
    r"((?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)"
    r"(?::([0-9]{1,5}))?(/[A-Za-z0-9._~!$'()*+,=:@/-]*)?(?:\?([A-Za-z0-9._~!$()*+,=:@/?&-]*))?(?:#[!-~]*)?"
)


def _split_plain(text: str):
    """(scheme, netloc, path, query) of a plain URL, or None to take the full path."""
    m = _PLAIN_RE.fullmatch(text)
    if m is None:
        return None
    scheme, host, port, path, query = m.groups()
    if "--" in host or len(host) > 253:
        return None
    scheme, host = scheme.lower(), host.lower()
    if port is not None:
        number = int(port)
        if not 0 < number < 65536:
            return None
        if number != _ALLOWED_SCHEMES[scheme]:
            host = f"{host}:{number}"
    if not path:
        path = "/"
    elif "/." in path:
        path = _remove_dot_segments(path)
    return scheme, host, path, query


def _normalize(url: str, matcher: tuple[frozenset[str], tuple[str, ...]] | None, sort_query: bool) -> str:
    text = url.strip()
    plain = _split_plain(text)
    if plain is not None:
        scheme, netloc, path, query = plain
        return _finish(scheme, netloc, path, query, matcher, sort_query)
    return _normalize_parsed(text, url, matcher, sort_query)


# The characters IDNA 2003 (Python's codec, w3lib's) maps away and UTS 46 without its
# transitional mappings keeps, as browsers and IDNA 2008 do: faß.de is not fass.de, another
# domain (and another server) since registries took ß
_DEVIATIONS = frozenset("\u00df\u03c2\u200c\u200d")


def ascii_host(host: str) -> str:
    """An internationalized host name in ASCII: punycode by UTS 46 without transitional
    mappings for a name with a deviation character (ß, ς, ZWJ, ZWNJ), else by IDNA 2003 as
    w3lib encodes it (its NFKC folds fullwidth letters); a name neither takes raises
    UnicodeError (idna.IDNAError is one)."""
    if not _DEVIATIONS.isdisjoint(host):
        return idna.encode(host, uts46=True, transitional=False).decode("ascii")
    return host.encode("idna").decode("ascii")


def _deviant_host(text: str) -> str:
    """``text`` with its host in ASCII (ascii_host) when the host holds a deviation
    character, which w3lib's IDNA 2003 would map away; as it was otherwise."""
    parts = urlsplit(text)
    host = parts.hostname
    if not host or _DEVIATIONS.isdisjoint(host):
        return text
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not hostport.lower().startswith(host):
        return text
    try:
        encoded = ascii_host(host)
    except UnicodeError:  # (not a name UTS 46 takes: w3lib's IDNA 2003 decides)
        return text
    netloc = f"{userinfo}{at}{encoded}{hostport[len(host) :]}"
    return parts._replace(netloc=netloc).geturl()


def _normalize_parsed(text: str, url: str, matcher, sort_query: bool) -> str:
    """The full path: parse and escape with w3lib."""
    head = text[:6].lower()
    if not (head.startswith("http:") or head == "https:"):
        raise InvalidURL(f"not an http(s) URL: {_short(url)}")
    if not _DEVIATIONS.isdisjoint(text):
        text = _deviant_host(text)

    if "[" in text:
        # w3lib drops the brackets of an IPvFuture literal ("[v1.x]" -> "v1.x"),
        # which would turn it into a different, ordinary host name.
        original = parse_url(text)
        if "[" in original.netloc and ":" not in (original.hostname or ""):
            raise InvalidURL(f"invalid bracketed host in URL: {_short(url)}")

    safe = safe_url_string(text)
    parts = urlsplit(safe)
    scheme = parts.scheme
    default_port = _ALLOWED_SCHEMES.get(scheme)
    if default_port is None:
        raise InvalidURL(f"not an http(s) URL: {_short(url)}")

    # --- authority
    host = _normalize_host(parts.hostname, url)
    port = parts.port  # ValueError for a bad port
    if port is not None and not 0 < port < 65536:
        raise InvalidURL(f"invalid port in URL: {_short(url)}")
    userinfo, at, _ = parts.netloc.rpartition("@")
    netloc = f"{userinfo}@{host}" if at and userinfo else host
    if port is not None and port != default_port:
        netloc = f"{netloc}:{port}"

    # --- path: escapes, then path parameters, then dot segments
    path = _normalize_escapes(parts.path) or "/"
    if matcher is not None and ";" in path:
        path = _strip_path_params(path, *matcher)
    path = _remove_dot_segments(path)
    query = parts.query
    return _finish(scheme, netloc, path, _normalize_escapes(query) if query else query, matcher, sort_query)


def _finish(scheme, netloc, path, query, matcher, sort_query) -> str:
    # --- query: drop empty fields, strip, sort by name (stable)
    if query:
        exact, prefixes = matcher or (frozenset(), ())
        fields: list[tuple[str, str]] = []
        for field in query.split("&"):
            if field:
                name = field.partition("=")[0]
                lname = name.lower()
                if lname not in exact and not lname.startswith(prefixes):
                    fields.append((name, field))
        if fields:
            if sort_query and len(fields) > 1:
                fields.sort(key=_first)  # list.sort is stable: equal names keep order
            query = "&".join([field for _, field in fields])
            return f"{scheme}://{netloc}{path}?{query}"
    return f"{scheme}://{netloc}{path}"


def normalize_url(
    url: str,
    *,
    strip_params: Iterable[str] | None = DEFAULT_STRIP_PARAMS,
    sort_query: bool = True,
) -> str:
    """Return the canonical form of the http(s) URL *url* (see module docstring).

    *strip_params* lists query / path parameter names to remove
    (case-insensitive; a trailing ``*`` makes an entry a prefix); pass ``()``
    to keep every parameter. Raises :class:`InvalidURL` for anything that is
    not a usable http(s) URL, and never raises anything else for a ``str``.
    """
    if not isinstance(url, str):
        raise InvalidURL(f"URL must be str, not {type(url).__name__}")
    matcher = _strip_matcher(strip_params)
    try:
        return _normalize(url, matcher, sort_query)
    except InvalidURL:
        raise
    except Exception as exc:  # w3lib / urllib / idna / codecs on bad input
        detail = str(exc)[:_TRUNCATE]
        raise InvalidURL(f"cannot normalize URL {_short(url)}: {detail}") from exc


def normalizer(strip_params: Iterable[str] | None = DEFAULT_STRIP_PARAMS, sort_query: bool = True):
    """``normalize_url`` with these options, as a function of the URL alone (the options
    read once: for many URLs)."""
    matcher = _strip_matcher(strip_params)
    split_plain, finish = _split_plain, _finish

    def normalize(url: str) -> str:
        if type(url) is str:
            try:
                text = url.strip()
                plain = split_plain(text)
                if plain is not None:
                    scheme, netloc, path, query = plain
                    if not query:  # (what _finish gives it)
                        return f"{scheme}://{netloc}{path}"
                    return finish(scheme, netloc, path, query, matcher, sort_query)
            except Exception:  # (as normalize_url says it)
                pass
        return normalize_url(url, strip_params=strip_params, sort_query=sort_query)

    return normalize


def url_options(settings) -> dict:
    """normalize_url's keyword arguments from the crawl's settings: URL_STRIP_PARAMS
    (empty: the built-in list) and URL_SORT_QUERY. Seed ingestion takes the same."""
    strip = tuple(settings.getlist("URL_STRIP_PARAMS")) or DEFAULT_STRIP_PARAMS
    return {"strip_params": strip, "sort_query": settings.getbool("URL_SORT_QUERY")}


def authority_host(authority: str) -> str:
    """The host of ``host[:port]`` (``[v6]:port`` for IPv6), as url_host gives it."""
    if authority.startswith("["):
        return authority[1:].partition("]")[0]
    host, _, port = authority.rpartition(":")
    return host if host and port.isdigit() and ":" not in host else authority


# an http(s) URL whose authority is a lowercase ASCII name or an IPv4 address, with a port
# or none (no user, no IPv6, no trailing dot): most URLs a crawl sees, read in a fraction of
# urlsplit's time
_PLAIN_AUTHORITY = re.compile(r"https?://([a-z0-9_-]+(?:\.[a-z0-9_-]+)*)(?::([0-9]{1,5}))?(?=[/?#]|$)")
#: the match of a URL whose authority is plain (``m[0]``: ``scheme://host[:port]``, ``m[1]``
#: the host as url_host gives it, ``m[2]`` the port or None), or None
plain_authority = _PLAIN_AUTHORITY.match


def url_authority(url: str) -> tuple[str, str]:
    """(host, port or '') of a normalized URL: the host as ``url_host`` gives it, the port
    when one is written (a normalized URL carries no default port). Raises
    :class:`InvalidURL` if the URL has no usable host."""
    plain = _PLAIN_AUTHORITY.match(url) if type(url) is str else None
    if plain is not None:
        return plain[1], plain[2] or ""
    host = url_host(url)
    try:
        port = urlsplit(url).port
    except ValueError:
        port = None
    return host, "" if port is None else str(port)


def url_host(url: str) -> str:
    """Lowercase ASCII host of an (already normalized) URL, without port.

    IPv6 hosts come back without brackets (as ``urlsplit().hostname``).
    Raises :class:`InvalidURL` if the URL has no usable host.
    """
    plain = _PLAIN_AUTHORITY.match(url) if type(url) is str else None
    if plain is not None:
        return plain[1]
    if not isinstance(url, str):
        raise InvalidURL(f"URL must be str, not {type(url).__name__}")
    try:
        host = urlsplit(url).hostname
    except ValueError as exc:
        raise InvalidURL(f"cannot parse URL {_short(url)}: {exc}") from exc
    if host and (host[-1] == "." or not host.isascii()):
        # Not a normalized URL: normalize the host the same way normalize_url does.
        host = urlsplit(normalize_url(url, strip_params=())).hostname
    if not host:
        raise InvalidURL(f"no host in URL: {_short(url)}")
    return host


# -- SURT keys (the CDXJ index's, and the crawl rules' surt prefixes) -------------------


def url_key(url: str) -> str:
    """The SURT key of a URL, as cdxj-indexer computes it with the ``surt`` package (the URL
    itself when SURT cannot read it). A plain URL (http or https; a lowercase host name, or
    an IPv4 address as its four numbers; a port or none; a path of letters, digits and
    ``._~/-``; no query, no fragment: most of what a crawl captures) is keyed here in a few
    microseconds, by the rules ``surt`` applies to it (tests/unit/test_cdxj_keys.py holds the two
    equal); any other goes to ``surt`` (30 us)."""
    key = _plain_key(url)
    if key is not None:
        return key
    try:
        return surt.surt(url)
    except Exception:  # (cdxj-indexer's rule)
        return url


_PLAIN = re.compile(r"(https?)://([a-z0-9-]+(?:\.[a-z0-9-]+)*)(?::([1-9][0-9]{0,4}))?(/[A-Za-z0-9._~/-]*)?")
_WWW = re.compile(r"www\d*\.")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_ADDRESS = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}")  # (surt keeps it as it is, reversed)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _plain_key(url: str) -> str | None:
    match = _PLAIN.fullmatch(url)
    if match is None:
        return None
    scheme, host, port, path = match.groups()
    if host.rsplit(".", 1)[-1].isdigit() and not _ADDRESS.fullmatch(host):  # (surt resolves it)
        return None
    if host in ("http", "https"):  # (a scheme twice: surt drops one)
        return None
    if path and ("//" in path or "/." in path):  # dot segments and empty ones are resolved
        return None
    www = _WWW.match(host)
    if www is not None:
        host = host[www.end() :]
    if port is not None:
        if int(port) > 65535:
            return None
        if int(port) == _DEFAULT_PORTS[scheme]:
            port = None
    path = (path or "/").lower()
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    reversed_host = ",".join(reversed(host.split(".")))
    return f"{reversed_host}:{port}){path}" if port else f"{reversed_host}){path}"
