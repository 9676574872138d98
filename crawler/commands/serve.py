"""``scrapy serve``: the UrlStore's read API and the live dashboard, over HTTP.

scrapy serve                       on SERVE_HOST:SERVE_PORT (127.0.0.1:6810)
scrapy serve --port 8080 --crawl news
scrapy serve --host 0.0.0.0 -s SERVE_TOKEN=...   any interface, with a token
scrapy serve --crawl news --wait   a crawl that has not started yet: served once it does

A ``--crawl`` that names no crawl (no frontier, no UrlStore) is refused with one line naming
the crawls there are (exit code 2), unless ``--wait`` says it is one yet to start.

Without SERVE_TOKEN the server listens on a loopback address only, and says so; a
non-loopback --host without a token is refused. The endpoints: crawler/serve/app.py.
With SERVE_PROCESSES above 1, that many processes serve the same port (SO_REUSEPORT).
Ctrl-C or SIGTERM stops it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.commands.frontier import no_such_crawl
from crawler.config.crawldir import crawls_holding
from crawler.config.validation import exit_if_invalid
from crawler.frontier.connection import crawl_exists
from crawler.urlstore.sqlite import SQLITE_FILE

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False  # no crawl, no Twisted reactor: aiohttp's asyncio loop
    default_settings = {"LOG_LEVEL": "INFO"}

    def syntax(self):
        return "[options]"

    def short_desc(self):
        return "Serve the UrlStore (JSON API) and a live dashboard over HTTP"

    def long_desc(self):
        return (
            "Serve what the crawl knows (records, archived pages, links, the frontier's numbers) as a JSON "
            "API under /api/, and the live dashboard at /. Without SERVE_TOKEN it listens on a loopback "
            "address only; with SERVE_TOKEN set (-s SERVE_TOKEN=... or the environment), every /api/ "
            "request needs 'Authorization: Bearer <token>' (the dashboard takes it as #token=... in its "
            "address) and --host may name any address. A --crawl that is no crawl exits 2 unless --wait."
        )

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--host", metavar="ADDRESS", help="address to listen on (default: SERVE_HOST)")
        parser.add_argument("--port", metavar="PORT", help="port (default: SERVE_PORT)")
        parser.add_argument("--crawl", metavar="NAME", help="the dashboard's crawl (default: CRAWL_NAME)")
        parser.add_argument(
            "--wait",
            action="store_true",
            help="serve the --crawl NAME even if it does not exist yet (a crawl about to start); "
            "without it, a name that is no crawl is refused (exit code 2)",
        )

    def process_options(self, args, opts):
        super().process_options(args, opts)
        if opts.host:
            self.settings.set("SERVE_HOST", opts.host, priority="cmdline")
        if opts.port:
            self.settings.set("SERVE_PORT", opts.port, priority="cmdline")
        if opts.crawl:
            self.settings.set("CRAWL_NAME", opts.crawl, priority="cmdline")
        exit_if_invalid(self.settings, "serve")  # before anything starts or logs
        if opts.crawl:
            then = (
                "serving it once it starts"
                if opts.wait
                else "name one with --crawl NAME (or --wait: serve it once it starts)"
            )
            unknown = unknown_crawl(self.settings, then)
            if unknown:
                print(unknown, file=sys.stderr)
            if unknown and not opts.wait:
                raise SystemExit(2)

    def run(self, args, opts):
        if args:
            raise UsageError(f"unexpected arguments: {' '.join(args)} (serve takes options only)")
        # imported when serving, not when the module is: aiohttp adds 0.2 s to every scrapy command's start
        from aiohttp import web
        from scrapy.utils.log import configure_logging

        from crawler.serve.app import make_app
        from crawler.serve.server import is_loopback

        host, port = self.settings.get("SERVE_HOST"), self.settings.getint("SERVE_PORT")
        token = self.settings.get("SERVE_TOKEN")
        if not token and not is_loopback(host):
            print(
                f"serve: SERVE_HOST={host!r} is not a loopback address: set SERVE_TOKEN to serve other machines",
                file=sys.stderr,
            )
            self.exitcode = 2
            return
        processes = self.settings.getint("SERVE_PROCESSES")
        taken = port_taken(host, port, processes > 1)
        if taken:  # before the "Serving" line: nothing is served
            print(f"serve: cannot listen on {host}:{port}: {taken}", file=sys.stderr)
            self.exitcode = 1
            return
        configure_logging(self.settings)
        log = logging.getLogger("crawler.serve")
        where = f"http://{host}:{port}/"
        guard = "a token is required (SERVE_TOKEN)" if token else "no token: listening on loopback only"
        log.info(
            "Serving crawl %r on %s (dashboard at /, API at /api/; %s)", self.settings.get("CRAWL_NAME"), where, guard
        )
        children = fork_servers(processes - 1)
        try:
            web.run_app(
                make_app(self.settings),
                host=host,
                port=port,
                print=None,
                access_log=log if self.settings.getbool("SERVE_ACCESS_LOG") else None,
                handle_signals=True,
                reuse_port=processes > 1,
            )
        except OSError as exc:  # the port is taken, the address is not ours
            if children is not None:
                print(f"serve: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
            self.exitcode = 1
        finally:
            if children is None:  # a forked server: its parent reports
                os._exit(self.exitcode or 0)
            stop_servers(children)


def fork_servers(n: int) -> list[int] | None:
    """``n`` more server processes, forked before any thread or loop exists; each listens
    on the same port (SO_REUSEPORT: the kernel spreads the connections) and dies with its
    parent. The parent gets their pids, a child None."""
    children = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() == 1:  # the parent died before prctl
                os._exit(0)
            return None
        children.append(pid)
    return children


def stop_servers(children: list[int]) -> None:
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in children:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def unknown_crawl(settings, then: str) -> str | None:
    """The line naming the crawls there are when CRAWL_NAME has neither a UrlStore file
    nor a frontier (a mistyped --crawl, or a crawl yet to start); None when it has one, or
    when Redis does not answer (the server says so once it runs)."""
    stores = crawls_holding(settings, SQLITE_FILE) if settings.get("URLSTORE_BACKEND").lower() == "sqlite" else []
    if settings.get("CRAWL_NAME") in stores:
        return None
    try:
        if crawl_exists(settings):
            return None
        return no_such_crawl(settings, "serve", also=stores, then=then)
    except Exception:  # noqa: BLE001 - Redis away: the server says so once it runs
        return None


def port_taken(host: str, port: int, reuse_port: bool) -> str | None:
    """Why ``host:port`` cannot be listened on now (taken, not an address of this
    machine), or None."""
    try:
        with socket.create_server((host, port), reuse_port=reuse_port):
            return None
    except OSError as exc:  # (create_server adds where it tried: the address is in the line already)
        return (exc.strerror or str(exc)).split(" (while attempting")[0]
