"""`scrapy demo` crawls its generated site to the end on the embedded defaults."""

import json
import re
import subprocess
import sys
from pathlib import Path

from testing.workers import clean_env

ROOT = Path(__file__).resolve().parents[2]


def test_demo_crawls_every_page(tmp_path):
    out = tmp_path / "pages.jsonl"
    cmd = [sys.executable, "-m", "scrapy", "demo", "--hosts", "2", "--pages", "5", "--output", str(out)]
    cmd += ["-s", f"CRAWL_DIR={tmp_path / 'crawl'}", "-s", "FRONTIER_HOST_INTERVAL=0.05", "-s", "LOG_LEVEL=WARNING"]
    proc = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pages = [json.loads(line) for line in out.read_text().splitlines()]
    hosts = {page["url"].split("/")[2].split(":")[0] for page in pages}
    assert hosts == {"127.0.0.2", "127.0.0.3"}
    assert all(page["status"] == 200 for page in pages)
    # per host: 5 pages, the redirect source, the meta-nofollow page, (p1 via the redirect)
    assert len(pages) == len({page["url"] for page in pages}) >= 2 * 5
    assert "0 queued, 0 leased" in proc.stdout
    # the first line names the pages each host serves; the end counts what the site answered
    per_host = int(re.search(r"demo site: 2 hosts x (\d+) pages \(5 linked pages", proc.stdout).group(1))
    assert f"fetched {2 * per_host} URLs from 2 hosts: 127.0.0.2 {per_host}, 127.0.0.3 {per_host}" in proc.stdout
    assert f"{len(pages)} pages in {out}" in proc.stdout, proc.stdout
    files, word = re.search(r"(\d+) (WARC files?) under", proc.stdout).groups()
    assert int(files) >= 1 and (word == "WARC file") == (files == "1"), proc.stdout
