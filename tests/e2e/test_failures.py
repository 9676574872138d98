"""Failures: a URL's own retries (the delayed set), a host slowed by failures and brought back
by answers (AIMD), a host down (backed off, probed), 429/Retry-After; all shared by every
worker through the frontier: the end-to-end tests (commands and workers as subprocesses)
(the others: tests/unit/test_failures.py, tests/integration/test_failures.py)."""

import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from testing.workers import clean_env, crawl_command, read_pages

ROOT = Path(__file__).resolve().parents[2]


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
