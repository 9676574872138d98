"""TLS to Cassandra (CASSANDRA_TLS*), through the real driver against a real TLS listener.

The Cassandra node the tests use listens without TLS, so the listener on 127.0.0.1 is a
TLS endpoint that completes the handshake with a certificate the test makes, then closes:
the driver's connection fails after it (NoHostAvailable), and the listener records whether
the handshake succeeded. What is tested is what the crawler controls: that the store dials
with TLS, checks the node's certificate against the configured CA and the address it
dialled, and presents a client certificate when one is configured.
"""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from scrapy.settings import Settings

from crawler.config.validation import problems
from crawler.urlstore.cassandra import CassandraUrlStore
from crawler.urlstore.cassandra_cluster import tls_context
from testing.services import project_settings
from testing.tls import certificate, pem


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a node certificate for 127.0.0.1 and a client certificate it signed, and an
    unrelated CA."""
    tmp = tmp_path_factory.mktemp("pki")
    ca, ca_key = certificate("test CA", ca=True)
    node, node_key = certificate("node", ca, ca_key, ip="127.0.0.1")
    client, client_key = certificate("crawler", ca, ca_key)
    other, other_key = certificate("other CA", ca=True)
    return {
        "ca": pem(tmp, "ca", ca, ca_key)[0],
        "node": pem(tmp, "node", node, node_key),
        "client": pem(tmp, "client", client, client_key),
        "other_ca": pem(tmp, "other", other, other_key)[0],
    }


class TlsListener:
    """127.0.0.1:port, answering TLS handshakes (client certificate required when
    ``client_ca``) and closing; ``handshakes`` holds the outcome of each."""

    def __init__(self, node: tuple[Path, Path], client_ca: Path | None = None):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(*node)
        if client_ca:
            self.context.verify_mode = ssl.CERT_REQUIRED
            self.context.load_verify_locations(client_ca)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.handshakes: list[str] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            conn.settimeout(3)
            try:
                with self.context.wrap_socket(conn, server_side=True) as tls:
                    peer = tls.getpeercert()
                    self.handshakes.append("ok, client certificate" if peer else "ok")
            except (ssl.SSLError, OSError) as exc:
                self.handshakes.append(f"failed: {exc.__class__.__name__}")
                conn.close()

    def close(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def _settings(port: int, **tls) -> Settings:
    return Settings(
        project_settings(
            URLSTORE_BACKEND="cassandra",
            CASSANDRA_HOSTS="127.0.0.1",
            CASSANDRA_PORT=port,
            CASSANDRA_TLS=True,
            CASSANDRA_CONNECT_TIMEOUT=3,  # (the listener answers no CQL: each dial fails after it)
            **tls,
        )
    )


def _dial(settings) -> None:
    from crawler.exceptions import ServiceUnreachable

    with pytest.raises(ServiceUnreachable):
        CassandraUrlStore.from_settings(settings, {})


def test_tls_is_off_unless_asked_for():
    assert tls_context(Settings(project_settings())) is None


def test_the_store_dials_with_tls_and_checks_the_node_against_the_ca(pki):
    listener = TlsListener(pki["node"])
    try:
        _dial(_settings(listener.port, CASSANDRA_TLS_CA_FILE=str(pki["ca"])))
    finally:
        listener.close()
    assert "ok" in listener.handshakes, listener.handshakes


def test_a_node_certificate_from_another_ca_is_refused(pki):
    listener = TlsListener(pki["node"])
    try:
        _dial(_settings(listener.port, CASSANDRA_TLS_CA_FILE=str(pki["other_ca"])))
    finally:
        listener.close()
    assert listener.handshakes and not any(h.startswith("ok") for h in listener.handshakes), listener.handshakes


def test_a_client_certificate_is_presented_when_configured(pki):
    listener = TlsListener(pki["node"], client_ca=pki["ca"])
    cert, key = pki["client"]
    try:
        _dial(
            _settings(
                listener.port,
                CASSANDRA_TLS_CA_FILE=str(pki["ca"]),
                CASSANDRA_TLS_CERT_FILE=str(cert),
                CASSANDRA_TLS_KEY_FILE=str(key),
            )
        )
        _dial(_settings(listener.port, CASSANDRA_TLS_CA_FILE=str(pki["ca"])))  # without one: refused
    finally:
        listener.close()
    assert "ok, client certificate" in listener.handshakes, listener.handshakes
    assert any(h.startswith("failed") for h in listener.handshakes), listener.handshakes


def test_an_unreadable_ca_file_is_an_invalid_setting(tmp_path):
    found = problems(_settings(9042, CASSANDRA_TLS_CA_FILE=str(tmp_path / "missing.pem")))
    assert found == [f"CASSANDRA_TLS_CA_FILE='{tmp_path / 'missing.pem'}': expected empty or a readable file"]
