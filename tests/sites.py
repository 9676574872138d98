"""Sites and worker-side instrumentation for the end-to-end tests (the site most of them
crawl is crawler/demo/site.py; ``ChangingSite`` is one whose pages change, with ETags and
304s, for the recrawl's tests).

``RecordingFrontier`` (for the workers, ``-s FRONTIER_CLASS=tests.sites.RecordingFrontier
-s E2E_POP_LOG=FILE``) is the crawl's own Frontier that also appends every hand-out to
FILE as a JSON line ``{"now": ms, "urls": [...], "due": [ms, ...]}``: ``now`` is the clock
value the pop script ran with, and each URL's ``due`` the time its request may leave (later
than ``now`` for a host handed out within FRONTIER_LOOKAHEAD of its due time), so a test
can check the frontier's politeness exactly, apart from the network and scheduling latency
between that time and the request reaching the site.
"""

from __future__ import annotations

import json
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from crawler.frontier import codec
from crawler.frontier.frontier import Frontier
from crawler.frontier.words import now_ms

# -- worker-side instrumentation --------------------------------------------------------


class RecordingFrontier(Frontier):
    """The crawl's Frontier, logging each hand-out (get) to the E2E_POP_LOG file."""

    pop_log: str = ""

    @classmethod
    def from_settings(cls, settings, redis, shard=None):
        frontier = super().from_settings(settings, redis, shard)
        frontier.pop_log = settings.get("E2E_POP_LOG", "")
        return frontier

    def get(self, n=1, now=None, *args, **kwargs):
        now = now_ms() if now is None else now
        leases, next_due = super().get(n, now, *args, **kwargs)
        if leases and self.pop_log:
            urls = [payload_url(lease.payload) for lease in leases]
            line = json.dumps({"now": now, "urls": urls, "due": [max(now, lease.due) for lease in leases]})
            with open(self.pop_log, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        return leases, next_due


def payload_url(payload: bytes) -> str:
    """The URL of a frontier payload (crawler/frontier/codec.py formats)."""
    if payload[:1] == codec.WHOLE:
        return json.loads(payload[1:])["url"]
    return payload.decode().split("\x1f", 1)[0]


def read_pop_log(path) -> list[tuple[float, str]]:
    """(the time its request may leave, in seconds since the epoch, url) of each hand-out
    of a RecordingFrontier log."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:  # torn last line of a killed worker
                    continue
                out += [(due / 1000, url) for due, url in zip(record["due"], record["urls"], strict=True)]
    except FileNotFoundError:
        pass
    return out


# -- a loopback site whose pages change on a schedule ------------------------------------------


class ChangingSite:
    """``/change/N`` pages change whenever the test says (``change()``); ``/static/N`` never
    do. Every page answers ETag and Last-Modified, and 304 to a matching If-None-Match (or
    an If-Modified-Since not older than Last-Modified when no ETag is sent). ``log``: (path,
    status) of every request."""

    def __init__(self, changing: int = 2, static: int = 2):
        self.version = 1
        self.changed_at = time.time() - 60
        self.started = time.time() - 3600
        self.paths = [f"/change/{i}" for i in range(changing)] + [f"/static/{i}" for i in range(static)]
        self.log: list[tuple[str, int]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path not in site.paths:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    site.log.append((self.path, 404))
                    return
                static = self.path.startswith("/static/")
                version = 0 if static else site.version
                etag = f'"{self.path}-{version}"'
                modified = formatdate(site.started if static else site.changed_at, usegmt=True)
                if self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.end_headers()
                    site.log.append((self.path, 304))
                    return
                words = " ".join(f"{self.path.strip('/')}-word{i}-v{version}" for i in range(80))
                body = f"<html><head><title>{self.path}</title></head><body><p>{words}</p></body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", etag)
                self.send_header("Last-Modified", modified)
                self.end_headers()
                self.wfile.write(body)
                site.log.append((self.path, 200))

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def change(self) -> None:
        self.version += 1
        self.changed_at = time.time()

    def fetches(self, path: str, status: int | None = None) -> int:
        return sum(1 for p, s in self.log if p == path and (status is None or s == status))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
