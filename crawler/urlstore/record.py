"""A UrlStore record, the one place its fields and fates are spelled: ``FetchRecord``
(the columns of both backends come from it: ``FIELDS``; tests/*/test_urlstore.py checks
schema.sql and schema.cql against it), the archive pointer, the fates, and the few
pure rules on them (a Page's fate, the inlink partition, the simhash's sign).

Every URL's fate is recorded, not only successes (``fate``): ``fetched`` (any HTTP
answer), ``robots_disallowed``, ``refused`` (network guard), ``dns_error``, ``timeout``,
``connection_error``, ``error`` (anything else), not fetched: ``dropped`` (its host dropped
by the operator), ``given_up`` (its host down too long), ``over_quota`` (its host's page
quota reached), and ``duplicate`` for a page whose
body was seen before (its canonical_url names the first copy). A near copy's fate is
``fetched``: it was read and archived like any page. A record without an answer (no
status) is written over the URL's last answer: its attempt's columns alone
(``ATTEMPT_COLUMNS``), the page of that answer kept.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime

FATES = (
    "fetched",
    "duplicate",
    "robots_disallowed",
    "refused",
    "dns_error",
    "timeout",
    "connection_error",
    "error",
    "dropped",
    "given_up",
    "over_quota",
)
MAX_CANONICAL_HOPS = 3


@dataclass
class ArchivePointer:
    key: str  # object key (S3) or file path relative to the archive root (local)
    offset: int  # of the WARC response record in the (gzipped) object
    length: int  # compressed length of that record
    bucket: str = ""  # the S3 bucket holding the object ("": the local archive)


@dataclass
class FetchRecord:
    url: str  # the requested URL (normalized)
    fate: str  # one of FATES
    fetched_at: float  # UNIX time
    status: int | None = None  # HTTP status (None when nothing was answered)
    error: str | None = None
    final_url: str | None = None
    redirect_chain: list[str] = field(default_factory=list)
    canonical_url: str | None = None  # rel=canonical, or the first page of an exact copy
    near_duplicate_of: str | None = None  # the page whose main text this one nearly repeats
    resemblance: float | None = None  # share of main-text words in common with near_duplicate_of
    content_digest: str | None = None
    simhash: int | None = None  # 64-bit, unsigned
    metadata: dict[str, str] = field(default_factory=dict)
    archive: ArchivePointer | None = None
    outlinks: list[dict] = field(default_factory=list)  # {"url", "text", "nofollow"}
    next_fetch_at: float | None = None
    fetch_interval: float | None = None  # seconds: the adaptive schedule's (crawler/freshness/schedule.py)
    etag: str | None = None  # the answer's ETag and Last-Modified, sent back on a refetch
    last_modified: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def inlink_bucket(source_url: str, buckets: int) -> int:
    """The inlink partition of a link from ``source_url`` (stable across processes)."""
    return zlib.crc32(source_url.encode()) % buckets


def signed64(value: int | None) -> int | None:
    """A 64-bit unsigned simhash as a signed 64-bit integer (what both stores keep)."""
    if value is None:
        return None
    return value - (1 << 64) if value >= 1 << 63 else value


def unsigned64(value: int | None) -> int | None:
    if value is None:
        return None
    return value + (1 << 64) if value < 0 else value


DUE_FIELDS = (
    "url",
    "next_fetch_at",
    "fetched_at",
    "fetch_interval",
    "content_digest",
    "etag",
    "last_modified",
    "put_at",
)


def put_again(row: dict, put_since: float | None) -> bool:
    """Whether a pass by fetch time (``due``'s ``fetched_before``) may put the row back: not
    when a pass put it back at ``put_since`` or later and it was not fetched since (it waits
    in the frontier, or its hold is not over)."""
    put, fetched = row.get("put_at"), row.get("fetched_at")
    return put_since is None or put is None or fetched is None or put <= fetched or put < put_since


def url_in_host(url: str, host: str) -> bool:
    """Whether a normalized URL is of ``host`` (a name, with its port when not the default)."""
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0].lower() == host.lower()


def answered(fate: str | None, status: int | None, archive_key: str | None = None, archived: bool = False) -> bool:
    """Whether a stored fate and status are a fetch with an answer, and (``archived``)
    its page stored in the archive, or an exact copy (``last_fetched``)."""
    if fate not in ("fetched", "duplicate") or status is None or status >= 500:
        return False
    return not archived or fate == "duplicate" or bool(archive_key)


# error class name (Page.error starts with it) -> fate
_FATES = {
    "AddressRefused": "refused",
    "RobotsDisallowed": "robots_disallowed",
    "DNSLookupError": "dns_error",
    "RefusedResolution": "refused",
    "TimeoutError": "timeout",
    "TCPTimedOutError": "timeout",
    "UserTimeoutError": "timeout",
    "ConnectionRefusedError": "connection_error",
    "ConnectError": "connection_error",
    "ConnectionLost": "connection_error",
    "ConnectionDone": "connection_error",
    "ResponseNeverReceived": "connection_error",
    "ResponseFailed": "connection_error",
    "DownloadFailedError": "connection_error",
    "DownloadConnectionRefusedError": "connection_error",
    "ResponseDataLossError": "connection_error",
    "CannotResolveHostError": "dns_error",
    "DownloadTimeoutError": "timeout",
    "HostDropped": "dropped",
    "HostGivenUp": "given_up",
    "OverQuota": "over_quota",
}


def page_fate(page) -> str:
    """What became of a Page's URL: ``fetched``, ``duplicate``, ``robots_disallowed``,
    ``refused``, ``dns_error``, ``timeout``, ``connection_error``, ``dropped``,
    ``given_up``, ``over_quota`` or ``error``."""
    status = page.get("status")
    if status == "robots_disallowed":
        return "robots_disallowed"
    if isinstance(status, int):
        return "duplicate" if page.get("duplicate_of") else "fetched"
    return _FATES.get((page.get("error") or "").split(":", 1)[0].strip(), "error")


def worker_fate(page) -> str:
    """The fate a worker counts a Page under (``pages/fate/<fate>``): its UrlStore fate,
    but ``server_error`` for a 5xx kept after its last try and ``not_modified`` for a 304."""
    fate = page_fate(page)
    if fate == "fetched" and page.get("status", 0) >= 500:
        return "server_error"
    if fate == "fetched" and page.get("status") == 304:
        return "not_modified"  # a recrawl's conditional request: the stored page is still the page
    return fate


FIELDS = tuple(f.name for f in fields(FetchRecord))

# The urls table's columns after its key (url), in the order both backends write and read
# them: (name, SQLite type, CQL type, added after the first version: added to an older
# store at open). A record's archive pointer is four columns. schema.sql and schema.cql
# make the same columns (tests/*/test_urlstore.py checks them against this table).
COLUMNS = (
    ("canonical_url", "TEXT", "text", False),
    ("near_duplicate_of", "TEXT", "text", True),
    ("resemblance", "REAL", "float", True),
    ("status", "INTEGER", "int", False),
    ("fate", "TEXT", "text", False),
    ("fetched_at", "REAL", "timestamp", False),
    ("error", "TEXT", "text", False),
    ("next_fetch_at", "REAL", "timestamp", False),
    ("final_url", "TEXT", "text", False),
    ("redirect_chain", "TEXT", "frozen<list<text>>", False),  # SQLite: JSON
    ("content_digest", "TEXT", "text", False),
    ("simhash", "INTEGER", "bigint", False),  # 64 bits, stored signed
    ("metadata", "TEXT", "map<text, text>", False),  # SQLite: JSON object
    ("archive_key", "TEXT", "text", False),
    ("archive_offset", "INTEGER", "bigint", False),
    ("archive_length", "INTEGER", "bigint", False),
    ("outlinks", "TEXT", "frozen<list<frozen<tuple<text, text, boolean>>>>", False),  # SQLite: JSON
    ("fetch_interval", "REAL", "double", True),
    ("etag", "TEXT", "text", True),
    ("last_modified", "TEXT", "text", True),
    ("archive_bucket", "TEXT", "text", True),
    ("archive_at", "REAL", "timestamp", True),
    ("put_at", "REAL", "timestamp", True),
)
COLUMN_NAMES = tuple(c[0] for c in COLUMNS)
# when a recrawl pass last put the URL back into the frontier (``reschedule``'s put_at; 0:
# never): a pass by fetch time leaves it out until it is fetched or its hold ends
# (``put_again``). A fetch's record leaves it as it is: no field of the record
PUT_AT = "put_at"
RECORD_COLUMNS = tuple(name for name in COLUMN_NAMES if name != PUT_AT)  # the columns a fetch's record writes
# the columns a record without an answer writes (no status: a connection, DNS or timeout
# error, robots.txt's refusal, a URL not fetched), in COLUMNS order: what the URL's last
# answer left (its page's digest and archive pointer, ETag and Last-Modified, metadata,
# links) stays, for the user and the next recrawl (``attempt_only``)
ATTEMPT_COLUMNS = ("status", "fate", "fetched_at", "error", "next_fetch_at", "fetch_interval")


def attempt_only(record: FetchRecord) -> bool:
    """Whether ``record`` got no answer, so that only its ATTEMPT_COLUMNS are written."""
    return record.status is None


ARCHIVE_COLUMNS = ("archive_key", "archive_offset", "archive_length", "archive_bucket")
# the fetch time of the capture the record's pointer names, or that it waits for (a record
# with an answer sets it, with its pointer or none): ``set_archive`` writes a capture's
# pointer only when it is not older, so that a batch stored late never puts an older
# capture's pointer over a newer one's (SQLite compares; Cassandra writes the pointer at
# that time, with USING TIMESTAMP). A record read leaves it out.
ARCHIVE_AT = "archive_at"
# the columns a record's read gives, in COLUMNS order: its fields' (the pointer as four)
READ_COLUMNS = tuple(name for name in RECORD_COLUMNS if name != ARCHIVE_AT)


def pop_pointer(row: dict) -> dict | None:
    """The archive pointer of a urls row as read (its ARCHIVE_COLUMNS taken out of ``row``):
    ``{"key", "offset", "length", "bucket"}`` (``bucket`` "" for the local archive), or None
    when the record has none."""
    key, offset, length, bucket = (row.pop(c) for c in ARCHIVE_COLUMNS)
    return {"key": key, "offset": offset, "length": length, "bucket": bucket or ""} if key else None


TIME_FIELDS = ("fetched_at", "next_fetch_at")


def with_iso_times(record: dict) -> dict:
    """The record with its times (UNIX seconds in the stores) as ISO 8601, UTC."""
    out = dict(record)
    for name in TIME_FIELDS:
        if isinstance(out.get(name), int | float):
            out[name] = datetime.fromtimestamp(out[name], UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return out
