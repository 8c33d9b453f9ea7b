"""The embedded stack as real processes: up / status / down, reuse, failure reporting, test helpers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from livehost.config import Settings, stack_env_file
from livehost.stack import StackError, down, status, up
from livehost.stack.kafka import probe as kafka_probe
from livehost.stack.process import pid_alive, read_record
from livehost.stack.testing import running_kafka, running_postgres, running_triton

pytestmark = pytest.mark.integration

ECHO_REPO = Path(__file__).parent / "triton_models"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "state"
    monkeypatch.setenv("LIVEHOST_STATE_DIR", str(root))
    for key in ("KAFKA_BOOTSTRAP", "POSTGRES_DSN", "TRITON_URL", "TRITON_HTTP_URL", "KAFKA_SECURITY_PROTOCOL",
                "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD", "KAFKA_SASL_MECHANISM", "KAFKA_SSL_CAFILE"):
        monkeypatch.delenv(f"LIVEHOST_{key}", raising=False)  # the stack's env file says these
    yield root
    down(echo=lambda _msg: None)  # never leave processes behind, whatever the test did


def _settings(**overrides: object) -> Settings:
    return Settings(triton_model_repository=ECHO_REPO, component_start_timeout_s=60, **overrides)  # type: ignore[arg-type]


@pytest.fixture
def listening_socket() -> Iterator[int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def _echo(url: str) -> list[bytes]:
    client = grpcclient.InferenceServerClient(url)
    try:
        inp = grpcclient.InferInput("INPUT", [2], "BYTES")
        inp.set_data_from_numpy(np.array([b"hello", b"live"], dtype=object))
        return list(client.infer("echo", [inp]).as_numpy("OUTPUT"))
    finally:
        client.close()


async def _kafka_roundtrip(bootstrap: str, secure: bool = False) -> bytes:
    """Create a topic, produce and consume one record; with ``secure``, authenticated the way the stack's
    env file says (SASL_SSL + SCRAM)."""
    from livehost.config import load_settings
    from livehost.kafka import client_options

    opts: dict[str, Any] = client_options(load_settings(kafka_bootstrap=bootstrap)) if secure \
        else {"bootstrap_servers": bootstrap}
    admin = AIOKafkaAdminClient(**opts)
    await admin.start()
    try:
        await admin.create_topics([NewTopic("stack.smoke", num_partitions=2, replication_factor=1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(**opts)
    await producer.start()
    try:
        await producer.send_and_wait("stack.smoke", b"ping", key=b"room-1")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        "stack.smoke", **opts, auto_offset_reset="earliest", fetch_max_wait_ms=10
    )
    await consumer.start()
    try:
        msg = await consumer.getone()
        return bytes(msg.value or b"")
    finally:
        await consumer.stop()


async def _select_one(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT 1"))
    finally:
        await conn.close()


async def test_up_status_reuse_down(state: Path) -> None:
    messages: list[str] = []
    info = up(_settings(), echo=messages.append)
    assert sorted(info.started) == ["kafka", "postgres", "triton"]
    assert info.env_file == stack_env_file() == state / "stack.env"

    env_text = info.env_file.read_text()
    for key in ("LIVEHOST_KAFKA_BOOTSTRAP", "LIVEHOST_POSTGRES_DSN", "LIVEHOST_TRITON_URL"):
        assert f"{key}={info.env[key]}" in env_text
    assert "LIVEHOST_TRITON_HTTP_URL=127.0.0.1:" in env_text

    # The env file is what services read.
    from livehost.config import load_settings

    loaded = load_settings()
    assert loaded.kafka_bootstrap == info.env["LIVEHOST_KAFKA_BOOTSTRAP"]
    assert loaded.postgres_dsn == info.env["LIVEHOST_POSTGRES_DSN"]
    assert loaded.triton_url == info.env["LIVEHOST_TRITON_URL"]

    # Each component really works.
    assert await _kafka_roundtrip(loaded.kafka_bootstrap, secure=True) == b"ping"
    assert await _select_one(loaded.postgres_dsn) == 1
    assert _echo(loaded.triton_url) == [b"hello", b"live"]

    st = status()
    assert all(st[name]["healthy"] for name in ("kafka", "postgres", "triton")), st
    assert st["kafka"]["port"] == int(loaded.kafka_bootstrap.rsplit(":", 1)[1])
    pids = {name: info.components[name].pid for name in info.components}

    # A second up reuses the healthy processes.
    messages.clear()
    again = up(_settings(), echo=messages.append)
    assert sorted(again.reused) == ["kafka", "postgres", "triton"] and not again.started
    assert {name: again.components[name].pid for name in again.components} == pids
    assert sum("reusing" in m for m in messages) == 3
    assert again.env == info.env

    stopped = down(echo=lambda _msg: None)
    assert sorted(stopped) == ["kafka", "postgres", "triton"]
    assert not stack_env_file().exists()
    for name, pid in pids.items():
        assert not pid_alive(pid), f"{name} (pid {pid}) still running after down()"
        assert read_record(state / name, name) is None
    assert _processes_under(state) == []
    assert not any(v["healthy"] for v in status().values())


async def test_apache_kafka_keeps_topics_and_offsets_across_down_and_up(state: Path) -> None:
    """The default broker is durable and authenticated: a topic, its records and a group's committed
    offset survive `down` + `up` (Tansu, memory-only, loses all three); a client without credentials
    is refused."""
    from livehost.config import load_settings
    from livehost.kafka import client_options

    info = up(_settings(), components=["kafka"], echo=lambda _m: None)
    assert info.env["LIVEHOST_KAFKA_FLAVOUR"] == "apache"
    bootstrap = info.env["LIVEHOST_KAFKA_BOOTSTRAP"]
    assert await _kafka_roundtrip(bootstrap, secure=True) == b"ping"
    opts = client_options(load_settings())
    consumer = AIOKafkaConsumer("stack.smoke", **opts, group_id="durable",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer.getone()
        await consumer.commit()
    finally:
        await consumer.stop()
    down(echo=lambda _m: None)

    again = up(_settings(), components=["kafka"], echo=lambda _m: None)
    assert again.started == ["kafka"]
    assert again.env["LIVEHOST_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    admin = AIOKafkaAdminClient(**client_options(load_settings()))
    await admin.start()
    try:
        assert "stack.smoke" in await admin.list_topics()
        offsets = await admin.list_consumer_group_offsets("durable")
    finally:
        await admin.close()
    assert sum(meta.offset for meta in offsets.values()) == 1  # the one record, committed before `down`

    # Without credentials, or with a wrong password, the broker lets nothing through.
    assert not kafka_probe(again.env["LIVEHOST_KAFKA_BOOTSTRAP"], 3000)
    wrong = {**client_options(load_settings()), "sasl_plain_password": "not-the-password"}
    assert not kafka_probe(again.env["LIVEHOST_KAFKA_BOOTSTRAP"], 3000, wrong)


async def test_tansu_stays_available_behind_its_option(state: Path) -> None:
    """`--broker tansu` (machines without Java): memory-only Tansu, with its client workarounds set."""
    info = up(_settings(stack_broker="tansu"), components=["kafka"], echo=lambda _m: None)
    assert info.env["LIVEHOST_KAFKA_FLAVOUR"] == "tansu"
    assert info.env["LIVEHOST_KAFKA_ENABLE_IDEMPOTENCE"] == "false"
    assert "tansu" in Path(f"/proc/{info.components['kafka'].pid}/cmdline").read_bytes().decode(errors="replace")
    assert await _kafka_roundtrip(info.env["LIVEHOST_KAFKA_BOOTSTRAP"]) == b"ping"
    # Asking for Apache Kafka next does not reuse the Tansu process.
    again = up(_settings(), components=["kafka"], echo=lambda _m: None)
    assert again.started == ["kafka"] and again.env["LIVEHOST_KAFKA_FLAVOUR"] == "apache"


def _processes_under(root: Path) -> list[str]:
    """Live processes whose command line or working dir is under ``root`` (our components all are)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            cwd = str((proc / "cwd").readlink())
        except OSError:
            continue
        if (str(root) in cmd or cwd.startswith(str(root))) and state != "Z":
            found.append(f"{proc.name}: {cmd}")
    return found


def test_port_taken_names_component_and_log_tail(state: Path, listening_socket: int) -> None:
    with pytest.raises(StackError) as err:
        up(_settings(stack_kafka_port=listening_socket), components=["kafka"], echo=lambda _m: None)
    text = str(err.value)
    assert err.value.component == "kafka"
    assert text.startswith("kafka: ")
    assert f"kafka={listening_socket}" in text and "already in use" in text
    assert "last 30 lines of" in text and "Address already in use" in text  # the broker's own log line
    assert not stack_env_file().exists()


def test_failure_stops_what_this_call_started(state: Path, listening_socket: int) -> None:
    with pytest.raises(StackError) as err:
        up(_settings(stack_postgres_port=listening_socket), components=["kafka", "postgres"], echo=print)
    text = str(err.value)
    assert text.startswith("postgres: ") and "already in use" in text
    assert "could not bind" in text  # the postmaster's log line in the tail
    assert read_record(state / "kafka", "kafka") is None  # kafka was started by this call, then stopped
    assert _processes_under(state) == []


def test_missing_model_repository_is_reported(state: Path, tmp_path: Path) -> None:
    settings = _settings()
    settings.triton_model_repository = tmp_path / "nope"
    with pytest.raises(StackError, match="triton: model repository .*nope does not exist"):
        up(settings, components=["triton"], echo=lambda _m: None)


async def test_single_component_helpers(tmp_path: Path) -> None:
    with running_kafka(tmp_path) as bootstrap, running_postgres(tmp_path) as dsn:
        assert bootstrap.startswith("127.0.0.1:")
        assert await _kafka_roundtrip(bootstrap) == b"ping"
        assert dsn.startswith("postgresql://livehost:") and "@127.0.0.1:" in dsn and dsn.endswith("/livehost")
        assert await _select_one(dsn) == 1
    with running_triton(tmp_path, ECHO_REPO) as url:
        assert _echo(url) == [b"hello", b"live"]
    assert _processes_under(tmp_path) == []


async def test_postgres_requires_a_password(tmp_path: Path) -> None:
    """The embedded PostgreSQL authenticates every connection with scram-sha-256: no password, or a
    wrong one, is refused; the password the stack made (file mode 0600) is accepted."""
    import stat
    from urllib.parse import urlsplit

    with running_postgres(tmp_path) as dsn:
        url = urlsplit(dsn)
        no_password = f"postgresql://livehost@{url.hostname}:{url.port}/livehost"
        wrong = f"postgresql://livehost:wrong@{url.hostname}:{url.port}/livehost"
        superuser = f"postgresql://postgres@{url.hostname}:{url.port}/postgres"
        for bad in (no_password, wrong, superuser):
            with pytest.raises((asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError)):
                await _select_one(bad)
        assert await _select_one(dsn) == 1
        for pw_file in (tmp_path / "postgres").glob("*.password"):
            assert stat.S_IMODE(pw_file.stat().st_mode) == 0o600
        hba = next((tmp_path / "postgres" / "data").glob("pg_hba.conf")).read_text()
        rules = [line for line in hba.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        assert rules and all(line.split()[-1] == "scram-sha-256" for line in rules), rules
