"""The network guard refuses private targets by default and allows what is listed."""

import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from crawler.scope.addresses import AddressPolicy
from testing.workers import clean_env, crawl_command, read_pages

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "address,reason",
    [
        ("127.0.0.1", "loopback"),
        ("127.9.9.9", "loopback"),
        ("::1", "loopback"),
        ("[::1]", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("::ffff:10.0.0.1", "private"),
        ("100.64.0.1", "not-global"),
        ("93.184.216.34", None),
        ("2606:4700::1", None),
    ],
)
def test_default_policy(address, reason):
    assert AddressPolicy().refusal(address) == reason


def test_allow_list_opens_chosen_networks():
    policy = AddressPolicy(["127.0.0.0/8", "10.1.0.0/16"])
    assert policy.refusal("127.0.0.5") is None
    assert policy.refusal("10.1.9.9") is None
    assert policy.refusal("10.2.0.1") == "private"
    assert policy.refusal("169.254.169.254") == "link-local"
    # (nothing can listen on the metadata address here, so the crawl tests cannot show it)
    assert AddressPolicy(["169.254.169.254/32"]).refusal("169.254.169.254") is None
    assert AddressPolicy(["::1/128"]).refusal("[::1]") is None


class _Handler(BaseHTTPRequestHandler):
    hits: list = []
    links: list = []  # of the page /start

    def do_GET(self):
        type(self).hits.append(self.path)
        anchors = "".join(f'<a href="{u}">x</a>' for u in self.links) if self.path == "/start" else ""
        body = f"<html><body>ok {anchors}</body></html>".encode()
        self.send_response(200 if self.path != "/robots.txt" else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(params=["127.0.0.1"])
def server(request):
    _Handler.hits, _Handler.links = [], []
    httpd = ThreadingHTTPServer((request.param, 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def crawl(tmp_path, seeds, expect=0, **settings):
    seed_file = tmp_path / "seeds.txt"
    seed_file.write_text("\n".join(seeds) + "\n")
    out = tmp_path / "out.jsonl"
    defaults = {"FRONTIER_IDLE_SECONDS": 1, "FRONTIER_HOST_INTERVAL": 0, "CRAWL_DIR": tmp_path / "crawl"}
    cmd = crawl_command(out, seed_file, {**defaults, **settings})
    proc = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == expect, proc.stderr[-3000:]
    return {page["url"]: page for page in read_pages(out)}, proc.stderr


def test_private_seeds_are_refused_when_seeded_naming_the_setting(tmp_path, server):
    seeds = [
        f"http://127.0.0.1:{server}/a",
        "http://169.254.169.254/latest/meta-data/",
        f"http://[::1]:{server}/b",
        f"http://localhost:{server}/c",
    ]
    pages, log = crawl(tmp_path, seeds, expect=2)  # (no seed left: nothing to crawl)
    assert _Handler.hits == [] and pages == {}  # nothing fetched, robots.txt included; nothing queued
    assert "4 seeds refused by the network guard" in log and "-s NETWORK_GUARD_ALLOW=" in log
    assert "'seeds/refused': 4" in log
    assert "Traceback" not in log and "CRITICAL" not in log


@pytest.mark.parametrize("server", ["127.0.0.2"], indirect=True)  # allowed; 127.0.0.1 not
def test_private_targets_found_in_pages_are_refused_and_recorded(tmp_path, server):
    """A page allowed (NETWORK_GUARD_ALLOW) links to private addresses, and to a name that
    resolves to one: each is refused at fetch time, recorded, and its line names the
    setting to allow it."""
    start = f"http://127.0.0.2:{server}/start"
    _Handler.links = [
        f"http://127.0.0.1:{server}/a",
        "http://169.254.169.254/latest/meta-data/",
        f"http://[::1]:{server}/b",
        f"http://localhost:{server}/c",  # a name that resolves to a private address
    ]
    pages, log = crawl(tmp_path, [start], NETWORK_GUARD_ALLOW="127.0.0.2/32")
    assert [h for h in _Handler.hits if h != "/robots.txt"] == ["/start"]  # nothing else was fetched
    assert set(pages) == {start, *_Handler.links}
    for url in _Handler.links:
        page = pages[url]
        assert page["status"] is None and page["error"].startswith("AddressRefused"), (url, page)
    assert "'netguard/refused': 8" in log  # each page and its robots.txt
    assert "to crawl it: -s NETWORK_GUARD_ALLOW=127.0.0.0/8" in log
    assert "Traceback" not in log and "CRITICAL" not in log


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def test_allow_list_lets_ipv6_loopback_through(tmp_path):
    _Handler.hits = []
    try:
        httpd = _Server6(("::1", 0), _Handler)
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://[::1]:{httpd.server_address[1]}/v6"
        pages, _ = crawl(tmp_path, [url], NETWORK_GUARD_ALLOW="::1/128")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert pages[url]["status"] == 200, pages[url]["error"]
    assert "/v6" in _Handler.hits


def test_allow_list_lets_loopback_through(tmp_path, server):
    seeds = [f"http://127.0.0.1:{server}/a", f"http://localhost:{server}/c"]
    pages, _ = crawl(tmp_path, seeds, NETWORK_GUARD_ALLOW="127.0.0.0/8,::1/128")
    assert {url: page["status"] for url, page in pages.items()} == {url: 200 for url in seeds}
    assert sorted(p for p in _Handler.hits if p != "/robots.txt") == ["/a", "/c"]


def test_names_whose_dns_never_answers_hold_the_crawl_seconds_not_minutes(tmp_path, redis_url):
    """DNS_NAMESERVERS that never answer for some names (here a UDP socket that reads and
    never replies): each look-up waits LOOKUP_MOST (5 s) at most, and a name whose look-up
    failed fails at once for a minute (the guard's look-up and the download's, and the
    host's robots.txt and pages each waited for DNS_TIMEOUT, 60 s: twenty such names held
    a worker's every slot for minutes). The crawl of the loopback site beside them is
    done, each such name's page recorded as a DNS error, and the worker ends by itself."""
    import time
    import uuid

    from redis import Redis

    from crawler.demo.site import serve_site
    from crawler.frontier.frontier import Frontier
    from testing.workers import loopback_settings, seed_file

    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dns.bind(("127.0.0.1", 0))
    threading.Thread(target=lambda: [dns.recvfrom(4096) for _ in iter(int, 1)], daemon=True).start()
    name = f"test-{uuid.uuid4().hex[:12]}"
    with serve_site(hosts=2, pages=10) as site:
        hanging = [f"http://hang{i}.example.org/p0.html" for i in range(20)]
        seeds = seed_file(tmp_path, [*site.seeds, *hanging])
        settings = loopback_settings(
            name,
            tmp_path / "worker.log",
            DNS_NAMESERVERS=f"127.0.0.1:{dns.getsockname()[1]}",
            URL_RETRY_ATTEMPTS=1,
            ROBOTSTXT_UNREACHABLE_ALLOW_AFTER=0,
            CRAWL_DIR=tmp_path / "crawl",
        )
        env = {**clean_env(), "REDIS_URL": redis_url}
        started = time.monotonic()
        proc = subprocess.run(crawl_command(tmp_path / "out.jsonl", seeds, settings), cwd=ROOT, env=env, timeout=120)
        took = time.monotonic() - started
        healthy = {f"{h.host}{h.path}" for h in site.page_hits()}
        every = {f"{host}{path}" for host in site.hosts for path in site.page_paths()}
    Frontier(Redis.from_url(redis_url), name).clear()
    assert proc.returncode == 0
    pages = {page["url"]: page for page in read_pages(tmp_path / "out.jsonl")}
    assert every <= healthy
    assert all(pages[url]["status"] == "dns_error" or "DNS" in str(pages[url].get("error")) for url in hanging), [
        pages.get(url) for url in hanging
    ]
    assert took < 60, took
