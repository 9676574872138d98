"""Back-pressure on big bodies (crawler/page/budget.py): the budget on plain values, and a
real worker crawling a loopback site of 8 MB pages whose resident memory stays bounded."""

import gc
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from twisted.internet import task
from twisted.internet.defer import CancelledError

from crawler.page.budget import BodyBudget
from testing.servers import RedisServer
from testing.workers import clean_env, seed_file

MB = 2**20


class Response:
    """Stands for a Scrapy response: a body, garbage once dropped."""

    def __init__(self, size: int):
        self.body = b"x" * size


def test_big_bodies_wait_for_room_in_turn_and_small_ones_never_wait():
    clock = task.Clock()
    budget = BodyBudget(20 * MB, MB, max_wait=30, clock=clock)
    first, second = budget.reserve(10 * MB), budget.reserve(10 * MB)
    assert first.called and second.called and budget.held == 20 * MB
    third, fourth = budget.reserve(8 * MB), budget.reserve(MB)
    assert not third.called and not fourth.called  # in turn: the small one waits behind
    assert not budget.big(MB - 1)  # below the size: never budgeted
    response = Response(10 * MB)
    budget.hold(response, first.result)  # the first body's response holds its bytes...
    budget.hold(response)  # (once)
    assert budget.held == 20 * MB
    del response  # ... until it is gone
    gc.collect()
    assert third.called and fourth.called and budget.held == 19 * MB
    second.result.release()
    second.result.release()  # a charge is released once
    assert budget.held == 9 * MB


def test_one_body_larger_than_the_budget_goes_in_alone():
    budget = BodyBudget(4 * MB, MB, max_wait=30, clock=task.Clock())
    alone = budget.reserve(9 * MB)
    assert alone.called
    after = budget.reserve(MB)
    assert not after.called
    alone.result.release()
    assert after.called and budget.held == MB


def test_a_wait_is_bounded_and_a_cancelled_one_gives_its_place_up():
    clock = task.Clock()
    budget = BodyBudget(4 * MB, MB, max_wait=30, clock=clock)
    held = budget.reserve(4 * MB)
    cancelled, waiting = budget.reserve(2 * MB), budget.reserve(2 * MB)
    cancelled.addErrback(lambda f: f.trap(CancelledError))
    cancelled.cancel()
    assert budget._waiting and budget._waiting[0][1] is waiting
    clock.advance(30)  # waited out: let in over the budget
    assert waiting.called and budget.held == 6 * MB
    held.result.release()
    waiting.result.release()
    assert budget.held == 0


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


def test_a_body_freed_in_another_thread_is_released_in_the_budgets_own():
    budget = BodyBudget(4 * MB, MB, max_wait=30, clock=task.Clock())
    charge = budget.reserve(4 * MB).result
    waiting = budget.reserve(2 * MB)
    calls = []
    from twisted.internet import reactor

    original = reactor.callFromThread
    reactor.callFromThread = lambda fn, *args: calls.append((fn, args))
    try:
        thread = threading.Thread(target=charge.release)
        thread.start()
        thread.join()
    finally:
        reactor.callFromThread = original
    assert budget.held == 4 * MB and not waiting.called  # not from that thread...
    for fn, args in calls:
        fn(*args)  # ... but from the reactor's
    assert waiting.called and budget.held == 2 * MB
