"""A pusher's spill rounds in a process of their own (crawler/frontier/rounds_process.py,
PusherRounds' ``remake``): on a real Redis and a real SQLite spill store, the process a
spawned Python (nothing stands in for it). Each URL comes out once and in order whether the
rounds ran in the process, in the thread after it ended, or in the thread because the
process made its spill on another crawl; a round's error in the process reaches the pusher."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import time
from functools import partial

import pytest
import redis

from crawler.frontier.chunks import SqliteChunks
from crawler.frontier.codec import encode_url
from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.spill import PusherRounds, Spill
from crawler.frontier.words import now_ms
from testing.frontiers import urls_through_spill

READY_WAIT = 60.0  # seconds a spawned process may take to make its spill (imports on a busy machine)


def _frontier(redis_url: str, crawl_name: str) -> Frontier:
    """A frontier whose inbox is due as it fills (spill age 0), windows of 4."""
    client = redis.Redis.from_url(redis_url)
    return Frontier(client, crawl_name, host_interval=0.0, max_in_flight=0, window=4, active_hosts=0, spill_age=0.0)


def spill_of(redis_url: str, crawl_name: str, path: str) -> Spill:
    """The spill made again in the rounds' process (picklable: a module's function)."""
    return Spill(_frontier(redis_url, crawl_name), SqliteChunks(path))


class _FullDisk(SqliteChunks):
    def write(self, crawl, chunks):
        raise sqlite3.OperationalError("database or disk is full")


def full_disk_spill_of(redis_url: str, crawl_name: str, path: str) -> Spill:
    return Spill(_frontier(redis_url, crawl_name), _FullDisk(path))


class _Stats:
    """What a Spill counts into (Scrapy's stats collector's ``inc_value``)."""

    def __init__(self):
        self.values: dict[str, int] = {}

    def inc_value(self, key, count=1):
        self.values[key] = self.values.get(key, 0) + count


def _push(frontier: Frontier, rounds: PusherRounds, urls: list[str]) -> None:
    """``urls`` pushed 20 at a time, each batch counted by the rounds (as ``ingest`` does)."""
    for i in range(0, len(urls), 20):
        batch = urls[i : i + 20]
        entries = [Entry(url=u, payload=encode_url(u)) for u in batch]
        assert set(frontier.put(entries, now=now_ms())) == {"added"}
        rounds.pushed(len(batch))


def _urls(hosts: int, per_host: int, start: int = 0) -> list[str]:
    return [f"http://h{h}.example/p{i}" for i in range(start, start + per_host) for h in range(hosts)]


def _until_ready(rounds: PusherRounds) -> None:
    deadline = time.monotonic() + READY_WAIT
    while not rounds.process.ready():
        assert rounds.process.alive, "the rounds' process ended before it was ready"
        assert time.monotonic() < deadline, "the rounds' process was not ready in time"
        time.sleep(0.05)


def _each_once_in_order(frontier, spill, urls: list[str], hosts: int) -> None:
    got = urls_through_spill(frontier, spill, now_ms())
    assert sorted(got) == sorted(urls)
    for h in range(hosts):
        mine = [u for u in urls if f"//h{h}." in u]
        assert [u for u in got if f"//h{h}." in u] == mine


def test_a_large_inputs_rounds_run_in_a_process_and_each_url_comes_out_once(redis_url, crawl_name, tmp_path):
    """A pusher that will push ``process_from`` URLs or more starts a process for its rounds
    at the first one; the rounds run in the thread until the process has made its spill,
    then there, and their URLs written are counted in the pusher's stats. Every URL is
    written out, and comes out once, each host's in the order pushed."""
    path = str(tmp_path / "spill.sqlite")
    frontier = _frontier(redis_url, crawl_name)
    stats = _Stats()
    spill = Spill(frontier, SqliteChunks(path), stats)
    remake = partial(spill_of, redis_url, crawl_name, path)
    rounds = PusherRounds(spill, every=20, remake=remake, coming=400, process_from=100)
    urls = _urls(5, 80)  # 400
    _push(frontier, rounds, urls[:20])  # (the first round: the process starts, the thread writes)
    assert rounds.process is not None and rounds.process_rounds == 0
    _until_ready(rounds)
    _push(frontier, rounds, urls[20:])
    rounds.close()
    assert rounds.process_rounds >= 1
    assert not rounds.process.process.is_alive()  # (stopped with the rounds)
    assert frontier.redis.llen(frontier.keys.inbox) == 0
    assert frontier.stats()["spilled"] == 400  # (every new URL comes by the inbox)
    assert stats.values["frontier/spilled"] == 400  # (the thread's rounds and the process's)
    _each_once_in_order(frontier, spill, urls, 5)


def test_a_small_input_gets_no_process(redis_url, crawl_name, tmp_path):
    """Below ``process_from`` (known, or pushed so far) the rounds stay in the thread."""
    path = str(tmp_path / "spill.sqlite")
    frontier = _frontier(redis_url, crawl_name)
    spill = Spill(frontier, SqliteChunks(path))
    rounds = PusherRounds(spill, every=20, remake=partial(spill_of, redis_url, crawl_name, path), process_from=1000)
    _push(frontier, rounds, _urls(5, 40))
    rounds.close()
    assert rounds.process is None and rounds.process_rounds == 0
    assert frontier.stats()["spilled"] == 200


def test_a_process_that_ends_leaves_the_rounds_to_the_thread(redis_url, crawl_name, tmp_path, caplog):
    """A rounds' process killed (out of memory, say) is said once in the log; the round sent
    to it writes nothing, and the rounds after it run in the thread: every URL written once."""
    path = str(tmp_path / "spill.sqlite")
    frontier = _frontier(redis_url, crawl_name)
    spill = Spill(frontier, SqliteChunks(path))
    rounds = PusherRounds(spill, every=20, remake=partial(spill_of, redis_url, crawl_name, path), process_from=20)
    urls = _urls(4, 60)  # 240
    _push(frontier, rounds, urls[:20])
    _until_ready(rounds)
    pid = rounds.process.pid
    os.kill(pid, signal.SIGKILL)
    rounds.process.process.join(10)
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.rounds_process"):
        _push(frontier, rounds, urls[20:])
        rounds.close()
    ended = [r.getMessage() for r in caplog.records if "rounds process" in r.getMessage()]
    assert len(ended) == 1 and "the rounds go on in a thread" in ended[0], ended
    assert not rounds.process.alive
    assert frontier.redis.llen(frontier.keys.inbox) == 0
    assert frontier.stats()["spilled"] == 240
    _each_once_in_order(frontier, spill, urls, 4)


def test_a_process_whose_spill_is_another_crawls_is_stopped(redis_url, crawl_name, tmp_path, caplog):
    """A process that made its spill on other keys (a remake given the wrong crawl) is
    stopped as soon as it says so, with a warning: its rounds would write another crawl's
    inbox. The thread writes this one's."""
    path = str(tmp_path / "spill.sqlite")
    frontier = _frontier(redis_url, crawl_name)
    spill = Spill(frontier, SqliteChunks(path))
    other = f"{crawl_name}-other"
    rounds = PusherRounds(spill, every=20, remake=partial(spill_of, redis_url, other, path), process_from=20)
    urls = _urls(4, 30)
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.rounds_process"):
        _push(frontier, rounds, urls[:20])
        deadline = time.monotonic() + READY_WAIT
        while rounds.process.alive:  # (it says it is ready: on other keys, it is stopped)
            assert not rounds.process.ready()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        _push(frontier, rounds, urls[20:])
        rounds.close()
    assert any("other servers or keys" in r.getMessage() for r in caplog.records)
    assert rounds.process_rounds == 0 and not rounds.process.process.is_alive()
    assert frontier.stats()["spilled"] == 120
    _each_once_in_order(frontier, spill, urls, 4)


def test_a_rounds_error_in_the_process_reaches_the_pusher(redis_url, crawl_name, tmp_path):
    """A round that fails in the process (its disk full) raises its error at the pusher's
    next look or at ``close``, as a thread's round does; its URLs stay in the inbox (its
    claim expires) and a round with room writes them."""
    path = str(tmp_path / "spill.sqlite")
    frontier = _frontier(redis_url, crawl_name)
    spill = Spill(frontier, SqliteChunks(path))
    remake = partial(full_disk_spill_of, redis_url, crawl_name, path)
    rounds = PusherRounds(spill, every=20, remake=remake, process_from=20)
    urls = _urls(2, 30)  # 60, in the inbox
    entries = [Entry(url=u, payload=encode_url(u)) for u in urls]
    rounds.pushed(20)  # (nothing pushed yet: the thread's round finds nothing)
    _until_ready(rounds)
    assert set(frontier.put(entries, now=now_ms())) == {"added"}
    rounds.pushed(20)  # (the process's round)
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        rounds.close()
    assert rounds.process_rounds == 1
    assert frontier.redis.llen(frontier.keys.inbox) == 60
    later = Spill(frontier, SqliteChunks(path))
    assert later.round(now=now_ms() + 61_000, loads=False)[0] == 60  # (once the claim expired)
