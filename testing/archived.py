"""What a crawl of the demo site left, read back as ``scrapy serve`` reads it (the UrlStore
opened read-only, ranged GETs of the archive): the pages it lost (no record, or a record
without its archive pointer) and the pointers that do not read back a WARC record of their
URL, and the pages the site answered more than once; for the fault tests and
bench/remote_stores.py, whatever the stores (SQLite or Cassandra, a directory or S3)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Archived:
    records: int = 0  # expected pages whose record was read
    pointers: int = 0  # archive pointers read back
    lost_records: list[str] = field(default_factory=list)  # expected pages without a record of status 200
    lost_pointers: list[str] = field(default_factory=list)  # records without a pointer (or their original's)
    bad_pointers: list[str] = field(default_factory=list)  # pointers that do not read back their URL's record
    refetched: list[str] = field(default_factory=list)  # URLs the site answered 200 more than once

    @property
    def lost(self) -> int:
        return len(self.lost_records) + len(self.lost_pointers) + len(self.bad_pointers)

    def summary(self) -> str:
        return (
            f"{self.records} records and {self.pointers} pointers read back; lost: {len(self.lost_records)} "
            f"records, {len(self.lost_pointers)} pointers, {len(self.bad_pointers)} pointers that do not read back; "
            f"{len(self.refetched)} pages fetched again"
        )


def refetched(site) -> list[str]:
    """URLs the site answered 200 more than once (robots.txt aside)."""
    counts = Counter(site.url(h.host, h.path) for h in site.page_hits() if h.status == 200)
    return sorted(url for url, n in counts.items() if n > 1)


def check_archived(settings: dict, site) -> Archived:
    """Every page a correct crawl of ``site`` records (``expected_page_urls``) read back from
    the crawl of ``settings`` (its UrlStore and archive settings, CRAWL_NAME, CRAWL_DIR)."""
    from scrapy.settings import Settings

    from crawler.archive.warc import read_record
    from crawler.serve.server import Crawl
    from testing.services import project_settings

    crawl = Crawl(Settings(project_settings(**settings)))
    out = Archived(refetched=refetched(site))
    try:
        store, storage = crawl.store(), crawl.storage()
        rows = {
            url: store.get(url, follow_canonical=False, normalize=False) for url in sorted(site.expected_page_urls())
        }
        for url, row in rows.items():
            if row is None or row.get("status") != 200:
                out.lost_records.append(url)
                continue
            out.records += 1
            pointer = row.get("archive")
            if not pointer and row.get("fate", "").startswith("duplicate") and row.get("canonical_url"):
                original = store.get(row["canonical_url"], follow_canonical=False, normalize=False)
                pointer = original and original.get("archive")  # an exact copy: its original's record
                if pointer:
                    continue
            if not pointer:
                out.lost_pointers.append(url)
                continue
            try:
                headers, _ = read_record(storage.get_range(**pointer))  # (from the pointer's bucket)
            except Exception as exc:  # noqa: BLE001 - an object or a range that is not there
                out.bad_pointers.append(f"{url}: {type(exc).__name__}: {exc}")
                continue
            out.pointers += 1
            if headers.get("WARC-Target-URI") not in (url, row.get("final_url")):
                out.bad_pointers.append(f"{url}: the record is of {headers.get('WARC-Target-URI')}")
    finally:
        crawl.close()
    return out
