"""Every ``Request.meta`` key the crawler reads or writes, spelled once.

The crawler's own keys, and the keys of Scrapy's components that it reads (each named
after its Scrapy meaning). Payloads in the frontier keep a few of them (``codec``).
"""

# -- the crawler's own ---------------------------------------------------------------

LEASE = "frontier_lease"  # the frontier lease this request fetches under (bytes id)
NOT_BEFORE = "frontier_not_before"  # ms: a follow-up waits until then (a URL's retry)
NOT_FETCHED = "frontier_not_fetched"  # 1 host dropped, 2 host given up, 3 over quota: recorded, not fetched
IMPORTANCE = "frontier_importance"  # FRONTIER_ORDER importance: the page's cash, shared among its links
DUE = "frontier_due"  # ms: when a leased request's host is due (it may not leave before)
FORCE = "force_fetch"  # fetched whatever URL-seen and the fetch policy say (scrapy submit --force)
URGENT = "frontier_urgent"  # a submission: its page is read before the pages waiting (crawler/page/workers.py)
RECRAWL = "recrawl"  # a recrawl: {"interval", "digest", "etag", "last_modified", "fetched_at"} of its record
ATTEMPT = "fetch_attempt"  # which try of the URL this request is (1 = first)
BACKOFF_RETRIES = "backoff_retries"  # tries of a URL put back because its host asked to wait (429, 503)
SITEMAP_HINTS = "sitemap_hints"  # {"changefreq", "lastmod"} of a URL listed in a sitemap
ROBOTS = "robots_txt"  # marks the robots.txt requests themselves
ROBOTS_BYTES = "robots_bytes"  # bytes of a robots.txt body received so far (its size cap)
DONT_BACK_OFF = "dont_back_off"  # the sender judges this request's failures itself (robots.txt)
SITEMAP = "sitemap"  # a sitemap request (its answer is read as a sitemap)

# -- Scrapy's, read here --------------------------------------------------------------

DEPTH = "depth"  # DepthMiddleware: links from the seed
REDIRECT_URLS = "redirect_urls"  # RedirectMiddleware: the URLs redirected from
DOWNLOAD_LATENCY = "download_latency"  # the downloader: seconds to the response's headers
DOWNLOAD_MAXSIZE = "download_maxsize"  # the largest body a request takes
DONT_OBEY_ROBOTSTXT = "dont_obey_robotstxt"  # a request robots.txt does not apply to
PROXY = "proxy"  # HttpProxyMiddleware: the proxy a request goes through
DONT_RETRY = "dont_retry"  # RetryMiddleware: not retried
