"""Loopback sites of the tests beside the demo site (crawler/demo/site.py): ``AddressSite``,
many host names on a few addresses, for politeness per address; ``ChangingSite``,
whose pages change on a schedule, with ETags and 304s, for the recrawl's tests."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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


@dataclass(frozen=True)
class AddressHit:
    start: float  # time.monotonic() when the request line was read
    end: float  # when the answer was sent
    address: str  # the local address the request came in on
    name: str  # the host name it asked for (its Host header, without the port)
    path: str


class AddressSite:
    """Many host names on a few loopback addresses, one port on each: whatever name a
    request asks for, ``/`` links to ``pages`` pages (``page_paths``), which link nowhere;
    robots.txt is 404. Every request is logged with the address it came in on (``hits``),
    after ``delay`` seconds of answering. Which name is at which address is the DNS's
    (testing/dns.py)."""

    def __init__(self, addresses: list[str], delay: float = 0.0, pages: int = 2):
        self.addresses = addresses
        self.delay = delay
        self.page_paths = [f"/p{i}" for i in range(pages)]
        self.log: list[AddressHit] = []
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                start = time.monotonic()
                if site.delay:
                    time.sleep(site.delay)
                name = (self.headers.get("Host") or "").rsplit(":", 1)[0]
                if self.path == "/":
                    links = " ".join(f'<a href="{p}">{name} {p}</a>' for p in site.page_paths)
                    status, body = 200, f"<html><body><p>{name}</p>{links}</body></html>".encode()
                elif self.path in site.page_paths:
                    status, body = 200, f"<html><body><p>{name}{self.path}</p></body></html>".encode()
                else:
                    status, body = 404, b""
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                hit = AddressHit(start, time.monotonic(), self.connection.getsockname()[0], name, self.path)
                with site._lock:
                    site.log.append(hit)

            def log_message(self, *args):
                pass

        first = ThreadingHTTPServer((addresses[0], 0), Handler)
        self.port = first.server_address[1]
        self.servers = [first] + [ThreadingHTTPServer((a, self.port), Handler) for a in addresses[1:]]
        for server in self.servers:
            server.daemon_threads = True

    def url(self, name: str, path: str = "/") -> str:
        return f"http://{name}:{self.port}{path}"

    def hits(self) -> list[AddressHit]:
        with self._lock:
            return list(self.log)

    def __enter__(self) -> AddressSite:
        for server in self.servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()
