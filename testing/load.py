"""Open-loop load on ``scrapy serve``'s read API from processes of their own (keep-alive
HTTP/1.1 connections of a small client of its own, a fraction of a general client's CPU):
each request has its time in the schedule (the step's rate, evenly spaced) and is sent
then whatever the answers before it did, its latency counted from that time to the end of
its answer, so that a server that falls behind shows in the latency instead of slowing the
load. ``Load.run`` measures one step: latencies, answers, and the CPU of the server, of a
Cassandra node it reads from, of the load and of the other processes meanwhile."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import re
import signal
import time
from array import array
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from testing.sampling import disk_read, machine_cpu, percentile, sched_seconds


@dataclass
class Plan:
    kind: str  # "record" or "lookup"
    rate: float  # requests a second (this client's share)
    seconds: float
    start: float  # time.time() of the first scheduled request
    timeout: float


_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)")


class _Answer(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection of the load: an answer is read to the end of its
    Content-Length (scrapy serve sends one with each answer)."""

    def __init__(self):
        self.transport = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future | None = None
        self.status = 0
        self.end = 0  # of the answer in the buffer, once its head is read

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.waiter is None or self.waiter.done():
            return
        if not self.end:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = bytes(self.buffer[:head_end]).lower()
            self.status = int(head[9:12])
            found = _LENGTH.search(head)
            length = int(found.group(1)) if found else 0
            self.end = head_end + 4 + length
        if len(self.buffer) >= self.end:
            del self.buffer[: self.end]
            self.end = 0
            self.waiter.set_result(self.status)

    def connection_lost(self, exc) -> None:
        self.transport = None
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionResetError("the server closed the connection"))


class _Client:
    """Requests over a pool of at most ``connections`` keep-alive connections: the load's
    own CPU a request a fraction of a general client's, so that the cores the server and
    its node are measured on are not taken by the load."""

    def __init__(self, host: str, port: int, connections: int):
        self.host, self.port = host, port
        self.idle: list[_Answer] = []
        self.slots = asyncio.Semaphore(connections)

    async def send(self, request: bytes) -> int:
        """The answer's status."""
        loop = asyncio.get_running_loop()
        async with self.slots:
            conn = self.idle.pop() if self.idle else None
            if conn is None or conn.transport is None:
                _, conn = await loop.create_connection(_Answer, self.host, self.port)
            conn.waiter = loop.create_future()
            conn.transport.write(request)
            try:
                status = await conn.waiter
            except BaseException:  # timed out or broken: the connection is not reused
                if conn.transport is not None:
                    conn.transport.close()
                raise
            self.idle.append(conn)
            return status

    def close(self) -> None:
        for conn in self.idle:
            if conn.transport is not None:
                conn.transport.close()


async def _step(
    client: _Client,
    crawl: str,
    plan: Plan,
    known: list[str],
    unknown: list[str],
    share: float,
    batch: int,
    seed: int,
) -> dict:
    loop = asyncio.get_running_loop()
    rng = random.Random(seed)
    latencies, lates = array("d"), array("d")
    outcome = {"ok": 0, "errors": 0, "timeouts": 0, "statuses": {}, "error_kinds": {}}
    last_done = [0.0]
    host = f"Host: {client.host}:{client.port}\r\n".encode()
    record_path = f"/api/crawls/{quote(crawl, safe='')}/record?url="
    lookup_head = f"POST /api/crawls/{quote(crawl, safe='')}/lookup HTTP/1.1\r\n".encode() + host

    def pick() -> tuple[str, bool]:
        if rng.random() < share:
            return rng.choice(unknown), False
        return rng.choice(known), True

    async def one(due: float) -> None:
        lates.append(loop.time() - due)
        try:
            if plan.kind == "record":
                url, stored = pick()
                expect = 200 if stored else 404
                request = f"GET {record_path}{quote(url, safe='')} HTTP/1.1\r\n".encode() + host + b"\r\n"
            else:
                expect = 200
                body = json.dumps({"urls": [pick()[0] for _ in range(batch)]}).encode()
                request = (
                    lookup_head
                    + f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
            async with asyncio.timeout(plan.timeout):
                status = await client.send(request)
        except TimeoutError:
            outcome["timeouts"] += 1
            latencies.append(plan.timeout)
            return
        except OSError as exc:
            outcome["errors"] += 1
            outcome["error_kinds"][type(exc).__name__] = outcome["error_kinds"].get(type(exc).__name__, 0) + 1
            latencies.append(loop.time() - due)
            return
        now = loop.time()
        latencies.append(now - due)
        outcome["statuses"][status] = outcome["statuses"].get(status, 0) + 1
        if status == expect:
            outcome["ok"] += 1
            last_done[0] = max(last_done[0], now)
        else:
            outcome["errors"] += 1

    count = max(1, round(plan.rate * plan.seconds))
    start = loop.time() + (plan.start - time.time())
    tasks: set[asyncio.Task] = set()
    i = 0
    while i < count:
        now = loop.time()
        while i < count and start + i / plan.rate <= now:
            task = loop.create_task(one(start + i / plan.rate))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            i += 1
        if i < count:
            await asyncio.sleep(max(0.0, start + i / plan.rate - loop.time()))
    if tasks:
        await asyncio.wait(set(tasks), timeout=plan.timeout + 1.0)
    for task in list(tasks):  # not even sent in time: counted as timed out
        task.cancel()
        outcome["timeouts"] += 1
        latencies.append(plan.timeout)
    outcome.update(
        latencies=latencies,
        lates=lates,
        sent=count,
        done_after=(last_done[0] - start) if last_done[0] else 0.0,
    )
    return outcome


def client_main(
    conn,
    base: str,
    crawl: str,
    known: list[str],
    unknown: list[str],
    share: float,
    batch: int,
    connections: int,
    seed: int,
) -> None:
    """A load process: runs the plans it is sent, answers each with its figures."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it
    # a session of its own: with the kernel's autogroup scheduling, a share of the CPUs as
    # large as the server's (in its own session too), whatever shell started the benchmark
    os.setsid()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    where = urlsplit(base)
    client = _Client(where.hostname, where.port, connections)
    n = 0
    try:
        while True:
            plan = conn.recv()
            if plan is None:
                break
            n += 1
            conn.send(
                loop.run_until_complete(_step(client, crawl, plan, known, unknown, share, batch, seed * 1000 + n))
            )
    finally:
        client.close()
        loop.close()


@dataclass
class StepResult:
    kind: str
    offered: float
    achieved: float
    p50: float
    p90: float
    p99: float
    max: float
    sent: int
    errors: int
    timeouts: int
    server_cpu: float  # % of one core
    server_wait: float  # % of the step the server's threads waited for a CPU (runnable)
    server_per: float  # seconds of the server's CPU a request
    disk: float  # MB the server read from storage (not from the page cache)
    client_cpu: float  # % of one core, the busiest load process
    client_wait: float
    others: float  # cores kept busy by other processes meanwhile
    late_p99: float  # seconds the load sent a request after its scheduled time, p99
    statuses: dict
    node_cpu: float = float("nan")  # % of one core, the Cassandra node (the Cassandra backend)
    node_wait: float = float("nan")


class Load:
    """``count`` load processes (forked: the URL lists are shared, not copied) sending
    record look-ups of ``known`` URLs, or with the share ``share`` of ``unknown`` ones, and
    batch look-ups of ``batch`` URLs; each step's figures a ``result`` (StepResult or a
    subclass of the bench's own)."""

    def __init__(self, count: int, base: str, crawl: str, known, unknown, share, batch, connections, seed,
                 result=None):  # fmt: skip
        self.result = result or StepResult
        context = multiprocessing.get_context("fork")
        self.pipes, self.procs = [], []
        for n in range(count):
            parent, child = context.Pipe()
            proc = context.Process(
                target=client_main,
                args=(child, base, crawl, known, unknown, share, batch, connections, seed + 10 * n),
                daemon=True,
            )
            proc.start()
            self.pipes.append(parent)
            self.procs.append(proc)

    def run(
        self,
        kind: str,
        rate: float,
        seconds: float,
        timeout: float,
        server_pid: int | None,
        node_pid: int | None = None,
    ) -> StepResult:
        """One step; ``node_pid``: the Cassandra node the server reads from (its CPU is
        the run's, not another process's)."""
        start = time.time() + 0.3
        share = rate / len(self.pipes)
        for pipe in self.pipes:
            pipe.send(Plan(kind, share, seconds, start, timeout))
        time.sleep(max(0.0, start - time.time()))
        server0 = sched_seconds([server_pid]) if server_pid else (0.0, 0.0)
        disk0 = disk_read(server_pid) if server_pid else 0
        clients0 = [sched_seconds([p.pid]) for p in self.procs]
        ours_pids = [os.getpid(), server_pid] if server_pid else [os.getpid()]  # and the load processes
        if node_pid:
            ours_pids.append(node_pid)
        node0 = sched_seconds([node_pid]) if node_pid else (float("nan"), float("nan"))
        ours0, busy0, wall0 = sched_seconds(ours_pids)[0], machine_cpu()[0], time.monotonic()
        results = []
        for pipe in self.pipes:
            if not pipe.poll(seconds + 2 * timeout + 30):
                raise SystemExit("a load process did not report")
            results.append(pipe.recv())
        wall = time.monotonic() - wall0
        server1 = sched_seconds([server_pid]) if server_pid else (float("nan"), float("nan"))
        node1 = sched_seconds([node_pid]) if node_pid else (float("nan"), float("nan"))
        clients = [
            [(b - a) / wall * 100 for a, b in zip(before, sched_seconds([p.pid]))]
            for before, p in zip(clients0, self.procs)
        ]
        ours = sched_seconds(ours_pids)[0] - ours0
        latencies = [x for r in results for x in r["latencies"]]
        lates = [x for r in results for x in r["lates"]]
        ok = sum(r["ok"] for r in results)
        span = max([seconds] + [r["done_after"] for r in results])
        statuses: dict = {}
        for r in results:
            for k, v in r["statuses"].items():
                statuses[k] = statuses.get(k, 0) + v
            for k, v in r["error_kinds"].items():
                statuses[k] = statuses.get(k, 0) + v
        busiest = max(clients, key=lambda c: c[0])
        return self.result(
            kind=kind,
            offered=rate,
            achieved=ok / span,
            p50=percentile(latencies, 0.50),
            p90=percentile(latencies, 0.90),
            p99=percentile(latencies, 0.99),
            max=max(latencies) if latencies else float("nan"),
            sent=sum(r["sent"] for r in results),
            errors=sum(r["errors"] for r in results),
            timeouts=sum(r["timeouts"] for r in results),
            server_cpu=(server1[0] - server0[0]) / wall * 100,
            server_wait=(server1[1] - server0[1]) / wall * 100,
            server_per=(server1[0] - server0[0]) / max(1, sum(r["sent"] for r in results)),
            disk=(disk_read(server_pid) - disk0) / 1e6 if server_pid else float("nan"),
            client_cpu=busiest[0],
            client_wait=busiest[1],
            others=max(0.0, (machine_cpu()[0] - busy0 - ours) / wall),
            late_p99=percentile(lates, 0.99),
            statuses=statuses,
            node_cpu=(node1[0] - node0[0]) / wall * 100,
            node_wait=(node1[1] - node0[1]) / wall * 100,
        )

    def close(self) -> None:
        for pipe in self.pipes:
            try:
                pipe.send(None)
            except OSError:
                pass
        for proc in self.procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
