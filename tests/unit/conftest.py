"""Unit tests: pure code, with no service, no process of their own and no network. Here a
socket that connects anywhere, a new process, and the fixtures of the services (Redis,
Cassandra, S3) fail the test: a test that needs one of them belongs in tests/integration/
(a real service in this process) or tests/e2e/ (commands and workers as subprocesses)."""

import socket
import subprocess

import pytest


def _refused(what: str):
    def refuse(*args, **kwargs):
        raise AssertionError(f"a unit test {what}: it belongs in tests/integration/ or tests/e2e/")

    return refuse


@pytest.fixture(autouse=True)
def _no_network_and_no_process(monkeypatch):
    monkeypatch.setattr(socket.socket, "connect", _refused("connects to nothing"))
    monkeypatch.setattr(socket.socket, "connect_ex", _refused("connects to nothing"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refused("starts no process"))


@pytest.fixture
def redis_url():
    raise AssertionError("a unit test uses no Redis: it belongs in tests/integration/")


@pytest.fixture
def cassandra_session():
    raise AssertionError("a unit test uses no Cassandra: it belongs in tests/integration/")


@pytest.fixture
def s3_server():
    raise AssertionError("a unit test uses no S3 server: it belongs in tests/integration/")
