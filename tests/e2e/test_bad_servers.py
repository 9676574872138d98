"""Servers that misbehave at the socket level (one that never answers, one whose body never
ends, one that resets every connection, one that trickles a byte at a time) beside healthy
hosts: the timeouts and size caps hold, each bad URL is recorded with its fate, the
healthy hosts keep their pace (by the site's own arrival log), and the worker ends by
itself."""

import socket
import statistics
import struct
import subprocess
import threading
import time
from pathlib import Path

from crawler.demo.site import serve_site
from testing.workers import clean_env, crawl_command, log_tail, read_pages

ROOT = Path(__file__).resolve().parents[2]
BAD = {"127.0.0.60": "hang", "127.0.0.61": "endless", "127.0.0.62": "reset", "127.0.0.63": "trickle"}
INTERVAL = 0.2
TIMEOUT = 4  # DOWNLOAD_TIMEOUT
MAX_SIZE = 2 * 2**20  # DOWNLOAD_MAXSIZE


class BadServers:
    """One port on several loopback addresses; robots.txt answers 404, every other
    request gets the address's behaviour. Each connection runs in its own thread and
    stops when the server stops."""

    def __init__(self):
        self.stop = threading.Event()
        self.sockets = []
        self.port = 0

    def __enter__(self):
        for address in BAD:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((address, self.port))
            self.port = s.getsockname()[1]
            s.listen(16)
            s.settimeout(0.2)
            self.sockets.append(s)
            threading.Thread(target=self._accept, args=(s, BAD[address]), daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for s in self.sockets:
            s.close()

    def _accept(self, listener, behaviour):
        while not self.stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(conn, behaviour), daemon=True).start()

    def _serve(self, conn, behaviour):
        with conn:
            conn.settimeout(1.0)
            try:
                request = conn.recv(65536)
            except OSError:
                return
            if b" /robots.txt " in request:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            if behaviour == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return  # closed with RST
            if behaviour == "hang":
                self.stop.wait(3 * TIMEOUT)
                return
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n<html><body>")
            chunk, pause = (b"<p>more</p>" * 1000, 0.0) if behaviour == "endless" else (b"x", 0.5)
            deadline = time.monotonic() + 3 * TIMEOUT
            while not self.stop.is_set() and time.monotonic() < deadline:
                try:
                    conn.sendall(chunk)
                except OSError:
                    return  # the crawler gave up: what the test wants
                if pause:
                    self.stop.wait(pause)


def test_bad_servers_are_bounded_and_healthy_hosts_keep_their_pace(tmp_path, redis_url):
    with BadServers() as bad, serve_site(hosts=3, pages=12) as site:
        bad_urls = [f"http://{address}:{bad.port}/page{i}.html" for address in BAD for i in range(2)]
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(site.seeds + bad_urls) + "\n")
        out = tmp_path / "pages.jsonl"
        settings = {
            "CRAWL_NAME": f"test-bad-{bad.port}",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": INTERVAL,
            "FRONTIER_IDLE_SECONDS": 1,
            "DOWNLOAD_TIMEOUT": TIMEOUT,
            "DOWNLOAD_MAXSIZE": MAX_SIZE,
            "URL_RETRY_ATTEMPTS": 1,  # no retry: each bad URL once
            "HOST_DOWN_AFTER": 5,
            "LOG_FILE": tmp_path / "worker.log",
        }
        env = {**clean_env(), "REDIS_URL": redis_url}
        started = time.monotonic()
        proc = subprocess.run(crawl_command(out, seeds, settings), cwd=ROOT, env=env, timeout=240)
        took = time.monotonic() - started
        hits = site.page_hits()
    assert proc.returncode == 0, log_tail([tmp_path / "worker.log"], 60, "no log")
    pages = {p["url"]: p for p in read_pages(out)}
    fates = {url: (pages[url]["status"], (pages[url]["error"] or "")[:200]) for url in bad_urls if url in pages}
    assert set(fates) == set(bad_urls), fates
    expected = {"hang": "Timeout", "trickle": "Timeout", "endless": "Cancelled", "reset": "ConnectionLost"}
    for url, (status, error) in fates.items():
        behaviour = BAD[url.split("/")[2].split(":")[0]]
        assert status is None and expected[behaviour] in error, (url, behaviour, error)  # a failure, recorded
    # the healthy hosts: every page, each host's requests spaced at its interval, not held
    # up by the downloads hanging meanwhile (gap: next arrival - previous end - interval)
    assert len({(h.host, h.path) for h in hits}) >= 3 * 12
    gaps = []
    for host in {h.host for h in hits}:
        mine = sorted((h for h in hits if h.host == host), key=lambda h: h.start)
        gaps += [b.start - a.end - INTERVAL for a, b in zip(mine, mine[1:])]
    assert min(gaps) > -0.01, min(gaps)  # polite
    assert statistics.median(gaps) < 0.1, sorted(gaps)[-10:]  # not held up
    assert took < 90, took
