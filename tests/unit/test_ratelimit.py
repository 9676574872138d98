"""The shared per-host rate limiter: one slot per interval per host, for all workers: the unit
tests (pure: no service, no process) (the others: tests/integration/test_ratelimit.py,
tests/e2e/test_ratelimit.py)."""

from crawler.frontier.intervals import HostIntervals


def test_intervals_file_hosts_domains_and_qps(tmp_path, caplog):
    path = tmp_path / "intervals.txt"
    path.write_text(
        "# popular domains\n"
        "example.com 2\n"
        "api.example.com 5qps   # the longest match wins\n"
        "127.0.0.3 0.5\n"
        "broken line here\n"
        "neg.example -1\n"
        "zero.example 0qps\n"
    )
    table = HostIntervals.from_file(str(path))
    assert len(table) == 3
    assert table.lookup("example.com") == 2
    assert table.lookup("www.example.com") == 2
    assert table.lookup("v1.api.example.com") == 0.2
    assert table.lookup("notexample.com") is None
    assert table.lookup("127.0.0.3") == 0.5
    assert table.lookup("10.127.0.0.3") is None
    assert sum("skipped" in r.message for r in caplog.records) == 3
