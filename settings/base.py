"""Every project setting with its default. Profiles (local.py, distributed.py) change
only what differs; any setting can still be overridden with ``-s NAME=VALUE``."""

import os

BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"
COMMANDS_MODULE = "crawler.commands"

# Identify the crawler honestly; the robots.txt token is the first word.
USER_AGENT = "crawler/0.1 (+https://example.invalid/crawler)"

# Scrapy's remote-control server (2.19+, runs arbitrary code) and telnet console stay
# off unless a user turns them on.
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False

# The profile these settings are (settings/local.py, settings/distributed.py): what the
# workers publish for viewers (crawler/observe/livestats.py).
SETTINGS_PROFILE = "local"

# --- crawl identity and storage ------------------------------------------------------
# Several crawls share one Redis: every key starts with crawl:{CRAWL_NAME}:
CRAWL_NAME = os.environ.get("CRAWL_NAME", "default")


def _project_root() -> str:
    """The folder of the project's scrapy.cfg, found from the current folder upward as
    Scrapy finds it ('' when there is none: a scrapyd job runs from its egg)."""
    from scrapy.utils.conf import closest_scrapy_cfg

    cfg = closest_scrapy_cfg()
    return os.path.dirname(cfg) if cfg else ""


# Where a crawl's local files live (the embedded Redis's data, the SQLite UrlStore, the
# WARC directory): .crawl in the project's root, from whichever of its folders a command
# runs, unless given (a relative path given is taken from the current folder).
CRAWL_DIR = os.environ.get("CRAWL_DIR") or os.path.join(_project_root(), ".crawl")
# redis://host:port/db or unix:///path; empty: an embedded Redis under CRAWL_DIR.
REDIS_URL = os.environ.get("REDIS_URL", "")
# Several Redis servers, comma separated: the crawl's hosts are spread over them by
# consistent hashing (crawler/frontier/shards.py); the first also holds what belongs to
# the whole crawl (content seen). Every worker of a crawl lists the same servers.
REDIS_URLS = [u for u in os.environ.get("REDIS_URLS", "").split(",") if u]
# A Redis Cluster (any of its nodes): the crawl is cut into REDIS_CLUSTER_SHARDS shards, each
# with its own hash tag, which the cluster spreads over its masters (hosts by consistent hashing).
REDIS_CLUSTER_URL = os.environ.get("REDIS_CLUSTER_URL", "")
REDIS_CLUSTER_SHARDS = 16
# Extra redis-py client parameters (password, ssl, timeouts...), as in scrapy-redis.
REDIS_PARAMS = {}

# --- the frontier (crawler/frontier/) ------------------------------------------------
SCHEDULER = "crawler.scheduler.scheduler.FrontierScheduler"
FRONTIER_CLASS = "crawler.frontier.frontier.Frontier"  # built with from_settings(settings, redis)
FRONTIER_PRIORITY_LEVELS = 3  # front queues; level weights 4:2:1 for 3 levels
FRONTIER_HOST_INTERVAL = 1.0  # seconds between two fetches handed out for one host
# Operator overrides (crawler/frontier/intervals.py): lines "HOST SECONDS" or "HOST Nqps";
# an entry covers the host and its subdomains, and comes before robots.txt Crawl-delay.
FRONTIER_HOST_INTERVALS_FILE = ""
FRONTIER_POLITENESS_KEY = "host"  # or "domain" (registered domain, public suffix list)
# Requests in flight at once per host (politeness key), across all workers; a host
# waits for a download to end before the next one starts (0: no limit).
FRONTIER_HOST_MAX_IN_FLIGHT = 1
FRONTIER_LEASE_SECONDS = 60.0  # a popped URL returns to its queue if not renewed in time
FRONTIER_LEASE_MAX_HOLD = 900.0  # a worker stops renewing a lease older than this
FRONTIER_LEASE_MAX_ATTEMPTS = 3  # leases of one URL that may expire before it is abandoned
FRONTIER_SEEN_CACHE = 100_000  # URLs a worker remembers pushing (seen for good), not sent again
FRONTIER_PREFETCH = 2  # due URLs leased per pop and kept ready for the engine (each host counts as in flight)
# pages a worker holds downloaded (or downloading) but not yet through its item pipelines;
# it leases no more meanwhile: what a crash costs in refetches, and memory (400 held the
# worker at 231 MB, 100 at 195 MB, bench/memory.py; the same pages read per second: a short
# bench/throughput.py run counts the backlog a worker downloaded ahead, 300 pages more)
FRONTIER_MAX_UNREAD = 100
FRONTIER_LOOKAHEAD = 0.02  # seconds: a host due this soon is handed out now, its request held until due (rate limiter)
FRONTIER_REFILL_BATCH = 100  # front-queue entries moved to back queues per pop, at most
FRONTIER_POLL_INTERVAL = 1.0  # seconds between polls when no host is due
# Real-time submission (crawler/frontier/submit.py): every this many seconds a worker takes
# up to FRONTIER_SUBMIT_BATCH URLs from the crawl's submission list (any program RPUSHes
# there), and notices URLs `scrapy submit` added (0: this worker takes no submissions)
FRONTIER_SUBMIT_INTERVAL = 0.1
FRONTIER_SUBMIT_BATCH = 100
FRONTIER_SEEN_CAPACITY = 1_000_000  # URLs the crawl expects: the first URL-seen generation takes these
FRONTIER_SEEN_ERROR_RATE = 1e-6  # overall false-positive bound of the URL-seen filter, however far it grows
FRONTIER_SEEN_GROWTH = 4  # each URL-seen generation takes this many times the last one's URLs
# Trap guards (0 turns one off); each refusal is counted as frontier/trap/<name>.
FRONTIER_MAX_URL_LENGTH = 2048
FRONTIER_MAX_DEPTH = 20
FRONTIER_MAX_PAGES_PER_HOST = 100_000
FRONTIER_MAX_REPEATED_SEGMENTS = 3
FRONTIER_MAX_QUERY_PARAMS = 24
FRONTIER_MAX_QUERY_LENGTH = 1024
FRONTIER_MAX_PARAM_REPEATS = 3
# Local profile: a worker closes when nothing is leased (by any worker) and nothing is
# due within FRONTIER_MAX_WAIT seconds, for FRONTIER_IDLE_SECONDS; what is still queued
# (hosts backed off, robots.txt unreachable, URL retries) stays for the next run. With
# False a worker waits for new work (distributed).
FRONTIER_CLOSE_WHEN_IDLE = True
FRONTIER_MAX_WAIT = 60.0
FRONTIER_IDLE_SECONDS = 2.0
FRONTIER_STATS_INTERVAL = 30.0  # seconds between frontier progress log lines
# Live stats (crawler/observe/livestats.py): every this many seconds a worker adds its new counts,
# its pages by 10-second bucket and its last pages to the crawl's Redis, for the dashboard
# and `scrapy serve` (0: off; at most 10, as a worker silent for 30 s no longer counts as live)
LIVE_STATS_INTERVAL = 2.0

# --- Prometheus metrics (crawler/observe/metrics.py) ----------------------------------------------
METRICS_PORT = None  # a port, a range "9410-9419" (the first free one) or "auto" (any free port); None/0: off
METRICS_ADDRESS = "127.0.0.1"  # the address the endpoint listens on ("0.0.0.0": every interface)
METRICS_FRONTIER_INTERVAL = 5.0  # seconds the frontier's numbers are reused between scrapes
METRICS_FRONTIER_TIMEOUT = 1.0  # seconds a scrape waits for fresh frontier numbers, else serves the last

# scrapy serve: the UrlStore's read API and the dashboard (crawler/serve/app.py)
SERVE_HOST = "127.0.0.1"  # without SERVE_TOKEN, only a loopback address is allowed
SERVE_PORT = 6810
SERVE_TOKEN = os.environ.get("SERVE_TOKEN", "")  # set: every /api/ request needs "Authorization: Bearer <token>"
SERVE_TIMEOUT = 2.0  # seconds a store, archive or Redis read may take; then 503 with Retry-After
SERVE_THREADS = 4  # threads for those reads
SERVE_PROCESSES = 1  # processes serving the same port (SO_REUSEPORT): one core each
SERVE_BATCH_MAX = 100  # URLs in one lookup
SERVE_ACCESS_LOG = False  # a log line per request

# --- URL normalization (crawler/urls.py) ------------------------------------------------
URL_STRIP_PARAMS = []  # empty: the built-in list of tracking and session parameters
URL_SORT_QUERY = True

# --- the broad-crawl spider -----------------------------------------------------------
CRAWL_ALLOWED_DOMAINS = []  # scope: these domains and their subdomains (empty: any)
CRAWL_ALLOWED_PREFIXES = []  # scope: URLs starting with one of these (empty: any)
CRAWL_FOLLOW_LINKS = True
SEED_BATCH_SIZE = 2000  # URLs per frontier round trip during seed ingestion
SEED_PROGRESS_INTERVAL = 5.0  # seconds between seed ingestion progress lines (0: none)
SITEMAP_MAX_URLS = 50_000  # URLs read from one sitemap (the sitemaps.org limit)

# --- Scrapy's own knobs, tuned for a broad crawl -----------------------------------------
# Politeness is the frontier's job: no per-process delay fighting it.
DOWNLOAD_DELAY = 0
AUTOTHROTTLE_ENABLED = False
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 4
DOWNLOAD_TIMEOUT = 30
DOWNLOAD_MAXSIZE = 10 * 1024 * 1024
DOWNLOAD_WARNSIZE = 0
REDIRECT_MAX_TIMES = 5
COOKIES_ENABLED = False
# The spider yields one Page per response; Scrapy starts this many tasks for each response's
# output: 100 (its default) cost 0.8 ms of reactor time per response, 2 cost 0.04 ms.
CONCURRENT_ITEMS = 2
HTTPERROR_ALLOW_ALL = True  # every status reaches the spider and becomes a Page
DEPTH_STATS_VERBOSE = False
DEPTH_PRIORITY = 0
LOG_LEVEL = "INFO"
LOG_FORMATTER = "crawler.observe.logformatter.LogFormatter"  # a dropped page named by its URL, not printed whole
LOGSTATS_INTERVAL = 30.0
REACTOR_THREADPOOL_MAXSIZE = 20
# processes reading pages: links, fingerprints, metadata (crawler/page/workers.py); 0: threads. One reads
# about 100 pages/s on a 2-core machine; 2 give a worker alone on such a machine 13-18% more pages/s for
# 80-110 MB more (bench/throughput.py runs 14, 16)
PAGE_PROCESSES = 1
PAGE_PROCESS_NICE = 10  # their CPU priority below the reactor's (nice levels; 0: the same)
DNSCACHE_ENABLED = True
FEED_EXPORT_ENCODING = "utf-8"

# --- network guard (crawler/middlewares/netguard.py) ---------------------------------
# Never connect to private, loopback, link-local, multicast or reserved addresses (the
# cloud metadata address 169.254.169.254 included) unless a network is listed here.
NETWORK_GUARD_ENABLED = True
NETWORK_GUARD_ALLOW = []  # e.g. ["10.1.0.0/16", "127.0.0.0/8"]
TWISTED_DNS_RESOLVER = "crawler.middlewares.netguard.GuardedResolver"

# --- failures: the URL's or the host's (crawler/middlewares/failures.py) ---------------
HOST_BACKOFF_ENABLED = True
# 429 (or any 5xx with Retry-After): every worker leaves the host alone for a while
HOST_BACKOFF_HTTP_CODES = [429]
HOST_BACKOFF_MIN = 30.0  # seconds, doubled at each back-off in a row (with jitter)
HOST_BACKOFF_MAX = 3600.0  # seconds, also the cap on Retry-After
HOST_BACKOFF_QUIET = 600.0  # seconds without a back-off after which the doubling restarts
HOST_BACKOFF_MAX_RETRIES = 5  # back-offs of one page before its answer is kept
# a 5xx or a timeout of one URL: that URL is tried again later, on its own schedule
URL_RETRY_HTTP_CODES = [500, 502, 503, 504, 522, 524, 408]
URL_RETRY_ATTEMPTS = 3  # tries of one URL in all; the last failure is recorded
URL_RETRY_DELAY = 15.0  # seconds before the second try, doubling (with jitter)
URL_RETRY_DELAY_MAX = 3600.0
# ... and its host is slowed (interval x factor, at most x max) until it answers again
HOST_SLOWDOWN_FACTOR = 2.0
HOST_SLOWDOWN_MAX = 8.0
HOST_SLOWDOWN_RECOVERY = 0.25  # of its base rate each answer gives a slowed host back
# a host is down (backed off, then probed one request at a time) on connection refused,
# DNS failure, or this many distinct URLs failing in a row with no answer between
HOST_DOWN_AFTER = 3
FAILURE_LOG_PERIOD = 60.0  # seconds: one log line per host and decision at most

# --- per-host rate limiter (crawler/middlewares/ratelimit.py) -------------------------
# The last guard before a request leaves: one slot per host interval, for all workers.
RATE_LIMITER_ENABLED = True
RATE_LIMITER_MAX_WAIT = 1.0  # seconds a request may wait for its slot; longer: back to the frontier

# --- content seen (crawler/pipelines/contentseen.py) -----------------------------------
CONTENT_SEEN_ENABLED = True
CONTENT_SEEN_RESEMBLANCE = 0.9  # share of the main text's words a near copy has in common with its original
CONTENT_SEEN_MIN_WORDS = 100  # words of main text; shorter pages: exact copies only
CONTENT_SEEN_BUCKET_SIZE = 4096  # entries per LSH bucket (8 bytes each; 65,536 buckets)
CONTENT_SEEN_FOLLOW_NEAR_DUPLICATES = True  # follow the links of a near copy (an exact copy's: never)

# --- page metadata (crawler/pipelines/metadata.py) ---------------------------------------
METADATA_ENABLED = True
METADATA_MAX_FIELD_LENGTH = 1000  # characters per value
METADATA_MAX_FIELDS = 64  # fields per page
METADATA_MAX_BYTES = 2 * 2**20  # of the body handed to the parsers

# --- the raw-page archive (crawler/pipelines/archive.py, crawler/archive/) ---------------
ARCHIVE_ENABLED = True
ARCHIVE_DIR = ""  # local WARC directory; empty: CRAWL_DIR/CRAWL_NAME/warc
ARCHIVE_S3_BUCKET = ""  # set: archive to S3 instead (credentials: the standard AWS chain)
ARCHIVE_S3_ENDPOINT_URL = ""  # an S3-compatible store (MinIO, Ceph...); empty: AWS
ARCHIVE_S3_REGION = ""
ARCHIVE_PREFIX = ""  # in object keys, after their hash part: <hash>/<prefix><crawl>/...
ARCHIVE_MAX_BYTES = 64 * 2**20  # a WARC batch is stored when it reaches this size...
# ... or this age; its pages' leases wait for it. Shorter: fewer pages fetched again when a
# worker dies, more objects (bench/rework.py, 3 workers, one killed, FRONTIER_MAX_UNREAD
# 400: 10 s 428 pages fetched twice and 2.0 objects per 1,000 pages, 5 s 308 and 3.2)
ARCHIVE_MAX_SECONDS = 5.0
ARCHIVE_GZIP_LEVEL = 6  # of each record's gzip member (1 fastest ... 9 smallest; warcio alone would use 9)
# a closing worker (Ctrl-C, or done) waits at most this long for its uploads; then its
# waiting pages go back to the frontier and the spool files stay for the next run
WORKER_STOP_TIMEOUT = 30.0
ARCHIVE_RETRY_MIN = 1.0  # seconds before a failed upload is tried again, doubling
ARCHIVE_RETRY_MAX = 60.0
# bodies Scrapy holds (waiting for the page processes, in the pipelines) before it stops
# fetching; it bounds the backlog a stopping worker finishes. Pages waiting for their WARC
# batch hold no body. (Scrapy's own default, 5 MB: 8 MB cut a worker's pages/s by a
# quarter on the documentation sites, bench/throughput.py)
SCRAPER_SLOT_MAX_ACTIVE_SIZE = 32 * 2**20
# ... which stops new requests only: the downloads under way finish whatever their size.
# Big bodies (BODY_BUDGET_MIN_SIZE or more, by Content-Length) are bounded here: a big
# page's body is read only once the big bodies the worker holds leave room for it (the
# first always goes in), waiting at most BODY_BUDGET_MAX_WAIT seconds (crawler/page/budget.py;
# 0 bytes: no bound). A loopback crawl of eight hosts of 10 MB pages: eleven held at once
# and the worker at 232 MB without, two and 153 MB with 24 MB (and done in 18 s, not 22)
BODY_BUDGET_BYTES = 24 * 2**20
BODY_BUDGET_MIN_SIZE = 2**20
BODY_BUDGET_MAX_WAIT = 30.0
DOWNLOAD_HANDLERS = {
    "http": "crawler.handlers.budgeted.BudgetedDownloadHandler",
    "https": "crawler.handlers.budgeted.BudgetedDownloadHandler",
}

# --- the UrlStore (crawler/urlstore/) ---------------------------------------------------
URLSTORE_ENABLED = True  # the UrlStore pipeline (crawler/pipelines/urlstore.py)
URLSTORE_BACKEND = "sqlite"  # or "cassandra"
URLSTORE_SQLITE_PATH = ""  # empty: CRAWL_DIR/CRAWL_NAME/urlstore.sqlite
URLSTORE_SQLITE_TIMEOUT = 30.0  # seconds a write waits for another worker's lock; then it fails (the page is refetched)
# the page cache of a worker's SQLite connection that writes: resident once full; 32 MB
# wrote records 4-18% faster (crawler/urlstore/sqlite.py), 8 MB 38% slower
URLSTORE_SQLITE_CACHE_BYTES = 16 * 2**20
URLSTORE_INLINK_BUCKETS = 16  # partitions per inlink target (bounds a popular target's)
RECRAWL_INTERVAL = 7 * 86400  # a fetched page's next fetch is due this many seconds later (0: none)
RECRAWL_RETRY_INTERVAL = 86400  # ... a failure's (5xx, DNS, timeout, robots-disallowed); refused: none
# The adaptive schedule (crawler/freshness/schedule.py, Nutch's AdaptiveFetchSchedule): a page's
# interval starts at RECRAWL_INTERVAL (or its sitemap changefreq), shrinks by DEC_RATE when
# its content changed, grows by INC_RATE when not (a 304 too), within MIN..MAX
RECRAWL_MIN_INTERVAL = 3600
RECRAWL_MAX_INTERVAL = 90 * 86400
RECRAWL_INC_RATE = 0.4
RECRAWL_DEC_RATE = 0.2
RECRAWL_SYNC_DELTA_RATE = 0.3  # moves the next fetch toward Last-Modified's rhythm (0: off)
RECRAWL_GONE_INTERVAL = 30 * 86400  # after a 404 or 410
RECRAWL_REDIRECT_INTERVAL = 7 * 86400  # after a redirect
# Due URLs back into the frontier (crawler/freshness/recrawl.py): every RECRAWL_CHECK_INTERVAL
# seconds one worker of a running crawl (a Redis lock) puts up to RECRAWL_BATCH due URLs
# (0: off; the distributed profile turns it on); a URL put is not put again for
# RECRAWL_HOLD seconds unless it is fetched meanwhile
RECRAWL_CHECK_INTERVAL = 0
RECRAWL_BATCH = 10_000
RECRAWL_HOLD = 86400
RECRAWL_PROGRESS_INTERVAL = 5.0  # seconds between scrapy recrawl's progress lines
# The fetch policy (crawler/freshness/policy.py): a URL the UrlStore says was fetched (with an
# answer) less than this many seconds ago is not fetched again, unless submitted with
# --force (0: off; needs URLSTORE_ENABLED)
FETCH_POLICY_MAX_AGE = 7 * 86400
CASSANDRA_HOSTS = [h for h in os.environ.get("CASSANDRA_HOSTS", "").split(",") if h]  # contact points
CASSANDRA_PORT = 9042
CASSANDRA_KEYSPACE = "crawler"  # letters, digits and _, starting with a letter, at most 48
# The keyspace schema.cql creates (one that exists is left as it is): this many replicas,
# with SimpleStrategy, or with NetworkTopologyStrategy in CASSANDRA_DATACENTER
CASSANDRA_REPLICATION_FACTOR = 1
CASSANDRA_DATACENTER = ""  # the local datacenter, whose replicas take the requests; "": the contact points'
CASSANDRA_APPLY_SCHEMA = True  # apply crawler/urlstore/schema.cql at start (idempotent)
CASSANDRA_USERNAME = os.environ.get("CASSANDRA_USERNAME", "")
CASSANDRA_PASSWORD = os.environ.get("CASSANDRA_PASSWORD", "")
CASSANDRA_TLS = False  # TLS to the nodes (client-to-node encryption)
CASSANDRA_TLS_CA_FILE = ""  # CA certificates (PEM) the nodes' certificates are checked against; "": the system's
CASSANDRA_TLS_CERT_FILE = ""  # a client certificate (PEM), for clusters that require one
CASSANDRA_TLS_KEY_FILE = ""  # its private key, when not in CASSANDRA_TLS_CERT_FILE
CASSANDRA_TLS_CHECK_HOSTNAME = True  # a node's certificate must name the address it is reached at
CASSANDRA_WRITE_CONSISTENCY = ""  # "": LOCAL_QUORUM with a replication factor of 3 or more, else LOCAL_ONE
CASSANDRA_READ_CONSISTENCY = ""  # "": LOCAL_ONE
CASSANDRA_REQUEST_TIMEOUT = 10.0  # seconds a statement waits for its answer, its retries included; then it fails
CASSANDRA_CONNECT_TIMEOUT = 60.0  # seconds a worker keeps trying to reach the cluster at start; then it does not start
CASSANDRA_PROTOCOL_VERSION = 5  # the native protocol (Cassandra 4.0 and later); 0: the driver's negotiation
CASSANDRA_MAX_IN_FLIGHT = 64  # statements in flight per worker; more wait
# per statement: a timeout at the replicas (retried on the same node), too few replicas
# alive or a connection error (on the next node)
CASSANDRA_RETRIES = 5

# --- robots.txt (crawler/middlewares/robots.py) ---------------------------------------
# Fetched once per site for all workers, shared in Redis, RFC 9309 semantics.
ROBOTSTXT_OBEY = True
ROBOTSTXT_USER_AGENT = ""  # product token matched in robots.txt; empty: USER_AGENT up to "/"
ROBOTSTXT_CACHE_SECONDS = 86400.0  # lifetime of a fetched robots.txt
ROBOTSTXT_STALE_SECONDS = 7 * 86400.0  # a copy past its lifetime serves while the site is unreachable
ROBOTSTXT_MAX_BYTES = 500 * 1024  # parsed at most; the download stops there
ROBOTSTXT_RETRY_MIN = 60.0  # seconds before an unreachable robots.txt is tried again, doubling
ROBOTSTXT_RETRY_MAX = 6 * 3600.0
# unreachable for longer than this: everything allowed (RFC 9309's 30 days), so the
# site's pages are tried, and recorded, on their own
ROBOTSTXT_UNREACHABLE_ALLOW_AFTER = 30 * 86400.0
ROBOTSTXT_FETCH_TIMEOUT = 15.0  # a worker's claim on a fetch, renewed while it lasts, expires after this when it died
ROBOTSTXT_MAX_CRAWL_DELAY = 30.0  # Crawl-delay above this is capped
ROBOTSTXT_SITEMAPS = True  # queue the Sitemap: URLs of robots.txt
ROBOTSTXT_MAX_SITEMAPS = 20  # per robots.txt
ROBOTSTXT_CACHE_ENTRIES = 10_000  # parsed robots.txt kept in each worker's memory
# ... and no more than this much of them (Protego's rules take ~24 bytes per character of
# robots.txt: 36 KB for fifty rules, 10,000 such sites 350 MB); the oldest are read again
ROBOTSTXT_CACHE_BYTES = 16 * 2**20

DOWNLOADER_MIDDLEWARES = {
    # Scrapy's own: per process, and a 5xx robots.txt would mean "allow all"
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "crawler.middlewares.robots.RobotsMiddleware": 100,
    # Scrapy's retries come at once; failures.py retries later and judges the host
    "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
    "crawler.middlewares.failures.FailureMiddleware": 560,
    # Scrapy's own, without decoding whole pages in the reactor (bodytext.py)
    "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": None,
    "crawler.middlewares.bodytext.MetaRefreshMiddleware": 580,
    "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
    "crawler.middlewares.bodytext.HttpCompressionMiddleware": 590,
    # after HttpProxyMiddleware (750), so that it sees the proxy
    "crawler.middlewares.netguard.NetworkGuardMiddleware": 760,
    # the last one before the download handler
    "crawler.middlewares.ratelimit.RateLimiterMiddleware": 950,
}
# The item pipelines, in Mercator's order; the page's lease is acknowledged after the
# last (ITEM_PIPELINES adds to these; set one to None to turn it off).
ITEM_PIPELINES_BASE = {
    "crawler.pipelines.contentseen.ContentSeenPipeline": 100,
    "crawler.pipelines.links.FollowLinksPipeline": 150,
    "crawler.pipelines.metadata.MetadataPipeline": 200,
    "crawler.pipelines.archive.ArchivePipeline": 300,
    "crawler.pipelines.urlstore.UrlStorePipeline": 400,
}
SPIDER_MIDDLEWARES = {
    # acknowledges a page's lease once everything it produced has been handled
    "crawler.middlewares.lease.LeaseMiddleware": 1000,
}
EXTENSIONS = {
    "crawler.extensions.summary.FrontierStats": 500,
    "crawler.extensions.metrics.Metrics": 510,
    "crawler.extensions.livestats.LiveStats": 520,
    "crawler.extensions.memory.GarbageCollection": 900,
    # not even imported (REMOTE_CONTROL_ENABLED is off): its module imports aiohttp, 7.7 MB
    # of a worker's memory; to turn it on, set it here again with REMOTE_CONTROL_ENABLED
    "scrapy.extensions.remote_control.RemoteControl": None,
}
