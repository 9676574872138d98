"""Settings profiles are chosen the Scrapy way and keep dangerous services off: the tests on
real services in this process (Redis, Cassandra, S3, page processes) (the others:
tests/e2e/test_settings.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _profile_settings(names, project=None, **env) -> dict:
    """``names``' values as the commands get them (get_project_settings), in one process."""
    environ = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_PROJECT", "SCRAPY_SETTINGS_MODULE", *names)}
    environ.update(env, **({"SCRAPY_PROJECT": project} if project else {}))
    code = (
        "import json, sys; from scrapy.utils.project import get_project_settings; s = get_project_settings(); "
        "print(json.dumps({n: s.get(n) for n in sys.argv[1:]}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *names], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_distributed_profile_reads_the_shared_stores_from_the_environment():
    """One ``export`` serves every command of the production profile (docs/OPERATIONS.md, "Several
    workers"): the UrlStore, the archive and the networks the crawl may reach; unset, the
    defaults; the local profile keeps its defaults."""
    env = {
        "URLSTORE_BACKEND": "cassandra",
        "CASSANDRA_PORT": "19042",
        "CASSANDRA_KEYSPACE": "news",
        "ARCHIVE_S3_BUCKET": "crawl-archive",
        "ARCHIVE_S3_ENDPOINT_URL": "http://127.0.0.1:8333",
        "ARCHIVE_S3_REGION": "eu-west-1",
        "NETWORK_GUARD_ALLOW": "127.0.0.0/8, 10.1.0.0/16",
    }
    expected = {**env, "NETWORK_GUARD_ALLOW": ["127.0.0.0/8", "10.1.0.0/16"]}
    assert _profile_settings(list(env), "distributed", **env) == expected
    defaults = {
        "URLSTORE_BACKEND": "sqlite",
        "CASSANDRA_PORT": 9042,
        "CASSANDRA_KEYSPACE": "crawler",
        "ARCHIVE_S3_BUCKET": "",
        "ARCHIVE_S3_ENDPOINT_URL": "",
        "ARCHIVE_S3_REGION": "",
        "NETWORK_GUARD_ALLOW": [],
    }
    assert _profile_settings(list(env), "distributed") == defaults
    assert _profile_settings(list(env), None, **env) == defaults
