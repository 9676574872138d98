"""The raw-page archive: WARC batches that other tools read, stored in a local directory or in
S3 (SeaweedFS's S3 gateway on loopback, scripts/s3server.py, through boto3), each page's
pointer returning exactly the bytes the site sent, through an outage of S3 too: the unit
tests (pure: no service, no process) (the others: tests/integration/test_archive.py,
tests/e2e/test_archive.py)."""

from crawler.archive.storage import LocalStorage
from crawler.archive.warc import object_key


def test_object_keys_are_deterministic_and_spread():
    assert object_key("c", "w", 1) == object_key("c", "w", 1)
    keys = [object_key("news", "host-1-abc", seq, prefix="warc/") for seq in range(200)]
    assert all(k.split("/", 1)[1].startswith("warc/news/host-1-abc-") for k in keys)
    assert len({k[:2] for k in keys}) > 50  # the leading hash spreads keys over the key space


def test_local_storage_put_and_ranged_read(tmp_path):
    src = tmp_path / "f.warc.gz"
    src.write_bytes(b"0123456789")
    storage = LocalStorage(str(tmp_path / "warc"))
    storage.put("ab/c/f.warc.gz", str(src))
    assert storage.get_range("ab/c/f.warc.gz", 3, 4) == b"3456"
