"""Turning Scrapy requests into frontier payloads and back.

Most requests of a broad crawl are plain: GET, no body, the spider's default callback
and errback, and nothing in ``meta`` but the depth. They are stored compactly as
``url`` or ``url \\x1f depth \\x1f referer`` (a few dozen bytes), and a forced request
(``meta.FORCE``: a submission's ``--force``, which passes URL-seen and the fetch policy)
as ``url \\x1f depth \\x1f referer \\x1f F``, a submission (``meta.URGENT``: read first)
with ``U`` there (``FU`` both), and a recrawl (``meta.RECRAWL``: a due URL put
back by crawler/freshness/recrawl.py, past URL-seen and the fetch policy, with what its schedule and
its conditional request need) as ``url \\x1f depth \\x1f referer \\x1f R \\x1f {json}``: the
request is rebuilt with If-None-Match / If-Modified-Since from the stored ETag and
Last-Modified. Any other request is stored whole: ``J`` followed by
``Request.to_dict()`` as JSON, bytes as ``{"$b": base64}`` and a mapping with keys that
are not text (headers) as ``{"$m": [[key, value], ...]}``. Nothing read from Redis is
unpickled: a payload there could have been written by anyone who reaches the Redis, and
unpickling runs code. A request whose ``meta`` holds something JSON cannot carry is
refused at ``encode`` (``UnencodableRequest``, naming the key), and a payload that is no
known form (an old pickled one, ``P``) at ``decode`` (``UndecodablePayload``).
"""

from __future__ import annotations

import base64
import json

from scrapy import Request
from scrapy.utils.request import request_from_dict

from crawler import meta
from crawler.frontier.frontier import Entry
from crawler.urls import normalize_url

SEP = "\x1f"
# a recrawl: {"interval", "digest", "etag", "last_modified", "fetched_at"} of the stored record
_PLAIN_META = {
    meta.DEPTH,
    meta.LEASE,
    meta.DUE,
    meta.FORCE,
    meta.URGENT,
    meta.RECRAWL,
    meta.IMPORTANCE,
    meta.NOT_FETCHED,
}
_CONDITIONAL = {b"If-None-Match", b"If-Modified-Since"}
WHOLE = b"J"  # a request stored whole, as JSON
REQUEST_CLASSES = ("scrapy.", "crawler.")  # where a whole request's class (_class) may come from


class UnencodableRequest(ValueError):
    """A request whose meta holds a value JSON cannot carry (an object, a set)."""


class UndecodablePayload(ValueError):
    """A payload that is none of this crawler's forms (not to be run, whatever it is)."""


def _tagged(value):
    """``value`` in JSON's types: bytes as {"$b": base64}, mappings with keys that are
    not text as {"$m": [[key, value], ...]}, tuples as lists; TypeError for anything else."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, bytes):
        return {"$b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (list, tuple)):
        return [_tagged(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and not ({"$b", "$m"} & value.keys()):
            return {k: _tagged(v) for k, v in value.items()}
        return {"$m": [[_tagged(k), _tagged(v)] for k, v in value.items()]}
    raise TypeError(f"a {type(value).__name__} is not JSON")


def _untagged(obj: dict):
    if len(obj) == 1 and "$b" in obj:
        return base64.b64decode(obj["$b"])
    if len(obj) == 1 and "$m" in obj:
        return {_hashable(k): v for k, v in obj["$m"]}
    return obj


def _hashable(key):
    return tuple(key) if isinstance(key, list) else key


def _default_errback(spider):
    return getattr(spider, "errback", None)


def _is_plain(request: Request, spider) -> bool:
    return (
        request.method == "GET"
        and not request.body
        and request.callback in (None, getattr(spider, "parse", None))
        and request.errback == _default_errback(spider)
        and not request.cookies
        and not request.cb_kwargs
        and not request.flags
        and request.dont_filter == bool(request.meta.get(meta.FORCE) or meta.RECRAWL in request.meta)
        and request.encoding == "utf-8"
        and set(request.meta) <= _PLAIN_META
        and set(request.headers) <= ({b"Referer"} | (_CONDITIONAL if meta.RECRAWL in request.meta else set()))
        and request.url.startswith("http")  # (what decode takes for a plain payload)
    )


def encode(request: Request, spider) -> bytes:
    if _is_plain(request, spider):
        depth = request.meta.get(meta.DEPTH, 0)
        referer = request.headers.get(b"Referer")
        flags = ("F" if request.meta.get(meta.FORCE) else "") + ("U" if request.meta.get(meta.URGENT) else "")
        recrawl = request.meta.get(meta.RECRAWL)
        if not depth and not referer and not flags and recrawl is None:
            return request.url.encode()
        fields = [request.url, str(depth), (referer or b"").decode("latin-1")]
        if recrawl is not None:
            fields += ["R", json.dumps(recrawl, separators=(",", ":"))]
        elif flags:
            fields.append(flags)
        return SEP.join(fields).encode()
    data = request.to_dict(spider=spider)
    data["meta"] = {
        k: v
        for k, v in data["meta"].items()
        if k not in (meta.LEASE, meta.NOT_BEFORE, meta.DUE, meta.IMPORTANCE, meta.NOT_FETCHED)
    }
    try:
        tagged = _tagged(data)
    except TypeError:  # name the meta key that holds it (the rest of to_dict() is JSON's)
        for key, value in data["meta"].items():
            try:
                _tagged(value)
            except TypeError as exc:
                raise UnencodableRequest(
                    f"meta[{key!r}] of {request.url} cannot be stored in the frontier: {exc}"
                ) from None
        raise
    return WHOLE + json.dumps(tagged, separators=(",", ":")).encode()


def decode(payload: bytes, spider) -> Request:
    if payload[:1] == WHOLE:
        try:
            data = json.loads(payload[1:], object_hook=_untagged)
        except ValueError as exc:
            raise UndecodablePayload(f"a whole request that is not JSON ({exc})") from None
        cls = data.get("_class")
        if cls is not None and not cls.startswith(REQUEST_CLASSES):
            raise UndecodablePayload(f"a request class outside {', '.join(REQUEST_CLASSES)}: {cls!r}")
        return request_from_dict(data, spider=spider)
    if payload[:1] == b"P" or not payload.startswith(b"http"):
        raise UndecodablePayload(f"not a payload of this crawler: {payload[:40]!r}")
    url, _, rest = payload.decode().partition(SEP)
    info, headers = {}, {}
    forced = False
    if rest:
        depth, _, referer = rest.partition(SEP)
        referer, _, flags = referer.partition(SEP)
        flags, _, data = flags.partition(SEP)
        info[meta.DEPTH] = int(depth)
        if referer:
            headers["Referer"] = referer
        if flags == "R":
            info[meta.RECRAWL] = recrawl = json.loads(data)
            headers.update(conditional_headers(recrawl))
            forced = True
        else:  # '', F, U or FU
            if "F" in flags:
                info[meta.FORCE] = forced = True
            if "U" in flags:
                info[meta.URGENT] = True
    return Request(url, meta=info, headers=headers, errback=_default_errback(spider), dont_filter=forced)


def conditional_headers(info: dict) -> dict[str, str]:
    """If-None-Match and If-Modified-Since of a recrawl, from the stored ETag and
    Last-Modified (either may be missing)."""
    out = {}
    if info.get("etag"):
        out["If-None-Match"] = info["etag"]
    if info.get("last_modified"):
        out["If-Modified-Since"] = info["last_modified"]
    return out


def encode_link(url: str, depth: int, referer: str) -> bytes:
    """The payload of a followed link (a normalized http(s) URL): what ``encode`` gives
    for ``Request(url, meta={meta.DEPTH: depth}, headers={"Referer": referer})``, without
    building the request."""
    if not url.startswith("http"):
        raise ValueError(f"not a normalized http(s) URL: {url!r}")
    return SEP.join((url, str(depth), referer)).encode()


def encode_recrawl(url: str, info: dict) -> bytes:
    """The payload of a due URL put back for a recrawl (``info``: meta.RECRAWL's fields):
    what ``encode`` gives for ``decode``'s request."""
    return SEP.join((url, "0", "", "R", json.dumps(info, separators=(",", ":")))).encode()


def encode_url(url: str, force: bool = False, urgent: bool = False) -> bytes:
    """The payload of a seed or submitted URL (depth 0, no referer); ``force``: fetched
    whatever URL-seen and the fetch policy say, ``urgent``: a submission, read first (what
    ``encode`` gives for ``Request(url, dont_filter=force, meta={meta.FORCE: force,
    meta.URGENT: urgent})``)."""
    flags = ("F" if force else "") + ("U" if urgent else "")
    return SEP.join((url, "0", "", flags)).encode() if flags else url.encode()


def leased_request(lease, spider, now_ms: int) -> Request:
    """The request of a lease (Frontier.get), carrying it (``meta.LEASE``), and what the
    frontier said of it: to be recorded as not fetched (a negative due time: its code),
    its importance, the time its host is due when that is later than ``now_ms``.
    UndecodablePayload when its payload is not a request of this crawler."""
    request = decode(lease.payload, spider)
    request.meta[meta.LEASE] = lease.id
    if lease.due < 0:  # to be recorded as not fetched (steering.py): no request leaves
        request.meta[meta.NOT_FETCHED] = -lease.due
    if lease.cash > 0:  # (FRONTIER_ORDER importance: its links share it)
        request.meta[meta.IMPORTANCE] = lease.cash
    if lease.due > now_ms:
        request.meta[meta.DUE] = lease.due
    return request


def queued_entry(request: Request, spider, url_options: dict) -> Entry:
    """The frontier entry of a request the engine schedules: its normalized URL, its payload,
    what the frontier needs of its meta; a request carrying a lease (a retry, a redirect)
    is a follow-up that takes the lease over (and keeps its ``meta.NOT_BEFORE``). InvalidURL
    or UnencodableRequest when it cannot be queued."""
    url = normalize_url(request.url, **url_options)
    lease = request.meta.get(meta.LEASE, "")
    not_before = request.meta.pop(meta.NOT_BEFORE, 0)
    return Entry(
        url=url,
        payload=encode(request, spider),
        priority=request.priority,
        depth=request.meta.get(meta.DEPTH, 0),
        dont_filter=request.dont_filter,
        follow_up=bool(lease),
        replaces_lease=lease,
        not_before=not_before if lease else 0,
    )
