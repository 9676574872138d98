"""A crawl of nasty pages the test makes (wrong and mixed charsets, binary sent as
text/html, a 9 MB single-line page, a page over DOWNLOAD_MAXSIZE, deeply nested markup,
50,000 links, invalid and IDN URLs, ``javascript:`` and ``data:`` links): every page is
recorded with its fate (a page's first LINKS_MAX_PER_PAGE links), the worker ends by
itself, and nothing raises."""

import json
import sqlite3
import subprocess
import uuid
from pathlib import Path

from crawler.demo.site import serve_site
from testing.workers import clean_env, crawl_command, log_tail, read_pages

ROOT = Path(__file__).resolve().parents[2]
HTML = {"Content-Type": "text/html"}


def nasty_routes() -> dict[str, tuple]:
    words = " ".join(f"word{i % 997}" for i in range(1_000_000))  # ~9 MB, one line
    nested = "<div>" * 5000 + "deep text" + "</div>" * 10 + '<a href="/n-target.html">t</a>'
    links = "".join(f'<a href="/x/{i}.html">link {i}</a>' for i in range(50_000))
    odd_links = [
        "javascript:alert(1)",
        "data:text/html,<b>x</b>",
        "mailto:someone@example.com",
        "http://[::1/broken",
        "http://ünïcödé.example/päth?q=ü",
        "https://a.example:99999/",
        "http://a.example/%zz%",
        "//" + "x" * 3000 + ".example/",
        "/n-target.html#frag",
        "\x00/nul",
    ]
    return {
        # declared utf-8 in the header, a meta saying shift_jis, latin-1 bytes
        "/n-charset.html": (
            200,
            {"Content-Type": "text/html; charset=utf-8"},
            '<html><head><meta charset="shift_jis"><title>Caf\xe9 cr\xe8me</title></head>'.encode("latin-1")
            + "<body><p>caf\xe9 \u00fcber na\xefve</p>".encode("latin-1")
            + "<p>日本語のテキスト</p></body></html>".encode("shift_jis"),
        ),
        "/n-unknown-charset.html": (
            200,
            {"Content-Type": "text/html; charset=x-no-such"},
            b"<title>\xff\xfe odd</title>",
        ),
        "/n-binary.html": (200, HTML, bytes(range(256)) * 400),
        "/n-one-line.html": (200, HTML, f"<html><body><p>{words}</p></body></html>".encode()),
        "/n-too-big.html": (200, HTML, b"<html><body>" + b"x" * (11 * 2**20) + b"</body></html>"),
        "/n-nested.html": (200, HTML, nested.encode()),
        "/n-links.html": (200, HTML, f"<html><body>{links}</body></html>".encode()),
        "/n-urls.html": (
            200,
            HTML,
            ("<html><body>" + "".join(f'<a href="{h}">{i}</a>' for i, h in enumerate(odd_links))).encode(),
        ),
        "/n-target.html": (200, HTML, b"<html><title>target</title><body>reached</body></html>"),
    }


def test_nasty_pages_are_each_recorded_and_nothing_raises(tmp_path, redis_url):
    routes = nasty_routes()
    name = f"test-{uuid.uuid4().hex[:12]}"
    with serve_site(hosts=2, pages=5, routes=routes) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(site.url(0, path) + "\n" for path in routes if path != "/n-target.html"))
        settings = {
            "CRAWL_NAME": name,
            "CRAWL_DIR": tmp_path / "crawl",
            "NETWORK_GUARD_ALLOW": "127.0.0.0/8",
            "FRONTIER_HOST_INTERVAL": 0.05,
            "FRONTIER_IDLE_SECONDS": 1,
            "LOG_FILE": tmp_path / "worker.log",
        }
        out = tmp_path / "pages.jsonl"
        cmd = crawl_command(out, seeds, settings) + ["-a", f"allowed_prefixes={site.url(0, '/n-')}"]
        env = {**clean_env(), "REDIS_URL": redis_url}
        proc = subprocess.run(cmd, cwd=ROOT, env=env, timeout=240)
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert proc.returncode == 0, log_tail([tmp_path / "worker.log"], 60, "no log")
    assert "Traceback" not in log and "Unhandled" not in log, log_tail([tmp_path / "worker.log"], 60, "")
    pages = {p["url"]: p for p in read_pages(out)}
    for path in routes:
        assert site.url(0, path) in pages, path  # every page, the target reached by links too
    too_big = pages[site.url(0, "/n-too-big.html")]
    assert too_big["status"] is None and too_big["error"]  # cut at DOWNLOAD_MAXSIZE, recorded
    db = sqlite3.connect(tmp_path / "crawl" / name / "urlstore.sqlite")
    rows = dict(db.execute("SELECT url, fate FROM urls WHERE url LIKE ?", (site.url(0, "/n-") + "%",)).fetchall())
    assert set(rows) == {site.url(0, path) for path in routes}
    assert rows[site.url(0, "/n-too-big.html")] == "error"
    assert all(fate == "fetched" for url, fate in rows.items() if not url.endswith("too-big.html"))
    links = json.loads(
        db.execute("SELECT outlinks FROM urls WHERE url = ?", (site.url(0, "/n-links.html"),)).fetchone()[0]
    )
    # its first LINKS_MAX_PER_PAGE (6,000) links, in page order
    assert [link["url"] for link in links] == [site.url(0, f"/x/{i}.html") for i in range(6000)]
    odd = [link["url"] for link in pages[site.url(0, "/n-urls.html")]["outlinks"]]
    assert all(u.startswith(("http://", "https://")) for u in odd), odd
    assert "http://xn--ncd-dma1a7bzb.example/p%C3%A4th?q=%C3%BC" in odd and site.url(0, "/n-target.html") in odd
    assert not any(u.startswith(("javascript:", "data:", "mailto:")) for u in odd)
    charset = pages[site.url(0, "/n-charset.html")]
    assert charset["status"] == 200 and charset["metadata"].get("title")
