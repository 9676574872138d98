"""A crawl's archive as one WACZ file, the package web archives are shared and opened in
a browser in (ReplayWeb.page), made by the ``wacz`` package (``wacz create``): the WARC
files stored uncompressed in the ZIP under ``archive/``, the index under ``indexes/``,
``pages/pages.jsonl`` (each page's URL, time and title), and ``datapackage.json`` with
the sha256 digest of each file. The package says the WACZ version it writes
(``wacz_version``), the one its validator accepts.

The pages are the crawl's HTML captures answered 200 (its first capture of each URL),
titled from the UrlStore's metadata when a title is known.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable

from warcio.timeutils import timestamp_to_iso_date

from crawler.archive import cdxj
from crawler.archive.collection import Collection, Progress

PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}


class WaczFailed(Exception):
    """``wacz create`` did not make the package."""


def pages_of(lines: Iterable[str], title_of: Callable[[list[str]], dict[str, str]] | None = None) -> list[dict]:
    """The pages.jsonl entries of index lines: each HTML capture answered 200, the first of
    its URL, by time; ``title_of(urls)`` gives the titles known."""
    first: dict[str, cdxj.Capture] = {}
    for text in lines:
        c = cdxj.parse(text)
        if (
            c.revisit
            or c.fields.get("status") != "200"
            or c.fields.get("mime") not in ("text/html", "application/xhtml+xml")
        ):
            continue
        if c.url not in first or c.timestamp < first[c.url].timestamp:
            first[c.url] = c
    titles = title_of(list(first)) if title_of is not None and first else {}
    pages = []
    for url, c in sorted(first.items(), key=lambda kv: (kv[1].timestamp, kv[0])):
        page = {"url": url, "ts": timestamp_to_iso_date(c.timestamp)}
        if titles.get(url):
            page["title"] = titles[url]
        pages.append(page)
    return pages


def export(collection: Collection, out: str, pages: list[dict], progress: Progress | None = None) -> int:
    """Write the WACZ of ``collection`` to ``out`` (WARCs from S3 are downloaded first);
    the number of WARC files in it."""
    from wacz.main import main as wacz_main

    keys = collection.warc_keys()
    with tempfile.TemporaryDirectory(prefix="crawler-wacz-") as tmp:
        paths = []
        for i, key in enumerate(keys, 1):
            path = collection.storage.local_path(key)
            if path is None:
                path = os.path.join(tmp, os.path.basename(key))
                collection.storage.download(key, path)
            paths.append(path)
            if progress is not None:
                progress(i, len(keys))
        pages_path = os.path.join(tmp, "pages.jsonl")
        with open(pages_path, "w", encoding="utf-8") as f:
            for entry in [PAGES_HEADER, *pages]:
                f.write(json.dumps(entry) + "\n")
        args = ["create", "-o", out, "-p", pages_path, "--hash-type", "sha256", "--title", collection.crawl, *paths]
        code = wacz_main(args)
    if code:
        raise WaczFailed(f"wacz create exited with {code}")
    return len(keys)
