"""The reactor-stall probe (crawler/extensions/stalls.py), on a test's clock: how late its
calls run is what it reports."""

from scrapy.utils.test import get_crawler
from twisted.internet import task

from crawler.extensions.stalls import ReactorStalls


def test_the_probe_reports_how_late_the_reactor_ran_its_calls():
    stats = get_crawler().stats
    clock = task.Clock()
    probe = ReactorStalls(stats, 0.05, clock)
    probe.start()
    for _ in range(99):
        clock.advance(0.05)  # on time
    clock.advance(0.05 + 0.25)  # held up 250 ms (a store read on the reactor)
    assert stats.get_value("reactor/stall_max_ms") == 250.0
    assert stats.get_value("reactor/stalls_over_100ms") == 1
    assert stats.get_value("reactor/stall_p99_ms") == 250.0  # (1 in 100)
    for _ in range(900):
        clock.advance(0.05)
    assert probe.p99() == 0.0 and stats.get_value("reactor/stall_max_ms") == 250.0  # the worst stays
    probe.stop()
    assert not clock.getDelayedCalls()
