"""Host back-off on 429/503: shared by every worker, the page retried later."""

import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from crawler.frontier.frontier import Entry, Frontier
from crawler.middlewares.failures import retry_after_seconds
from tests.workers import clean_env, crawl_command, read_pages

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_700_000_000_000
LIMITS = {"minimum": 10, "maximum": 100, "quiet": 300}


@pytest.fixture
def frontier(redis_client, crawl_name):
    return Frontier(redis_client, crawl_name, host_interval=1.0)


def test_back_off_doubles_is_capped_and_forgiven(frontier):
    delays = [frontier.back_off("a.example", now=T0 + i * 1000, **LIMITS) for i in range(5)]
    assert delays == [10, 20, 40, 80, 100]
    # a quiet period later the doubling starts over
    assert frontier.back_off("a.example", now=T0 + 4000 + 301_000, **LIMITS) == 10


def test_retry_after_wins_but_is_capped(frontier):
    assert frontier.back_off("a.example", retry_after=7, now=T0, **LIMITS) == 7
    assert frontier.back_off("b.example", retry_after=7200, now=T0, **LIMITS) == 100


def test_backed_off_host_is_not_handed_out(frontier):
    frontier.push_many([Entry(url=f"http://a.example/{i}", payload=f"{i}".encode()) for i in range(2)])
    leases, _ = frontier.pop(1, now=T0)
    assert len(leases) == 1
    frontier.back_off("a.example", now=T0 + 10, **LIMITS)
    frontier.ack(landed=[leases[0].id], now=T0 + 20)  # its download ended: back in the heap
    assert frontier.pop(1, now=T0 + 9_999)[0] == []
    assert len(frontier.pop(1, now=T0 + 10_010)[0]) == 1


def test_back_off_never_brings_a_host_forward(frontier):
    frontier.push(Entry(url="http://a.example/1", payload=b"1"), now=T0)
    frontier.back_off("a.example", retry_after=50, now=T0, **LIMITS)
    frontier.back_off("a.example", retry_after=5, now=T0 + 1, **LIMITS)
    assert frontier.pop(1, now=T0 + 49_000)[0] == []
    assert len(frontier.pop(1, now=T0 + 50_000)[0]) == 1


def test_retry_after_header_forms():
    assert retry_after_seconds(b"120") == 120
    assert retry_after_seconds(None) == 0
    assert retry_after_seconds(b"soon") == 0
    assert retry_after_seconds(b"Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470) == 10


class _Handler(BaseHTTPRequestHandler):
    hits: list = []
    lock = threading.Lock()

    def do_GET(self):
        with self.lock:
            first = self.path == "/a" and "/a" not in [p for p, _ in self.hits]
            self.hits.append((self.path, time.monotonic()))
        if self.path == "/robots.txt":
            self.send_response(404)
            self.end_headers()
            return
        if first:
            self.send_response(429)
            self.send_header("Retry-After", "2")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"<html><body>ok</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_429_backs_the_host_off_and_the_page_is_fetched_later(tmp_path):
    _Handler.hits = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    try:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"http://127.0.0.1:{port}/a\nhttp://127.0.0.1:{port}/b\n")
        out = tmp_path / "out.jsonl"
        settings = {
            "CRAWL_DIR": tmp_path / "crawl",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": 0.5,  # /b is due after the 429 has been seen
            "FRONTIER_IDLE_SECONDS": 2,
        }
        cmd = crawl_command(out, seeds, settings)
        proc = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        httpd.shutdown()
        httpd.server_close()
    hits = [(path, t) for path, t in _Handler.hits if path != "/robots.txt"]
    a_times = [t for path, t in hits if path == "/a"]
    b_times = [t for path, t in hits if path == "/b"]
    assert len(a_times) == 2 and len(b_times) == 1, hits
    # the whole host waited: the retry and the other page came at least Retry-After later
    assert a_times[1] - a_times[0] >= 1.9
    assert b_times[0] - a_times[0] >= 1.9
    pages = {page["url"].rsplit("/", 1)[1]: page["status"] for page in read_pages(out)}
    assert pages == {"a": 200, "b": 200}
    assert "'backoff/throttled/429': 1" in proc.stderr
