"""``scrapy demo``: a real crawl of a generated multi-host site on loopback.

Starts the demo site (crawler/demo/site.py) on 127.0.0.2 ... 127.0.0.(1+hosts), seeds its
first page and runs the ``broad`` spider on the embedded defaults (or on REDIS_URL when
set) until the frontier is empty, then prints what was fetched. Every run starts afresh
and says so: the ``demo`` crawl's keys, UrlStore and WARC files are deleted first.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter

from scrapy.commands import ScrapyCommand

from crawler.archive.warc import WARC_SUFFIX
from crawler.config.validation import exit_if_invalid
from crawler.demo.site import serve_site
from crawler.frontier.connection import frontier_from_settings, redis_location, unreachable
from crawler.observe.report import count


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = True

    def syntax(self):
        return "[options]"

    def short_desc(self):
        return "Crawl a generated multi-host site on loopback (a demo of the whole crawler)"

    def add_options(self, parser):
        super().add_options(parser)
        parser.add_argument("--hosts", type=int, default=4, help="hosts of the demo site (default 4)")
        parser.add_argument("--pages", type=int, default=25, help="pages per host (default 25)")
        parser.add_argument("--output", default="demo-pages.jsonl", help="where the Page items go")

    def process_options(self, args, opts):
        super().process_options(args, opts)
        s = self.settings
        demo_defaults = (
            ("CRAWL_NAME", "demo"),
            ("FRONTIER_HOST_INTERVAL", 0.25),
            ("FRONTIER_IDLE_SECONDS", 2.0),
            ("NETWORK_GUARD_ALLOW", ["127.0.0.0/8"]),  # the demo site is on loopback
            ("ARCHIVE_MAX_SECONDS", 2.0),
        )
        for name, value in demo_defaults:
            if s.getpriority(name) < 40:  # not set with -s
                s.set(name, value, priority="cmdline")
        s.set("FEEDS", {opts.output: {"format": "jsonlines", "overwrite": True}}, priority="cmdline")
        exit_if_invalid(self.settings, "demo")  # before anything starts or logs

    def run(self, args, opts):
        if opts.hosts < 1 or opts.pages < 3:
            print("demo: --hosts must be at least 1 and --pages at least 3")
            self.exitcode = 2
            return
        try:
            frontier = frontier_from_settings(self.settings)
            self._start_afresh(frontier)
        except Exception as exc:
            if not unreachable(exc):
                raise
            print(f"demo: cannot connect to Redis ({redis_location(self.settings)}): {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        with serve_site(hosts=opts.hosts, pages=opts.pages, framed=True) as site:
            seeds = os.path.join(self.settings.get("CRAWL_DIR"), "demo-seeds.txt")
            os.makedirs(os.path.dirname(seeds) or ".", exist_ok=True)
            with open(seeds, "w", encoding="utf-8") as f:
                f.write("\n".join(site.seeds) + "\n")
            print(
                f"demo site: {count(opts.hosts, 'host')} x {len(site.page_paths())} pages ({opts.pages} linked "
                f"pages, a redirect, a meta refresh and near copies) at {', '.join(site.seeds)} ..."
            )
            self.crawler_process.crawl("broad", seeds=seeds)
            self.crawler_process.start()
            hits = site.page_hits()
        self._report(opts.output, hits, frontier, site.seeds[0])

    def _start_afresh(self, frontier) -> None:
        """Every demo run starts from zero: the previous run's frontier keys, UrlStore
        and WARC files of the ``demo`` crawl are deleted first, and the run says so."""
        keys = frontier.clear()
        crawl_dir = os.path.join(self.settings.get("CRAWL_DIR"), frontier.keys.crawl_name)
        removed = []
        for name in ("warc", "archive-spool"):
            path = os.path.join(crawl_dir, name)
            if os.path.isdir(path):
                files = sum(len(f) for _, _, f in os.walk(path))
                shutil.rmtree(path)
                if files:
                    removed.append(f"{count(files, 'file')} under {path}")
        for suffix in ("", "-wal", "-shm"):
            path = os.path.join(crawl_dir, "urlstore.sqlite" + suffix)
            if os.path.exists(path):
                os.remove(path)
                if not suffix:
                    removed.append(f"the UrlStore {path}")
        if keys or removed:
            print(f"demo: starting afresh; removed the previous demo's frontier ({keys} keys), " + ", ".join(removed))

    def _report(self, output, hits, frontier, seed):
        pages = []
        if os.path.exists(output):
            with open(output, encoding="utf-8") as f:
                pages = [json.loads(line) for line in f if line.strip()]
        by_host = Counter(h.host for h in hits)
        statuses = Counter(p.get("status") for p in pages)
        stats = frontier.stats()
        print()
        print(
            f"fetched {count(len(hits), 'URL')} from {count(len(by_host), 'host')}: "
            + ", ".join(f"{h} {n}" for h, n in sorted(by_host.items()))
        )
        print(
            f"{count(len(pages), 'page')} in {output} (status: "
            + ", ".join(f"{k} x{v}" for k, v in statuses.items())
            + ")"
        )
        print(
            f"frontier: {stats['queued']} queued, {stats['leased']} leased, {count(stats['seen']['urls'], 'URL')} seen; "
            f"see `scrapy frontier --crawl {frontier.keys.crawl_name}`"
        )
        crawl_dir = os.path.join(self.settings.get("CRAWL_DIR"), frontier.keys.crawl_name)
        warcs = [
            n for _, _, files in os.walk(os.path.join(crawl_dir, "warc")) for n in files if n.endswith(WARC_SUFFIX)
        ]
        print(
            f"stored: UrlStore {os.path.join(crawl_dir, 'urlstore.sqlite')}, {count(len(warcs), 'WARC file')} under "
            f"{os.path.join(crawl_dir, 'warc')}; try `scrapy urlstore get {seed} --crawl {frontier.keys.crawl_name}`"
        )
        print(
            f"served: `scrapy serve --crawl {frontier.keys.crawl_name}` answers what the crawl knows over HTTP, "
            "with a dashboard at http://127.0.0.1:6810/"
        )
        if stats["queued"] or stats["leased"]:
            self.exitcode = 1
