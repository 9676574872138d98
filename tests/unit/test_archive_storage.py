"""What the archive's S3 store makes of an answer (crawler/archive/storage.py): a refusal
that only a person can mend stops the uploads at once, an outage or throttling is tried
again; and its uploads go through one bounded pool (crawler/archive/uploads.py)."""

import threading

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from crawler.archive.storage import refusal_code, s3_proxies
from crawler.archive.uploads import UploadPool


def answered(status: int, code: str = "") -> ClientError:
    return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")


@pytest.mark.parametrize(
    "exc,refused",
    [
        (answered(405, "MethodNotAllowed"), "MethodNotAllowed"),  # a forward proxy in the way
        (answered(404, "NoSuchBucket"), "NoSuchBucket"),
        (answered(403, "AccessDenied"), "AccessDenied"),
        (answered(400, "InvalidArgument"), "InvalidArgument"),
        (answered(403, "SignatureDoesNotMatch"), "SignatureDoesNotMatch"),
        (answered(400, "RequestTimeout"), None),  # tried again
        (answered(429, "TooManyRequests"), None),
        (answered(503, "SlowDown"), None),
        (answered(500, "InternalError"), None),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), None),
    ],
)
def test_a_refusal_is_what_no_retry_mends(exc, refused):
    assert refusal_code(exc) == refused


def test_s3_goes_through_a_proxy_only_when_asked():
    assert s3_proxies("") == {}  # (botocore: none, not the environment's)
    assert s3_proxies("env") is None
    assert s3_proxies("http://proxy:3128") == {"http": "http://proxy:3128", "https": "http://proxy:3128"}


def test_the_upload_pool_runs_at_most_its_size_at_once(monkeypatch):
    """Six uploads, a pool of two: two threads, never more than two running; each result
    (or failure) reaches its Deferred."""
    from twisted.internet import reactor

    monkeypatch.setattr(reactor, "callFromThread", lambda f, *a: f(*a))  # (no reactor runs here)
    pool = UploadPool(2)
    release, lock = threading.Event(), threading.Lock()
    running, most, results = [0], [0], []
    finished = threading.Semaphore(0)

    def upload(n):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(5)
        with lock:
            running[0] -= 1
        if n == 5:
            raise ValueError("refused")
        return n

    for n in range(6):
        d = pool.submit(upload, n)
        d.addCallbacks(results.append, lambda f: results.append(f.type))
        d.addBoth(lambda _: finished.release())
    assert pool.waiting >= 3  # two taken at most; the others wait their turn
    release.set()
    assert all(finished.acquire(timeout=5) for _ in range(6))
    assert sorted(r for r in results if r is not ValueError) == [0, 1, 2, 3, 4] and ValueError in results
    assert most[0] == 2 and pool.threads == 2
