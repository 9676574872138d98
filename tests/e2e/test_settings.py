"""Settings profiles are chosen the Scrapy way and keep dangerous services off.

Here: the end-to-end tests (commands and workers as subprocesses); the others of this
subject: tests/integration/test_settings.py."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]


def scrapy_setting(name, project=None, **env):
    environ = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_PROJECT", "SCRAPY_SETTINGS_MODULE")}
    environ.update(env)
    if project:
        environ["SCRAPY_PROJECT"] = project
    out = subprocess.run(
        [sys.executable, "-m", "scrapy", "settings", "--get", name],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_local_profile_is_the_default_and_closes_when_idle():
    assert scrapy_setting("FRONTIER_CLOSE_WHEN_IDLE") == "True"
    assert scrapy_setting("SCHEDULER") == "crawler.scheduler.scheduler.FrontierScheduler"


def test_distributed_profile_waits_for_work_and_reads_the_environment():
    assert scrapy_setting("FRONTIER_CLOSE_WHEN_IDLE", "distributed") == "False"
    url = "redis://127.0.0.1:6399/3"
    assert scrapy_setting("REDIS_URL", "distributed", REDIS_URL=url) == url


def test_telnet_and_remote_control_are_off():
    from settings import base

    assert base.TELNETCONSOLE_ENABLED is False
    assert base.REMOTE_CONTROL_ENABLED is False
    assert scrapy_setting("REMOTE_CONTROL_ENABLED", "distributed") == "False"
    assert scrapy_setting("TELNETCONSOLE_ENABLED") == "False"


def test_an_unknown_profile_argument_stops_the_crawl_with_one_line(tmp_path):
    """``-a profile=`` (how a scrapyd job picks its profile) names local or distributed;
    another name stops ``scrapy crawl`` before it starts, exit code 2, on stderr and in
    LOG_FILE (a scrapyd job's log)."""
    log = tmp_path / "crawl.log"
    command = [sys.executable, "-m", "scrapy", "crawl", "broad", "-a", "profile=production", "-s", f"LOG_FILE={log}"]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    line = "crawl: unknown profile 'production': expected local or distributed"
    assert out.returncode == 2 and out.stderr.splitlines() == [line], out.stderr
    assert log.read_text().endswith(f"ERROR: {line}\n")


RUN = uuid.uuid4().hex[:8]  # in the crawls' names: a run's keys never meet an earlier run's


def _crawl_log(tmp_path, redis_url, name: str, args: list[str], project: str | None = None) -> str:
    """The log of an empty crawl (no seeds) that closes once idle."""
    log = tmp_path / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_PROJECT", "SCRAPY_SETTINGS_MODULE", "REDIS_URL")}
    env.update(REDIS_URL=redis_url, FRONTIER_CLOSE_WHEN_IDLE="1", **({"SCRAPY_PROJECT": project} if project else {}))
    command = [sys.executable, "-m", "scrapy", "crawl", "broad", "-a", f"crawl=test-profile-{name}-{RUN}", *args]
    command += ["-s", f"LOG_FILE={log}", "-s", f"CRAWL_DIR={tmp_path / 'crawl'}", "-s", "FRONTIER_IDLE_SECONDS=0.5"]
    try:
        out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    finally:  # (its keys go, as the crawl_name fixture's do: a shared Redis keeps no test crawl)
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"crawl:\\{{test-profile-{name}-{RUN}\\}}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()
    assert out.returncode == 0, out.stderr[-2000:]
    return log.read_text()


def test_the_distributed_profile_says_when_a_store_is_this_machines_alone(tmp_path, redis_url):
    """On the distributed profile (SCRAPY_PROJECT or ``-a profile=``), a worker whose
    UrlStore is SQLite or whose archive is a local directory says so in one line at start;
    with neither, or on the local profile, it says nothing."""
    local = tmp_path / "crawl"
    both = (
        f"WARNING: Distributed profile, but the UrlStore is SQLite ({local}/test-profile-env-{RUN}/urlstore.sqlite)"
        f" and the archive is a local directory {local}/test-profile-env-{RUN}/warc: this machine's alone, not shared with "
        "workers on other machines (URLSTORE_BACKEND=cassandra, ARCHIVE_S3_BUCKET)"
    )
    log = _crawl_log(tmp_path, redis_url, "env", [], project="distributed")
    assert [line.split("] ", 1)[1] for line in log.splitlines() if "Distributed profile" in line] == [both]
    log = _crawl_log(tmp_path, redis_url, "arg", ["-a", "profile=distributed", "-s", "URLSTORE_ENABLED=False"])
    [line] = [line for line in log.splitlines() if "Distributed profile" in line]
    assert "but the archive is a local directory" in line and "SQLite" not in line
    off = ["-s", "URLSTORE_ENABLED=False", "-s", "ARCHIVE_ENABLED=False"]
    assert "Distributed profile" not in _crawl_log(tmp_path, redis_url, "shared", off, project="distributed")
    assert "Distributed profile" not in _crawl_log(tmp_path, redis_url, "local", [])


def test_the_crawl_directory_is_the_projects_from_any_of_its_folders():
    """From a subfolder a command finds the crawls made from the project's root (a
    relative default would start a new, empty crawl there)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("CRAWL_DIR", "SCRAPY_PROJECT")}
    got = {}
    for folder in (ROOT, ROOT / "crawler" / "frontier"):
        out = subprocess.run(
            [sys.executable, "-m", "scrapy", "settings", "--get", "CRAWL_DIR"],
            cwd=folder,
            env={**environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        got[folder] = out.stdout.strip()
    assert set(got.values()) == {str(ROOT / ".crawl")}
