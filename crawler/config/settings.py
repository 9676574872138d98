"""The settings table: every setting of the project, one row each, with its default,
its rule (crawler/config/values.py) and what it does. Everything else comes from here:

- the defaults (settings/base.py takes ``defaults()``; the profiles change only what
  differs: settings/local.py, settings/distributed.py);
- the checks every command makes before it starts (``RULES``, crawler/config/validation.py);
- the settings tables of docs/OPERATIONS.md (``OPERATIONS_SETTINGS``, the settings that matter)
  and of docs/SETTINGS.md (every row):
  ``python -m crawler.config.settings --write`` rewrites both, and a test fails when
  either is not what this table gives.

``env``: an environment variable that gives the default when it is set (and not empty),
in every profile.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from crawler.config.values import (
    AT_LEAST_ONE,
    COMPONENTS,
    CONSISTENCY_LEVELS,
    COUNT,
    CQL_NAME,
    CRAWL,
    DATACENTER_NAME,
    HANDLERS,
    MODULES,
    OBJECT,
    PATH,
    POSITIVE_SECONDS,
    SECONDS,
    STATUSES,
    TEXT,
    TEXTS,
    Address,
    Choice,
    CrawlRulesFile,
    Dotted,
    Flag,
    Networks,
    Number,
    Pattern,
    Ports,
    ReadableFile,
    RedisParams,
    Url,
    UrlList,
)

MODULE = Dotted()


@dataclass(frozen=True)
class Setting:
    name: str
    default: object  # a value, or a function of nothing that gives it (CRAWL_DIR's)
    rule: object  # crawler/config/values.py: problem(settings, name) -> None or what it takes
    doc: str  # what it does, one line
    env: str = ""  # an environment variable that gives the default when set


def S(name, default, rule, doc, env="") -> Setting:  # noqa: N802 (a row of the table)
    return Setting(name, default, rule, doc, env)


def project_crawl_dir() -> str:
    """.crawl in the folder of the project's scrapy.cfg, found from the current folder
    upward as Scrapy finds it (a scrapyd job, with no scrapy.cfg: .crawl in the current folder)."""
    from scrapy.utils.conf import closest_scrapy_cfg

    cfg = closest_scrapy_cfg()
    return os.path.join(os.path.dirname(cfg) if cfg else "", ".crawl")


TABLE: tuple[Setting, ...] = (
    S("BOT_NAME", "crawler", TEXT, "Scrapy's name for the project"),
    S("SPIDER_MODULES", ["crawler.spiders"], MODULES, "where Scrapy finds the spiders (the broad spider)"),
    S("NEWSPIDER_MODULE", "crawler.spiders", MODULE, "where `scrapy genspider` writes a new spider"),
    S(
        "COMMANDS_MODULE",
        "crawler.commands",
        MODULE,
        "the project's commands (seed, frontier, submit, recrawl, urlstore, archive, serve, demo)",
    ),
    S(
        "USER_AGENT",
        "crawler/0.1 (+https://example.invalid/crawler)",
        TEXT,
        "the crawler's honest identity; the robots.txt token is its first word",
    ),
    S("TELNETCONSOLE_ENABLED", False, Flag(), "Scrapy's telnet console (runs arbitrary code): off unless turned on"),
    S(
        "REMOTE_CONTROL_ENABLED",
        False,
        Flag(),
        "Scrapy's remote-control server (2.19+, runs arbitrary code): off unless turned on",
    ),
    S(
        "SETTINGS_PROFILE",
        "local",
        Choice(("local", "distributed")),
        "The profile these settings are (settings/local.py, settings/distributed.py): what the workers publish for viewers (crawler/observe/livestats.py).",
    ),
    # --- crawl identity and storage ---
    S(
        "CRAWL_NAME",
        "default",
        CRAWL,
        "several crawls share one Redis without touching each other's keys",
        env="CRAWL_NAME",
    ),
    S(
        "CRAWL_DIR",
        project_crawl_dir,
        PATH,
        "where a crawl's local files live (embedded Redis, SQLite UrlStore, WARC files): .crawl in the project's root, from any of its folders",
        env="CRAWL_DIR",
    ),
    S(
        "REDIS_URL",
        "",
        Url(("redis", "rediss", "unix")),
        "the shared frontier; empty: embedded Redis under `CRAWL_DIR`",
        env="REDIS_URL",
    ),
    S(
        "REDIS_URLS",
        [],
        UrlList(("redis", "rediss", "unix")),
        "several Redis servers, comma separated: the hosts are spread over them (Several workers, below)",
        env="REDIS_URLS",
    ),
    S(
        "REDIS_CLUSTER_URL",
        "",
        Url(("redis", "rediss")),
        "a node of a Redis Cluster: the crawl's `REDIS_CLUSTER_SHARDS` (16) shards spread over its masters",
        env="REDIS_CLUSTER_URL",
    ),
    S(
        "REDIS_CLUSTER_SHARDS",
        16,
        Number(1, 16384, integer=True),
        "shards a crawl on a Redis Cluster is cut into, each with its hash tag, spread over the masters",
    ),
    S(
        "REDIS_PARAMS",
        {},
        RedisParams(),
        "Extra redis-py client parameters (password, ssl, timeouts...), as in scrapy-redis.",
    ),
    # --- the frontier (crawler/frontier/) ---
    S(
        "SCHEDULER",
        "crawler.scheduler.scheduler.FrontierScheduler",
        OBJECT,
        "Scrapy's scheduler: the frontier's (crawler/scheduler/)",
    ),
    S("FRONTIER_CLASS", "crawler.frontier.frontier.Frontier", OBJECT, "built with from_settings(settings, redis)"),
    S(
        "FRONTIER_PRIORITY_LEVELS",
        3,
        Number(1, 16, integer=True),
        "front queues; a higher level is served more often, none starves",
    ),
    S("FRONTIER_HOST_INTERVAL", 1.0, SECONDS, "seconds between two fetches of one host, across all workers"),
    S(
        "CRAWL_RULES",
        "",
        CrawlRulesFile(),
        "The crawl's rules file (crawler/scope/rules.py): ordered accept/reject rules by host, SURT prefix, URL prefix or regex, applied to every URL entering the frontier, and per-host overrides (interval, in_flight, max_pages, priority); checked at start, read again when it changes ('': none).",
    ),
    S(
        "CRAWL_RULES_CHECK_INTERVAL",
        5.0,
        POSITIVE_SECONDS,
        "seconds between two looks at CRAWL_RULES for a change, in each worker",
    ),
    S(
        "FRONTIER_HOST_INTERVALS_FILE",
        "",
        ReadableFile(),
        'Operator overrides (crawler/frontier/intervals.py): lines "HOST SECONDS" or "HOST Nqps"; an entry covers the host and its subdomains, and comes before robots.txt Crawl-delay.',
    ),
    S(
        "FRONTIER_POLITENESS_KEY",
        "host",
        Choice(("host", "domain")),
        "the host with its port when that is not the scheme's default (`127.0.0.1:8080`): interval, in-flight limit, back-offs and down state are kept per key, so a closed port leaves the host's other ports alone; or `domain`: one per registered domain, whatever the port",
    ),
    S(
        "FRONTIER_HOST_MAX_IN_FLIGHT",
        1,
        COUNT,
        "downloads in flight at once per host, across all workers (0: no limit)",
    ),
    S(
        "FRONTIER_ADDRESS_POLITENESS",
        False,
        Flag(),
        "politeness per server as well as per host: each host's address is resolved once for all workers (crawler/frontier/addresses.py), and the hosts of one address (its class: FRONTIER_ADDRESS_PREFIX_V4/V6) share FRONTIER_ADDRESS_INTERVAL and FRONTIER_ADDRESS_MAX_IN_FLIGHT, across all workers; with FRONTIER_POLITENESS_KEY host",
    ),
    S(
        "FRONTIER_ADDRESS_INTERVAL",
        1.0,
        SECONDS,
        "with FRONTIER_ADDRESS_POLITENESS: seconds between two requests to one address (class), across all workers and its hosts",
    ),
    S(
        "FRONTIER_ADDRESS_MAX_IN_FLIGHT",
        2,
        COUNT,
        "with FRONTIER_ADDRESS_POLITENESS: downloads in flight at once per address (class), across all workers and its hosts (0: no limit)",
    ),
    S(
        "FRONTIER_ADDRESS_PREFIX_V4",
        32,
        Number(8, 32, integer=True),
        "with FRONTIER_ADDRESS_POLITENESS: the IPv4 addresses that share one budget: those of one /N network (32: each address alone; 24: a /24)",
    ),
    S(
        "FRONTIER_ADDRESS_PREFIX_V6",
        64,
        Number(16, 128, integer=True),
        "with FRONTIER_ADDRESS_POLITENESS: the IPv6 addresses that share one budget: those of one /N network (64: one machine's, in practice)",
    ),
    S(
        "FRONTIER_ADDRESS_TTL_MIN",
        60.0,
        POSITIVE_SECONDS,
        "with FRONTIER_ADDRESS_POLITENESS: a host's address is kept at least this long, whatever its DNS TTL",
    ),
    S(
        "FRONTIER_ADDRESS_TTL_MAX",
        86_400.0,
        POSITIVE_SECONDS,
        "with FRONTIER_ADDRESS_POLITENESS: a host's address is looked up again after this long at most, whatever its DNS TTL",
    ),
    S(
        "DNS_NAMESERVERS",
        "",
        TEXTS,
        "the DNS servers the workers resolve hosts with (and FRONTIER_ADDRESS_POLITENESS's look-ups), `address` or `address:port`, comma separated ('': the machine's resolver)",
    ),
    S(
        "FRONTIER_LEASE_SECONDS",
        60.0,
        POSITIVE_SECONDS,
        "a dead worker's URLs are handed out again after this",
    ),
    S("FRONTIER_LEASE_MAX_HOLD", 900.0, POSITIVE_SECONDS, "a worker stops renewing a lease older than this"),
    S("FRONTIER_LEASE_MAX_ATTEMPTS", 3, AT_LEAST_ONE, "leases of one URL that may expire before it is abandoned"),
    S(
        "FRONTIER_SEEN_CACHE",
        100_000,
        COUNT,
        "URLs a worker remembers having pushed (seen for good), counted as seen without a round trip (0: off)",
    ),
    S(
        "FRONTIER_PREFETCH",
        2,
        AT_LEAST_ONE,
        "due hosts leased per pop; the extra requests wait in the worker for the engine (their hosts count as in flight)",
    ),
    S(
        "FRONTIER_MAX_UNREAD",
        8,
        AT_LEAST_ONE,
        "pages a worker holds downloaded but not yet through its pipelines; it leases no more meanwhile but due submissions (read first; at most as many again): when the CPU bounds the crawl, each page waits behind at most these to be read (bounds refetches after a crash, and memory; the downloads in flight are CONCURRENT_REQUESTS')",
    ),
    S(
        "FRONTIER_MAX_UNSTORED",
        500,
        AT_LEAST_ONE,
        "pages a worker holds fetched but not yet stored (archive and UrlStore); at the bound it leases nothing, submissions included, until the stores catch up, and says so (about two 5 s archive batches at one worker's 46 pages/s, bench/throughput.py)",
    ),
    S(
        "FRONTIER_MAX_UNSTORED_BYTES",
        128 * 2**20,
        AT_LEAST_ONE,
        "bytes of bodies a worker holds fetched but not yet stored; at the bound, as FRONTIER_MAX_UNSTORED (two ARCHIVE_MAX_BYTES batches)",
    ),
    S(
        "FRONTIER_LOOKAHEAD",
        0.02,
        SECONDS,
        "seconds: a host due this soon is handed out already, and its request held by the rate limiter until the host is due (0 when `RATE_LIMITER_ENABLED` is off)",
    ),
    S("FRONTIER_REFILL_BATCH", 100, AT_LEAST_ONE, "front-queue entries moved to back queues per pop, at most"),
    S(
        "FRONTIER_HOST_WINDOW",
        32,
        COUNT,
        "URLs of a host's queue kept in Redis (its window); the rest is spilled to disk in chunks of this size (SQLite under CRAWL_DIR, or Cassandra's keyspace with URLSTORE_BACKEND cassandra: the store of workers on several machines) and loaded back as the window runs low; 0: every queued URL in Redis (decision 0055)",
        env="FRONTIER_HOST_WINDOW",
    ),
    S(
        "FRONTIER_ACTIVE_HOSTS",
        10_000,
        COUNT,
        "with FRONTIER_HOST_WINDOW: hosts with a window at most; the others wait wholly on disk until one finishes (0: no limit)",
    ),
    S(
        "FRONTIER_WINDOW_IDLE",
        60.0,
        SECONDS,
        "with FRONTIER_HOST_WINDOW: a host not due for this long (nor for twice its own interval) gives its window back to disk while other hosts wait on disk for one (0: never)",
    ),
    S(
        "FRONTIER_SPILL_AGE",
        5.0,
        SECONDS,
        "with FRONTIER_HOST_WINDOW: seconds new URLs wait in the crawl's inbox (and a host's buffer smaller than a chunk) before they are written to disk, at most (a worker with nothing to hand out writes them at once; decision 0061)",
    ),
    S("FRONTIER_POLL_INTERVAL", 1.0, POSITIVE_SECONDS, "seconds between polls when no host is due"),
    S(
        "FRONTIER_SUBMIT_INTERVAL",
        0.1,
        SECONDS,
        "seconds between a worker's looks at the crawl's submission list (0: never)",
    ),
    S(
        "FRONTIER_SUBMIT_BATCH",
        100,
        AT_LEAST_ONE,
        "submitted URLs a worker takes from the submission list at a time",
    ),
    S(
        "FRONTIER_SEEN_CAPACITY",
        1_000_000,
        AT_LEAST_ONE,
        "URLs the crawl expects: the first URL-seen generation takes these (the three URL-seen settings: a crawl keeps those of its first push)",
    ),
    S(
        "FRONTIER_SEEN_ERROR_RATE",
        1e-6,
        Number(1e-8, 0.5),
        "overall false-positive bound of the URL-seen filter, however far it grows",
    ),
    S(
        "FRONTIER_SEEN_GROWTH",
        4,
        Number(2, 16, integer=True),
        "each URL-seen generation takes this many times the last one's URLs",
    ),
    S(
        "FRONTIER_MAX_URL_LENGTH",
        2048,
        COUNT,
        "trap guard: characters of a URL (0: off; refusals counted as frontier/trap/<name>)",
    ),
    S("FRONTIER_MAX_DEPTH", 20, COUNT, "trap guard: links from the seed (0: off)"),
    S(
        "FRONTIER_ORDER",
        "fifo",
        Choice(("fifo", "importance")),
        "the order of each host's new URLs: fifo (as found) or importance (OPIC: each page shares its importance among its links, seeds start with 1; the most important first, seed priorities and submissions still first)",
    ),
    S(
        "CRAWL_MAX_PAGES",
        0,
        COUNT,
        "the crawl's page budget, over all workers: once this many pages are handled (or in hand) nothing more is handed out and the workers end, saying so (0: none)",
    ),
    S(
        "FRONTIER_HOST_MAX_PAGES",
        100_000,
        COUNT,
        "each host's page quota, over all workers: URLs admitted per host; the others are recorded as not fetched (fate over_quota; 0: none)",
    ),
    S("FRONTIER_MAX_REPEATED_SEGMENTS", 3, COUNT, "trap guard: times one path segment may repeat (0: off)"),
    S("FRONTIER_MAX_QUERY_PARAMS", 24, COUNT, "trap guard: query parameters of a URL (0: off)"),
    S("FRONTIER_MAX_QUERY_LENGTH", 1024, COUNT, "trap guard: characters of a query (0: off)"),
    S("FRONTIER_MAX_PARAM_REPEATS", 3, COUNT, "trap guard: times one query parameter may repeat (0: off)"),
    S(
        "FRONTIER_CLOSE_WHEN_IDLE",
        True,
        Flag(),
        "a worker closes when nothing is leased and nothing is due within FRONTIER_MAX_WAIT, for FRONTIER_IDLE_SECONDS (distributed: waits for work)",
    ),
    S(
        "FRONTIER_MAX_WAIT",
        60.0,
        SECONDS,
        "seconds: an idle worker closes only when nothing is due within this (FRONTIER_CLOSE_WHEN_IDLE)",
    ),
    S(
        "FRONTIER_IDLE_SECONDS",
        2.0,
        SECONDS,
        "seconds an idle worker waits before it closes (FRONTIER_CLOSE_WHEN_IDLE)",
    ),
    S("FRONTIER_STATS_INTERVAL", 30.0, SECONDS, "the periodic line of each worker (below)"),
    S(
        "REACTOR_PROBE_INTERVAL",
        0.05,
        SECONDS,
        "seconds between the reactor-stall probe's calls (reactor/stall_max_ms, stall_p99_ms; 0: off)",
    ),
    S(
        "LIVE_STATS_INTERVAL",
        2.0,
        Number(0, 10, unit="seconds"),
        "how often each worker publishes its live numbers to the crawl's Redis (below; 0: off, at most 10)",
    ),
    # --- Prometheus metrics (crawler/observe/metrics.py) ---
    S(
        "METRICS_PORT",
        None,
        Ports(),
        'a port, a range "9410-9419" (the first free one) or "auto" (any free port); None/0: off',
    ),
    S(
        "METRICS_ADDRESS",
        "127.0.0.1",
        Address(),
        'the address the endpoint listens on ("0.0.0.0": every interface)',
    ),
    S(
        "METRICS_FRONTIER_INTERVAL",
        5.0,
        SECONDS,
        "seconds the frontier's numbers are reused between scrapes",
    ),
    S(
        "METRICS_FRONTIER_TIMEOUT",
        1.0,
        POSITIVE_SECONDS,
        "seconds a scrape waits for fresh frontier numbers, else serves the last",
    ),
    S(
        "SERVE_HOST",
        "127.0.0.1",
        Address(),
        "scrapy serve: the UrlStore's read API and the dashboard (crawler/serve/app.py) without SERVE_TOKEN, only a loopback address is allowed",
    ),
    S("SERVE_PORT", 6810, Number(1, 65535, integer=True), "the port `scrapy serve` listens on"),
    S("SERVE_TOKEN", "", TEXT, 'set: every /api/ request needs "Authorization: Bearer <token>"', env="SERVE_TOKEN"),
    S(
        "SERVE_TIMEOUT",
        2.0,
        POSITIVE_SECONDS,
        "seconds a store, archive or Redis read may take; then 503 with Retry-After",
    ),
    S("SERVE_THREADS", 4, AT_LEAST_ONE, "threads for those reads"),
    S(
        "SERVE_PROCESSES",
        1,
        Number(1, 64, integer=True),
        "processes serving the same port (SO_REUSEPORT): one core each",
    ),
    S("SERVE_BATCH_MAX", 100, AT_LEAST_ONE, "URLs in one lookup"),
    S("SERVE_ACCESS_LOG", False, Flag(), "a log line per request"),
    # --- URL normalization (crawler/urls.py) ---
    S("URL_STRIP_PARAMS", [], TEXTS, "empty: the built-in list of tracking and session parameters"),
    S("URL_SORT_QUERY", True, Flag(), "normalization: sort a URL's query parameters"),
    # --- the broad-crawl spider ---
    S("CRAWL_ALLOWED_DOMAINS", [], TEXTS, "scope: these domains and their subdomains (empty: any)"),
    S("CRAWL_ALLOWED_PREFIXES", [], TEXTS, "scope: URLs starting with one of these (empty: any)"),
    S(
        "CRAWL_FOLLOW_LINKS",
        True,
        Flag(),
        "follow the links of fetched pages (False: fetch the seeds and submissions only)",
    ),
    S(
        "LINKS_MAX_PER_PAGE",
        6000,
        COUNT,
        "links of a page read at most, in page order (a page of hundreds of thousands of links: a trap, or a crawl's memory); 0: all",
    ),
    S("SEED_BATCH_SIZE", 2000, AT_LEAST_ONE, "URLs per frontier round trip during seed ingestion"),
    S(
        "SEED_GROUP_URLS",
        100_000,
        COUNT,
        "with FRONTIER_HOST_WINDOW: seed URLs held in memory, up to this many, and pushed grouped by host once read, each "
        "host's in the order read (a push does a host's work once a batch; about 450 bytes a URL held, 45 MB at 100,000; "
        "more: held on disk, SEED_SPOOL_DIR, in parts of about this many, up to twice it read back at once; 0: pushed as read)",
    ),
    S(
        "SEED_ROUNDS_PROCESS_FROM",
        500_000,
        COUNT,
        "with FRONTIER_HOST_WINDOW: `scrapy seed` of this many URLs or more (counted once read when grouped, else as "
        "pushed) writes the inbox out to the spill store in a process of its own beside the pushes, which costs some "
        "0.4 s of a core to start (0: never, a thread)",
    ),
    S(
        "SEED_SPLIT_READ_FROM",
        8_000_000,
        COUNT,
        "with FRONTIER_HOST_WINDOW: `scrapy seed` of one plain file of this many bytes or more, held on disk past "
        "SEED_GROUP_URLS, reads its second half in a process of its own while it reads the first (0: never)",
    ),
    S(
        "SEED_SPOOL_DIR",
        "",
        PATH,
        "with FRONTIER_HOST_WINDOW, seeds past SEED_GROUP_URLS are held here, sorted by host, until the input is read "
        "(about 1.5 times the input's plain text; removed after; empty: the system's temporary directory, TMPDIR)",
    ),
    S(
        "SEED_PROGRESS_INTERVAL",
        5.0,
        SECONDS,
        "a progress line of seed ingestion every this many seconds (`scrapy seed` to a log or a pipe, `-a seeds=` in the worker's log; 0: none)",
    ),
    S("SITEMAP_MAX_URLS", 50_000, COUNT, "URLs read from one sitemap (the sitemaps.org limit)"),
    # --- Scrapy's own knobs, tuned for a broad crawl ---
    S("DOWNLOAD_DELAY", 0, SECONDS, "Politeness is the frontier's job: no per-process delay fighting it."),
    S("AUTOTHROTTLE_ENABLED", False, Flag(), "Scrapy's AutoThrottle: off (the frontier spaces each host's requests)"),
    S("CONCURRENT_REQUESTS", 32, AT_LEAST_ONE, "requests a worker has in flight at once"),
    S(
        "CONCURRENT_REQUESTS_PER_DOMAIN",
        4,
        AT_LEAST_ONE,
        "requests in flight per Scrapy download slot (the frontier's FRONTIER_HOST_MAX_IN_FLIGHT rules per host)",
    ),
    S("CLOSESPIDER_TIMEOUT", 0, SECONDS, "seconds after which a worker closes, whatever is left (0: never)"),
    S("DOWNLOAD_TIMEOUT", 30, POSITIVE_SECONDS, "seconds a download may take"),
    S("DOWNLOAD_MAXSIZE", 10 * 1024 * 1024, COUNT, "bytes of a response body at most; a larger one is dropped"),
    S("DOWNLOAD_WARNSIZE", 0, COUNT, "bytes of a body above which Scrapy warns (0: never)"),
    S("REDIRECT_MAX_TIMES", 5, COUNT, "redirects followed from one URL"),
    S("COOKIES_ENABLED", False, Flag(), "cookies: off (a broad crawl keeps no sessions)"),
    S(
        "CONCURRENT_ITEMS",
        2,
        AT_LEAST_ONE,
        "The spider yields one Page per response; Scrapy starts this many tasks for each response's output: 100 (its default) cost 0.8 ms of reactor time per response, 2 cost 0.04 ms.",
    ),
    S("HTTPERROR_ALLOW_ALL", True, Flag(), "every status reaches the spider and becomes a Page"),
    S("DEPTH_STATS_VERBOSE", False, Flag(), "Scrapy's pages-per-depth stats"),
    S(
        "DEPTH_PRIORITY",
        0,
        Number(-1000, 1000, integer=True),
        "Scrapy's priority change per depth (the frontier orders by its front queues)",
    ),
    S("LOG_LEVEL", "INFO", Choice(("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), upper=True), "the log's level"),
    S(
        "LOG_FORMATTER",
        "crawler.observe.logformatter.LogFormatter",
        OBJECT,
        "a dropped page named by its URL, not printed whole",
    ),
    S("LOGSTATS_INTERVAL", 30.0, SECONDS, "seconds between Scrapy's pages/min log lines"),
    S("REACTOR_THREADPOOL_MAXSIZE", 20, AT_LEAST_ONE, "threads of the reactor's pool (DNS, store writes)"),
    S(
        "PAGE_PROCESSES",
        1,
        Number(0, 64, integer=True),
        "processes that read pages (links, fingerprints, metadata: one parse each), beside the crawling process (0: threads of it)",
    ),
    S(
        "PAGE_PROCESS_NICE",
        10,
        Number(0, 19, integer=True),
        "their CPU priority below the crawling process's, whose delays are every due host's delays",
    ),
    S(
        "PAGE_READ_TIMEOUT",
        30.0,
        SECONDS,
        "seconds a page process may take to read a page before it is stopped and the page kept unread (exact copies checked only; 0: no limit)",
    ),
    S("DNSCACHE_ENABLED", True, Flag(), "Scrapy's DNS cache"),
    S("FEED_EXPORT_ENCODING", "utf-8", TEXT, "encoding of `-o` feeds"),
    # --- network guard (crawler/middlewares/netguard.py) ---
    S(
        "NETWORK_GUARD_ENABLED",
        True,
        Flag(),
        "Never connect to private, loopback, link-local, multicast or reserved addresses (the cloud metadata address 169.254.169.254 included) unless a network is listed here.",
    ),
    S("NETWORK_GUARD_ALLOW", [], Networks(), 'e.g. ["10.1.0.0/16", "127.0.0.0/8"]'),
    S(
        "TWISTED_DNS_RESOLVER",
        "crawler.middlewares.netguard.GuardedResolver",
        OBJECT,
        "the resolver: the network guard's, which refuses private addresses",
    ),
    # --- failures: the URL's or the host's (crawler/middlewares/failures.py) ---
    S(
        "HOST_BACKOFF_ENABLED",
        True,
        Flag(),
        "a 429, a 5xx with Retry-After or a host that is down keeps every worker away from the host",
    ),
    S(
        "HOST_BACKOFF_HTTP_CODES",
        [429],
        STATUSES,
        "429 (or any 5xx with Retry-After): every worker leaves the host alone for a while",
    ),
    S("HOST_BACKOFF_MIN", 30.0, SECONDS, "seconds, doubled at each back-off in a row (with jitter)"),
    S("HOST_BACKOFF_MAX", 3600.0, SECONDS, "seconds, also the cap on Retry-After"),
    S("HOST_BACKOFF_QUIET", 600.0, SECONDS, "seconds without a back-off after which the doubling restarts"),
    S("HOST_BACKOFF_MAX_RETRIES", 5, COUNT, "back-offs of one page before its answer is kept"),
    S(
        "URL_RETRY_HTTP_CODES",
        [500, 502, 503, 504, 522, 524, 408],
        STATUSES,
        "a 5xx or a timeout of one URL: that URL is tried again later, on its own schedule",
    ),
    S("URL_RETRY_ATTEMPTS", 3, AT_LEAST_ONE, "tries of one URL in all; the last failure is recorded"),
    S("URL_RETRY_DELAY", 15.0, SECONDS, "seconds before the second try, doubling (with jitter)"),
    S("URL_RETRY_DELAY_MAX", 3600.0, SECONDS, "seconds: the longest wait before a URL's next try"),
    S(
        "HOST_SLOWDOWN_FACTOR",
        2.0,
        Number(1),
        "... and its host is slowed (interval x factor, at most x max) until it answers again",
    ),
    S("HOST_SLOWDOWN_MAX", 8.0, Number(1), "a failing host's interval is multiplied by at most this"),
    S(
        "HOST_SLOWDOWN_RECOVERY",
        0.25,
        Number(0, 1, above=True),
        "of its base rate each answer gives a slowed host back",
    ),
    S(
        "HOST_DOWN_AFTER",
        3,
        AT_LEAST_ONE,
        "distinct URLs failing in a row (no answer between) that make a host down",
    ),
    S(
        "HOST_GIVE_UP_AFTER",
        86400.0,
        SECONDS,
        "seconds a host may stay down (or its robots.txt unreachable) since it last answered before it is given up: its URLs are recorded as not fetched (fate given_up) and the crawl can end (0: never)",
    ),
    S("FAILURE_LOG_PERIOD", 60.0, SECONDS, "seconds: one log line per host and decision at most"),
    # --- per-host rate limiter (crawler/middlewares/ratelimit.py) ---
    S(
        "RATE_LIMITER_ENABLED",
        True,
        Flag(),
        "The last guard before a request leaves: one slot per host interval, for all workers.",
    ),
    S(
        "RATE_LIMITER_MAX_WAIT",
        1.0,
        SECONDS,
        "every request to a host, from any worker, takes a slot one interval after the last; a request waits this long at most, else goes back to the frontier",
    ),
    # --- content seen (crawler/pipelines/contentseen.py) ---
    S("CONTENT_SEEN_ENABLED", True, Flag(), "the content-seen pipeline: exact and near copies"),
    S(
        "CONTENT_SEEN_RESEMBLANCE",
        0.9,
        Number(0, 1, above=True),
        "share of its main text's words a near copy has in common with the page it resembles",
    ),
    S(
        "CONTENT_SEEN_MIN_WORDS",
        100,
        COUNT,
        "words of main text (stop words aside) a page needs to be checked for near copies; shorter pages: exact copies only",
    ),
    S("CONTENT_SEEN_BUCKET_SIZE", 4096, AT_LEAST_ONE, "entries per LSH bucket (8 bytes each; 65,536 buckets)"),
    S("CONTENT_SEEN_FOLLOW_NEAR_DUPLICATES", True, Flag(), "follow the links of a near copy (an exact copy's: never)"),
    # --- page metadata (crawler/pipelines/metadata.py) ---
    S("METADATA_ENABLED", True, Flag(), "the metadata pipeline (title, description, language, Open Graph, JSON-LD...)"),
    S("METADATA_MAX_FIELD_LENGTH", 1000, AT_LEAST_ONE, "characters per value"),
    S("METADATA_MAX_FIELDS", 64, AT_LEAST_ONE, "fields per page"),
    S("METADATA_MAX_BYTES", 2 * 2**20, AT_LEAST_ONE, "of the body handed to the parsers"),
    # --- the raw-page archive (crawler/pipelines/archive.py, crawler/archive/) ---
    S("ARCHIVE_ENABLED", True, Flag(), "the archive pipeline: raw pages as WARC records"),
    S("ARCHIVE_DIR", "", PATH, "local WARC directory; empty: CRAWL_DIR/CRAWL_NAME/warc"),
    S("ARCHIVE_S3_BUCKET", "", TEXT, "set: archive to S3 instead (credentials: the standard AWS chain)"),
    S(
        "ARCHIVE_S3_ENDPOINT_URL",
        "",
        Url(("http", "https")),
        "an S3-compatible store (MinIO, Ceph...); empty: AWS",
    ),
    S("ARCHIVE_S3_REGION", "", TEXT, "the S3 bucket's region (empty: the AWS chain's)"),
    S(
        "ARCHIVE_S3_PROXY",
        "",
        TEXT,
        "the proxy S3 calls go through: empty, none (HTTP_PROXY and HTTPS_PROXY are the crawl's, for the web); env: the environment's; or a proxy URL",
    ),
    S(
        "ARCHIVE_S3_TIMEOUT",
        60.0,
        POSITIVE_SECONDS,
        "seconds an S3 call waits for each read of its answer (and 10 at most to connect): a store that takes a PUT and never answers (a blackhole) holds the upload this long before it is tried again",
    ),
    S("ARCHIVE_PREFIX", "", TEXT, "in object keys, after their hash part: <hash>/<prefix><crawl>/..."),
    S("ARCHIVE_MAX_BYTES", 64 * 2**20, AT_LEAST_ONE, "a WARC batch is stored when it reaches this size..."),
    S(
        "ARCHIVE_MAX_SECONDS",
        5.0,
        POSITIVE_SECONDS,
        "... or this age; its pages' leases wait for it. Shorter: fewer pages fetched again when a worker dies, more objects (bench/rework.py, 3 workers, one killed, FRONTIER_MAX_UNREAD 400: 10 s 428 pages fetched twice and 2.0 objects per 1,000 pages, 5 s 308 and 3.2)",
    ),
    S(
        "ARCHIVE_GZIP_LEVEL",
        6,
        Number(0, 9, integer=True),
        "gzip level of each WARC record (request and metadata records: 1 at most)",
    ),
    S(
        "ARCHIVE_OPERATOR",
        "",
        TEXT,
        "who runs the crawl (a name, an e-mail or a URL), in each WARC file's warcinfo record",
    ),
    S("WORKER_STOP_TIMEOUT", 30.0, SECONDS, "how long a closing worker waits for its archive uploads"),
    S(
        "ARCHIVE_UPLOADS",
        2,
        AT_LEAST_ONE,
        "WARC batches uploaded at once, at most (one pool of threads; the others wait)",
    ),
    S("ARCHIVE_RETRY_MIN", 1.0, POSITIVE_SECONDS, "seconds before a failed upload is tried again, doubling"),
    S("ARCHIVE_RETRY_MAX", 60.0, POSITIVE_SECONDS, "seconds: the longest wait before a failed upload is tried again"),
    S(
        "SCRAPER_SLOT_MAX_ACTIVE_SIZE",
        32 * 2**20,
        AT_LEAST_ONE,
        "bodies Scrapy holds (waiting for the page processes, in the pipelines) before it stops fetching; it bounds the backlog a stopping worker finishes. Pages waiting for their WARC batch hold no body. (Scrapy's own default, 5 MB: 8 MB cut a worker's pages/s by a quarter on the documentation sites, bench/throughput.py)",
    ),
    S(
        "BODY_BUDGET_BYTES",
        24 * 2**20,
        COUNT,
        "bytes of big bodies a worker holds at once; a big download waits before its body (0: no limit)",
    ),
    S(
        "BODY_BUDGET_MIN_SIZE",
        2**20,
        AT_LEAST_ONE,
        "bytes of a Content-Length from which a body counts against BODY_BUDGET_BYTES",
    ),
    S("BODY_BUDGET_MAX_WAIT", 30.0, POSITIVE_SECONDS, "seconds a big body waits for room in the budget, at most"),
    S(
        "DOWNLOAD_HANDLERS",
        {
            "http": "crawler.handlers.budgeted.BudgetedDownloadHandler",
            "https": "crawler.handlers.budgeted.BudgetedDownloadHandler",
        },
        HANDLERS,
        "http and https: Scrapy's HTTP/1.1 handler, held to the body budget",
    ),
    # --- the UrlStore (crawler/urlstore/) ---
    S("URLSTORE_ENABLED", True, Flag(), "the UrlStore pipeline (crawler/pipelines/urlstore.py)"),
    S(
        "URLSTORE_BACKEND",
        "sqlite",
        Choice(("sqlite", "cassandra")),
        "or `cassandra` (`CASSANDRA_HOSTS`, `_PORT`, `_KEYSPACE`, `_USERNAME`, `_PASSWORD`, TLS below; `crawler/urlstore/schema.cql` is applied at start)",
    ),
    S("URLSTORE_SQLITE_PATH", "", PATH, "empty: CRAWL_DIR/CRAWL_NAME/urlstore.sqlite"),
    S(
        "URLSTORE_SQLITE_TIMEOUT",
        30.0,
        POSITIVE_SECONDS,
        "seconds a write waits for another worker's lock; then it fails (the page is refetched)",
    ),
    S(
        "URLSTORE_SQLITE_CACHE_BYTES",
        16 * 2**20,
        AT_LEAST_ONE,
        "the page cache of a worker's SQLite connection that writes: resident once full; 32 MB wrote records 4-18% faster (crawler/urlstore/sqlite.py), 8 MB 38% slower",
    ),
    S("URLSTORE_INLINK_BUCKETS", 16, AT_LEAST_ONE, "partitions per inlink target (bounds a popular target's)"),
    S(
        "RECRAWL_INTERVAL",
        7 * 86400,
        SECONDS,
        "a fetched page's next fetch is due this many seconds later (0: none)",
    ),
    S(
        "RECRAWL_RETRY_INTERVAL",
        86400,
        SECONDS,
        "... a failure's (5xx, DNS, timeout, robots-disallowed); refused: none",
    ),
    S(
        "RECRAWL_MIN_INTERVAL",
        3600,
        POSITIVE_SECONDS,
        "The adaptive schedule (crawler/freshness/schedule.py, Nutch's AdaptiveFetchSchedule): a page's interval starts at RECRAWL_INTERVAL (or its sitemap changefreq), shrinks by DEC_RATE when its content changed, grows by INC_RATE when not (a 304 too), within MIN..MAX",
    ),
    S(
        "RECRAWL_MAX_INTERVAL",
        90 * 86400,
        POSITIVE_SECONDS,
        "seconds: the longest interval the adaptive schedule gives",
    ),
    S("RECRAWL_INC_RATE", 0.4, Number(0, 10), "an unchanged page's interval grows by this share"),
    S("RECRAWL_DEC_RATE", 0.2, Number(0, 0.99), "a changed page's interval shrinks by this share"),
    S("RECRAWL_SYNC_DELTA_RATE", 0.3, Number(0, 1), "moves the next fetch toward Last-Modified's rhythm (0: off)"),
    S("RECRAWL_GONE_INTERVAL", 30 * 86400, SECONDS, "after a 404 or 410"),
    S("RECRAWL_REDIRECT_INTERVAL", 7 * 86400, SECONDS, "after a redirect"),
    S(
        "RECRAWL_CHECK_INTERVAL",
        0,
        SECONDS,
        "seconds between a worker's rounds of putting due URLs back (one worker at a time; 0: never)",
    ),
    S("RECRAWL_BATCH", 10_000, AT_LEAST_ONE, "due URLs put back per round"),
    S(
        "RECRAWL_HOLD",
        86400,
        POSITIVE_SECONDS,
        "seconds a due URL put back is not put back again (its refetch is pending)",
    ),
    S("RECRAWL_PROGRESS_INTERVAL", 5.0, POSITIVE_SECONDS, "seconds between scrapy recrawl's progress lines"),
    S(
        "FETCH_POLICY_MAX_AGE",
        7 * 86400,
        SECONDS,
        "a URL the UrlStore says was fetched (with an answer) more recently is not fetched again unless submitted with `--force` (0: off)",
    ),
    S("CASSANDRA_HOSTS", [], TEXTS, "contact points", env="CASSANDRA_HOSTS"),
    S("CASSANDRA_PORT", 9042, Number(1, 65535, integer=True), "the nodes' CQL port"),
    S(
        "CASSANDRA_KEYSPACE",
        "crawler",
        Pattern(CQL_NAME, "a CQL name: letters, digits and _, starting with a letter, at most 48 characters"),
        "letters, digits and _, starting with a letter, at most 48",
    ),
    S(
        "CASSANDRA_REPLICATION_FACTOR",
        1,
        AT_LEAST_ONE,
        "The keyspace schema.cql creates (one that exists is left as it is): this many replicas, with SimpleStrategy, or with NetworkTopologyStrategy in CASSANDRA_DATACENTER",
    ),
    S(
        "CASSANDRA_DATACENTER",
        "",
        Pattern(f"|{DATACENTER_NAME}", "empty (SimpleStrategy) or a datacenter name: letters, digits, _, . and -"),
        'the local datacenter, whose replicas take the requests; "": the contact points\'',
    ),
    S("CASSANDRA_APPLY_SCHEMA", True, Flag(), "apply crawler/urlstore/schema.cql at start (idempotent)"),
    S("CASSANDRA_USERNAME", "", TEXT, "credentials, when the cluster asks for them", env="CASSANDRA_USERNAME"),
    S("CASSANDRA_PASSWORD", "", TEXT, "credentials, when the cluster asks for them", env="CASSANDRA_PASSWORD"),
    S("CASSANDRA_TLS", False, Flag(), "TLS to the nodes (client-to-node encryption)"),
    S(
        "CASSANDRA_TLS_CA_FILE",
        "",
        ReadableFile(),
        "CA certificates (PEM) the nodes' certificates are checked against; \"\": the system's",
    ),
    S("CASSANDRA_TLS_CERT_FILE", "", ReadableFile(), "a client certificate (PEM), for clusters that require one"),
    S("CASSANDRA_TLS_KEY_FILE", "", ReadableFile(), "its private key, when not in CASSANDRA_TLS_CERT_FILE"),
    S("CASSANDRA_TLS_CHECK_HOSTNAME", True, Flag(), "a node's certificate must name the address it is reached at"),
    S(
        "CASSANDRA_WRITE_CONSISTENCY",
        "",
        Choice(CONSISTENCY_LEVELS, upper=True, empty=True),
        '"": LOCAL_QUORUM with a replication factor of 3 or more, else LOCAL_ONE',
    ),
    S("CASSANDRA_READ_CONSISTENCY", "", Choice(CONSISTENCY_LEVELS, upper=True, empty=True), '"": LOCAL_ONE'),
    S(
        "CASSANDRA_REQUEST_TIMEOUT",
        10.0,
        POSITIVE_SECONDS,
        "seconds a statement waits for its answer, its retries included; then it fails",
    ),
    S(
        "CASSANDRA_CONNECT_TIMEOUT",
        60.0,
        POSITIVE_SECONDS,
        "seconds a worker keeps trying to reach the cluster at start; then it does not start",
    ),
    S(
        "CASSANDRA_PROTOCOL_VERSION",
        4,
        Number(0, 5, integer=True),
        "the native protocol; 5 (Cassandra 4.0 and later) checksums every frame, in Python in the driver: a fifth more CPU a read, in the client and the node; 0: the driver's negotiation",
    ),
    S("CASSANDRA_MAX_IN_FLIGHT", 64, AT_LEAST_ONE, "statements in flight per worker; more wait"),
    S(
        "CASSANDRA_BATCH_BYTES",
        0,
        Number(0, 50 * 1024, integer=True),
        "a write batch's bytes at most, as the server counts them (rows' clustering keys and cells, not partition keys), under the nodes' batch_size_fail_threshold (50 KiB by default: a larger batch is refused); 0: just under the nodes' own batch_size_warn_threshold (read at start from system_views.settings; 5 KiB, Cassandra's default, where a node does not say), at most 64 KiB. Larger batches are fewer requests a page, and the driver's CPU a request bounds a worker's writes: raise the nodes' threshold (cassandra.yaml) to 32KiB, as scripts/cassandra.py does, and a worker's CPU a record halves",
    ),
    S(
        "CASSANDRA_RETRIES",
        5,
        COUNT,
        "per statement: a timeout at the replicas (retried on the same node), too few replicas alive or a connection error (on the next node)",
    ),
    # --- robots.txt (crawler/middlewares/robots.py) ---
    S("ROBOTSTXT_OBEY", True, Flag(), "robots.txt, fetched once per site for all workers (RFC 9309)"),
    S("ROBOTSTXT_USER_AGENT", "", TEXT, 'product token matched in robots.txt; empty: USER_AGENT up to "/"'),
    S("ROBOTSTXT_CACHE_SECONDS", 86400.0, SECONDS, "lifetime of a fetched robots.txt"),
    S(
        "ROBOTSTXT_STALE_SECONDS",
        7 * 86400.0,
        SECONDS,
        "a copy past its lifetime serves while the site is unreachable",
    ),
    S("ROBOTSTXT_MAX_BYTES", 500 * 1024, AT_LEAST_ONE, "parsed at most; the download stops there"),
    S(
        "ROBOTSTXT_RETRY_MIN",
        60.0,
        POSITIVE_SECONDS,
        "seconds before an unreachable robots.txt is tried again, doubling",
    ),
    S(
        "ROBOTSTXT_RETRY_MAX",
        6 * 3600.0,
        POSITIVE_SECONDS,
        "seconds: the longest wait before an unreachable robots.txt is tried again",
    ),
    S(
        "ROBOTSTXT_UNREACHABLE_ALLOW_AFTER",
        30 * 86400.0,
        SECONDS,
        "unreachable for longer than this: everything allowed (RFC 9309's 30 days), so the site's pages are tried, and recorded, on their own",
    ),
    S(
        "ROBOTSTXT_FETCH_TIMEOUT",
        15.0,
        POSITIVE_SECONDS,
        "a worker's claim on a fetch, renewed while it lasts, expires after this when it died",
    ),
    S("ROBOTSTXT_MAX_CRAWL_DELAY", 30.0, SECONDS, "Crawl-delay is capped at this many seconds"),
    S("ROBOTSTXT_SITEMAPS", True, Flag(), "queue the `Sitemap:` URLs of robots.txt (indexes and `.gz` too)"),
    S("ROBOTSTXT_MAX_SITEMAPS", 20, COUNT, "per robots.txt"),
    S("ROBOTSTXT_CACHE_ENTRIES", 10_000, AT_LEAST_ONE, "parsed robots.txt kept in each worker's memory"),
    S(
        "ROBOTSTXT_CACHE_BYTES",
        16 * 2**20,
        AT_LEAST_ONE,
        "... and no more than this much of them (Protego's rules take ~24 bytes per character of robots.txt: 36 KB for fifty rules, 10,000 such sites 350 MB); the oldest are read again",
    ),
    S(
        "DOWNLOADER_MIDDLEWARES",
        {
            # Scrapy's own: per process, and a 5xx robots.txt would mean "allow all"
            "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
            # URLs handed out to be recorded, not fetched (a dropped host's, over a quota)
            "crawler.middlewares.steering.NotFetchedMiddleware": 50,
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
        },
        COMPONENTS,
        "Scrapy's, with URLs recorded and not fetched, robots.txt, failures, meta refresh, compression, the network guard and the rate limiter the project's",
    ),
    S(
        "ITEM_PIPELINES_BASE",
        {
            "crawler.pipelines.contentseen.ContentSeenPipeline": 100,
            "crawler.pipelines.links.FollowLinksPipeline": 150,
            "crawler.pipelines.metadata.MetadataPipeline": 200,
            "crawler.pipelines.archive.ArchivePipeline": 300,
            "crawler.pipelines.urlstore.UrlStorePipeline": 400,
        },
        COMPONENTS,
        "content seen, links, metadata, archive, UrlStore, in that order; the page's lease is acknowledged after the last",
    ),
    S(
        "SPIDER_MIDDLEWARES",
        {
            # acknowledges a page's lease once everything it produced has been handled
            "crawler.middlewares.lease.LeaseMiddleware": 1000,
        },
        COMPONENTS,
        "the lease middleware: a page's lease is acknowledged once all it produced is handled",
    ),
    S(
        "EXTENSIONS",
        {
            "crawler.extensions.summary.FrontierStats": 500,
            "crawler.extensions.metrics.Metrics": 510,
            "crawler.extensions.livestats.LiveStats": 520,
            "crawler.extensions.recrawl.RecrawlRounds": 530,
            "crawler.extensions.submissions.Submissions": 540,
            "crawler.extensions.memory.GarbageCollection": 900,
            "crawler.extensions.stalls.ReactorStalls": 910,
            # not even imported (REMOTE_CONTROL_ENABLED is off): its module imports aiohttp, 7.7 MB
            # of a worker's memory; to turn it on, set it here again with REMOTE_CONTROL_ENABLED
            "scrapy.extensions.remote_control.RemoteControl": None,
        },
        COMPONENTS,
        "the crawl's summary and progress, metrics, live stats, the recrawl's rounds, submissions taken from the list, garbage collection; Scrapy's remote control not even imported",
    ),
)

BY_NAME = {s.name: s for s in TABLE}
# the settings docs/OPERATIONS.md lists, in the table's order (docs/SETTINGS.md lists them all)
OPERATIONS_SETTINGS = (
    "CRAWL_NAME", "CRAWL_DIR", "REDIS_URL", "REDIS_URLS", "REDIS_CLUSTER_URL", "USER_AGENT",
    "FRONTIER_PRIORITY_LEVELS", "FRONTIER_HOST_INTERVAL", "FRONTIER_HOST_INTERVALS_FILE", "FRONTIER_POLITENESS_KEY",
    "FRONTIER_HOST_MAX_IN_FLIGHT", "FRONTIER_MAX_DEPTH", "CRAWL_MAX_PAGES", "FRONTIER_HOST_MAX_PAGES", "FRONTIER_CLOSE_WHEN_IDLE",
    "FRONTIER_HOST_WINDOW", "FRONTIER_ACTIVE_HOSTS", "FRONTIER_WINDOW_IDLE", "FRONTIER_ADDRESS_POLITENESS", "FRONTIER_ADDRESS_INTERVAL",
    "FRONTIER_ADDRESS_MAX_IN_FLIGHT", "LIVE_STATS_INTERVAL", "METRICS_PORT", "SERVE_TOKEN", "CRAWL_ALLOWED_DOMAINS", "CRAWL_ALLOWED_PREFIXES",
    "PAGE_PROCESSES", "NETWORK_GUARD_ALLOW", "CONTENT_SEEN_RESEMBLANCE", "ARCHIVE_DIR", "ARCHIVE_S3_BUCKET",
    "ARCHIVE_S3_ENDPOINT_URL", "WORKER_STOP_TIMEOUT", "FRONTIER_MAX_UNSTORED", "URLSTORE_BACKEND", "RECRAWL_INTERVAL", "RECRAWL_CHECK_INTERVAL",
    "FETCH_POLICY_MAX_AGE", "CASSANDRA_HOSTS", "CASSANDRA_KEYSPACE", "ROBOTSTXT_OBEY",
)  # fmt: skip
RULES = {s.name: s.rule for s in TABLE}


def defaults(environ=os.environ) -> dict:
    """Every setting's default (an ``env`` variable's value when it is set)."""
    out = {}
    for s in TABLE:
        value = s.default() if callable(s.default) else s.default
        given = environ.get(s.env, "") if s.env else ""
        if given:
            value = [part for part in given.split(",") if part] if isinstance(value, list) else given
        out[s.name] = value
    return out


# -- the generated tables -------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS_DOC = ROOT / "docs" / "OPERATIONS.md"
SETTINGS_DOC = ROOT / "docs" / "SETTINGS.md"
BEGIN = "<!-- settings table: python -m crawler.config.settings --write -->"
END = "<!-- end of the settings table -->"


def _shown(s: Setting) -> str:
    if s.env and callable(s.default):
        return f"`${s.env}`, else `.crawl` in the project"
    value = s.default() if callable(s.default) else s.default
    if isinstance(value, dict):
        shown = "(components)" if value else "`{}`"
    elif isinstance(value, str):
        shown = f"`{value}`" if value else "empty"
    elif isinstance(value, list):
        shown = "`" + ", ".join(map(str, value)) + "`" if value else "empty"
    elif isinstance(value, float) and value >= 10_000 and value.is_integer():
        shown = f"{int(value):,}"
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 10_000:
        shown = f"{value:,}"
    else:
        shown = f"{value}"
    return f"`${s.env}`, else {shown}" if s.env else shown


def markdown(rows) -> str:
    lines = ["| setting | default | what it does |", "|---|---|---|"]
    lines += ["| `{}` | {} | {} |".format(s.name, _shown(s), s.doc.replace("|", "\\|")) for s in rows]
    return "\n".join(lines)


def tables() -> dict[Path, str]:
    """docs/OPERATIONS.md's and docs/SETTINGS.md's settings tables, between their markers."""
    return {OPERATIONS_DOC: markdown(s for s in TABLE if s.name in OPERATIONS_SETTINGS), SETTINGS_DOC: markdown(TABLE)}


def current(path: Path, begin: str = BEGIN, end: str = END) -> str | None:
    """What a generated page holds between its markers (None: no markers)."""
    text = path.read_text()
    if begin not in text or end not in text:
        return None
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def write_between(path: Path, table: str, begin: str = BEGIN, end: str = END) -> None:
    """Put ``table`` between a page's markers, the rest of the page as it is."""
    text = path.read_text()
    head, rest = text.split(begin, 1)
    path.write_text(f"{head}{begin}\n{table}\n{end}{rest.split(end, 1)[1]}")


def write() -> None:
    for path, table in tables().items():
        write_between(path, table)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print(tables()[SETTINGS_DOC])
