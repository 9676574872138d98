"""What a test needs that may not be on a user's machine (Cassandra, S3, Chromium, Toxiproxy...):
skipped there with the reason, failed in CI unless CRAWLER_TESTS_WITHOUT names it; and
the project's settings as a dict, for components built in-process."""

from __future__ import annotations

import os

import pytest


def project_settings(**overrides) -> dict:
    """The project's settings (settings/base.py) as a dict, with ``overrides``: for
    components built in-process with scrapy.utils.test.get_crawler."""
    import settings.base

    values = {k: v for k, v in vars(settings.base).items() if k.isupper()}
    values.update(overrides)
    return values


SERVICES = ("cassandra", "s3", "chromium", "redis-tls", "redis-cli", "pywb", "luacheck", "toxiproxy")

OPTED_OUT = "CRAWLER_TESTS_WITHOUT"  # e.g. "chromium,redis-tls": CI skips those as a user's machine does


def require_service(name: str, reason: str) -> None:
    """The test cannot run here for want of ``name`` (one of SERVICES): skipped with
    ``reason`` on a user's machine; in CI (``CI`` set) a failure, unless ``name`` is in
    CRAWLER_TESTS_WITHOUT, so that no test is skipped silently there."""
    assert name in SERVICES, name
    opted_out = {n.strip() for n in os.environ.get(OPTED_OUT, "").split(",") if n.strip()}
    if os.environ.get("CI") and name not in opted_out:
        pytest.fail(f"{name} is needed in CI ({reason}); or set {OPTED_OUT}={name} to skip its tests", pytrace=False)
    pytest.skip(reason)
