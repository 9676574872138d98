#!/usr/bin/env python3
"""An S3 server on loopback (SeaweedFS), for the tests, the benchmarks and a try on one machine.

    python scripts/s3server.py start DIR [--port 8333] [--ports FROM-TO] [--bucket NAME] [--access-key K] [--secret-key S]
                                         [--reader KEY:SECRET]
    python scripts/s3server.py stop DIR [--kill]
    python scripts/s3server.py status DIR
    python scripts/s3server.py env DIR
    python scripts/s3server.py build

``start`` runs ``weed server`` (master, volume server, filer and the S3 gateway in one
process) on 127.0.0.1 with its data under DIR, waits until the S3 port answers and prints
the settings a crawl and boto3 need, as shell lines: ``eval "$(python scripts/s3server.py
start DIR)"`` sets ARCHIVE_S3_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
AWS_DEFAULT_REGION (``env DIR`` prints them again). Its seven other ports (master, volume
server, filer and their gRPC ports) are chosen free at the first start, from ``--ports
FROM-TO`` (default 20000-31999), and kept in DIR/ports.json, so a server stopped (``stop``, ``--kill`` as a
crash) starts again on the same ports with its objects. Its one identity (access key and
secret key: ``--access-key`` and ``--secret-key``, or S3SERVER_ACCESS_KEY and
S3SERVER_SECRET_KEY, else fixed test keys) is kept in DIR/s3.json (mode 600) the same way.
``--reader KEY:SECRET`` adds an identity that may read and list but not write (a replay of
the archive; a worker that must stop when its uploads are refused).

``start`` returns once an object with a body is stored: a server started again over its
data (after ``stop`` or ``--kill``) answers at once but assigns no volume for 15 s (its
master's warm-up), so a PUT waits that long; the first start of a DIR has no warm-up.
``stop`` closes the S3 port at once but takes about 16 s to end (the filer's last flush
of its metadata log, after the volume server has stopped). After ``--kill`` every object
whose PUT was answered is there again (the process dies, not the machine: what it wrote
is in the kernel's cache); one whose PUT was cut off is not there at all.

Where SeaweedFS comes from: the Go module proxy (github.com/seaweedfs/seaweedfs at
VERSION, Apache-2.0), built once with the machine's Go into
CRAWLER_SERVICES_CACHE/seaweedfs-VERSION/weed (about 9 minutes on 2 cores) and reused.
``go install`` refuses the module (its go.mod has replace directives), so its source is
copied out of the module cache and built as a main module.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import sys
import time
import urllib.request
from pathlib import Path

from service import (
    CACHE,
    ServiceError,
    answers,
    fail,
    go_module,
    read_pid,
    require,
    run_quietly,
    saved_ports,
    spawn,
    stop,
    wait_until,
)

MODULE = "github.com/seaweedfs/seaweedfs"
VERSION = os.environ.get("SEAWEEDFS_VERSION", "v0.0.0-20261109003541-7506e5f91cd6")
HOME = CACHE / f"seaweedfs-{VERSION}"
WEED = HOME / "weed"
ACCESS_KEY, SECRET_KEY, REGION = "crawler-test", "crawler-test-secret", "us-east-1"  # loopback only


MASTER_TOML = """[master.volume_growth]
copy_1 = 1
copy_2 = 2
copy_3 = 3
copy_other = 1
"""


def build() -> Path:
    """The weed binary, built from the Go module proxy the first time."""
    if WEED.exists():
        return WEED
    source = go_module(MODULE, VERSION, HOME, "SeaweedFS")
    go = require("go", "SeaweedFS is built with Go")
    src = HOME / "src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(source, src)
    for path in [src, *src.rglob("*")]:  # the module cache is read-only
        path.chmod(path.stat().st_mode | 0o200)
    env = {**os.environ, "GOFLAGS": "-buildvcs=false", "GOWORK": "off"}
    part = HOME / "weed.part"
    run_quietly(
        [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(part), "./weed"],
        f"building SeaweedFS {VERSION} (weed)",
        cwd=src,
        env=env,
    )
    part.rename(WEED)
    shutil.rmtree(src, ignore_errors=True)
    return WEED


QUIET_PORTS = range(20000, 32000)  # below Linux's ephemeral range (32768-60999)


def free_port(among: range = QUIET_PORTS, taken: set[int] = frozenset()) -> int:
    """A free TCP port on 127.0.0.1 of ``among`` (by default below the ephemeral range,
    which the system hands to outgoing connections: a port from it, kept in ports.json,
    may be some client's when the server starts again after a stop, and it then exits
    while starting), not one of ``taken``."""
    for port in random.sample(among, min(len(among), 2000)):
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise ServiceError(f"no free port in {among.start}-{among.stop - 1} on 127.0.0.1")


INTERNAL = ("master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3_grpc")


def port_range(text: str) -> range:
    """``FROM-TO`` (both included) as a range of ports, for --ports."""
    try:
        low, high = (int(part) for part in text.split("-", 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected FROM-TO, e.g. 20000-20099") from None
    if not 1024 <= low <= high <= 65535 or high - low + 1 < len(INTERNAL):
        raise argparse.ArgumentTypeError(f"{text!r}: {len(INTERNAL)} ports at least, within 1024-65535")
    return range(low, high + 1)


def ports(root: Path, s3_port: int, among: range = QUIET_PORTS) -> dict:
    """The server's ports: DIR/ports.json's, else chosen now from ``among`` and saved there."""
    saved = root / "ports.json"
    if saved.exists():
        return json.loads(saved.read_text())
    chosen = {"s3": s3_port}
    for name in INTERNAL:
        chosen[name] = free_port(among, set(chosen.values()))
    saved.write_text(json.dumps(chosen, indent=1))
    return chosen


def identity(root: Path, access_key: str | None = None, secret_key: str | None = None) -> tuple[str, str]:
    """(access key, secret key): those given, else DIR/s3.json's (kept across restarts), else
    the fixed test keys."""
    saved = (ACCESS_KEY, SECRET_KEY)
    if (root / "s3.json").exists():
        keys = json.loads((root / "s3.json").read_text())["identities"][0]["credentials"][0]
        saved = (keys["accessKey"], keys["secretKey"])
    return access_key or saved[0], secret_key or saved[1]


def s3_config(keys: tuple[str, str], reader: tuple[str, str] | None = None) -> dict:
    """One identity with every right (the server listens on loopback only), and ``reader``'s
    that may read and list, if given."""
    credentials = [{"accessKey": keys[0], "secretKey": keys[1]}]
    identities = [
        {"name": "crawler", "credentials": credentials, "actions": ["Admin", "Read", "Write", "List", "Tagging"]}
    ]
    if reader:
        credentials = [{"accessKey": reader[0], "secretKey": reader[1]}]
        identities.append({"name": "reader", "credentials": credentials, "actions": ["Read", "List"]})
    return {"identities": identities}


def command(weed: Path, root: Path, p: dict) -> list[str]:
    return [
        str(weed),
        "server",
        f"-dir={(root / 'data').resolve()}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={p['master']}",
        f"-master.port.grpc={p['master_grpc']}",
        "-master.volumeSizeLimitMB=256",
        "-master.electionTimeout=1s",  # one master: at a restart it elects itself at once
        "-master.telemetry=false",  # nothing leaves loopback
        f"-volume.port={p['volume']}",
        f"-volume.port.grpc={p['volume_grpc']}",
        "-volume.max=64",
        "-volume.preStopSeconds=1",
        "-filer",
        f"-filer.port={p['filer']}",
        f"-filer.port.grpc={p['filer_grpc']}",
        "-s3",
        f"-s3.port={p['s3']}",
        f"-s3.port.grpc={p['s3_grpc']}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.config={(root / 's3.json').resolve()}",
    ]


def ready(p: dict) -> bool:
    """The S3 gateway answers and its filer and volume server are up: a signed ListBuckets
    is refused or answered by S3 itself, not by a proxy error."""
    if not answers("127.0.0.1", p["s3"]) or not answers("127.0.0.1", p["volume"]):
        return False
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{p['s3']}/status", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def env_lines(p: dict, keys: tuple[str, str]) -> str:
    return "\n".join(
        f"export {name}={value}"
        for name, value in (
            ("ARCHIVE_S3_ENDPOINT_URL", f"http://127.0.0.1:{p['s3']}"),
            ("AWS_ACCESS_KEY_ID", keys[0]),
            ("AWS_SECRET_ACCESS_KEY", keys[1]),
            ("AWS_DEFAULT_REGION", REGION),
        )
    )


def make_bucket(p: dict, keys: tuple[str, str], bucket: str, timeout: float) -> None:
    """Create ``bucket`` (already there: fine) and store and delete an object in it,
    retried while the volume server registers and the master warms up: the server takes
    writes after this (an empty object would not tell: it needs no volume)."""
    import boto3
    from botocore.exceptions import ClientError

    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{p['s3']}",
        aws_access_key_id=keys[0],
        aws_secret_access_key=keys[1],
        region_name=REGION,
    )
    deadline = time.monotonic() + timeout
    while True:
        try:
            try:
                client.create_bucket(Bucket=bucket)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise
            client.put_object(Bucket=bucket, Key=".started", Body=b"x")
            client.delete_object(Bucket=bucket, Key=".started")
            return
        except ClientError as exc:
            if time.monotonic() > deadline:
                raise ServiceError(f"bucket {bucket} not created: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - connection errors while it starts
            if time.monotonic() > deadline:
                raise ServiceError(f"bucket {bucket} not created: {exc}") from exc
        time.sleep(0.5)


def start(
    root: Path,
    s3_port: int,
    timeout: float,
    bucket: str,
    keys: tuple[str, str],
    among: range = QUIET_PORTS,
    reader: tuple[str, str] | None = None,
) -> None:
    weed = build()
    root.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    config = root / "s3.json"
    config.touch(mode=0o600)
    config.chmod(0o600)  # the secret key
    config.write_text(json.dumps(s3_config(keys, reader)))
    p = ports(root, s3_port, among)
    pid_file, log = root / "weed.pid", root / "weed.log"
    # one volume per new bucket (a collection), not seven: a bucket's first PUT waits for them
    (root / "master.toml").write_text(MASTER_TOML)
    if read_pid(pid_file) is None:
        spawn(command(weed, root, p), pid_file, log, cwd=root)
        waited = wait_until(lambda: ready(p), pid_file, timeout, "SeaweedFS", log)
        print(f"SeaweedFS S3 on 127.0.0.1:{p['s3']} (started in {waited:.0f} s)", file=sys.stderr)
    else:
        wait_until(lambda: ready(p), pid_file, timeout, "SeaweedFS", log)
    started = time.monotonic()
    make_bucket(p, keys, bucket, timeout)
    print(f"SeaweedFS takes writes to bucket {bucket} ({time.monotonic() - started:.1f} s)", file=sys.stderr)
    print(env_lines(p, keys))


def key_pair(text: str) -> tuple[str, str]:
    key, colon, secret = text.partition(":")
    if not (key and colon and secret):
        raise argparse.ArgumentTypeError(f"expected KEY:SECRET, got {text!r}")
    return key, secret


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("start", help="start the server in DIR; print its settings as shell lines")
    p.add_argument("dir", type=Path)
    p.add_argument("--port", type=int, default=8333, help="S3 port (default 8333; kept in DIR/ports.json)")
    p.add_argument(
        "--ports",
        type=port_range,
        default=QUIET_PORTS,
        metavar="FROM-TO",
        help="where the server's 7 other ports are chosen, free ones (default 20000-31999; kept in DIR/ports.json)",
    )
    p.add_argument("--bucket", default="crawl-archive", help="create this bucket (default crawl-archive)")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--access-key", default=os.environ.get("S3SERVER_ACCESS_KEY"), help="(kept in DIR/s3.json)")
    p.add_argument("--secret-key", default=os.environ.get("S3SERVER_SECRET_KEY"), help="(kept in DIR/s3.json)")
    p.add_argument(
        "--reader",
        type=key_pair,
        metavar="KEY:SECRET",
        help="also an identity that may read and list, not write (kept in DIR/s3.json until the next start)",
    )
    p = sub.add_parser("stop", help="stop the server in DIR")
    p.add_argument("dir", type=Path)
    p.add_argument("--kill", action="store_true", help="SIGKILL, as a crash")
    for verb, what in (("status", "whether it answers"), ("env", "its settings as shell lines")):
        sub.add_parser(verb, help=what).add_argument("dir", type=Path)
    sub.add_parser("build", help="build SeaweedFS only")
    args = parser.parse_args(argv)
    try:
        if args.verb == "build":
            print(build())
        elif args.verb == "start":
            keys = identity(args.dir, args.access_key, args.secret_key)
            start(args.dir, args.port, args.timeout, args.bucket, keys, args.ports, args.reader)
        elif args.verb == "stop":
            was = stop(args.dir / "weed.pid", kill=args.kill, grace=30.0)
            print(f"SeaweedFS: {('killed' if args.kill else 'stopped') if was else 'not running'}", file=sys.stderr)
        elif args.verb in ("status", "env"):
            p = saved_ports(args.dir / "ports.json")
            if args.verb == "env":
                print(env_lines(p, identity(args.dir)))
                return 0
            up = ready(p)
            print(
                f"127.0.0.1:{p['s3']}  pid {read_pid(args.dir / 'weed.pid') or '-'}  {'answers S3' if up else 'down'}"
            )
            return 0 if up else 3
    except ServiceError as exc:
        return fail("s3server", exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
