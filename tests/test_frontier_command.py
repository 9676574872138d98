"""`scrapy frontier`: the frontier's numbers one command away."""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from crawler.commands.frontier import watch
from crawler.frontier.frontier import Entry, Frontier
from tests.harness import clean_env

ROOT = Path(__file__).resolve().parents[1]


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


def test_an_unknown_crawl_is_named_with_the_crawls_there_are(redis_url, redis_client, crawl_name):
    other = crawl_name + "-other"
    Frontier(redis_client, other).put([Entry(url="http://a.example/", payload=b"x")])
    try:
        out = _run_frontier_command(redis_url, crawl_name)
        assert out.returncode == 1 and out.stdout == ""
        assert f"no crawl {crawl_name!r} in this Redis" in out.stderr and other in out.stderr, out.stderr
        assert not redis_client.exists(f"crawl:{{{crawl_name}}}:counters")  # nothing created
    finally:
        Frontier(redis_client, other).clear()


def test_status_says_finished_running_or_waiting_and_why(redis_url, redis_client, crawl_name):
    f = Frontier(redis_client, crawl_name)
    f.put([Entry(url="http://done.example/", payload=b"x")])
    (lease,), _ = f.get(1)
    f.ack(lease.id)
    assert "status           finished" in _frontier_command(redis_url, crawl_name)
    f.put([Entry(url=f"http://{h}.example/{i}", payload=b"x") for h in "ab" for i in range(3)])
    assert "status           running: 6 URLs queued" in _frontier_command(redis_url, crawl_name)
    limits = {"minimum": 300, "maximum": 7200, "quiet": 600}
    f.block_until("a.example", retry_after=3600, reason="robots", **limits)
    f.fail("b.example", "down", "http://b.example/0", **limits)
    assert f.get(10)[0] == []  # (sorts every URL into its host's back queue)
    out = _frontier_command(redis_url, crawl_name)
    status = next(line for line in out.splitlines() if line.startswith("status"))
    assert "waiting until" in status and "(in 5 min): 6 URLs queued" in status, out
    assert "robots.txt unreachable: 1 host, 3 URLs" in out and "host down: 1 host, 3 URLs" in out, out
    data = json.loads(_frontier_command(redis_url, crawl_name, "--json"))
    assert data["status"]["state"] == "waiting" and set(data["status"]["deferred"]) == {"robots", "down"}
