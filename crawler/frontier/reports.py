"""The frontier's numbers (a mixin of Frontier: one Redis's, or one shard's): what is
queued, leased and seen (``stats``), whether the crawl is finished, running or waiting
and until when (``outlook``), why hosts wait (``deferred``), the busiest hosts
(``busiest``) and the slowed ones (``slowed``). Read-only; ``now`` from the caller where
time matters."""

from __future__ import annotations

from crawler.frontier.keys import EPOCH, SEP
from crawler.frontier.steering import budget_spent
from crawler.frontier.urlseen import SeenLayout
from crawler.frontier.words import FINISHED, INTERVAL, PAUSED, RETRY, RUNNING, WAITING, now_ms
from crawler.frontier.words import text as _str

RECENT_SECONDS = 60  # stats()["acked_last_minute"]: leases acknowledged in the last this many seconds


class FrontierReports:
    def stats(self) -> dict:
        k = self.keys
        now = now_ms()
        p = self.redis.pipeline(transaction=False)
        p.hgetall(k.counters)
        p.zcard(k.ready)
        p.zcount(k.ready, "-inf", now)
        p.zcard(k.leases)
        p.hlen(k.hnext)
        p.hgetall(k.seen_meta)
        p.scard(k.flying)
        p.hlen(k.hflight)
        p.zcard(k.delayed)
        p.hlen(k.hslow)
        p.zrangebyscore(k.leases, "(0", "+inf", start=0, num=1, withscores=True)  # the oldest held
        p.zcount(k.leases, 0, 0)  # given back, queued again at the next pop
        p.hgetall(k.acked_recent)
        for level in range(self.levels):
            p.llen(k.front(level))
        p.exists(k.paused)
        p.hkeys(k.hpaused)
        p.hkeys(k.hflight)
        p.zcard(k.dormant)
        p.llen(k.inbox)
        res = p.execute()
        inbox = res.pop()
        dormant = res.pop()
        flying_hosts = [_str(h) for h in res[-1]]
        paused, held = res[-3], [_str(h) for h in res[-2]]
        res = res[:-3]
        # hosts downloading now, and hosts paused, are out of the ready heap: those with URLs
        # left count among the hosts with URLs queued, as do the hosts waiting on disk for a
        # window (each once)
        busy = sorted({*flying_hosts, *held})
        on_disk = self.redis.zmscore(k.dormant, busy) if busy else []
        busy_with_queue = sum(1 for n, d in zip(self.queue_lengths(busy), on_disk, strict=True) if n and d is None)
        between = self._hosts_between(set(busy)) if self.window > 0 else 0  # (no window: no buffer, no chunk)
        hosts_paused = len(held)
        counters = {_str(a): int(b) for a, b in res[0].items() if _str(a) != EPOCH}
        meta = {_str(a): b for a, b in res[5].items()}
        layout = SeenLayout.parse(meta.pop("layout").decode()) if "layout" in meta else self.layout
        meta = {a: int(b) for a, b in meta.items()}
        gen = meta.get("gen", 1)
        oldest = res[10]
        front = res[13:]
        return {
            "queued": counters.get("queued", 0),
            "front_queued": sum(front),
            "front_by_level": front,
            "hosts_queued": res[1],
            # ready, downloading or paused with URLs left, waiting on disk for a window, or
            # between the two (_hosts_between)
            "hosts_with_urls": res[1] + busy_with_queue + dormant + between,
            "hosts_due": res[2],
            "hosts_seen": res[4],
            "leased": res[3],
            "in_flight": res[6],  # leases whose downloads have not ended
            "hosts_in_flight": res[7],
            "retries_delayed": res[8],  # URLs waiting for their own retry time
            "hosts_slowed": res[9],  # hosts whose interval failures have stretched
            # seconds since the lease that expires first was taken or last renewed (its
            # expiry less the lease time); None when no lease is held
            "oldest_lease_age": (now - int(oldest[0][1]) + self.lease_ms) / 1000 if oldest else None,
            "lease_seconds": self.lease_ms / 1000,
            "given_back": res[11],
            "acked_last_minute": recent_count(res[12], now),
            "pushed": counters.get("pushed", 0),
            # every URL pushed or requeued after an expired lease is queued or was popped
            "popped": counters.get("pushed", 0) + counters.get("expired", 0) - counters.get("queued", 0),
            # every lease ends acknowledged, expired (and requeued), abandoned, or is held
            "acked": counters.get("pushed", 0) - counters.get("queued", 0) - res[3] - counters.get("abandoned", 0),
            "expired": counters.get("expired", 0),
            "abandoned": counters.get("abandoned", 0),
            "done": counters.get("done", 0),  # pages handled (acknowledged): what CRAWL_MAX_PAGES counts
            "spilled": counters.get("spilled", 0),  # queued URLs in chunks of the spill store (FRONTIER_HOST_WINDOW)
            "hosts_dormant": dormant,  # hosts waiting wholly on disk for a window (FRONTIER_ACTIVE_HOSTS)
            # new URLs waiting in the inbox to be written out (their hosts are counted once they are)
            "inbox": inbox,
            "paused": paused,  # 1 while the operator has paused the crawl
            "hosts_paused": hosts_paused,
            "seen": layout.report([meta.get(f"n:{i}", 0) for i in range(gen)]),
        }

    def _hosts_between(self, busy: set[str], page: int = 1000) -> int:
        """Hosts with URLs queued that are neither in the ready heap, nor waiting in
        'dormant', nor among ``busy`` (downloading or paused: counted by the caller): with a
        window, those whose URLs are all in a buffer not yet written out (no window, no
        chunk: a new host while FRONTIER_ACTIVE_HOSTS hosts have a window, as after a seed
        file with more hosts than that), or whose chunk a worker is loading. Read a page of
        'spill' and 'refill' at a time (ZSCAN), each page looked up in the two (ZMSCORE):
        as many round trips as pages, a few hosts a page in a crawl (buffers are written
        out within FRONTIER_SPILL_AGE)."""
        k = self.keys
        hosts = set()
        for key in (k.spill, k.refill):
            for host, _ in self.redis.zscan_iter(key, count=page):
                hosts.add(_str(host))
        hosts -= busy
        found, listed = 0, list(hosts)
        for i in range(0, len(listed), page):
            part = listed[i : i + page]
            p = self.redis.pipeline(transaction=False)
            p.zmscore(k.ready, part)
            p.zmscore(k.dormant, part)
            ready, dormant = p.execute()
            found += sum(1 for a, b in zip(ready, dormant, strict=True) if a is None and b is None)
        return found

    def outlook(self, max_wait: float, now: int | None = None) -> dict:
        """Where the crawl stands (one round trip): ``state`` is ``finished`` (nothing
        queued, nothing leased), ``running`` (leases held, or a URL due within
        ``max_wait`` seconds) or ``waiting`` (URLs queued, none due within ``max_wait``:
        ``next_due`` (ms) says when the first is) or ``paused`` (by the operator:
        ``scrapy frontier pause``). A crawl whose page budget is spent (``budget_spent``)
        is finished once nothing is leased. Leases given back count as queued."""
        k = self.keys
        now = now_ms() if now is None else now
        horizon = now + int(max_wait * 1000)
        p = self.redis.pipeline(transaction=False)
        p.hget(k.counters, "queued")
        p.zcount(k.leases, "(0", "+inf")
        p.zcount(k.leases, 0, 0)  # given back by their workers: queued again at the next pop
        p.zrange(k.ready, 0, 0, withscores=True)
        p.zrange(k.delayed, 0, 0, withscores=True)
        p.get(k.paused)
        p.hget(k.counters, "done")
        p.zrange(k.refill, 0, 0, withscores=True)  # hosts waiting for a chunk to be loaded
        p.zrange(k.dormant, 0, 0, withscores=True)  # hosts waiting on disk for a window
        p.zrange(k.spill, 0, 0, withscores=True)  # buffers waiting to be written out
        p.zrange(k.aready, 0, 0, withscores=True)  # hosts waiting for their address class
        p.zrange(k.resolve, 0, 0, withscores=True)  # hosts waiting for their first address
        p.llen(k.inbox)  # new URLs waiting to be written out: the next round's (decision 0061)
        for level in range(self.levels):
            p.llen(k.front(level))
        (
            queued,
            leased,
            returned,
            ready,
            delayed,
            paused,
            done,
            refill,
            dormant,
            spill,
            aready,
            resolve,
            inbox,
            *front,
        ) = p.execute()
        queued = int(queued or 0) + returned
        waits = (ready, delayed, refill, dormant, spill, aready, resolve)
        firsts = [int(score) for entries in waits for _, score in entries[:1]]
        next_due = min(firsts) if firsts else None
        if sum(front) or returned or inbox:
            next_due = now
        spent = budget_spent(self.max_pages, int(done or 0), leased + returned)
        if (queued <= 0 or spent) and not leased:
            state = FINISHED
        elif paused:
            state = PAUSED
        elif leased or (next_due is not None and next_due <= horizon):
            state = RUNNING
        else:
            state = WAITING
        return {
            "state": state,
            "queued": queued,
            "leased": leased,
            "next_due": next_due,
            "budget_spent": spent,
            "max_pages": self.max_pages,
            "paused_at": int(paused) if paused else None,
        }

    def deferred(self, max_wait: float = 0.0, now: int | None = None, limit: int = 10_000) -> dict:
        """The URLs not due within ``max_wait`` seconds, by reason (REASONS): reason ->
        {"hosts", "urls", "due" (ms, the earliest; None for paused hosts: when resumed),
        "examples" (a few hosts)}. Looks
        at ``limit`` hosts and ``limit`` delayed retries at most."""
        k = self.keys
        now = now_ms() if now is None else now
        horizon = now + int(max_wait * 1000)
        hosts = self.redis.zrangebyscore(k.ready, f"({horizon}", "+inf", start=0, num=limit, withscores=True)
        paused = [_str(h) for h in self.redis.hkeys(k.hpaused)[:limit]]
        # (and those that gave their windows back until they are due, EVICT, once: not again
        # when a follow-up put one back in the heap, nor when paused)
        listed = {_str(h) for h, _ in hosts} | set(paused)
        dormant = self.redis.zrangebyscore(k.dormant, f"({horizon}", "+inf", start=0, num=limit, withscores=True)
        hosts += [(h, score) for h, score in dormant if _str(h) not in listed]
        retries = self.redis.zrangebyscore(k.delayed, f"({horizon}", "+inf", start=0, num=limit, withscores=True)
        out: dict[str, dict] = {}

        def add(reason, host, urls, due):
            r = out.setdefault(reason, {"hosts": set(), "urls": 0, "due": due, "examples": []})
            if host not in r["hosts"] and len(r["examples"]) < 3:
                r["examples"].append(host)
            r["hosts"].add(host)
            r["urls"] += urls
            r["due"] = None if due is None else min(r["due"], due)

        if hosts:
            backs = self.redis.hmget(k.hback, [h for h, _ in hosts])
            lengths = self.queue_lengths([_str(h) for h, _ in hosts])
            for (h, score), back, length in zip(hosts, backs, lengths):
                reason = INTERVAL
                if back:
                    fields = _str(back).split(":")
                    if len(fields) > 3 and int(fields[2]) > now:
                        reason = fields[3]
                add(reason, _str(h), length, int(score))
        for member, score in retries:
            add(RETRY, _str(member.split(SEP.encode(), 2)[1]), 1, int(score))
        for host, length in zip(paused, self.queue_lengths(paused), strict=True):
            add(PAUSED, host, length, None)
        for r in out.values():
            r["hosts"] = len(r["hosts"])
        return out

    def busiest(self, n: int = 10, limit: int = 10_000, now: int | None = None) -> dict:
        """The ``n`` hosts with the most URLs queued (window, disk, buffer), most first (URLs still
        in the front queues are not sorted into hosts yet). Looks at ``limit`` hosts at
        most: the first of the ready heap (earliest due) and those at their in-flight
        limit (out of the heap while they download); and at ``limit`` more of those waiting
        wholly on disk for a window (``dormant``, oldest first; due at their score there, or
        once they get a window). Returns {"hosts": [{"host",
        "queued", "interval" (s, slow-down included), "slowed" (factor), "in_flight",
        "backoff" (None, or {"reason", "until" (ms), "level"} while it lasts),
        "next_due" (ms; None: when one of its downloads lands), "on_disk" (waiting wholly on
        disk for a window, from next_due on)}], "looked_at",
        "complete" (every host with a queue was looked at)}."""
        k = self.keys
        now = now_ms() if now is None else now
        p = self.redis.pipeline(transaction=False)
        p.zrange(k.ready, 0, limit - 1, withscores=True)
        p.zcard(k.ready)
        p.zrange(k.dormant, 0, limit - 1, withscores=True)
        p.zcard(k.dormant)
        ready, in_heap, dormant, on_disk = p.execute()
        due = {_str(h): int(score) for h, score in ready}
        cursor, flying = self.redis.hscan(k.hflight, 0, count=limit)
        others = [h for h in map(_str, flying) if h not in due]
        candidates = list(due) + others[: max(limit - len(due), 0)]
        complete = len(due) >= in_heap and not cursor and len(candidates) == len(due) + len(others)
        # the hosts waiting on disk: as many again (a spilling crawl's longest queues wait there)
        looked = set(candidates)
        waiting = {h: int(score) for h, score in ((_str(h), score) for h, score in dormant) if h not in looked}
        complete = complete and len(dormant) >= on_disk
        candidates += list(waiting)
        if not candidates:
            return {"hosts": [], "looked_at": 0, "complete": complete}
        lengths = self.queue_lengths(candidates)
        top = sorted(((q, h) for h, q in zip(candidates, lengths, strict=True) if q), key=lambda qh: (-qh[0], qh[1]))[
            :n
        ]
        hosts = [h for _, h in top]
        out = []
        if hosts:
            p = self.redis.pipeline(transaction=False)
            for key in (k.hdelay, k.hslow, k.hback, k.hnext, k.hflight):
                p.hmget(key, hosts)
            delays, slows, backs, nexts, flights = p.execute()
            for i, (q, host) in enumerate(top):
                factor = float(slows[i]) if slows[i] else 1.0
                interval = int(delays[i]) if delays[i] is not None else self.host_interval_ms
                backoff = None
                if backs[i]:
                    fields = _str(backs[i]).split(":")
                    if len(fields) > 3 and int(fields[2]) > now:
                        backoff = {"reason": fields[3], "until": int(fields[2]), "level": int(fields[0])}
                nxt = due.get(host, waiting.get(host))
                if nxt is None and not flights[i]:  # (not in the heap, nothing in flight: its hnext time)
                    nxt = int(nexts[i] or now)
                out.append(
                    {
                        "host": host,
                        "queued": q,
                        "interval": interval * factor / 1000,
                        "slowed": factor,
                        "in_flight": int(flights[i] or 0),
                        "backoff": backoff,
                        "next_due": nxt,
                        "on_disk": host in waiting,  # waiting on disk for a window (from next_due on)
                    }
                )
        return {"hosts": out, "looked_at": len(candidates), "complete": complete}

    def busiest_addresses(self, n: int = 10, limit: int = 10_000) -> dict:
        """FRONTIER_ADDRESS_POLITENESS: the ``n`` address classes with the most URLs queued
        (window, disk, buffer) over their hosts, most first, from ``limit`` hosts' records
        at most. Returns {"classes": [{"class", "addresses" (up to 3), "hosts" (with URLs
        queued), "queued", "parked" (hosts waiting for the class), "in_flight", "cap" (0:
        none), "interval" (s), "handed_out" (so far)}], "looked_at", "complete"}."""
        k = self.keys
        records, cursor = {}, 0
        while True:
            cursor, page = self.redis.hscan(k.haddr, cursor, count=min(limit, 1000))
            records.update(page)
            if not cursor or len(records) >= limit:
                break
        taken = list(records.items())[:limit]
        hosts = [_str(host) for host, _ in taken]
        fields = [_str(record).split(SEP) for _, record in taken]
        lengths = self.queue_lengths(hosts)
        classes: dict[str, dict] = {}
        for (class_, address, _), queued in zip(fields, lengths, strict=True):
            c = classes.setdefault(class_, {"class": class_, "addresses": set(), "hosts": 0, "queued": 0})
            c["addresses"].add(address)
            c["hosts"] += bool(queued)
            c["queued"] += queued
        top = sorted((c for c in classes.values() if c["queued"]), key=lambda c: (-c["queued"], c["class"]))[:n]
        if top:
            names = [c["class"] for c in top]
            p = self.redis.pipeline(transaction=False)
            for key in (k.aflight, k.alimit, k.adelay, k.ahanded):
                p.hmget(key, names)
            for name in names:
                p.zcard(k.apark(name))
            flights, limits, delays, handed, *parked = p.execute()
            for i, c in enumerate(top):
                c["addresses"] = sorted(c["addresses"])[:3]
                c["parked"] = parked[i]
                c["in_flight"] = int(flights[i] or 0)
                c["cap"] = int(limits[i]) if limits[i] is not None else self.address_max_in_flight
                c["interval"] = (int(delays[i]) if delays[i] is not None else max(self.address_interval_ms, 0)) / 1000
                c["handed_out"] = int(handed[i] or 0)
        return {"classes": top, "looked_at": len(hosts), "complete": not cursor and len(hosts) == len(records)}

    def queue_lengths(self, hosts: list[str]) -> list[int]:
        """The URLs each host has queued: its window's (back and ranked queues), and with a
        window (FRONTIER_HOST_WINDOW) its chunks' and its buffer's (one round trip)."""
        if not hosts:
            return []
        p = self.redis.pipeline(transaction=False)
        for host in hosts:
            p.llen(self.keys.back(host))
            p.zcard(self.keys.ranked(host))
            p.llen(self.keys.buffer(host))
        p.hmget(self.keys.host_spilled, hosts)
        *n, spilled = p.execute()
        return [a + b + c + int(d or 0) for a, b, c, d in zip(n[::3], n[1::3], n[2::3], spilled, strict=True)]

    def slowed(self, limit: int = 5) -> list[tuple[str, float]]:
        """Up to ``limit`` hosts slowed down by failures, slowest first: (host, factor)."""
        _, found = self.redis.hscan(self.keys.hslow, 0, count=1000)
        hosts = [(_str(h), float(f)) for h, f in found.items()]
        return sorted(hosts, key=lambda hf: -hf[1])[:limit]


def recent_count(buckets: dict, now: int, seconds: int = RECENT_SECONDS) -> int:
    """The leases acknowledged in the last ``seconds`` (at most 63) before ``now`` (ms),
    from the ``acked:recent`` hash (second mod 64 -> ``<second>:<count>``; see
    scripts._SETTLE): the fields of the seconds in (now - seconds, now]."""
    second = now // 1000
    total = 0
    for value in buckets.values():
        at, _, count = _str(value).partition(":")
        if second - seconds < int(at) <= second:
            total += int(count)
    return total
