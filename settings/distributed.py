"""Production profile: services from the environment, workers wait for new work.

REDIS_URL       the shared frontier, e.g. redis://redis.internal:6379/0
CRAWL_NAME      the crawl these workers work on

and, as every profile, REDIS_URLS, REDIS_CLUSTER_URL and CASSANDRA_HOSTS. The shared
stores and the networks the crawl may reach are read from the environment too, so that
one ``export`` serves every command (seed, crawl, serve, frontier, urlstore):

URLSTORE_BACKEND         cassandra (default sqlite), with CASSANDRA_HOSTS
CASSANDRA_PORT           (default 9042)
CASSANDRA_KEYSPACE       (default crawler)
ARCHIVE_S3_BUCKET        the archive's bucket (default: none, a local directory)
ARCHIVE_S3_ENDPOINT_URL  an S3-compatible server (default: AWS)
ARCHIVE_S3_REGION        (default: the AWS chain's, e.g. AWS_DEFAULT_REGION)
NETWORK_GUARD_ALLOW      private or loopback networks the crawler may connect to, comma separated

An unset or empty variable leaves the default; ``-s NAME=VALUE`` comes before all of them.
"""

import os

from settings import base
from settings.base import *  # noqa: F403

SETTINGS_PROFILE = "distributed"
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
FRONTIER_CLOSE_WHEN_IDLE = os.environ.get("FRONTIER_CLOSE_WHEN_IDLE", "") in ("1", "true", "yes")
LOGSTATS_INTERVAL = 60.0
RECRAWL_CHECK_INTERVAL = 300.0  # one worker at a time puts the URLs that are due back into the frontier

# (as text: the commands' checks of the settings say what a wrong value should be)
URLSTORE_BACKEND = os.environ.get("URLSTORE_BACKEND") or base.URLSTORE_BACKEND
CASSANDRA_PORT = os.environ.get("CASSANDRA_PORT") or base.CASSANDRA_PORT
CASSANDRA_KEYSPACE = os.environ.get("CASSANDRA_KEYSPACE") or base.CASSANDRA_KEYSPACE
ARCHIVE_S3_BUCKET = os.environ.get("ARCHIVE_S3_BUCKET") or base.ARCHIVE_S3_BUCKET
ARCHIVE_S3_ENDPOINT_URL = os.environ.get("ARCHIVE_S3_ENDPOINT_URL") or base.ARCHIVE_S3_ENDPOINT_URL
ARCHIVE_S3_REGION = os.environ.get("ARCHIVE_S3_REGION") or base.ARCHIVE_S3_REGION
NETWORK_GUARD_ALLOW = [n.strip() for n in os.environ.get("NETWORK_GUARD_ALLOW", "").split(",") if n.strip()] or list(
    base.NETWORK_GUARD_ALLOW
)
