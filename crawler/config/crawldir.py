"""The crawls of a crawl directory: CRAWL_DIR/<crawl name>/ holds a crawl's local files
(the embedded Redis's, the SQLite UrlStore's), and a read command lists the crawls that
hold the file it reads, creating nothing."""

from __future__ import annotations

import os


def crawls_holding(settings, *filenames: str) -> list[str]:
    """The names of the crawls under CRAWL_DIR whose directory holds one of ``filenames``
    (a file or a directory), sorted."""
    root = os.path.abspath(settings.get("CRAWL_DIR"))
    names = os.listdir(root) if os.path.isdir(root) else []
    return sorted(n for n in names if any(os.path.exists(os.path.join(root, n, f)) for f in filenames))
