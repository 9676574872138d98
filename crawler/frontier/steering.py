"""The operator's hand on a running crawl (a mixin of Frontier): pause and resume the
crawl or one host, drop a host (scripts.HOLD), and the page budget (CRAWL_MAX_PAGES, which POP
enforces). Every worker obeys at its next pop; what was handed out before goes on."""

from __future__ import annotations

from crawler.frontier.words import now_ms
from crawler.frontier.words import text as _str
from crawler.urls import InvalidURL, normalize_url


def budget_spent(max_pages: int, done: int, held: int) -> bool:
    """Whether the page budget is spent: ``done`` pages handled and ``held`` leases
    held reach CRAWL_MAX_PAGES (0: no budget). POP holds hand-outs to the same sum."""
    return bool(max_pages) and done + held >= max_pages


def host_key(frontier, given: str) -> str:
    """The politeness key an operator means by ``given``: a URL's, or a host name
    (``host:port``) as written; ValueError, in words, for anything else."""
    given = given.strip()
    if "://" not in given:
        if not given or any(c in given for c in " /\t\n\x1f?#@"):
            raise ValueError(f"{given!r} is not a host name (example.com, 127.0.0.1:8080, or a URL of it)")
        given = f"http://{given}/"
    try:
        return frontier.politeness_key(normalize_url(given))
    except InvalidURL as exc:
        raise ValueError(f"{given!r} is not a valid URL ({exc})") from None


class FrontierSteering:
    def pause(self, host: str | None = None, now: int | None = None) -> bool:
        """Hold the crawl (``host`` None), or one host (a politeness key): no worker is
        handed new work of it until ``resume``. False when it was paused already."""
        return self._hold_call("pause", host, now)

    def resume(self, host: str | None = None, now: int | None = None) -> bool:
        """Let the crawl, or one host (paused, dropped or given up), be handed out again.
        False when it was not held."""
        return self._hold_call("resume", host, now)

    def drop(self, host: str, now: int | None = None) -> bool:
        """Fetch nothing more of ``host``: its URLs queued, and any that come up later, are
        handed out to be recorded as not fetched (fate ``dropped``) without a request.
        False when it was dropped (or given up) already. The host's queues move a chunk a
        call (scripts.HOLD), each call atomic, so that a drop of a long queue never holds up
        the other workers' calls for long."""
        state = self._hold_script("drop", host, now)
        if state == 2:  # entries left: the next chunks, until none is left
            while self._hold_script("more", host, now):
                pass
        return state > 0

    def _hold_call(self, verb: str, host: str | None, now: int | None) -> bool:
        return self._hold_script(verb, host, now) > 0

    def _hold_script(self, verb: str, host: str | None, now: int | None) -> int:
        args = [
            self.keys.prefix,
            now_ms() if now is None else now,
            verb,
            host or "",
            self.max_in_flight,
            self.host_interval_ms,
        ]
        return int(self._hold(keys=self._route, args=args))

    def paused(self) -> dict:
        """What the operator holds: {"crawl": the time (ms) the crawl was paused, or None;
        "hosts": {host: the time (ms) it was paused}; "dropped": {host: [the time (ms),
        the reason: ``operator`` or ``down`` (given up)]}}."""
        p = self.redis.pipeline(transaction=False)
        p.get(self.keys.paused)
        p.hgetall(self.keys.hpaused)
        p.hgetall(self.keys.hdropped)
        crawl, hosts, dropped = p.execute()
        return {
            "crawl": int(crawl) if crawl else None,
            "hosts": {_str(h): int(t) for h, t in hosts.items()},
            "dropped": {_str(h): [int(_str(v).split(":")[0]), _str(v).split(":")[1]] for h, v in dropped.items()},
        }

    def budget(self) -> dict:
        """The page budget: {"max" (CRAWL_MAX_PAGES; 0: none), "done" (pages handled),
        "leased" (held now), "spent" (max reached: nothing more is handed out)}."""
        p = self.redis.pipeline(transaction=False)
        p.hget(self.keys.counters, "done")
        p.zcard(self.keys.leases)
        done, leased = p.execute()
        done = int(done or 0)
        return {
            "max": self.max_pages,
            "done": done,
            "leased": leased,
            "spent": budget_spent(self.max_pages, done, leased),
        }
