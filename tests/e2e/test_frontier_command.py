"""`scrapy frontier`: the frontier's numbers one command away."""

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from crawler.commands.frontier import watch
from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.shards import ShardedFrontier
from crawler.frontier.words import now_ms
from testing.workers import ServeProcess, clean_env

ROOT = Path(__file__).resolve().parents[2]


def _run_frontier_command(redis_url, crawl_name, *args) -> subprocess.CompletedProcess:
    env = clean_env()
    env["REDIS_URL"] = redis_url
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "frontier", "--crawl", crawl_name, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _frontier_command(redis_url, crawl_name, *args) -> str:
    out = _run_frontier_command(redis_url, crawl_name, *args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_stats_as_json(redis_url, redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name)
    f.put([Entry(url=f"http://h{i}.example/", payload=b"x") for i in range(5)])
    stats = json.loads(_frontier_command(redis_url, crawl_name, "--json"))
    assert stats["queued"] == 5 and stats["seen"]["urls"] == 5 and stats["leased"] == 0
    assert stats["seen"]["kind"] == "sets"
    assert "URL-seen         5 URLs in 1 generation, 20 bytes of fingerprints (in Redis sets), " in (
        _frontier_command(redis_url, crawl_name)
    )


def test_watch_reports_rates(redis_client, crawl_name, capsys):
    f = Frontier(redis_client, crawl_name, host_interval=0)
    f.put([Entry(url=f"http://h{i}.example/", payload=b"x") for i in range(40)])

    def work():
        time.sleep(0.2)
        for _ in range(20):
            leases, _ = f.get(1)
            f.ack(*(lease.id for lease in leases))

    worker = threading.Thread(target=work)
    worker.start()
    watch(f, 1.0, count=2)
    worker.join()
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert "queued 40" in lines[0]
    rate = float(lines[1].split(", ")[-1].split(" pages done/s")[0])
    assert 10 <= rate <= 25  # 20 pages acknowledged in about one second


def _on_crawl(redis_url: str, command: list[str], name: str, crawl_dir) -> subprocess.CompletedProcess:
    """``scrapy COMMAND --crawl NAME`` on the test's Redis."""
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *command, "--crawl", name, "-s", f"CRAWL_DIR={crawl_dir}"],
        cwd=ROOT,
        env={**clean_env(), "REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["submit", "http://a.example/new"],
        ["recrawl"],
        ["frontier"],
        ["serve", "--port", "6811"],
    ],
)
def test_a_mistyped_crawl_is_refused_naming_the_crawls_there_are(
    command, redis_url, redis_client, crawl_name, tmp_path
):
    """Every command that takes --crawl refuses a crawl that does not exist (exit 2, one
    line naming the real ones) and creates nothing: submit does not start a crawl, recrawl
    does not read an empty one, serve serves nothing (unless --wait: a dashboard opened
    before its crawl)."""
    real = crawl_name + "-real"
    Frontier(redis_client, real).put([Entry(url="http://a.example/", payload=b"x")])
    try:
        out = _on_crawl(redis_url, command, crawl_name, tmp_path)
        assert out.returncode == 2, out.stderr
        [line] = out.stderr.strip().splitlines()
        assert line.startswith(f"{command[0]}: no crawl {crawl_name!r} in this Redis (crawls in this Redis: ")
        assert real in line and "name one with --crawl NAME" in line
        assert not redis_client.keys(f"crawl:{{{crawl_name}}}*") and not any(tmp_path.iterdir())
    finally:
        Frontier(redis_client, real).clear()


def test_an_unknown_crawl_is_named_with_the_crawls_there_are(redis_url, redis_client, crawl_name):
    other = crawl_name + "-other"
    Frontier(redis_client, other).put([Entry(url="http://a.example/", payload=b"x")])
    try:
        out = _run_frontier_command(redis_url, crawl_name)
        assert out.returncode == 2 and out.stdout == ""
        assert f"no crawl {crawl_name!r} in this Redis" in out.stderr and other in out.stderr, out.stderr
        assert not redis_client.exists(f"crawl:{{{crawl_name}}}:counters")  # nothing created
    finally:
        Frontier(redis_client, other).clear()


def test_status_comes_from_the_frontier_and_the_workers_alive(redis_url, redis_client, crawl_name):
    """finished, idle, stopped, running and waiting, by the frontier and the workers'
    heartbeats; the interval shown is the one the workers published, not the viewer's."""
    f = Frontier(redis_client, crawl_name)
    keys = f.keys

    def worker_alive() -> None:
        redis_client.zadd(keys.workers, {"w1": now_ms()})

    f.put([Entry(url="http://done.example/", payload=b"x")])
    (lease,), _ = f.get(1)
    f.ack(lease.id)
    assert "status           finished: nothing queued" in _frontier_command(redis_url, crawl_name)
    worker_alive()
    assert "status           idle: nothing queued, nothing leased; 1 worker alive" in _frontier_command(
        redis_url, crawl_name
    )
    redis_client.delete(keys.workers)
    f.put([Entry(url=f"http://{h}.example/{i}", payload=b"x") for h in "ab" for i in range(3)])
    out = _frontier_command(redis_url, crawl_name)
    assert "status           stopped: 6 URLs queued, 0 leased, no worker alive" in out, out
    worker_alive()
    redis_client.hset(keys.published, mapping={"host_interval": "0.1", "host_max_in_flight": "1", "max_wait": "60"})
    out = _frontier_command(redis_url, crawl_name, "-s", "FRONTIER_HOST_INTERVAL=7")
    assert "status           running: 6 URLs queued, 0 leased; 1 worker alive" in out, out
    assert "workers          1 alive; they run with a host interval of 0.10 s, 1 in flight per host" in out, out
    assert "0.10 s" in out and "7.00 s" not in out, out  # the busiest hosts at the workers' interval
    limits = {"minimum": 300, "maximum": 7200, "quiet": 600}
    f.block_until("a.example", retry_after=3600, reason="robots", **limits)
    f.fail("b.example", "down", "http://b.example/0", **limits)
    assert f.get(10)[0] == []  # (sorts every URL into its host's back queue)
    worker_alive()  # (the heartbeat of a live worker: a command takes seconds, LIVE_SECONDS is 30)
    out = _frontier_command(redis_url, crawl_name)
    status = next(line for line in out.splitlines() if line.startswith("status"))
    assert "waiting until" in status and "(in 5 min): 6 URLs queued" in status, out
    assert "robots.txt unreachable: 1 host, 3 URLs" in out and "host down: 1 host, 3 URLs" in out, out
    worker_alive()
    data = json.loads(_frontier_command(redis_url, crawl_name, "--json"))
    assert data["status"]["state"] == "waiting" and set(data["status"]["deferred"]) == {"robots", "down"}
    assert data["workers"] == 1 and data["published"]["host_interval"] == 0.1


def _busy_frontier(f, now: int) -> None:
    """Hosts a (6 URLs), b (3), c (1) sorted into their back queues, each with one URL
    leased 20 s ago; a's lease acknowledged (landed: due its interval later), b's
    robots.txt unreachable, c's lease still out."""
    f.put(
        [
            Entry(url=f"http://{h}.example/{i}", payload=b"x")
            for h, n in (("a", 6), ("b", 3), ("c", 1))
            for i in range(n)
        ]
    )
    leases, _ = f.get(10, now=now - 20_000)
    assert sorted(lease.id.split(b"\x1f")[2] for lease in leases) == [b"a.example", b"b.example", b"c.example"]
    by_host = {lease.id.split(b"\x1f")[2].decode(): lease.id for lease in leases}
    f.ack(by_host["a.example"], now=now)
    f.ack(by_host["b.example"], now=now - 120_000)  # two minutes ago: not in the last minute
    f.block_until("b.example", minimum=300, maximum=7200, quiet=600, reason="robots", now=now)


def test_busiest_hosts_leases_and_the_last_minute(redis_url, redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, host_interval=5, lease_seconds=60)
    now = now_ms()
    _busy_frontier(f, now)
    busiest = f.busiest(2, now=now)
    assert busiest["complete"] and busiest["looked_at"] == 3  # a and b in the heap, c in flight (empty queue)
    a, b = busiest["hosts"]
    assert (a["host"], a["queued"], a["interval"], a["backoff"]) == ("a.example", 5, 5.0, None)
    assert a["next_due"] == now + 5000  # its interval after its lease landed
    assert (b["host"], b["queued"]) == ("b.example", 2)
    assert b["backoff"]["reason"] == "robots" and b["backoff"]["until"] >= now + 300_000
    assert [h["host"] for h in f.busiest(1, now=now)["hosts"]] == ["a.example"]
    stats = f.stats()
    assert stats["leased"] == 1 and 19 <= stats["oldest_lease_age"] <= 25  # c's, taken 20 s ago
    assert stats["acked_last_minute"] == 1  # a's; b's was two minutes ago
    out = _frontier_command(redis_url, crawl_name, "--hosts", "2", "-s", "FRONTIER_HOST_INTERVAL=5")
    # c's lease, taken 20 s ago, and the command's own start (some seconds on a loaded machine)
    age = re.search(r"the oldest taken or renewed (\d+) s ago", out)
    assert age and 20 <= int(age[1]) < 60 and "last minute      1 page done" in out, out
    rows = out[out.index("busiest hosts") :].splitlines()
    assert rows[2].split()[:4] == ["a.example", "5", "5.00", "s"] and "due " in rows[2], out
    assert rows[3].split()[:2] == ["b.example", "2"] and "robots.txt unreachable until" in rows[3], out
    assert len(rows) == 4
    data = json.loads(_frontier_command(redis_url, crawl_name, "--json"))
    assert [h["host"] for h in data["busiest"]["hosts"]] == ["a.example", "b.example"]
    assert "busiest hosts" not in _frontier_command(redis_url, crawl_name, "--hosts", "0")


def test_an_expired_lease_is_named_so(redis_url, redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name, lease_seconds=10)
    f.put([Entry(url="http://a.example/", payload=b"x")])
    f.get(1, now=now_ms() - 40_000)  # leased 40 s ago, never renewed: expired 30 s ago
    assert 39 <= f.stats()["oldest_lease_age"] <= 45
    out = _frontier_command(redis_url, crawl_name, "-s", "FRONTIER_LEASE_SECONDS=10")
    # (30 s ago when leased, and the command's start: some 15 s at most on a loaded machine)
    assert re.search(r"the oldest expired (29|3\d|4[0-5]) s ago \(its worker stopped renewing\)", out), out


def test_the_numbers_over_shards(redis_client, crawl_name):
    shards = [Frontier(redis_client, crawl_name, host_interval=5, shard=k) for k in range(2)]
    sharded = ShardedFrontier(shards, ["r1", "r2"])  # (names on the ring that put c apart from a and b)
    try:
        now = now_ms()
        _busy_frontier(sharded, now)
        assert [h["host"] for h in sharded.busiest(5, now=now)["hosts"]] == ["a.example", "b.example"]
        stats = sharded.stats()
        assert stats["acked_last_minute"] == 1 and 19 <= stats["oldest_lease_age"] <= 25
        assert stats["seen"]["kind"] == "sets"
        assert [sharded.ring.index(f"{h}.example") for h in "abc"] == [0, 0, 1]
    finally:
        sharded.clear()


@pytest.mark.parametrize("command", [["frontier"], ["submit", "http://a.example/"], ["serve", "--port", "6811"]])
def test_a_crawl_name_one_letter_off_gets_a_did_you_mean(command, redis_url, redis_client, crawl_name, tmp_path):
    real = crawl_name + "-news"
    Frontier(redis_client, real).put([Entry(url="http://a.example/", payload=b"x")])
    try:
        out = _on_crawl(redis_url, command, crawl_name + "-nwes", tmp_path)
        assert out.returncode == 2, out.stderr
        assert f"; did you mean {real}? name one with --crawl NAME" in out.stderr, out.stderr
    finally:
        Frontier(redis_client, real).clear()


def test_serve_waits_for_a_crawl_yet_to_start_when_told_to(redis_url, crawl_name, tmp_path):
    """``serve --crawl NAME --wait``: the crawl is not there yet; it says so in one line and
    serves, and its API answers once the crawl starts."""
    env = {**clean_env(), "REDIS_URL": redis_url}
    serve = ServeProcess(env, {"CRAWL_DIR": tmp_path}, tmp_path / "serve.log", ("--crawl", crawl_name, "--wait"))
    try:
        assert f"no crawl {crawl_name!r} in this Redis" in serve.tail() and "serving it once it starts" in serve.tail()
        client = redis.Redis.from_url(redis_url)
        Frontier(client, crawl_name).put([Entry(url="http://a.example/", payload=b"x")])
        assert serve.json(f"/api/crawls/{crawl_name}/frontier")["queued"] == 1
    finally:
        serve.stop()
