"""The broker of the embedded stack: Apache Kafka (default) or Tansu (``--broker tansu``).

Apache Kafka runs as one combined KRaft broker + controller (no ZooKeeper) with the machine's JDK:
``java -cp '<libs>/*' kafka.Kafka server.properties`` on 127.0.0.1 and free ports, after formatting
``<workdir>/data`` once with a cluster id. The data folder survives ``down``/``up`` and restarts, so
topics and committed offsets are durable. Its log4j2 configuration writes to the component's log.
The jars come from :mod:`livehost.stack.kafka_dist` (pinned pom, verified checksums).

Secure by default: the client listener is SASL_SSL with SCRAM-SHA-512 and the controller listener
SSL with client certificates required. The broker's certificate (identity ``kafka-broker``) is issued
by the installation's local CA (:mod:`livehost.security.pki`), so clients trust it through the same
``ca.pem`` as every gRPC service. SCRAM users are created when the storage is formatted: ``admin``
(the broker's own inter-broker login), ``livehost`` (the services) and ``producer`` (live-room
producers); their passwords are random, kept in ``<workdir>/scram.json`` (mode 0600), and the
services' password reaches them through the stack's env file (also 0600).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

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
    # Apache Kafka refuses a session timeout below this (6000 by default), and a SIGKILLed member is only
    # noticed when its session ends: the clients' LIVEHOST_KAFKA_SESSION_TIMEOUT_MS (livehost.config, the
    # one place for that choice) may then be short enough for a ~3 s handover. Compose's broker sets the
    # same (infra/kafka/compose/server.properties; tests/deploy checks both against the setting).
    "group.min.session.timeout.ms": "1000",
    # KRaft: a broker restarted after a crash (kill -9) cannot register again until the controller has
    # expired its previous registration's session (9 s by default); measured on the embedded combined
    # broker+controller: 8.2 s of "waiting for the controller to acknowledge that we are caught up" on
    # every kill -9 restart. One node, so a short session costs nothing.
    "broker.session.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "500",
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
# One line per group rebalance and its reason ("removing member ... on heartbeat expiration" is a
# session that ran out: a dead member, or a live one too starved to heartbeat).
logger.groups.name = org.apache.kafka.coordinator.group.GroupMetadataManager
logger.groups.level = INFO
"""


BROKER_IDENTITY = "kafka-broker"
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_USERS = ("admin", "livehost", "producer")
SERVICE_USER = "livehost"


def _scram_passwords(workdir: Path) -> dict[str, str]:
    """The SCRAM users' passwords, made once per data folder (they are formatted into its metadata)."""
    import json
    import secrets

    path = workdir / "scram.json"
    if path.exists():
        return dict(json.loads(path.read_text()))
    passwords = {user: secrets.token_urlsafe(24) for user in SCRAM_USERS}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(passwords, fh)
    return passwords


def client_security(rec: Running, user: str = SERVICE_USER) -> dict[str, str]:
    """The LIVEHOST_KAFKA_* security settings for a client of this broker ({} when it is plaintext)."""
    if rec.extra.get("security") != "sasl_ssl":
        return {}
    password = _scram_passwords(Path(rec.workdir))[user]
    return {"LIVEHOST_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "LIVEHOST_KAFKA_SASL_MECHANISM": SCRAM_MECHANISM,
            "LIVEHOST_KAFKA_SASL_USERNAME": user, "LIVEHOST_KAFKA_SASL_PASSWORD": password,
            "LIVEHOST_KAFKA_SSL_CAFILE": rec.extra["cafile"]}


def tls_client_security(rec: Running, identity: str) -> dict[str, str]:
    """Settings for a client that authenticates with its certificate from the local CA (mutual TLS) on the
    broker's second listener; ``identity`` must have a credential in the CA's folder."""
    pki = Path(rec.extra["pki"])
    return {"LIVEHOST_KAFKA_BOOTSTRAP": f"{HOST}:{rec.ports['kafka_tls']}",
            "LIVEHOST_KAFKA_SECURITY_PROTOCOL": "SSL", "LIVEHOST_KAFKA_SSL_CAFILE": str(pki / "ca.pem"),
            "LIVEHOST_KAFKA_SSL_CERTFILE": str(pki / f"{identity}.pem"),
            "LIVEHOST_KAFKA_SSL_KEYFILE": str(pki / f"{identity}.key")}


def client_kwargs(rec: Running, user: str = SERVICE_USER) -> dict[str, object]:
    """aiokafka keyword arguments for a client of this broker (address and security)."""
    from livehost.config import Settings
    from livehost.kafka import client_options

    env: dict[str, Any] = {"LIVEHOST_KAFKA_BOOTSTRAP": bootstrap(rec), "LIVEHOST_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",
                           **client_security(rec, user)}
    return client_options(Settings(**{k.removeprefix("LIVEHOST_").lower(): v for k, v in env.items()}))


def flavour_of(rec: Running) -> str:
    return rec.extra.get("flavour", FLAVOUR)


def bootstrap(rec: Running) -> str:
    return f"{HOST}:{rec.ports['kafka']}"


def probe(servers: str, timeout_ms: int = 2000, options: dict[str, object] | None = None) -> bool:
    """The broker answers a (authenticated, when ``options`` say so) metadata request that lists at
    least one registered broker."""
    host, _, port = servers.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_ms / 1000).close()
    except OSError:
        return False
    extra = {k: v for k, v in (options or {}).items() if k != "bootstrap_servers"}
    try:
        return run_async(lambda: tansu._metadata_ok(servers, timeout_ms, extra))
    except Exception:  # refused, unauthenticated, TLS failure: not (yet) usable with these options
        return False


def healthy(rec: Running) -> bool:
    if flavour_of(rec) == tansu.FLAVOUR:
        return tansu.healthy(rec)
    return healthy_if(rec, lambda: probe(bootstrap(rec), options=client_kwargs(rec)))


def env(rec: Running) -> dict[str, str]:
    if flavour_of(rec) == tansu.FLAVOUR:
        return tansu.env(rec)
    return {"LIVEHOST_KAFKA_BOOTSTRAP": bootstrap(rec), "LIVEHOST_KAFKA_FLAVOUR": FLAVOUR, **client_security(rec)}


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


def _tls_files(workdir: Path, pki: Path) -> tuple[Path, Path]:
    """The broker's PEM keystore (key + certificate) from the local CA, and the CA file (truststore)."""
    from livehost.security.pki import ensure_pki, load_credential

    ensure_pki(pki, [BROKER_IDENTITY])
    cred = load_credential(pki, BROKER_IDENTITY)
    keystore = workdir / "broker-keystore.pem"
    fd = os.open(keystore, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(cred.key + cred.cert)
    return keystore, pki / "ca.pem"


def _write_config(workdir: Path, ports: dict[str, int], pki: Path | None) -> Path:
    props = dict(SERVER_PROPERTIES)
    props.update({
        "listeners": f"PLAINTEXT://{HOST}:{ports['kafka']},CONTROLLER://{HOST}:{ports['controller']}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{ports['kafka']}",
        "controller.quorum.voters": f"1@{HOST}:{ports['controller']}",
        "log.dirs": str(workdir / "data"),
    })
    if pki is not None:
        keystore, cafile = _tls_files(workdir, pki)
        admin = _scram_passwords(workdir)["admin"]
        props.update({
            "listeners": f"SASL_SSL://{HOST}:{ports['kafka']},SSL://{HOST}:{ports['kafka_tls']},"
                         f"CONTROLLER://{HOST}:{ports['controller']}",
            "advertised.listeners": f"SASL_SSL://{HOST}:{ports['kafka']},SSL://{HOST}:{ports['kafka_tls']}",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SSL",
            # The second client listener authenticates by certificate (mutual TLS) instead of SCRAM: for
            # clients whose SCRAM does not work with Kafka 4 (Debian's kcat, librdkafka 2.0.2).
            "listener.name.ssl.ssl.client.auth": "required",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
            f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config":
                'org.apache.kafka.common.security.scram.ScramLoginModule required '
                f'username="admin" password="{admin}";',
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(cafile),
            # The controller accepts only peers with a certificate from the local CA.
            "listener.name.controller.ssl.client.auth": "required",
        })
    path = workdir / "server.properties"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the admin password
    with os.fdopen(fd, "w") as fh:
        fh.write("# Written by livehost.stack.kafka at every start.\n")
        fh.writelines(f"{k}={v}\n" for k, v in props.items())
    (workdir / "log4j2.properties").write_text(LOG4J2)
    return path


def _jvm_args(workdir: Path, heap_mb: int) -> list[str]:
    return [f"-Xms{min(128, heap_mb)}m", f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={workdir / 'log4j2.properties'}"]


def _format_storage(java: str, libs: Path, workdir: Path, config: Path, heap_mb: int, secure: bool) -> None:
    """Format the KRaft storage once; a data folder that has its meta.properties is kept as it is."""
    if (workdir / "data" / "meta.properties").exists():
        return
    id_file = workdir / "cluster.id"
    if not id_file.exists():
        # A Kafka cluster id is a base64url UUID without padding (what `random-uuid` prints).
        import base64

        cluster_id = "-"
        while cluster_id.startswith("-"):  # as Kafka's Uuid.randomUuid: a leading '-' reads as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        id_file.write_text(cluster_id + "\n")
    argv = [java, *_jvm_args(workdir, min(heap_mb, 256)), "-cp", f"{libs}/*", "kafka.tools.StorageTool",
            "format", "-t", id_file.read_text().strip(), "-c", str(config), "--ignore-formatted"]
    if secure:
        for user, password in _scram_passwords(workdir).items():
            argv += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    shown = [a if not a.startswith(SCRAM_MECHANISM) else f"{SCRAM_MECHANISM}=[name=…,password=***]" for a in argv]
    with open(workdir / "kafka.log", "a") as log:
        log.write(f"\n=== format: {' '.join(shown)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        raise StackError(NAME, f"formatting KRaft storage failed (exit {proc.returncode})", workdir / "kafka.log")


def start_apache(
    workdir: Path,
    port: int = 0,
    controller_port: int = 0,
    timeout: float = 60.0,
    heap_mb: int = 512,
    dist_dir: Path | None = None,
    pki: Path | None = None,
    tls_port: int = 0,
) -> Running:
    """Start Apache Kafka on ``127.0.0.1:port`` (0 = free port), data in ``<workdir>/data``; SASL_SSL with
    certificates from the CA in ``pki`` when given (plus a mutual-TLS listener on ``tls_port``),
    plaintext otherwise."""
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "kafka.log"
    java = java_binary()
    libs = kafka_dist.ensure_jars(dist_dir or default_dist_dir())
    configured = {"kafka": port, "controller": controller_port}
    if pki is not None:
        configured["kafka_tls"] = tls_port
    ports = pick_ports(configured)
    if pki is not None and (workdir / "data" / "meta.properties").exists() and not (workdir / "scram.json").exists():
        raise StackError(NAME, f"{workdir / 'data'} was formatted without SCRAM users (an older plaintext stack); "
                               f"remove {workdir} to start a secure broker")
    config = _write_config(workdir, ports, pki)
    t0 = time.monotonic()
    _format_storage(java, libs, workdir, config, heap_mb, secure=pki is not None)
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
    if pki is not None:
        rec.extra.update(security="sasl_ssl", pki=str(pki), cafile=str(pki / "ca.pem"))
    options = client_kwargs(rec)
    try:
        wait_healthy(
            NAME,
            lambda: probe(f"{HOST}:{ports['kafka']}", 1000, options),
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
    pki: Path | None = None,
) -> Running:
    """Start the configured broker: ``kafka`` (Apache Kafka, durable; SASL_SSL when ``pki`` names the
    local CA's folder) or ``tansu`` (memory only, plaintext)."""
    if broker == "tansu":
        return tansu.start(workdir, port, timeout=timeout)
    if broker != "kafka":
        raise StackError(NAME, f"unknown broker {broker!r}; choose one of {list(FLAVOURS)}")
    return start_apache(workdir, port, controller_port, timeout=timeout, heap_mb=heap_mb, dist_dir=dist_dir,
                        pki=pki)


def restart(rec: Running, timeout: float = 60.0) -> Running:
    """Start the broker again on the same ports and data folder (after a crash or a kill)."""
    workdir = Path(rec.workdir)
    if flavour_of(rec) == tansu.FLAVOUR:
        return tansu.start(workdir, rec.ports["kafka"], timeout=timeout)
    return start_apache(workdir, rec.ports["kafka"], rec.ports["controller"], timeout=timeout,
                        heap_mb=int(rec.extra.get("heap_mb", "512")),
                        dist_dir=Path(rec.extra["dist_dir"]) if "dist_dir" in rec.extra else None,
                        pki=Path(rec.extra["pki"]) if "pki" in rec.extra else None,
                        tls_port=rec.ports.get("kafka_tls", 0))


def stop(rec: Running, timeout: float = 20.0) -> None:
    stop_pid(rec.pid, timeout, rec.cmd_match)
