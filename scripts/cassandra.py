#!/usr/bin/env python3
"""Apache Cassandra on loopback, for the tests, the benchmarks and a try on one machine.

    python scripts/cassandra.py start DIR [--nodes 3] [--heap 512M] [--port 9042]
                                          [--storage-port 7000] [--jmx-port 7199]
    python scripts/cassandra.py stop DIR [--node N] [--kill]
    python scripts/cassandra.py status DIR
    python scripts/cassandra.py nodetool DIR [--node N] -- tablestats crawler.urls
    python scripts/cassandra.py fetch

``start`` runs one node on 127.0.0.1, or ``--nodes N`` nodes on 127.0.0.1 ... 127.0.0.N
(loopback addresses; one cluster, each node its own folders under DIR/nodeK and its own
JMX port, 7199 + 100 (K-1); the ports are kept in DIR/cluster.json for the other verbs),
waits until each answers CQL and prints the contact points
(``127.0.0.1,127.0.0.2,127.0.0.3``) on stdout: ``export CASSANDRA_HOSTS=$(...)``. A node
stopped by ``stop --node K`` (``--kill``: SIGKILL, as a crash) starts again with its data
by ``start DIR --node K``; node 1 is the cluster's seed: with it down, another node that
starts finds no peer to gossip with and exits, so start node 1 first.

Where Cassandra comes from: Maven Central serves no ``apache-cassandra`` distribution of
5.0 (its ``bin`` tarball stops at 4.0-alpha2), so Maven copies ``cassandra-all`` and its
runtime dependencies into CRAWLER_SERVICES_CACHE/cassandra-VERSION/lib, and the daemon
(org.apache.cassandra.service.CassandraDaemon) is started from that class path with the
JVM options of Cassandra's own jvm17-server.options and a cassandra.yaml written here.
The download is made once and reused. Needs Java 11 or 17 and Maven.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from service import (
    CACHE,
    ServiceError,
    answers,
    fail,
    read_pid,
    require,
    run_quietly,
    spawn,
    stop,
    wait_until,
)

VERSION = os.environ.get("CASSANDRA_VERSION", "5.0.9")
HOME = CACHE / f"cassandra-{VERSION}"
LIB = HOME / "lib"

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>crawler.services</groupId>
  <artifactId>cassandra-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""

# Cassandra's conf/jvm17-server.options (GC and the module system's openings it needs)
JVM_OPTIONS = """
-XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1 -XX:MaxGCPauseMillis=300
-XX:+HeapDumpOnOutOfMemoryError -Xss256k
-Djdk.attach.allowAttachSelf=true
--add-exports java.base/jdk.internal.misc=ALL-UNNAMED
--add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
--add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
--add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
--add-exports java.sql/java.sql=ALL-UNNAMED
--add-exports java.base/java.lang.ref=ALL-UNNAMED
--add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
--add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
--add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
--add-opens java.base/java.lang.module=ALL-UNNAMED
--add-opens java.base/jdk.internal.loader=ALL-UNNAMED
--add-opens java.base/jdk.internal.ref=ALL-UNNAMED
--add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
--add-opens java.base/jdk.internal.math=ALL-UNNAMED
--add-opens java.base/jdk.internal.module=ALL-UNNAMED
--add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
--add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
--add-opens java.base/sun.nio.ch=ALL-UNNAMED
--add-opens java.base/java.io=ALL-UNNAMED
--add-opens java.base/java.lang.reflect=ALL-UNNAMED
--add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
--add-opens java.base/java.lang=ALL-UNNAMED
--add-opens java.base/java.util=ALL-UNNAMED
-Dio.netty.tryReflectionSetAccessible=true
-Dio.netty.allocator.useCacheForAllThreads=true
-Dio.netty.allocator.maxOrder=11
""".split()

YAML = """cluster_name: crawler-loopback
num_tokens: 16
allocate_tokens_for_local_replication_factor: {rf}
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
data_file_directories: [{node}/data]
commitlog_directory: {node}/commitlog
saved_caches_directory: {node}/saved_caches
hints_directory: {node}/hints
cdc_raw_directory: {node}/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:{storage_port}"
listen_address: {address}
rpc_address: {address}
storage_port: {storage_port}
native_transport_port: {port}
start_native_transport: true
endpoint_snitch: GossipingPropertyFileSnitch
auto_bootstrap: false
# tests create and drop many keyspaces: no snapshot of each
auto_snapshot: false
snapshot_before_compaction: false
# a worker's write batches are cut under this (CASSANDRA_BATCH_BYTES 0): 5KiB by
# default, one request for every 30 inlinks of a page; the fail threshold stays 50KiB
batch_size_warn_threshold: 32KiB
"""

LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${cassandra.logdir}/system.log</file>
    <encoder><pattern>%-5level %date{ISO8601} [%thread] %logger{30} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""

LOGBACK_TOOLS = """<configuration>
  <appender name="ERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%-5level %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="ERR"/></root>
</configuration>
"""

RACKDC = "dc=datacenter1\nrack=rack1\n"  # the datacenter name the replication settings use


def java() -> str:
    """The java command (JAVA_HOME's, else PATH's); ServiceError unless it is 11 or 17."""
    home = os.environ.get("JAVA_HOME")
    path = str(Path(home) / "bin" / "java") if home else require("java", "Cassandra 5.0 needs Java 11 or 17")
    try:
        out = subprocess.run([path, "-version"], capture_output=True, text=True, timeout=60).stderr
    except OSError as exc:
        raise ServiceError(f"cannot run {path}: {exc}") from exc
    match = re.search(r'version "(\d+)', out)
    major = int(match.group(1)) if match else 0
    if major not in (11, 17):
        raise ServiceError(f"{path} is Java {major or '?'}; Cassandra 5.0 runs on Java 11 or 17 (set JAVA_HOME)")
    return path


def fetch() -> Path:
    """Cassandra's class path folder, downloaded by Maven the first time."""
    if (LIB / f"cassandra-all-{VERSION}.jar").exists():
        return LIB
    mvn = require("mvn", "Maven fetches Cassandra from Maven Central: apt-get install maven")
    HOME.mkdir(parents=True, exist_ok=True)
    (HOME / "pom.xml").write_text(POM.format(version=VERSION))
    part = HOME / "lib.part"
    cmd = [mvn, "-q", "-B", "dependency:copy-dependencies", f"-DoutputDirectory={part}", "-DincludeScope=runtime"]
    run_quietly(cmd, f"downloading cassandra-all {VERSION} and its dependencies from Maven Central", cwd=HOME)
    part.rename(LIB)
    return LIB


@dataclass
class Layout:
    """A cluster's shape, kept in DIR/cluster.json by its first start."""

    nodes: int = 1
    port: int = 9042  # CQL, on every node's address
    storage_port: int = 7000  # the same on every node: each has its own address
    jmx_port: int = 7199  # node K: jmx_port + 100 (K - 1), on 127.0.0.1

    @classmethod
    def of(cls, root: Path) -> Layout | None:
        try:
            return cls(**json.loads((root / "cluster.json").read_text()))
        except FileNotFoundError:
            return None

    def save(self, root: Path) -> None:
        (root / "cluster.json").write_text(json.dumps(asdict(self)))


class Node:
    def __init__(self, root: Path, number: int, layout: Layout):
        self.number = number
        self.address = f"127.0.0.{number}"
        self.layout = layout
        self.port = layout.port
        self.dir = root / f"node{number}"
        self.pid_file = self.dir / "cassandra.pid"
        self.log = self.dir / "logs" / "system.log"
        self.jmx_port = layout.jmx_port + 100 * (number - 1)

    def configure(self) -> None:
        conf = self.dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        values = {
            "node": self.dir.resolve(),
            "address": self.address,
            "port": self.port,
            "storage_port": self.layout.storage_port,
            "rf": min(self.layout.nodes, 3),
        }
        (conf / "cassandra.yaml").write_text(YAML.format(**values))
        (conf / "logback.xml").write_text(LOGBACK)
        (conf / "cassandra-rackdc.properties").write_text(RACKDC)

    def command(self, java_path: str, heap: str) -> list[str]:
        conf = (self.dir / "conf").resolve()
        jamm = next(LIB.glob("jamm-*.jar"))
        return [
            java_path,
            f"-Xms{heap}",
            f"-Xmx{heap}",
            *JVM_OPTIONS,
            f"-javaagent:{jamm}",
            f"-Dcassandra.config=file://{conf}/cassandra.yaml",
            f"-Dcassandra.logdir={(self.dir / 'logs').resolve()}",
            f"-Dcassandra.storagedir={self.dir.resolve()}",
            f"-Dlogback.configurationFile={conf}/logback.xml",
            "-Dcassandra-foreground=yes",
            f"-Dcassandra.jmx.local.port={self.jmx_port}",
            "-Djava.rmi.server.hostname=127.0.0.1",
            "-Dcassandra.skip_wait_for_gossip_to_settle=0",
            "-Dcassandra.ring_delay_ms=1000",
            "-cp",
            f"{conf}:{LIB.resolve()}/*",
            "org.apache.cassandra.service.CassandraDaemon",
        ]

    def running(self) -> int | None:
        return read_pid(self.pid_file)

    def answers(self) -> bool:
        return answers(self.address, self.port)


def nodes_of(root: Path, layout: Layout) -> list[Node]:
    return [Node(root, k, layout) for k in range(1, layout.nodes + 1)]


def start(root: Path, layout: Layout, heap: str, timeout: float, only: int | None) -> None:
    java_path = java()
    fetch()
    root.mkdir(parents=True, exist_ok=True)
    layout.save(root)
    for node in nodes_of(root, layout):
        if only is not None and node.number != only:
            continue
        if node.running():
            if not node.answers():
                wait_until(node.answers, node.pid_file, timeout, f"Cassandra {node.address}", node.log)
            continue
        node.configure()
        spawn(node.command(java_path, heap), node.pid_file, node.dir / "logs" / "stdout.log")
        waited = wait_until(node.answers, node.pid_file, timeout, f"Cassandra {node.address}", node.log)
        print(f"Cassandra {VERSION} on {node.address}:{node.port} (started in {waited:.0f} s)", file=sys.stderr)
    print(",".join(node.address for node in nodes_of(root, layout)))


def saved_layout(root: Path) -> Layout:
    layout = Layout.of(root)
    if layout is None:
        raise ServiceError(f"no Cassandra was started in {root}")
    return layout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("start", help="start the node(s) in DIR; print the contact points")
    p.add_argument("dir", type=Path)
    p.add_argument("--nodes", type=int, help="nodes on 127.0.0.1..N (default 1; later starts: DIR's)")
    p.add_argument("--node", type=int, help="start this node only (one that was stopped)")
    p.add_argument("--port", type=int, help="CQL port of each node (default 9042)")
    p.add_argument("--storage-port", type=int, help="inter-node port of each node (default 7000)")
    p.add_argument("--jmx-port", type=int, help="JMX port of node 1 (default 7199; node K: + 100 (K-1))")
    p.add_argument("--heap", default=os.environ.get("CASSANDRA_HEAP", "512M"), help="per node (default 512M)")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds to wait for each node")
    p = sub.add_parser("stop", help="stop the nodes in DIR (or one)")
    p.add_argument("dir", type=Path)
    p.add_argument("--node", type=int)
    p.add_argument("--kill", action="store_true", help="SIGKILL, as a crash")
    sub.add_parser("status", help="each node: address, pid, CQL answering").add_argument("dir", type=Path)
    p = sub.add_parser("nodetool", help="Cassandra's nodetool against a node: DIR [--node N] -- ARGS")
    p.add_argument("dir", type=Path)
    p.add_argument("--node", type=int, default=1)
    sub.add_parser("fetch", help="download Cassandra only")
    argv = sys.argv[1:] if argv is None else list(argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []  # nodetool's own arguments
    args = parser.parse_args(argv[: len(argv) - len(extra) - (1 if "--" in argv else 0)])
    try:
        if args.verb == "fetch":
            print(fetch())
        elif args.verb == "start":
            layout = Layout.of(args.dir) or Layout()
            for name in ("nodes", "port", "storage_port", "jmx_port"):
                if getattr(args, name) is not None:
                    setattr(layout, name, getattr(args, name))
            start(args.dir, layout, args.heap, args.timeout, args.node)
        elif args.verb == "stop":
            for node in nodes_of(args.dir, saved_layout(args.dir)):
                if args.node in (None, node.number):
                    was = stop(node.pid_file, kill=args.kill)
                    done = ("killed" if args.kill else "stopped") if was else "not running"
                    print(f"Cassandra {node.address}: {done}", file=sys.stderr)
        elif args.verb == "status":
            down = 0
            for node in nodes_of(args.dir, saved_layout(args.dir)):
                pid, up = node.running(), node.answers()
                down += not up
                print(f"{node.address}:{node.port}  pid {pid or '-'}  {'answers CQL' if up else 'down'}")
            return 3 if down else 0
        elif args.verb == "nodetool":
            node = Node(args.dir, args.node, saved_layout(args.dir))
            opens = [o for o in JVM_OPTIONS if o.startswith("--add") or "ALL-UNNAMED" in o]
            tools_log = HOME / "logback-tools.xml"
            tools_log.write_text(LOGBACK_TOOLS)
            classpath = f"{fetch().resolve()}/*"
            tool = "org.apache.cassandra.tools.NodeTool"
            cmd = [java(), *opens, "-cp", classpath, f"-Dlogback.configurationFile={tools_log}", tool]
            return subprocess.run([*cmd, "-h", "127.0.0.1", "-p", str(node.jmx_port), *extra]).returncode
    except ServiceError as exc:
        return fail("cassandra", exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
