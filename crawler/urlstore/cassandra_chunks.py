"""The frontier's spill store on Cassandra (crawler/frontier/chunks.py says what a chunk is):
the table ``frontier_chunks`` of the UrlStore's keyspace (schema.cql), a chunk a partition,
written once, read by its exact key and deleted once, through the UrlStore's session, its
consistency levels and its retries of idempotent statements. A call's chunks are read side by
side (at most CASSANDRA_MAX_IN_FLIGHT at a time): a refill of many hosts waits for about one
round trip, not one a chunk. A chunk that reads as missing is read again at a level that
meets every write acknowledged at the store's write level (its ``sure_reads``): a replica that
missed the write (down then, its hint not yet replayed) answers "no row" at LOCAL_ONE."""

from __future__ import annotations


class CassandraChunks:
    def __init__(self, store, owned: bool = False):
        """``store``: the crawl's CassandraUrlStore (its session, keyspace and profiles);
        ``owned``: opened for the chunks alone, closed with them."""
        self.store = store if owned else None
        self.session = store.session
        self.reads, self.writes = store.reads, store.writes
        self._read_all = store._read_all  # (the store's reads side by side, as its due index's)
        self.sure_reads = store.sure_reads
        ks = store.keyspace
        self.where = f"the Cassandra keyspace {ks}"  # (Spill.bind)
        self._insert = self._prepare(f"INSERT INTO {ks}.frontier_chunks (crawl, host, id, body) VALUES (?, ?, ?, ?)")
        self._select = self._prepare(f"SELECT body FROM {ks}.frontier_chunks WHERE crawl = ? AND host = ? AND id = ?")
        self._delete = self._prepare(f"DELETE FROM {ks}.frontier_chunks WHERE crawl = ? AND host = ? AND id = ?")

    def _prepare(self, cql: str):
        statement = self.session.prepare(cql)
        statement.is_idempotent = True  # a chunk written or deleted twice is so once
        return statement

    def _all(self, statement, rows) -> None:
        futures = [self.session.execute_async(statement, row, execution_profile=self.writes) for row in rows]
        for future in futures:
            future.result()

    def write(self, crawl: str, chunks: list[tuple[str, int, bytes]]) -> None:
        self._all(self._insert, [(crawl, host, chunk, body) for host, chunk, body in chunks])

    def read(self, crawl: str, keys: list[tuple[str, int]]) -> list[bytes | None]:
        """The bodies of chunks, (host, id) each, in that order (None: no such chunk, read
        again at ``sure_reads``); the first error is raised."""
        bodies = self._bodies(crawl, keys, self.reads)
        missing = [i for i, body in enumerate(bodies) if body is None]
        if missing:
            for i, body in zip(missing, self._bodies(crawl, [keys[i] for i in missing], self.sure_reads), strict=True):
                bodies[i] = body
        return bodies

    def _bodies(self, crawl: str, keys: list[tuple[str, int]], profile) -> list[bytes | None]:
        results = self._read_all([(self._select, (crawl, host, chunk)) for host, chunk in keys], profile)
        rows = [result.one() for result in results]
        return [None if row is None else row.body for row in rows]

    def delete(self, crawl: str, keys: list[tuple[str, int]]) -> None:
        self._all(self._delete, [(crawl, host, chunk) for host, chunk in keys])

    def clear(self, crawl: str, keys: list[tuple[str, int]]) -> int:
        """Delete the chunks the crawl's queues list (Cassandra is not scanned: a chunk a
        dead worker wrote and never committed stays, unread)."""
        self.delete(crawl, keys)
        return len(keys)

    def release(self) -> None:
        """(Nothing a thread's own: the session is shared.)"""

    def close(self) -> None:
        """(The session is the UrlStore's: closed here only when opened for the chunks.)"""
        if self.store is not None:
            self.store.close()
