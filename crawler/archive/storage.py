"""Where closed WARC batches are stored: a local directory (the embedded default) or an
S3 bucket (boto3; any S3-compatible store through ``endpoint_url``).

Both verbs are blocking; the archive pipeline calls them from a thread.

``put(key, path, stop=None)``  store the file at ``path`` under ``key``, whole, in one
                    request (one S3 PUT per object, never a multipart upload: PUTs are
                    what S3 bills and throttles); retried with exponential back-off
                    (jittered; the only retries: botocore's own are off) until it succeeds or the ``stop`` event is set (StorageStopped), each
                    failure logged (and reported to ``on_retry``, a function of the
                    failure, called from the uploading thread); the same key every time.
                    An answer no retry mends (``refusal_code``: wrong credentials, no
                    such bucket, access denied, method not allowed, any 4xx but a
                    timeout or throttling) raises StorageRefused at once
``get_range(key, offset, length, bucket="")``  the bytes of one record (a ranged GET), from
                    the pointer's bucket when it names one
``get(key)``        a whole object (an index)
``download(key, path)``  a whole object into a local file (a WARC)
``keys()``          every key stored, in no order (``scrapy archive``)

Nothing is listed or read back while crawling (Secor's rule): keys are computed, never
discovered; only ``scrapy archive`` lists.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import time

logger = logging.getLogger(__name__)


class StorageStopped(Exception):
    """An upload was given up because the worker is stopping (the file stays)."""


class StorageRefused(Exception):
    """The store turned the upload away for a reason no retry mends: wrong credentials, no
    such bucket, no right to write there (the file stays). A setting to fix."""


# S3 error codes that are a setting to fix, not an outage to wait out
REFUSED_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "AllAccessDisabled",
        "NoSuchBucket",
        "InvalidBucketName",
        "AuthorizationHeaderMalformed",
        "MethodNotAllowed",
    }
)
# answers of 4xx that are worth another try (the others are refusals a person must mend)
RETRIED_CODES = frozenset({"RequestTimeout", "RequestTimeTooSkewed", "SlowDown", "TooManyRequests", "Throttling"})


def refusal_code(exc) -> str | None:
    """The S3 error code (or HTTP status) of ``exc`` when it is a refusal no retry mends:
    a code of REFUSED_CODES, or a 4xx answer but a timeout or throttling (429); None for an
    outage, a throttled or a failed request, which are tried again."""
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code") or "")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code in REFUSED_CODES:
        return code
    if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429) and code not in RETRIED_CODES:
        return code or str(status)
    return None


def s3_reason(exc) -> str:
    """A failed S3 call in a few words: ``S3 503 SlowDown``, ``S3 EndpointConnectionError``."""
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code") or "")
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return " ".join(str(part) for part in ("S3", status, code or (None if status else type(exc).__name__)) if part)


class LocalStorage:
    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self.bucket = ""  # (an archive pointer's: none)
        self.on_retry = None  # (a local write is not retried: an error fails its batch)

    def describe(self) -> str:
        return f"directory {self.root}"

    def put(self, key: str, path: str, stop=None) -> None:
        dest = os.path.join(self.root, key)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        tmp = dest + ".part"
        try:
            shutil.copyfile(path, tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, dest)
        except OSError:  # (a full or failing disk: no part left behind)
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise

    def get_range(self, key: str, offset: int, length: int, bucket: str = "") -> bytes:
        with open(os.path.join(self.root, key), "rb") as f:
            f.seek(offset)
            return f.read(length)

    def get(self, key: str) -> bytes:
        with open(os.path.join(self.root, key), "rb") as f:
            return f.read()

    def download(self, key: str, path: str) -> None:
        shutil.copyfile(os.path.join(self.root, key), path)

    def local_path(self, key: str) -> str:
        """Where the object is on disk (no copy needed)."""
        return os.path.join(self.root, key)

    def keys(self):
        for dirpath, _, files in os.walk(self.root):
            for name in files:
                if not name.endswith(".part"):
                    yield os.path.relpath(os.path.join(dirpath, name), self.root).replace(os.sep, "/")


class S3Storage:
    def __init__(
        self,
        bucket: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        retry_min: float = 1.0,
        retry_max: float = 60.0,
        proxy: str = "",
        timeout: float = 60.0,
        client=None,
    ):
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.retry_min, self.retry_max = retry_min, retry_max
        # credentials: the standard AWS chain (environment, config files, instance role)
        self.client = client or boto3.client(
            "s3",
            endpoint_url=endpoint_url or None,
            region_name=region or None,
            config=Config(
                retries={"mode": "standard", "max_attempts": 1},  # (one retry layer: put's own)
                connect_timeout=min(10.0, timeout),
                read_timeout=timeout,
                proxies=s3_proxies(proxy),
            ),
        )
        self.puts = 0  # PUT requests sent (retries included)
        self.on_retry = None  # called (from the uploading thread) with the failure, before each retry

    def describe(self) -> str:
        return f"s3://{self.bucket}"

    def check(self) -> str | None:
        """Whether the bucket is there and this worker may use it (HeadBucket): None, or
        why not, when only a person can fix it (no such bucket, access denied, wrong
        credentials). A store that does not answer is no such answer: None (the uploads
        wait for it)."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except Exception as exc:
            response = getattr(exc, "response", None) or {}
            code = str(response.get("Error", {}).get("Code", ""))
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("404", "NoSuchBucket") or status == 404:
                return f"the archive's bucket s3://{self.bucket} does not exist (ARCHIVE_S3_BUCKET)"
            if code in ("403", "AccessDenied") or status == 403 or code in REFUSED_CODES:
                return (
                    f"s3://{self.bucket} refuses this worker ({code or status}): check the credentials "
                    "(the AWS chain) and ARCHIVE_S3_BUCKET"
                )
            if status is not None and 400 <= status < 500:
                return f"s3://{self.bucket} answered {status} ({code}) to HeadBucket: check ARCHIVE_S3_ENDPOINT_URL"
            logger.warning("S3 at %s did not answer HeadBucket (%s: %s)", self.bucket, type(exc).__name__, exc)
        return None

    def put(self, key: str, path: str, stop=None) -> None:
        delay, attempt = self.retry_min, 0
        while True:
            if stop is not None and stop.is_set():
                raise StorageStopped(f"upload of s3://{self.bucket}/{key} given up after {attempt} attempts")
            attempt += 1
            try:
                with open(path, "rb") as f:
                    self.puts += 1
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=f)
                if attempt > 1:
                    logger.info("Stored s3://%s/%s after %d attempts", self.bucket, key, attempt)
                return
            except Exception as exc:  # botocore's ClientError, EndpointConnectionError, ...
                code = refusal_code(exc)
                if code is not None:
                    raise StorageRefused(f"s3://{self.bucket} refused the upload of {key} ({code}: {exc})") from exc
                wait = delay * random.uniform(0.5, 1.0)  # (jitter: workers throttled together spread out)
                logger.warning(
                    "S3 upload of s3://%s/%s failed (attempt %d: %s: %s); retrying in %.3g s (back-off %.3g s); "
                    "its pages wait, nothing is lost",
                    self.bucket,
                    key,
                    attempt,
                    type(exc).__name__,
                    exc,
                    wait,
                    delay,
                )
                if self.on_retry is not None:
                    self.on_retry(exc)
                if stop is not None:
                    stop.wait(wait)
                else:
                    time.sleep(wait)
                delay = min(delay * 2, self.retry_max)

    def get_range(self, key: str, offset: int, length: int, bucket: str = "") -> bytes:
        """``bucket``: the pointer's, when it names one (a crawl may have moved to another)."""
        byte_range = f"bytes={offset}-{offset + length - 1}"
        response = self.client.get_object(Bucket=bucket or self.bucket, Key=key, Range=byte_range)
        return response["Body"].read()

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def download(self, key: str, path: str) -> None:
        self.client.download_file(self.bucket, key, path)

    def local_path(self, key: str) -> None:
        return None  # (downloaded first)

    def keys(self):
        for listing in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            for obj in listing.get("Contents", []):
                yield obj["Key"]


def s3_proxies(proxy: str) -> dict | None:
    """botocore's ``proxies`` for ARCHIVE_S3_PROXY: empty, none (the environment's
    HTTP_PROXY/HTTPS_PROXY are the crawl's, for the web); ``env``, the environment's; else
    that proxy's URL for both schemes."""
    if not proxy:
        return {}
    if proxy == "env":
        return None
    return {"http": proxy, "https": proxy}


def storage_from_settings(settings):
    """ARCHIVE_S3_BUCKET set: S3; else the local directory ARCHIVE_DIR (default
    CRAWL_DIR/CRAWL_NAME/warc)."""
    bucket = settings.get("ARCHIVE_S3_BUCKET")
    if bucket:
        return S3Storage(
            bucket,
            endpoint_url=settings.get("ARCHIVE_S3_ENDPOINT_URL"),
            region=settings.get("ARCHIVE_S3_REGION"),
            retry_min=settings.getfloat("ARCHIVE_RETRY_MIN"),
            retry_max=settings.getfloat("ARCHIVE_RETRY_MAX"),
            proxy=settings.get("ARCHIVE_S3_PROXY"),
            timeout=settings.getfloat("ARCHIVE_S3_TIMEOUT"),
        )
    root = settings.get("ARCHIVE_DIR") or os.path.join(settings.get("CRAWL_DIR"), settings.get("CRAWL_NAME"), "warc")
    return LocalStorage(root)
