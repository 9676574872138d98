"""Seed files: reading (crawler.seeds.files.read_seeds), ingestion into a real Redis
(crawler.seeds.files.ingest) and the ``scrapy seed`` command, run as a subprocess: the end-
to-end tests (commands and workers as subprocesses) (the others: tests/unit/test_seeds.py,
tests/integration/test_seeds.py)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.frontier.frontier import Frontier
from testing.seeds import SEEDS
from testing.servers import free_port
from testing.workers import crawl_command

ROOT = Path(__file__).resolve().parents[2]  # where scrapy.cfg is


@pytest.fixture
def frontier(redis_client, crawl_name):
    return Frontier(redis_client, crawl_name, seen_capacity=10_000)


SUMMARY = re.compile(
    r"^added (\d+), already seen (\d+), invalid (\d+)(?: \(first at [^)]*\))?, refused (\d+)"
    r"(?: \([^)]*\))?, (\d+) lines in [\d.]+ s \(\d+ lines/s\)$"
)


def scrapy_seed(*args, redis_url, input=None):
    env = dict(os.environ, REDIS_URL=redis_url)
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "seed", *map(str, args)],
        cwd=ROOT,
        env=env,
        input=input,
        capture_output=True,
        timeout=60,
    )


def test_command_reads_files_and_stdin(tmp_path, redis_url, redis_client, crawl_name):
    path = tmp_path / "seeds.txt"
    path.write_text(SEEDS)
    stdin = b"http://stdin.example/1  3\nhttp://a.example/1\nhttp://stdin.example/\xff\n"
    # all in Redis (FRONTIER_HOST_WINDOW=0): seeds wait in the front queues, by level
    window = ("-s", "FRONTIER_HOST_WINDOW=0")
    proc = scrapy_seed(path, "-", "-s", f"CRAWL_NAME={crawl_name}", *window, redis_url=redis_url, input=stdin)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode().splitlines()
    assert len(out) == 1, out
    match = SUMMARY.match(out[0])
    assert match, out[0]
    # file: 4 added, 1 seen, 3 invalid; stdin: 1 added, 1 seen, 1 invalid (not UTF-8)
    assert tuple(int(g) for g in match.groups()) == (5, 2, 4, 0, 11)
    err = proc.stderr.decode()
    assert f"invalid: {path}:7: bad priority 'high'" in err
    assert "invalid: <stdin>:3: not valid UTF-8" in err
    assert "\r" not in err  # no progress line: stderr is not a terminal
    frontier = Frontier(redis_client, crawl_name)
    assert frontier.stats()["front_by_level"] == [2, 2, 1]  # priorities 5, 3 | 0, 0 | -2


def test_command_unreadable_file_exits_2_as_the_crawl_command_does(tmp_path, redis_url, crawl_name):
    proc = scrapy_seed(tmp_path / "missing.txt", "--crawl", crawl_name, redis_url=redis_url)
    assert proc.returncode == 2
    err = proc.stderr.decode().strip()
    assert err == f"seed: cannot read seed file {tmp_path / 'missing.txt'}: No such file or directory"
    assert proc.stdout == b""


def test_command_holds_seeds_past_a_block_on_disk_and_says_so_when_it_cannot(
    tmp_path, redis_url, redis_client, crawl_name
):
    """More seeds than SEED_GROUP_URLS are held on disk (SEED_SPOOL_DIR) until the input is
    read, then pushed by host; a spool directory that cannot be made stops the command with
    a clear line, nothing pushed, and the same command with room adds every seed."""
    stdin = "".join(f"http://h{i % 7}.example/{i}\n" for i in range(40)).encode()
    common = ("-", "-s", f"CRAWL_NAME={crawl_name}", "-s", "SEED_GROUP_URLS=10", "-s", f"CRAWL_DIR={tmp_path}")
    missing = tmp_path / "no-such-dir"
    proc = scrapy_seed(*common, "-s", f"SEED_SPOOL_DIR={missing}", redis_url=redis_url, input=stdin)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert f"seed: cannot hold seeds on disk in {missing} (SEED_SPOOL_DIR): " in err, err
    assert "the same command again adds them" in err and "Traceback" not in err
    assert proc.stdout.decode().startswith("added 0, already seen 0, invalid 0, refused 0, 11 lines in")
    assert Frontier(redis_client, crawl_name).stats()["queued"] == 0

    spool = tmp_path / "spool"
    spool.mkdir()
    proc = scrapy_seed(*common, "-s", f"SEED_SPOOL_DIR={spool}", redis_url=redis_url, input=stdin)
    assert proc.returncode == 0, proc.stderr
    assert SUMMARY.match(proc.stdout.decode().strip()).groups() == ("40", "0", "0", "0", "40")
    assert Frontier(redis_client, crawl_name).stats()["queued"] == 40
    assert list(spool.iterdir()) == []


def test_command_redis_unreachable_exits_1(tmp_path, crawl_name):
    path = tmp_path / "seeds.txt"
    path.write_text("http://a.example/\n")
    port = free_port()  # nobody listens there
    proc = scrapy_seed(path, "--crawl", crawl_name, "--no-progress", redis_url=f"redis://127.0.0.1:{port}/0")
    assert proc.returncode == 1
    err = proc.stderr.decode().strip()
    assert err.startswith(f"seed: cannot connect to Redis (redis://127.0.0.1:{port}/0):"), err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_command_refuses_seeds_the_network_guard_will_refuse_and_names_the_setting(
    tmp_path, redis_url, redis_client, crawl_name
):
    path = tmp_path / "seeds.txt"
    path.write_text("http://127.0.0.1:8765/\nhttp://localhost/x\nhttp://10.1.2.3/\nhttp://a.example/\n")
    proc = scrapy_seed(path, "--crawl", crawl_name, "--no-progress", redis_url=redis_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().startswith("added 1, already seen 0, invalid 0, refused 3 (network_guard 3), 4 lines")
    assert "NETWORK_GUARD_ALLOW" in proc.stderr.decode()
    assert Frontier(redis_client, crawl_name).stats()["queued"] == 1
    allowed = scrapy_seed(path, "--crawl", crawl_name, "--no-progress", "-s", "NETWORK_GUARD_ALLOW=127.0.0.0/8",
                          redis_url=redis_url)  # fmt: skip
    assert allowed.stdout.decode().startswith(
        "added 2, already seen 1, invalid 0, refused 1 (network_guard 1), 4 lines"
    )


def test_a_crawl_keeps_the_spill_store_it_began_with(tmp_path, redis_url, redis_client, crawl_name):
    """With FRONTIER_HOST_WINDOW, the crawl's first spilling client records its spill store; a
    `scrapy seed` or a worker with another (an SQLite file under another CRAWL_DIR, as on
    another machine), or with none (FRONTIER_HOST_WINDOW=0), is refused with exit 2 and pushes
    nothing, fetches nothing."""
    path = tmp_path / "seeds.txt"
    path.write_text("".join(f"http://a.example/{i}\n" for i in range(10)))
    window = ("-s", "FRONTIER_HOST_WINDOW=4", "-s", "FRONTIER_SPILL_AGE=0")
    first, other = tmp_path / "first", tmp_path / "other"
    proc = scrapy_seed(
        path, "--crawl", crawl_name, "--no-progress", *window, "-s", f"CRAWL_DIR={first}", redis_url=redis_url
    )
    assert proc.returncode == 0, proc.stderr
    stats = Frontier(redis_client, crawl_name).stats()
    assert stats["queued"] == 10 and stats["spilled"] == 10  # (written out; a seed's rounds load no window)

    more = tmp_path / "more.txt"
    more.write_text("http://b.example/\n")
    proc = scrapy_seed(
        more, "--crawl", crawl_name, "--no-progress", *window, "-s", f"CRAWL_DIR={other}", redis_url=redis_url
    )
    assert proc.returncode == 2
    err = proc.stderr.decode().strip()
    assert err.startswith(f"seed: crawl '{crawl_name}' spills its queued URLs to the SQLite file {first}/"), err
    assert f"this process's spill store is the SQLite file {other}/" in err and "URLSTORE_BACKEND=cassandra" in err
    assert Frontier(redis_client, crawl_name).stats()["queued"] == 10
    # a process that keeps every URL in Redis would bypass the windows and leave the chunks
    proc = scrapy_seed(
        more, "--crawl", crawl_name, "--no-progress", "-s", "FRONTIER_HOST_WINDOW=0", "-s", f"CRAWL_DIR={first}",
        redis_url=redis_url,
    )  # fmt: skip
    assert proc.returncode == 2
    err = proc.stderr.decode().strip()
    assert "and this process keeps every queued URL in Redis (FRONTIER_HOST_WINDOW=0)" in err, err
    assert Frontier(redis_client, crawl_name).stats()["queued"] == 10

    def refused_worker(crawl_dir, window: int) -> str:
        """A worker's stderr; it was refused (exit 2) and took nothing."""
        settings = {"CRAWL_NAME": crawl_name, "CRAWL_DIR": crawl_dir, "FRONTIER_HOST_WINDOW": window}
        crawl = subprocess.run(
            crawl_command(tmp_path / "w.jsonl", settings={**settings, "LOG_FILE": tmp_path / "w.log"}),
            cwd=ROOT,
            env=dict(os.environ, REDIS_URL=redis_url),
            capture_output=True,
            timeout=120,
        )
        assert crawl.returncode == 2, (tmp_path / "w.log").read_text()
        stats = Frontier(redis_client, crawl_name).stats()
        assert stats["queued"] == 10 and stats["leased"] == 0
        return crawl.stderr.decode()

    err = refused_worker(other, 4)
    assert f"crawl: crawl '{crawl_name}' spills its queued URLs to the SQLite file {first}/" in err
    assert "keeps every queued URL in Redis (FRONTIER_HOST_WINDOW=0)" in refused_worker(first, 0)


def test_command_on_the_embedded_redis_writes_a_large_input_out_from_a_process_of_its_own(tmp_path, crawl_name):
    """A large input's rounds (SEED_ROUNDS_PROCESS_FROM, set low here) run in a process that
    makes the crawl's spill again from the settings: on the embedded Redis it joins the
    server the command started (it neither starts another nor stops this one), and every
    seed is written out to the crawl's spill store once; no warning (a process that could
    not make its spill, or made it on another Redis, says so on stderr)."""
    path = tmp_path / "seeds.txt"
    path.write_text("".join(f"http://h{i % 300}.example/p{i}\n" for i in range(60_000)))
    options = ["-s", "SEED_ROUNDS_PROCESS_FROM=1000", "-s", "FRONTIER_SPILL_AGE=0", "-s", "SEED_BATCH_SIZE=100"]
    options += ["-s", "SEED_GROUP_URLS=0", "--no-progress"]
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["CRAWL_DIR"] = str(tmp_path / "crawl")
    command = [sys.executable, "-m", "scrapy", "seed", str(path), "--crawl", crawl_name, *options]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().startswith("added 60000, already seen 0, invalid 0, refused 0"), proc.stdout
    assert proc.stderr.decode() == ""
    shown = subprocess.run(
        [sys.executable, "-m", "scrapy", "frontier", "--crawl", crawl_name], cwd=ROOT, env=env, capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "queued           60000  (60000 on disk, in the spill store;" in shown.stdout.decode()


def test_command_stopped_by_sigterm_says_what_it_pushed_and_removes_its_seeds_on_disk(
    tmp_path, redis_url, redis_client, crawl_name
):
    """SIGTERM (a service manager's stop) stops ``scrapy seed`` as Ctrl-C does: the summary
    of what it pushed, marked, exit 143, the seeds it held on disk removed (it died on the
    spot, silent, its spool left behind)."""
    import signal
    import time

    spool = tmp_path / "spool"
    spool.mkdir()
    cmd = [sys.executable, "-m", "scrapy", "seed", "-", "--crawl", crawl_name, "-s", "SEED_GROUP_URLS=10"]
    cmd += ["-s", f"SEED_SPOOL_DIR={spool}", "-s", f"CRAWL_DIR={tmp_path}", "-s", "SEED_PROGRESS_INTERVAL=0.1"]
    env = dict(os.environ, REDIS_URL=redis_url, FRONTIER_HOST_WINDOW="4")
    log = tmp_path / "stderr"
    with log.open("wb") as stderr:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    try:
        proc.stdin.write("".join(f"http://h{i % 7}.example/{i}\n" for i in range(5000)).encode())
        proc.stdin.flush()  # (and left open: a producer still writing)
        deadline = time.monotonic() + 30
        while not any(part.is_dir() and any(part.iterdir()) for part in spool.iterdir()):  # (held on disk)
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, log.read_text()
    summary = out.decode().strip()
    assert summary.endswith(" [terminated]") and SUMMARY.match(summary.removesuffix(" [terminated]")), summary
    assert list(spool.iterdir()) == []


def test_command_whose_spill_store_fails_says_so_in_a_line(tmp_path, redis_url, crawl_name):
    """A spill store that cannot be opened or written (here CRAWL_DIR is a file; a full
    disk likewise) ends ``scrapy seed`` with one line saying what and where the seeds
    pushed are, exit 1, not a traceback."""
    not_a_dir = tmp_path / "crawls"
    not_a_dir.write_text("")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.example/\n")
    proc = scrapy_seed(seeds, "--crawl", crawl_name, "-s", f"CRAWL_DIR={not_a_dir}", redis_url=redis_url)
    assert proc.returncode == 1
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1 and err[0].startswith("seed: spill store error:") and "Traceback" not in err[0], err
