"""The broker of the embedded stack: Apache Kafka (default) or Tansu (``--broker tansu``).

Apache Kafka runs as one combined KRaft broker + controller (no ZooKeeper) with the machine's JDK:
``java -cp '<libs>/*' kafka.Kafka server.properties`` on 127.0.0.1 and free ports, after formatting
``<workdir>/data`` once with a cluster id. The data folder survives ``down``/``up`` and restarts, so
topics and committed offsets are durable. Its log4j2 configuration writes to the component's log.
The jars come from :mod:`livehost.stack.kafka_dist` (pinned pom, verified checksums).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

from livehost.stack import kafka_dist, tansu
from livehost.stack.process import (
    HOST,
    Running,
    StackError,
    busy_ports_hint,
    healthy_if,
    pick_ports,
    run_async,
    start_detached,
    stop_pid,
    wait_healthy,
    write_record,
)

NAME = "kafka"
FLAVOUR = "apache"
FLAVOURS = ("kafka", "tansu")  # what `--broker` accepts

# Broker settings of the embedded single node. Replication factors are 1 (one broker); the internal
# topics get few partitions because a 2-core machine gains nothing from 50, and each costs start time.
SERVER_PROPERTIES = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "8",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "8",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": "16777216",
    # Retention/compaction of LiveHost's topics is per topic (livehost.topics); this is the default
    # for anything else created on the broker.
    "log.retention.hours": "168",
    "log.segment.bytes": "67108864",
    "delete.topic.enable": "true",
}

LOG4J2 = """\
# Written by livehost.stack.kafka: the broker logs to stdout, which the stack appends to kafka.log.
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = STDOUT
# "Kafka Server started" and the storage format line, nothing per request.
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
logger.broker.name = kafka.server.BrokerServer
logger.broker.level = INFO
"""


def flavour_of(rec: Running) -> str:
    return rec.extra.get("flavour", FLAVOUR)


def bootstrap(rec: Running) -> str:
    return f"{HOST}:{rec.ports['kafka']}"


def probe(servers: str, timeout_ms: int = 2000) -> bool:
    """The broker answers a metadata request that lists at least one registered broker."""
    host, _, port = servers.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_ms / 1000).close()
    except OSError:
        return False
    return run_async(lambda: tansu._metadata_ok(servers, timeout_ms))


def healthy(rec: Running) -> bool:
    if flavour_of(rec) == tansu.FLAVOUR:
        return tansu.healthy(rec)
    return healthy_if(rec, lambda: probe(bootstrap(rec)))


def env(rec: Running) -> dict[str, str]:
    if flavour_of(rec) == tansu.FLAVOUR:
        return tansu.env(rec)
    return {"LIVEHOST_KAFKA_BOOTSTRAP": bootstrap(rec), "LIVEHOST_KAFKA_FLAVOUR": FLAVOUR}


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    candidates = [str(Path(home) / "bin" / "java")] if home else []
    candidates.append(shutil.which("java") or "")
    for cand in candidates:
        if cand and os.access(cand, os.X_OK):
            return cand
    raise StackError(NAME, "no Java runtime found (JAVA_HOME or `java` on PATH); Apache Kafka needs a "
                           "JDK 17+. On a machine without Java use the memory-only Tansu broker: "
                           "`livehost stack up --broker tansu` (or LIVEHOST_STACK_BROKER=tansu)")


def _write_config(workdir: Path, ports: dict[str, int]) -> Path:
    props = dict(SERVER_PROPERTIES)
    props.update({
        "listeners": f"PLAINTEXT://{HOST}:{ports['kafka']},CONTROLLER://{HOST}:{ports['controller']}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{ports['kafka']}",
        "controller.quorum.voters": f"1@{HOST}:{ports['controller']}",
        "log.dirs": str(workdir / "data"),
    })
    path = workdir / "server.properties"
    path.write_text("# Written by livehost.stack.kafka at every start.\n"
                    + "".join(f"{k}={v}\n" for k, v in props.items()))
    (workdir / "log4j2.properties").write_text(LOG4J2)
    return path


def _jvm_args(workdir: Path, heap_mb: int) -> list[str]:
    return [f"-Xms{min(128, heap_mb)}m", f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}"]


def _format_storage(java: str, libs: Path, workdir: Path, config: Path, heap_mb: int) -> None:
    """Format the KRaft storage once; a data folder that has its meta.properties is kept as it is."""
    if (workdir / "data" / "meta.properties").exists():
        return
    id_file = workdir / "cluster.id"
    if not id_file.exists():
        # A Kafka cluster id is a base64url UUID without padding (what `random-uuid` prints).
        import base64

        id_file.write_text(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=") + "\n")
    argv = [java, *_jvm_args(workdir, min(heap_mb, 256)), "-cp", f"{libs}/*", "kafka.tools.StorageTool",
            "format", "-t", id_file.read_text().strip(), "-c", str(config), "--ignore-formatted"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    with open(workdir / "kafka.log", "a") as log:
        log.write(f"\n=== format: {' '.join(argv)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        raise StackError(NAME, f"formatting KRaft storage failed (exit {proc.returncode})", workdir / "kafka.log")


def start_apache(
    workdir: Path,
    port: int = 0,
    controller_port: int = 0,
    timeout: float = 60.0,
    heap_mb: int = 512,
    dist_dir: Path | None = None,
) -> Running:
    """Start Apache Kafka on ``127.0.0.1:port`` (0 = free port), data in ``<workdir>/data``."""
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "kafka.log"
    java = java_binary()
    libs = kafka_dist.ensure_jars(dist_dir or default_dist_dir())
    configured = {"kafka": port, "controller": controller_port}
    ports = pick_ports(configured)
    config = _write_config(workdir, ports)
    t0 = time.monotonic()
    _format_storage(java, libs, workdir, config, heap_mb)
    argv = [java, *_jvm_args(workdir, heap_mb), "-cp", f"{libs}/*", "kafka.Kafka", str(config)]
    proc = start_detached(argv, log_path, cwd=workdir)
    rec = Running(
        name=NAME,
        pid=proc.pid,
        ports=ports,
        log_path=str(log_path),
        workdir=str(workdir),
        cmd_match=str(config),  # unique per stack: the pid is ours only if it runs this config
        started_at=time.time(),
        extra={"flavour": FLAVOUR, "heap_mb": str(heap_mb), "dist_dir": str(dist_dir or default_dist_dir())},
    )
    try:
        wait_healthy(
            NAME,
            lambda: probe(f"{HOST}:{ports['kafka']}", 1000),
            timeout=timeout,
            proc=proc,
            log_path=log_path,
            hint=lambda: busy_ports_hint(ports, configured),
            interval=0.1,
        )
    except BaseException:
        stop_pid(proc.pid, 10.0, rec.cmd_match)
        raise
    rec.start_seconds = round(time.monotonic() - t0, 3)
    write_record(rec)
    return rec


def default_dist_dir() -> Path:
    from livehost.config import load_settings

    return Path(load_settings().stack_kafka_dist_dir)


def start(
    workdir: Path,
    port: int = 0,
    timeout: float = 60.0,
    *,
    broker: str = "kafka",
    controller_port: int = 0,
    heap_mb: int = 512,
    dist_dir: Path | None = None,
) -> Running:
    """Start the configured broker: ``kafka`` (Apache Kafka, durable) or ``tansu`` (memory only)."""
    if broker == "tansu":
        return tansu.start(workdir, port, timeout=timeout)
    if broker != "kafka":
        raise StackError(NAME, f"unknown broker {broker!r}; choose one of {list(FLAVOURS)}")
    return start_apache(workdir, port, controller_port, timeout=timeout, heap_mb=heap_mb, dist_dir=dist_dir)


def restart(rec: Running, timeout: float = 60.0) -> Running:
    """Start the broker again on the same ports and data folder (after a crash or a kill)."""
    workdir = Path(rec.workdir)
    if flavour_of(rec) == tansu.FLAVOUR:
        return tansu.start(workdir, rec.ports["kafka"], timeout=timeout)
    return start_apache(workdir, rec.ports["kafka"], rec.ports["controller"], timeout=timeout,
                        heap_mb=int(rec.extra.get("heap_mb", "512")),
                        dist_dir=Path(rec.extra["dist_dir"]) if "dist_dir" in rec.extra else None)


def stop(rec: Running, timeout: float = 20.0) -> None:
    stop_pid(rec.pid, timeout, rec.cmd_match)
