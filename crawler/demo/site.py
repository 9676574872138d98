"""A generated multi-host web site on loopback: the demo crawl's target and the
end-to-end tests' site.

    with serve_site(hosts=4, pages=25) as site:
        site.seeds            # ["http://127.0.0.2:PORT/p0.html"]
        ...crawl...
        site.page_hits()      # every request but robots.txt, in arrival order

The pages, links, failures and expectations of the site are crawler/demo/plan.py's;
this module serves them.

Every request is recorded (server host, raw path, User-Agent, arrival and end time on
``time.monotonic()``, arrival also on ``time.time()``, the status answered, None for a
dropped connection); ``end`` stays None while the response is being produced, so a test
can see which requests are in flight. ``on_hit`` (a callable) is also given each request
once answered. ``delay`` (seconds, settable while running) makes every page and redirect
answer that much later. ``port``: the port every host listens on (default 0: a free one).

From a shell, ``python -m crawler.demo.site [--hosts 4] [--pages 25] [--port 8000]`` serves
the site ``scrapy demo`` crawls (framed pages) until Ctrl-C or SIGTERM, for crawls of
your own (``NETWORK_GUARD_ALLOW=127.0.0.0/8``: the crawler refuses loopback otherwise). It
prints the seed URL, then a line per request answered: ``HH:MM:SS HOST GET PATH STATUS``
(STATUS ``-`` for a connection closed unanswered). Exit code 2 when the port is taken.
"""

from __future__ import annotations

import argparse
import contextlib
import selectors
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from crawler.demo.plan import (
    BINARIES,
    REDIRECT_FROM,
    REDIRECT_TO,
    SitePlan,
    _failing,
)


@dataclass
class Hit:
    host: str  # the server's address, e.g. "127.0.0.3"
    path: str  # raw request path (with query, if any); absolute-URI requests keep it
    user_agent: str
    start: float  # time.monotonic() at arrival
    wall: float  # time.time() at arrival (to compare with the workers' clocks)
    end: float | None = None  # time.monotonic() once the response is written
    status: int | None = None  # the status answered (None: dropped, or not answered yet)

    @property
    def key(self) -> tuple[str, str]:
        return (self.host, self.path)


class Site(SitePlan):
    def __init__(self, *args, port: int = 0, on_hit=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._failures_answered: dict[tuple[int, str], int] = {}
        self._first_page_at: dict[int, float] = {}
        self._answered: dict[tuple[int, str], int] = {}
        self.port = 0
        self._port = port  # the one to take (0: any free one)
        self.on_hit = on_hit
        self._servers: list[ThreadingHTTPServer] = []  # by host index once started
        # one thread accepts on every listening host (each request is then answered in a
        # thread of its own): a thread per host polling would cost the crawl's CPU
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._to_serve: list[ThreadingHTTPServer] = []  # listening, for the accepting thread to take
        self._accepting: threading.Thread | None = None
        self._stopping = False
        self._lock = threading.Lock()
        self._hits: list[Hit] = []

    def _handler(self, host_index: int):
        site = self
        addr = self.hosts[host_index]

        class Handler(BaseHTTPRequestHandler):
            server_version = "TestSite/1.0"

            def log_message(self, format, *args):  # noqa: A002 - quiet
                pass

            def do_GET(self):  # noqa: N802
                hit = Hit(addr, self.path, self.headers.get("User-Agent", ""), time.monotonic(), time.time())
                self._hit = hit
                with site._lock:
                    site._hits.append(hit)
                try:
                    self._answer()
                except OSError:  # the client went away (a killed worker): nothing to do
                    self.close_connection = True
                finally:
                    end = time.monotonic()  # (set by _send right after the answer, if any)
                    with site._lock:
                        hit.end = hit.end or end
                    if site.on_hit is not None:
                        site.on_hit(hit)

            def _answer(self):
                path = self.path
                if "://" in path:  # absolute URI (a proxy's form)
                    path = "/" + path.split("://", 1)[1].partition("/")[2]
                path = path.split("#", 1)[0].split("?", 1)[0]
                if path == "/robots.txt" or path in site.routes:
                    spec = site.robots.get(host_index, 404) if path == "/robots.txt" else site.routes[path]
                    if isinstance(spec, list):
                        with site._lock:
                            n = site._answered.get((host_index, path), 0)
                            site._answered[(host_index, path)] = n + 1
                        spec = spec[min(n, len(spec) - 1)]
                    if spec == "drop":
                        self.close_connection = True
                        return None
                    status, headers, body = (
                        spec
                        if isinstance(spec, tuple)
                        else (spec, {}, "")
                        if isinstance(spec, int)
                        else (200, {}, spec)
                    )
                    if isinstance(body, str):
                        body = body.replace("{port}", str(site.port)).encode()
                    return self._send(status, body or b"robots.txt answer", "text/plain", **headers)
                if site.sitemap_pages and path in ("/sitemap-index.xml", "/sitemap-pages.xml.gz"):
                    return self._send(200, site.sitemap(host_index, path), "application/xml")
                with site._lock:
                    retry_after = site.throttle.pop(host_index, None)
                if retry_after is not None:
                    return self._send(429, b"slow down", "text/plain", **{"Retry-After": str(retry_after)})
                failure = site._failure(host_index, path)
                if failure is not None:
                    status, headers = failure
                    return self._send(status, f"failing on purpose: {status}".encode(), "text/plain", **headers)
                if site.delay:
                    time.sleep(site.delay)
                if path == REDIRECT_FROM:
                    return self._send(301, b"moved", "text/plain", Location=site.url(host_index, REDIRECT_TO))
                if path in BINARIES:
                    return self._send(200, b"\x00binary", "application/octet-stream")
                html = site.page(host_index, path)
                if html is None:
                    return self._send(404, b"not found", "text/plain")
                return self._send(200, html.encode(), "text/html; charset=utf-8")

            def _send(self, status, body: bytes, ctype: str, **headers):
                with site._lock:
                    self._hit.status = status
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)
                self._hit.end = time.monotonic()  # at once: not after waiting for the log's lock

        return Handler

    def _failure(self, host_index: int, path: str) -> tuple[int, dict] | None:
        """(status, headers) of a failure behaviour answering this page request, or None."""
        with self._lock:
            now = time.monotonic()
            first = self._first_page_at.setdefault(host_index, now)
            if host_index in self.throttle_for and now - first < self.throttle_for[host_index]:
                return 429, {}
            if host_index in self.fail_all:
                return self.fail_all[host_index], {}
            spec = self.fail_pages.get(host_index, {}).get(path)
            if isinstance(spec, list):
                n = self._failures_answered.get((host_index, path), 0)
                self._failures_answered[(host_index, path)] = n + 1
                spec = spec[min(n, len(spec) - 1)]
        if spec is None:
            return None
        status, headers = spec if isinstance(spec, tuple) else (spec, {})
        return int(status), dict(headers)

    def start(self) -> Site:
        last = None
        for _ in range(1 if self._port else 50):
            port = self._port or _free_port(self.hosts[0])
            try:
                for i, addr in enumerate(self.hosts):
                    server = ThreadingHTTPServer((addr, port), self._handler(i), bind_and_activate=False)
                    server.daemon_threads = True
                    self._servers.append(server)
                    server.server_bind()
                    if i not in self.refuse:  # a bound socket that does not listen refuses
                        server.server_activate()
            except OSError as exc:  # taken on one of the addresses: try another port
                last = exc
                self._close_servers()
                continue
            self.port = port
            break
        else:
            if self._port:
                raise RuntimeError(
                    f"port {self._port} is not free on all of {self.hosts[0]} ... {self.hosts[-1]}: {last}"
                )
            raise RuntimeError(f"no port free on all of {self.hosts}: {last}")
        for i, server in enumerate(self._servers):
            if i not in self.refuse:
                self._serve(server)
        return self

    def _serve(self, server: ThreadingHTTPServer) -> None:
        with self._lock:
            self._to_serve.append(server)
        if self._accepting is None:
            self._accepting = threading.Thread(target=self._accept, daemon=True)
            self._accepting.start()
        self._wake_w.send(b"x")

    def _accept(self) -> None:
        """The accepting thread: a connection to any host is handed to its server, which
        answers it in a new thread."""
        while True:
            for key, _ in self._selector.select():
                server = key.data
                if server is not None:
                    server._handle_request_noblock()  # (what serve_forever calls: accept, answer in a thread)
                    continue
                self._wake_r.recv(4096)
                with self._lock:
                    new, self._to_serve = self._to_serve, []
                    if self._stopping:
                        return
                for server in new:
                    self._selector.register(server, selectors.EVENT_READ, server)

    def heal(self, robots: dict | None = None) -> None:
        """Turn every failure behaviour off (see the module docstring): later requests
        are answered as by a healthy site; refused hosts start listening on the same port.
        ``robots``: new robots.txt answers for these hosts."""
        with self._lock:
            self.fail_pages.clear()
            self.fail_all.clear()
            self.throttle_for.clear()
            self.throttle.clear()
            for answers in (self.robots, self.routes):
                for key, spec in list(answers.items()):
                    good = [a for a in spec if not _failing(a)] if isinstance(spec, list) else [spec]
                    if good and not _failing(good[-1]):
                        answers[key] = good[-1]
                    else:
                        del answers[key]
            self.robots.update(robots or {})
            reopen, self.refuse = sorted(self.refuse), set()
        for i in reopen:
            if i < len(self._servers):  # started: listen now
                self._servers[i].server_activate()
                self._serve(self._servers[i])

    def stop(self) -> None:
        with self._lock:
            stopped, self._stopping = self._stopping, True
        if stopped:
            return
        if self._accepting is not None:
            self._wake_w.send(b"x")
            self._accepting.join(timeout=5)
        self._close_servers()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _close_servers(self):
        for server in self._servers:
            server.server_close()
        self._servers.clear()

    def __enter__(self) -> Site:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def hits(self) -> list[Hit]:
        """Every request so far, in arrival order (copies)."""
        with self._lock:
            return [Hit(h.host, h.path, h.user_agent, h.start, h.wall, h.end, h.status) for h in self._hits]

    def page_hits(self) -> list[Hit]:
        """Every request but robots.txt."""
        return [h for h in self.hits() if not h.path.endswith("/robots.txt")]

    def in_flight(self, user_agent: str = "") -> list[Hit]:
        """Requests (robots.txt aside) still being answered, optionally of one User-Agent."""
        return [h for h in self.page_hits() if h.end is None and user_agent in h.user_agent]


def _free_port(addr: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_site(hosts: int = 4, pages: int = 25, delay: float = 0.0, **options):
    """A running Site (``options``: robots, sitemap_pages, throttle, routes, articles,
    fail_pages, fail_all, throttle_for, refuse); stopped on exit."""
    site = Site(hosts, pages, delay, **options)
    site.start()
    try:
        yield site
    finally:
        site.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m crawler.demo.site``: serve the demo site until Ctrl-C or SIGTERM (see the
    module's docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m crawler.demo.site", description="Serve the generated demo site on loopback."
    )
    parser.add_argument("--hosts", type=int, default=4, help="hosts, on 127.0.0.2 and up (default 4)")
    parser.add_argument("--pages", type=int, default=25, help="pages per host (default 25)")
    parser.add_argument("--port", type=int, default=8000, help="the port of every host (default 8000)")
    args = parser.parse_args(argv)
    lock = threading.Lock()

    def log(hit: Hit) -> None:
        line = f"{time.strftime('%H:%M:%S')} {hit.host} GET {hit.path} {hit.status or '-'}"
        with lock:
            print(line, flush=True)

    try:
        site = Site(args.hosts, args.pages, framed=True, port=args.port, on_hit=log).start()
    except (ValueError, RuntimeError) as exc:
        print(f"demosite: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(
        f"demo site: {args.hosts} hosts x {args.pages} pages on {site.hosts[0]} ... {site.hosts[-1]} "
        f"port {site.port}; seed {site.seeds[0]}",
        flush=True,
    )
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        site.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
