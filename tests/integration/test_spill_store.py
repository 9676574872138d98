"""The spill store's contract, on SQLite and on the real Cassandra node (one suite): a chunk
is read back by its key exactly as written, deleted once, and a crawl's chunks are apart
from another's; then a frontier spilling to Cassandra hands every URL out once, leaving no
row behind."""

from __future__ import annotations

import pytest
import redis

from crawler.frontier.chunks import EMPTY, SqliteChunks, count_of, pack, uncompressed, unpack
from crawler.frontier.codec import encode_url
from crawler.frontier.frontier import Entry, Frontier
from crawler.frontier.spill import Spill
from crawler.urlstore.cassandra_chunks import CassandraChunks
from crawler.urlstore.cassandra_cluster import schema_statements
from testing.frontiers import hand_out_all


@pytest.fixture(params=["sqlite", "cassandra"])
def chunks(request, tmp_path):
    if request.param == "sqlite":
        store = SqliteChunks(str(tmp_path / "spill.sqlite"))
        yield store
        store.close()
        return
    from crawler.urlstore.cassandra import CassandraUrlStore

    session = request.getfixturevalue("cassandra_session")
    keyspace = request.getfixturevalue("cassandra_keyspace")
    for statement in schema_statements(keyspace):
        session.execute(statement)
    urlstore = CassandraUrlStore(session, keyspace)
    yield CassandraChunks(urlstore)
    urlstore.close()


ENTRIES = [b"http://a.example/1", b"\x1e-0.5\x1fhttp://a.example/2\x1f{}", b"J" + "é\n\x00".encode() * 100, b""]


def test_a_chunk_reads_back_as_written_and_is_deleted_once(chunks):
    crawl, other = "crawl:{one}:", "crawl:{two}:"
    chunks.write(crawl, [("a.example", 1, pack(ENTRIES)), ("a.example", 2, pack(ENTRIES[:1]))])
    chunks.write(other, [("a.example", 1, pack(ENTRIES[1:]))])
    got = chunks.read(crawl, [("a.example", 2), ("b.example", 1), ("a.example", 1)])  # in the order asked
    assert [body and unpack(body) for body in got] == [ENTRIES[:1], None, ENTRIES]
    assert [unpack(body) for body in chunks.read(other, [("a.example", 1)])] == [ENTRIES[1:]]
    assert chunks.read(crawl, []) == []
    chunks.write(crawl, [("a.example", 1, pack(ENTRIES))])  # written again: the same chunk
    chunks.delete(crawl, [("a.example", 1)])
    assert chunks.read(crawl, [("a.example", 1)]) == [None]
    chunks.delete(crawl, [("a.example", 1)])  # deleted twice: still gone, no error
    assert chunks.clear(crawl, [("a.example", 2)]) == 1
    assert chunks.read(crawl, [("a.example", 2)]) == [None]
    assert [unpack(body) for body in chunks.read(other, [("a.example", 1)])] == [ENTRIES[1:]]


def test_a_frontier_spilling_to_the_store_hands_each_url_out_once(chunks, redis_url, crawl_name):
    frontier = Frontier(
        redis.Redis.from_url(redis_url), crawl_name, host_interval=0.0, max_in_flight=0, window=8, spill_age=0.0
    )
    spill = Spill(frontier, chunks)
    urls = [f"http://h{i % 5}.example/p{i}" for i in range(500)]
    entries = [Entry(url=u, payload=encode_url(u)) for u in urls]
    assert frontier.put(entries).count("added") == 500
    assert spill.round() == (500, 5 * 8)  # (the inbox written out; each host's oldest chunk loaded)
    assert hand_out_all(frontier, 16, spill) == 500
    stats = frontier.stats()
    assert stats["queued"] == 0 and stats["spilled"] == 0
    assert frontier.chunk_keys() == []
    for host in {u.split("/")[2] for u in urls}:  # every chunk was deleted once loaded
        assert chunks.read(frontier.keys.prefix, [(host, chunk) for chunk in range(1, 80)]) == [None] * 79


def test_a_chunk_body_of_the_first_layout_reads_back():
    """Bodies written before their count and lengths led them (zlib of each entry after its
    length) are read as they were written; small bodies are kept as they are, others
    compressed."""
    import struct
    import zlib

    first = zlib.compress(b"".join(struct.pack(">I", len(e)) + e for e in ENTRIES), 1)
    assert unpack(first) == ENTRIES
    assert pack(ENTRIES[:1])[:1] == b"\x01" and pack(ENTRIES * 10)[:1] == b"\x02"
    assert unpack(pack([])) == [] and unpack(pack(ENTRIES * 50)) == ENTRIES * 50


def test_a_chunk_goes_to_load_as_its_entries_whatever_its_layout(redis_url, crawl_name, tmp_path):
    """LOAD takes a chunk's entries as one argument (``uncompressed``): a small body, a
    compressed one, one of the first layout, an empty one give the entries packed, and a
    chunk compressed on disk comes back to the window byte for byte."""
    import struct
    import zlib

    first = zlib.compress(b"".join(struct.pack(">I", len(e)) + e for e in ENTRIES), 1)
    for body, entries in ((pack(ENTRIES), ENTRIES), (pack(ENTRIES * 50), ENTRIES * 50), (first, ENTRIES)):
        data = uncompressed(body)
        assert count_of(data) == len(entries) and unpack(b"\x01" + data) == entries
    assert uncompressed(pack([])) == EMPTY and count_of(EMPTY) == 0
    frontier = Frontier(
        redis.Redis.from_url(redis_url), crawl_name, host_interval=0.0, max_in_flight=0, window=64, spill_age=0.0
    )
    chunks = SqliteChunks(str(tmp_path / "spill.sqlite"))
    spill = Spill(frontier, chunks)
    path = "/".join(f"é{j}" for j in range(20))
    urls = [f"http://a.example/{path}/{i}?q=\x00{i}" for i in range(200)]
    entries = [Entry(url=u, payload=encode_url(u)) for u in urls]
    assert frontier.put(entries).count("added") == 200
    assert spill.drain() == 200
    bodies = chunks.read(
        frontier.keys.prefix,
        [("a.example", int(c)) for c in frontier.redis.lrange(frontier.keys.spilled("a.example"), 0, -1)],
    )
    assert {body[:1] for body in bodies} == {b"\x01", b"\x02"}  # (three compressed on disk, the last small)
    got = []
    while len(got) < 200:
        spill.round()
        leases, _ = frontier.get(50)
        frontier.ack(*[lease.id for lease in leases])
        got += [lease.payload for lease in leases]
    assert got == [e.payload for e in entries]


def test_a_chunk_of_one_entry_reads_back_as_the_general_layout_writes_it():
    """A chunk of one entry (most chunks of a crawl of many small hosts) is packed without
    the general layout's formatting, byte for byte what it gives; one too large for a small
    body is compressed as before."""
    import struct

    for entry in (b"", b"http://a.example/1", ENTRIES[1], b"x" * 1015, b"y" * 1016, ENTRIES[2] * 4):
        body = pack([entry])
        assert unpack(body) == [entry]
        raw = struct.pack(">II", 1, len(entry)) + entry
        assert body == (b"\x01" + raw if len(raw) < 1024 else body) and (len(raw) < 1024) == (body[:1] == b"\x01")


def test_an_sqlite_spill_file_of_the_earlier_layout_keeps_its_chunks(tmp_path):
    """A file whose chunks were keyed by (crawl, host, id) in a table 'chunks': the first
    open moves them to the table keyed by (crawl, id, host), once; each reads back under its host."""
    import sqlite3

    path = str(tmp_path / "spill.sqlite")
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE chunks (crawl TEXT, host TEXT, id INTEGER, body BLOB, PRIMARY KEY (crawl, host, id))")
    old.executemany(
        "INSERT INTO chunks VALUES (?, ?, ?, ?)",
        [("c:", "a.example", 1, pack(ENTRIES)), ("c:", "b.example", 2, pack(ENTRIES[:1]))],
    )
    old.commit()
    old.close()
    store = SqliteChunks(path)
    again = SqliteChunks(path)  # (a second worker of the machine: nothing left to move)
    got = again.read("c:", [("b.example", 2), ("a.example", 1), ("b.example", 1)])
    assert [body and unpack(body) for body in got] == [ENTRIES[:1], ENTRIES, None]
    assert store.size("c:")[0] == 2
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    assert tables == [("spill_chunks",)]
    store.close()
    again.close()
