"""Credentials never show: a crawl on a Redis that requires a password and an S3 archive
(the session's SeaweedFS on loopback, whose one identity has a secret key of this
session's own) with its secret key, then ``scrapy frontier``, the same commands with a
wrong Redis password, and a crawl with a wrong S3 secret key: the secrets appear in no
log line, stats dump, output or error message."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

from crawler.demo.site import serve_site
from testing.servers import RedisServer
from testing.stores import s3_archive_settings
from testing.workers import clean_env, crawl_command, log_tail, loopback_settings, read_pages, seed_file

ROOT = Path(__file__).resolve().parents[2]
REDIS_SECRET = "redis-Secret-7c1f"


def _scrapy(args: list[str], env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_no_secret_appears_in_logs_stats_output_or_errors(tmp_path, s3, s3_server):
    endpoint, bucket = s3
    aws_secret = s3_server.credentials["AWS_SECRET_ACCESS_KEY"]  # the server checks every signature with it
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == aws_secret and "Secret" in aws_secret
    name = f"test-{uuid.uuid4().hex[:12]}"
    with RedisServer(str(tmp_path), password=REDIS_SECRET) as redis_server, serve_site(hosts=2, pages=6) as site:
        assert REDIS_SECRET in redis_server.url
        env = {**clean_env(), "REDIS_URL": redis_server.url, "CASSANDRA_PASSWORD": "cass-Secret-33aa"}
        seeds = seed_file(tmp_path, site.seeds)
        out = tmp_path / "pages.jsonl"
        settings = loopback_settings(
            name,
            tmp_path / "worker.log",
            FRONTIER_IDLE_SECONDS=1,
            LOG_LEVEL="DEBUG",
            **s3_archive_settings(endpoint, bucket),
        )
        crawl = subprocess.run(
            crawl_command(out, seeds, settings), cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
        )
        assert crawl.returncode == 0, log_tail([tmp_path / "worker.log"], 40, "no log")
        assert len(read_pages(out)) >= 12
        frontier = _scrapy(["frontier", "--crawl", name], env)
        as_json = _scrapy(["frontier", "--crawl", name, "--json"], env)
        assert frontier.returncode == 0 and "finished" in frontier.stdout, frontier.stderr
        # the wrong password, and a server that is not there
        wrong = {**env, "REDIS_URL": redis_server.url.replace(REDIS_SECRET, REDIS_SECRET + "-wrong")}
        refused = {**env, "REDIS_URL": f"redis://:{REDIS_SECRET}@127.0.0.1:1/0"}
        failures = [_scrapy(["frontier", "--crawl", name], e) for e in (wrong, refused)]
        wrong_crawl = subprocess.run(
            crawl_command(tmp_path / "again.jsonl", None, {**settings, "LOG_FILE": tmp_path / "wrong.log"}),
            cwd=ROOT,
            env=wrong,
            capture_output=True,
            text=True,
            timeout=30,
        )
        # a wrong S3 secret key: the server refuses the bucket check at start, and the
        # crawl stops before anything is fetched (a setting to fix, not an outage)
        refused_s3 = subprocess.run(
            crawl_command(
                tmp_path / "refused.jsonl",
                seeds,
                {
                    **settings,
                    "CRAWL_NAME": f"{name}-s3",
                    "LOG_FILE": tmp_path / "refused.log",
                    "ARCHIVE_RETRY_MIN": 0.2,
                    "WORKER_STOP_TIMEOUT": 2,
                },
            ),
            cwd=ROOT,
            env={**env, "AWS_SECRET_ACCESS_KEY": aws_secret + "-wrong"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert all(f.returncode == 1 and f.stderr.startswith("frontier: ") for f in failures), failures
    # a wrong password is a setting to fix, not an outage to wait out: the worker stops
    assert wrong_crawl.returncode == 1
    assert "Redis refused this worker (AuthenticationError" in (tmp_path / "wrong.log").read_text(errors="replace")
    refused_log = (tmp_path / "refused.log").read_text(errors="replace")
    assert refused_s3.returncode == 2, refused_log[-3000:]
    assert refused_s3.stderr.strip().splitlines() == [
        f"crawl: s3://{bucket} refuses this worker (403): check the credentials (the AWS chain) and ARCHIVE_S3_BUCKET"
    ], refused_s3.stderr[-3000:]
    assert "retrying in" not in refused_log  # not waited out as an outage
    assert not (tmp_path / "crawl" / f"{name}-s3" / "archive-spool").exists()  # nothing fetched
    texts = {
        "worker log": (tmp_path / "worker.log").read_text(errors="replace"),
        "crawl output": crawl.stdout + crawl.stderr,
        "frontier": frontier.stdout + frontier.stderr,
        "frontier --json": as_json.stdout + as_json.stderr,
        "wrong password": failures[0].stdout + failures[0].stderr,
        "no server": failures[1].stdout + failures[1].stderr,
        "crawl with the wrong password": wrong_crawl.stdout + wrong_crawl.stderr,
        "crawl with the wrong S3 key": refused_s3.stdout + refused_s3.stderr,
        "log with the wrong S3 key": refused_log,
    }
    wrong_log = tmp_path / "wrong.log"
    if wrong_log.exists():
        texts["log with the wrong password"] = wrong_log.read_text(errors="replace")
    assert "Dumping Scrapy stats" in texts["worker log"]  # the stats are in there
    for what, text in texts.items():
        for secret in (REDIS_SECRET, aws_secret, "cass-Secret-33aa"):
            assert secret not in text, f"{secret} in {what}"
