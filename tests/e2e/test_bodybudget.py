"""Back-pressure on big bodies (crawler/page/budget.py): the budget on plain values, and a real
worker crawling a loopback site of 8 MB pages whose resident memory stays bounded: the end-
to-end tests (commands and workers as subprocesses) (the others:
tests/unit/test_bodybudget.py)."""

import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from testing.servers import RedisServer
from testing.workers import clean_env, seed_file

MB = 2**20


class BigPages(BaseHTTPRequestHandler):
    """Each host: an index linking to PAGES pages of SIZE bytes (one link each)."""

    protocol_version = "HTTP/1.1"
    PAGES, SIZE = 3, 8 * MB

    def log_message(self, *args):
        pass

    def do_GET(self):
        host = self.headers.get("Host", "")
        if self.path == "/robots.txt":
            body = b"User-agent: *\nAllow: /\n"
        elif self.path == "/":
            links = "".join(f"<a href='/big/{n}'>page {n}</a>" for n in range(self.PAGES))
            body = f"<html><body><h1>{host}</h1>{links}</body></html>".encode()
        else:
            line = f"<p>{host} {self.path} fn add(x: u32) -> u32 {{ x + 1 }}</p>\n".encode()
            body = b"<html><body><a href='/'>home</a>" + line * (self.SIZE // len(line)) + b"</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html" if self.path != "/robots.txt" else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0.0


def test_a_worker_crawling_big_pages_holds_at_most_its_budget_of_them(tmp_path):
    """Six hosts of 8 MB pages: without the budget the worker held every page downloading
    at once (six and more: 48-80 MB of bodies, peak 200-230 MB); with a budget of 16 MB it
    holds two, and the pages all arrive."""
    hosts = [f"127.0.{30 + n}.1" for n in range(6)]
    servers = []
    port = 0
    for host in hosts:
        server = ThreadingHTTPServer((host, port), BigPages)
        server.daemon_threads = True
        port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    seeds = seed_file(tmp_path, [f"http://{host}:{port}/" for host in hosts])
    log = tmp_path / "worker.log"
    try:
        with RedisServer(str(tmp_path)) as redis_server:
            cmd = [sys.executable, "-m", "scrapy", "crawl", "broad", "-a", f"seeds={seeds}"]
            for name, value in {
                "CRAWL_NAME": "big",
                "CRAWL_DIR": tmp_path / "crawl",
                "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
                "FRONTIER_HOST_INTERVAL": 0.05,
                "FRONTIER_IDLE_SECONDS": 1,
                "ARCHIVE_MAX_SECONDS": 1,
                "BODY_BUDGET_BYTES": 16 * MB,
                "LOG_FILE": log,
            }.items():
                cmd += ["-s", f"{name}={value}"]
            env = {**clean_env(), "REDIS_URL": redis_server.url}
            proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            started, peak, idle = time.monotonic(), 0.0, 0.0
            while proc.poll() is None and time.monotonic() - started < 120:
                rss = rss_mb(proc.pid)
                idle = idle or (rss if time.monotonic() - started > 0.3 and "Spider opened" in _text(log) else 0)
                peak = max(peak, rss)
                time.sleep(0.05)
            if proc.poll() is None:
                proc.kill()
            assert proc.wait(10) == 0, _text(log)[-3000:]
    finally:
        for server in servers:
            server.shutdown()
    text = _text(log)
    stats = {k: int(v) for k, v in re.findall(r"'((?:bodybudget|item_scraped)[^']*)': (\d+)", text)}
    print(f"worker RSS {idle:.0f} MB when the spider opened, peak {peak:.0f} MB; {stats}")
    assert stats["item_scraped_count"] == len(hosts) * (1 + BigPages.PAGES)
    assert stats["bodybudget/waited"] >= len(hosts)
    # 16 MB of bodies held, one being read out for the page process, one archived, and
    # the small change of a crawl: well under the 48 MB and more held without a budget
    assert peak - idle < 16 + 2 * 8 + 20, (idle, peak)


def _text(path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
