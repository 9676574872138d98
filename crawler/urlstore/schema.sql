-- The SQLite UrlStore (crawler/urlstore/sqlite.py); the Cassandra twin is schema.cql.
CREATE TABLE IF NOT EXISTS urls (
    url            TEXT PRIMARY KEY,   -- normalized
    canonical_url  TEXT,               -- rel=canonical, or the first page of an exact copy
    near_duplicate_of TEXT,            -- the page whose main text this one nearly repeats
    resemblance    REAL,               -- share of main-text words in common with near_duplicate_of
    status         INTEGER,            -- HTTP status; NULL when nothing was answered
    fate           TEXT,               -- fetched, duplicate, robots_disallowed, refused, dns_error, ...
    fetched_at     REAL,               -- UNIX time
    error          TEXT,
    next_fetch_at  REAL,               -- when a recrawl is due (UNIX time)
    final_url      TEXT,
    redirect_chain TEXT,               -- JSON list of URLs before final_url
    content_digest TEXT,               -- of the body
    simhash        INTEGER,            -- 64 bits, stored signed
    metadata       TEXT NOT NULL DEFAULT '{}',  -- JSON object of text fields
    archive_key    TEXT,               -- WARC object holding the raw page
    archive_offset INTEGER,
    archive_length INTEGER,
    outlinks       TEXT,               -- JSON list of {"url", "text", "nofollow"}
    fetch_interval REAL,               -- seconds: the adaptive schedule's interval (crawler/freshness/schedule.py)
    etag           TEXT,               -- the answer's ETag: a refetch sends If-None-Match
    last_modified  TEXT,               -- the answer's Last-Modified: a refetch sends If-Modified-Since
    archive_bucket TEXT,               -- the S3 bucket of archive_key ('': the local archive)
    archive_at     REAL,               -- the fetch time of the capture archive_key names or waits for
    put_at         REAL                -- when a recrawl pass last put the URL back into the frontier
);
-- the due query (UrlStore.due): URLs by next fetch time, then URL, the order it pages in
-- (a page starts where the last ended, at (next_fetch_at, url) of its last row)
CREATE INDEX IF NOT EXISTS urls_due ON urls (next_fetch_at, url);
DROP INDEX IF EXISTS urls_next_fetch_at;  -- a store's before: next_fetch_at alone sorted every page again
CREATE TABLE IF NOT EXISTS inlinks (
    target_url  TEXT NOT NULL,
    bucket      INTEGER NOT NULL,      -- crc32(source_url) % URLSTORE_INLINK_BUCKETS
    source_url  TEXT NOT NULL,
    anchor_text TEXT,
    nofollow    INTEGER,
    PRIMARY KEY (target_url, source_url)
) WITHOUT ROWID;
