"""A host's politeness key, and its state in the frontier (a mixin of Frontier): its next
slot for the rate limiter (``slot``), a response it did not hand out ended (``end``), a
failure that slows it or puts it down (``fail``), a back-off (``block_until``), its
interval from robots.txt's Crawl-delay or the operator (``set_delay``)."""

from __future__ import annotations

import zlib
from functools import lru_cache

from crawler.frontier.words import (
    THROTTLED,
    now_ms,
)
from crawler.urls import url_authority


@lru_cache(maxsize=1)
def _domain_extractor():
    import tldextract

    # the snapshot shipped with tldextract: never fetch the list at run time
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def politeness_key(url: str, mode: str = "host") -> str:
    """The key a URL's politeness interval and failure state are kept under: its host
    with the port when it is not the scheme's default (``127.0.0.1:8080``; a normalized
    URL carries no default port), so that one closed port leaves the others of the host
    alone; or its registered domain (``mode='domain'``, e.g. ``a.b.example.co.uk`` ->
    ``example.co.uk``), whatever the port."""
    host, port = url_authority(url)
    if mode == "domain":
        ext = _domain_extractor()(host)
        if ext.domain and ext.suffix:
            return f"{ext.domain}.{ext.suffix}"
        return host
    if not port:
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def backoff_settings(settings) -> dict:
    """FAIL's back-off of a host that is down, from HOST_BACKOFF_MIN, _MAX and _QUIET:
    ``fail``'s minimum, maximum and quiet."""
    return {
        "minimum": settings.getfloat("HOST_BACKOFF_MIN"),
        "maximum": settings.getfloat("HOST_BACKOFF_MAX"),
        "quiet": settings.getfloat("HOST_BACKOFF_QUIET"),
    }


def key_host(key: str) -> str:
    """The host name (or address) of a politeness key in host mode, without its port:
    what is resolved to the host's address."""
    if key.startswith("["):
        return key[1 : key.index("]")]
    if key.count(":") == 1:
        return key.rsplit(":", 1)[0]
    return key


class FrontierHosts:
    def slot(self, host: str, max_wait: float, now: int | None = None, not_before: int = 0) -> int:
        """The time (ms) a request to ``host`` may leave, at least its interval after
        the previous one and no sooner than ``not_before`` (ms): taken when it is at most
        ``max_wait`` seconds away, else the host is pushed back to it (scripts.SLOT)."""
        override = self.interval_override(host)
        args = [
            self.keys.prefix,
            host,
            now_ms() if now is None else now,
            self.host_interval_ms,
            int(max_wait * 1000),
            "" if override is None else str(int(override * 1000)),
            int(not_before),
            self.address_interval_ms,
        ]
        return int(self._slot(keys=self._route, args=args))

    def interval_override(self, host: str) -> float | None:
        """The operator's interval for ``host`` (seconds): its crawl rules' entry, else
        FRONTIER_HOST_INTERVALS_FILE's, else None."""
        seconds = self.current_rules().overrides(host).interval
        return seconds if seconds is not None else self.intervals.lookup(host)

    def end(self, host: str, now: int | None = None, client=None) -> None:
        """A response from ``host`` to a request the frontier did not hand out
        (robots.txt and its redirect hops) has just ended: the host's next slot and
        hand-out count from now (scripts.END). ``client``: a pipeline to add the call to."""
        args = [
            self.keys.prefix,
            host,
            now_ms() if now is None else now,
            self.host_interval_ms,
            self.address_interval_ms,
        ]
        self._end(keys=self._route, args=args, client=client)

    def blocked_until(self, host: str) -> int:
        """The end (ms) of the host's last back-off (0: none)."""
        state = self.redis.hget(self.keys.hback, host)
        return int(state.split(b":")[2]) if state else 0

    def fail(
        self,
        host: str,
        kind: str,
        url: str,
        *,
        factor: float = 2.0,
        max_factor: float = 8.0,
        down_after: int = 3,
        minimum: float,
        maximum: float,
        quiet: float,
        jitter: float = 1.0,
        now: int | None = None,
    ) -> tuple[bool, float, float]:
        """A fetch from ``host`` failed: ``kind`` 'url' (a 5xx or a timeout of ``url``)
        slows the host down by ``factor`` (at most ``max_factor``); 'down' (connection
        refused, DNS), or ``down_after`` distinct URLs failing in a row, backs it off
        (scripts.FAIL). A host down (or its robots.txt unreachable) for
        HOST_GIVE_UP_AFTER since it last answered is given up: its URLs are recorded as not
        fetched. Returns (down, back-off seconds, slow-down factor)."""
        state, delay, f = self._fail(
            keys=self._route,
            args=[
                self.keys.prefix,
                host,
                now_ms() if now is None else now,
                kind,
                format(zlib.crc32(url.encode()), "x"),
                factor,
                max_factor,
                down_after,
                int(minimum * 1000),
                int(maximum * 1000),
                int(quiet * 1000),
                jitter,
                self.host_interval_ms,
                self.give_up_ms,
            ],
        )
        return bool(state), int(delay) / 1000, int(f) / 1000

    def block_until(
        self,
        host: str,
        *,
        minimum: float,
        maximum: float,
        quiet: float,
        retry_after: float = 0.0,
        jitter: float = 1.0,
        reason: str = THROTTLED,
        now: int | None = None,
    ) -> float:
        """Keep every worker away from ``host`` for a while (``reason``: it answered 429
        or sent Retry-After, its robots.txt is unreachable, it is down): Retry-After if
        given, else an exponential back-off (see scripts.BACKOFF). Returns the delay in
        seconds."""
        ms = self._backoff(
            keys=self._route,
            args=[
                self.keys.prefix,
                host,
                now_ms() if now is None else now,
                int(minimum * 1000),
                int(maximum * 1000),
                int(quiet * 1000),
                int(retry_after * 1000),
                jitter,
                reason,
                self.give_up_ms,
            ],
        )
        return int(ms) / 1000

    def set_delay(self, host: str, seconds: float | None, client=None) -> None:
        """Set a host's interval (None: back to the default). ``client``: a pipeline to
        add the command to."""
        client = self.redis if client is None else client
        if seconds is None:
            client.hdel(self.keys.hdelay, host)
        else:
            client.hset(self.keys.hdelay, host, int(seconds * 1000))
