"""Benchmark: our Redis frontier against stock scrapy-redis, side by side.

Both sides run in this one process, single-threaded, against the same Redis, on the
same pre-built Scrapy requests (``https://www.site<h>.com/...`` with ``depth`` meta and
a ``Referer`` header, as links extracted by a spider look when they reach the
scheduler). URLs are generated in normal form, so no normalizer runs on either side
(scrapy-redis still computes its request fingerprint, which canonicalizes the URL:
that is part of its per-request cost, as in a real crawl).

Ours (crawler.frontier.frontier.Frontier, host intervals and leases on):
  push       per request: ``codec.encode`` + ``Frontier.push`` (one round trip each,
             as the scheduler does); batched: ``push_many`` of 1000 (seed ingestion)
  pop        ``pop(n)`` + ``codec.decode`` + ``ack(lease)`` per request (the scheduler
             acknowledges pages one at a time), with n=1 and n=16
  memory     ``MEMORY USAGE key SAMPLES 0`` of the ``seen:*`` keys per URL added, and
             of the queue keys (fq:*, bq:*, ready, hnext, hpages) per queued request,
             after push and before pop
Stock scrapy-redis (PriorityQueue + RFPDupeFilter, constructed directly):
  push       ``dupefilter.request_seen(req)``, then ``queue.push(req)`` if unseen
             (scrapy_redis.scheduler.Scheduler.enqueue_request)
  pop        ``queue.pop()`` (decodes the request)
  memory     the dupefilter set and the queue zset, per request

"Redis us/req" is server-side time from INFO commandstats deltas of the top-level
commands (EVALSHA for ours; SADD/ZADD/MULTI/EXEC for scrapy-redis), so client-side
Python time is the rest. It is approximate if other clients use the same Redis.

Keys are created under unique prefixes (``crawl:{bench-...}:`` and ``bench:...:``)
and deleted at the end, also on errors or Ctrl-C. Nothing else is touched.

    python bench/frontier.py                 # N=100,000 over N hosts
    python bench/frontier.py --quick         # N=20,000
    python bench/frontier.py --n 50000 --hosts 5000 --redis-url redis://host:6379/1
    python bench/frontier.py --quick --profile   # + cProfile of our client side

It always exits 0: it is a report, PASS/FAIL lines are informational.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import platform
import pstats
import sys
import time
import uuid
from dataclasses import dataclass, field

import redis
from scrapy import Request, Spider
from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.queue import PriorityQueue

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from crawler.frontier import codec  # noqa: E402
from crawler.frontier.frontier import Entry, Frontier  # noqa: E402

PUSH_BATCH = 1000
ERROR_RATE = 1e-6
OUR_TOP_LEVEL = ("evalsha", "eval")
THEIR_TOP_LEVEL = ("sadd", "zadd", "multi", "exec")
QUEUE_KEY_KINDS = ("fq", "bq", "ready", "hnext", "hpages")


class BenchSpider(Spider):
    name = "bench"

    def parse(self, response):
        pass


# -- inputs -------------------------------------------------------------------------


def make_requests(n: int, hosts: int) -> list[Request]:
    """n requests spread round-robin over `hosts` hosts, URLs already normalized."""
    out = []
    for i in range(n):
        h = i % hosts
        site = f"https://www.site{h}.com"
        url = f"{site}/articles/{i // hosts}/item-{i}.html"
        out.append(Request(url, meta={"depth": 1}, headers={"Referer": site + "/"}))
    return out


def check_normal_form(requests: list[Request]) -> str:
    try:
        from crawler.urls import normalize_url
    except Exception:  # the normalizer is optional here
        return "normalizer not importable; URLs generated in normal form"
    sample = requests[:: max(1, len(requests) // 200)]
    bad = sum(normalize_url(r.url) != r.url for r in sample)
    return f"{len(sample) - bad}/{len(sample)} sampled URLs unchanged by normalize_url"


# -- measurement helpers ------------------------------------------------------------


@dataclass
class Result:
    count: int = 0
    seconds: float = 0.0
    server_usec: int = 0
    note: str = ""
    commands: dict = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0

    @property
    def server_us_per_req(self) -> float:
        return self.server_usec / self.count if self.count else 0.0


class Meter:
    """Wall time plus INFO commandstats deltas around one phase."""

    def __init__(self, r: redis.Redis, top_level: tuple[str, ...]):
        self.r, self.top_level = r, top_level

    def _stats(self) -> dict:
        return {k.removeprefix("cmdstat_"): v for k, v in self.r.info("commandstats").items()}

    def __enter__(self):
        self.result = Result()
        gc.collect()
        self.before = self._stats()
        self.t0 = time.perf_counter()
        return self.result

    def __exit__(self, *exc):
        self.result.seconds = time.perf_counter() - self.t0
        after = self._stats()
        for name, v in after.items():
            b = self.before.get(name, {})
            calls = v.get("calls", 0) - b.get("calls", 0)
            if calls and name != "info":
                self.result.commands[name] = (calls, v.get("usec", 0) - b.get("usec", 0))
        self.result.server_usec = sum(self.result.commands.get(c, (0, 0))[1] for c in self.top_level)
        return False


def memory_usage(r: redis.Redis, keys: list) -> int:
    total = 0
    for i in range(0, len(keys), 1000):
        p = r.pipeline(transaction=False)
        for key in keys[i : i + 1000]:
            p.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
        total += sum(v or 0 for v in p.execute())
    return total


def frontier_memory(f: Frontier) -> dict[str, int]:
    """Bytes of this crawl's keys by kind (seen, queue, other)."""
    prefix = f.keys.prefix.encode()
    groups: dict[str, list] = {"seen": [], "queue": [], "other": []}
    for key in f.redis.scan_iter(match=f.keys.pattern(), count=1000):
        kind = key[len(prefix) :].split(b":", 1)[0].decode()
        if kind == "seen":
            groups["seen"].append(key)
        elif kind in QUEUE_KEY_KINDS:
            groups["queue"].append(key)
        else:
            groups["other"].append(key)
    out = {k: memory_usage(f.redis, v) for k, v in groups.items()}
    out["queue_keys"] = len(groups["queue"])
    return out


# -- our frontier -------------------------------------------------------------------


def new_frontier(r, run_id: str, tag: str, capacity: int, interval: float, created: list) -> Frontier:
    f = Frontier(
        r,
        f"bench-{run_id}-{tag}",
        host_interval=interval,
        lease_seconds=600.0,  # no lease expires during the run
        bloom_capacity=capacity,
        bloom_error_rate=ERROR_RATE,
        max_pages_per_host=0,
    )
    created.append(f)
    return f


def entry_of(request: Request, spider) -> Entry:
    return Entry(
        url=request.url,
        payload=codec.encode(request, spider),
        priority=request.priority,
        depth=request.meta.get("depth", 0),
    )


def ours_push(f: Frontier, requests, spider, batch: int, deadline: float) -> Result:
    with Meter(f.redis, OUR_TOP_LEVEL) as res:
        added = 0
        if batch == 1:
            for i, req in enumerate(requests):
                if f.push(entry_of(req, spider)) == "added":
                    added += 1
                if not i & 255 and time.perf_counter() > deadline:
                    res.note = "time bound"
                    break
            res.count = i + 1
        else:
            done = 0
            for i in range(0, len(requests), batch):
                chunk = requests[i : i + batch]
                added += f.push_many([entry_of(req, spider) for req in chunk]).count("added")
                done += len(chunk)
                if time.perf_counter() > deadline:
                    res.note = "time bound"
                    break
            res.count = done
    if added != res.count:
        res.note = (res.note + f"; {res.count - added} not added").lstrip("; ")
    return res


def ours_pop(f: Frontier, spider, n: int, limit: int, deadline: float) -> Result:
    with Meter(f.redis, OUR_TOP_LEVEL) as res:
        done = 0
        while done < limit:
            leases, next_due = f.pop(n)
            if not leases:
                if next_due is not None:
                    res.note = "stopped: hosts not due (raise --hosts)"
                break
            for lease in leases:
                codec.decode(lease.payload, spider)
                f.ack(lease.id)
            done += len(leases)
            if time.perf_counter() > deadline:
                res.note = "time bound"
                break
        res.count = done
    if done < limit and not res.note:
        res.note = f"only {done} of {limit}"
    return res


# -- stock scrapy-redis -------------------------------------------------------------


def theirs_push(df: RFPDupeFilter, q: PriorityQueue, requests, deadline: float) -> Result:
    with Meter(df.server, THEIR_TOP_LEVEL) as res:
        for i, req in enumerate(requests):
            if not req.dont_filter and df.request_seen(req):
                continue
            q.push(req)
            if not i & 255 and time.perf_counter() > deadline:
                res.note = "time bound"
                break
        res.count = i + 1
    return res


def theirs_pop(q: PriorityQueue, limit: int, deadline: float) -> Result:
    with Meter(q.server, THEIR_TOP_LEVEL) as res:
        done = 0
        while done < limit and q.pop() is not None:
            done += 1
            if not done & 255 and time.perf_counter() > deadline:
                res.note = "time bound"
                break
        res.count = done
    return res


# -- report -------------------------------------------------------------------------


def fmt_rate(res: Result | None) -> str:
    return "-" if res is None or not res.count else f"{res.rate:,.0f}"


def fmt_us(res: Result | None) -> str:
    return "-" if res is None or not res.count else f"{res.server_us_per_req:.1f}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def profile_ours(r, run_id, spider, requests, created) -> str:
    """cProfile of our per-request push and pop(1)+ack (client side)."""
    f = new_frontier(r, run_id, "prof", len(requests), 1.0, created)
    out = io.StringIO()
    for title, fn in (
        ("push (per request)", lambda: ours_push(f, requests, spider, 1, float("inf"))),
        ("pop(1) + decode + ack", lambda: ours_pop(f, spider, 1, len(requests), float("inf"))),
    ):
        prof = cProfile.Profile()
        prof.enable()
        res = fn()
        prof.disable()
        out.write(f"\n--- cProfile, ours, {title}: {res.count:,} requests, {res.rate:,.0f} req/s under profiler\n")
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(14)
        out.write("Redis commandstats delta (calls, usec):\n")
        for name, (calls, usec) in sorted(res.commands.items(), key=lambda x: -x[1][1])[:12]:
            out.write(f"  {name:<22}{calls:>10,}{usec:>12,}  ({usec / max(res.count, 1):.2f} us/req)\n")
    f.clear()
    return out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=None, help="requests (default 100,000)")
    ap.add_argument("--hosts", type=int, default=None, help="hosts (default: = N)")
    ap.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--quick", action="store_true", help="N=20,000")
    ap.add_argument("--phase-seconds", type=float, default=None, help="time bound of each phase")
    ap.add_argument("--profile", action="store_true", help="also cProfile our client side")
    args = ap.parse_args(argv)

    n = args.n or (20_000 if args.quick else 100_000)
    hosts = min(args.hosts or n, n)
    few_hosts = min(1000, n)
    phase_seconds = args.phase_seconds or (10.0 if args.quick else 25.0)
    r = redis.Redis.from_url(args.redis_url, socket_timeout=60)
    r.ping()
    spider = BenchSpider()
    run_id = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    created: list[Frontier] = []
    theirs_keys: list[str] = []

    t_start = time.perf_counter()
    requests = make_requests(n, hosts)
    few_requests = make_requests(n, few_hosts) if few_hosts != hosts else requests
    normal_note = check_normal_form(requests)
    gc.collect()
    gc.freeze()  # the request lists are long-lived: keep them out of GC passes

    def deadline() -> float:
        return time.perf_counter() + phase_seconds

    R: dict[str, Result] = {}
    mem: dict[str, dict] = {}
    try:
        # round-trip floor of this client and machine
        with Meter(r, ("ping",)) as ping:
            for _ in range(2000):
                r.ping()
            ping.count = 2000

        # warm-up (script load, hash function set-up, imports) on a throw-away crawl
        f = new_frontier(r, run_id, "warm", 1000, 1.0, created)
        ours_push(f, make_requests(200, 200), spider, 1, float("inf"))
        ours_pop(f, spider, 16, 200, float("inf"))
        f.clear()

        # -- stock scrapy-redis --
        qkey, dkey = f"bench:{run_id}:requests", f"bench:{run_id}:dupefilter"
        theirs_keys += [qkey, dkey]
        q = PriorityQueue(r, spider, qkey)
        df = RFPDupeFilter(r, dkey)
        R["theirs_push"] = theirs_push(df, q, requests, deadline())
        pushed = R["theirs_push"].count
        mem["theirs"] = {
            "seen": r.memory_usage(dkey, samples=0) or 0,
            "queue": r.memory_usage(qkey, samples=0) or 0,
            "count": pushed,
        }
        R["theirs_pop"] = theirs_pop(q, pushed, deadline())
        r.delete(qkey, dkey)

        # -- ours, N hosts, interval 1 s: per-request push, then pop(1) + ack --
        fa = new_frontier(r, run_id, "a", n, 1.0, created)
        R["push1"] = ours_push(fa, requests, spider, 1, deadline())
        mem["ours"] = dict(frontier_memory(fa), count=R["push1"].count)
        R["pop1"] = ours_pop(fa, spider, 1, R["push1"].count, deadline())
        fa.clear()

        # -- ours: batched push, then pop(16) + ack --
        fb = new_frontier(r, run_id, "b", n, 1.0, created)
        R["pushb"] = ours_push(fb, requests, spider, PUSH_BATCH, deadline())
        mem["ours_b"] = dict(frontier_memory(fb), count=R["pushb"].count)
        R["pop16"] = ours_pop(fb, spider, 16, R["pushb"].count, deadline())
        fb.clear()

        # -- ours: Bloom capacity N/4, so the filter grows twice --
        fc = new_frontier(r, run_id, "c", max(n // 4, 1), 1.0, created)
        R["pushc"] = ours_push(fc, requests, spider, PUSH_BATCH, deadline())
        mem["ours_grown"] = dict(frontier_memory(fc), count=R["pushc"].count)
        gens = fc._read_generation()
        fc.clear()

        # -- ours: 1000 hosts, interval 0 --
        fd = new_frontier(r, run_id, "d", n, 0.0, created)
        R["few_push1"] = ours_push(fd, few_requests, spider, 1, deadline())
        mem["few"] = dict(frontier_memory(fd), count=R["few_push1"].count)
        R["few_pop1"] = ours_pop(fd, spider, 1, R["few_push1"].count, deadline())
        fd.clear()
        fe = new_frontier(r, run_id, "e", n, 0.0, created)
        R["few_pushb"] = ours_push(fe, few_requests, spider, PUSH_BATCH, deadline())
        R["few_pop16"] = ours_pop(fe, spider, 16, R["few_pushb"].count, deadline())
        fe.clear()

        prof_text = profile_ours(r, run_id, spider, requests[: min(n, 20_000)], created) if args.profile else ""
        elapsed = time.perf_counter() - t_start
    finally:
        for f in created:
            f.clear()
        if theirs_keys:
            r.delete(*theirs_keys)

    # -- report --
    info = r.info("server")
    print("Frontier benchmark: ours vs stock scrapy-redis (single process, single thread, same Redis)")
    print(
        f"machine: {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"Redis {info.get('redis_version')} at {args.redis_url}, hiredis {redis.utils.HIREDIS_AVAILABLE}"
    )
    print(
        f"N={n:,} requests over {hosts:,} hosts; Bloom capacity N, error {ERROR_RATE:g}; "
        f"phase bound {phase_seconds:.0f} s; round trips (PING) {ping.rate:,.0f}/s"
    )
    print(f"URLs: {normal_note}; payload ours {len(codec.encode(requests[0], spider))} B")
    print()

    def row(label, ours: Result | None, theirs: Result | None, extra=""):
        ratio = f"{ours.rate / theirs.rate:.2f}" if ours and theirs and theirs.rate else ""
        notes = "; ".join(x for x in (ours.note if ours else "", theirs.note if theirs else "", extra) if x)
        print(
            f"{label:<34}{fmt_rate(ours):>11}{fmt_us(ours):>8}{fmt_rate(theirs):>11}"
            f"{fmt_us(theirs):>8}{ratio:>8}  {notes}"
        )

    print(f"{'':<34}{'ours':>11}{'':>8}{'scrapy-redis':>11}{'':>8}{'ratio':>8}")
    print(f"{'rates (req/s), Redis us/req':<34}{'req/s':>11}{'us':>8}{'req/s':>11}{'us':>8}")
    row("push, per request", R["push1"], R["theirs_push"])
    row("push, push_many(1000) [extra]", R["pushb"], R["theirs_push"])
    row("pop(1) + ack", R["pop1"], R["theirs_pop"])
    row("pop(16) + ack per request", R["pop16"], R["theirs_pop"])
    row(f"push, per request, {few_hosts} hosts, iv 0", R["few_push1"], R["theirs_push"])
    row(f"push_many, {few_hosts} hosts, iv 0", R["few_pushb"], R["theirs_push"])
    row(f"pop(1) + ack, {few_hosts} hosts, iv 0", R["few_pop1"], R["theirs_pop"])
    row(f"pop(16) + ack, {few_hosts} hosts, iv 0", R["few_pop16"], R["theirs_pop"])
    print()

    def per(m: dict, kind: str) -> float:
        return m[kind] / m["count"] if m["count"] else 0.0

    seen_ours, seen_theirs = per(mem["ours"], "seen"), per(mem["theirs"], "seen")
    q_ours, q_theirs = per(mem["ours"], "queue"), per(mem["theirs"], "queue")
    print(f"{'memory (bytes per request)':<34}{'ours':>11}{'':>8}{'scrapy-redis':>11}{'':>8}{'ratio':>8}")
    print(f"{'seen URL (capacity N)':<34}{seen_ours:>11.2f}{'':>8}{seen_theirs:>11.2f}{'':>8}{seen_ours / seen_theirs:>8.3f}")
    print(
        f"{'seen URL (capacity N/4, grown)':<34}{per(mem['ours_grown'], 'seen'):>11.2f}{'':>8}{'':>11}{'':>8}"
        f"{'':>8}  {gens} filters"
    )
    print(f"{'queued request':<34}{q_ours:>11.1f}{'':>8}{q_theirs:>11.1f}{'':>8}{q_ours / q_theirs:>8.3f}")
    print(
        f"{f'queued request, {few_hosts} hosts':<34}{per(mem['few'], 'queue'):>11.1f}{'':>8}{'':>11}{'':>8}{'':>8}"
    )
    print()

    push_ratio = R["push1"].rate / R["theirs_push"].rate
    pop_ratio = R["pop1"].rate / R["theirs_pop"].rate
    pop16_ratio = R["pop16"].rate / R["theirs_pop"].rate
    print("targets")
    print(f"  push ours/theirs (per request)  {push_ratio:6.2f}  >= 1.0   {verdict(push_ratio >= 1.0)}")
    print(f"  pop  ours/theirs (pop(1)+ack)   {pop_ratio:6.2f}  >= 0.8   {verdict(pop_ratio >= 0.8)}")
    print(f"  pop  ours/theirs (pop(16)+ack)  {pop16_ratio:6.2f}  >= 0.8   {verdict(pop16_ratio >= 0.8)}")
    print(f"  bytes per seen URL, ours        {seen_ours:6.2f}  <= 4     {verdict(seen_ours <= 4.0)}")
    print()
    print(
        "notes: 'us' = Redis server time per request (INFO commandstats, top-level commands);\n"
        "       ours pop = pop(n) + codec.decode + ack(lease) per request (2 round trips at n=1),\n"
        "       theirs pop = queue.pop() (MULTI ZRANGE ZREMRANGEBYRANK EXEC + decode, 1 round trip);\n"
        "       queue bytes ours = fq:*, bq:*, ready, hnext, hpages (measured after push, before pop)."
    )
    print(f"elapsed {elapsed:.0f} s")
    if prof_text:
        print(prof_text)
    return 0


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
    sys.exit(0)
