"""A comment published to the broker comes out as speech for the avatar and a stored trajectory."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
import grpc
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from livehost import codec
from livehost.config import Settings
from livehost.gen.livehost.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from livehost.grpcutil import make_channel
from livehost.harness.loader import load
from livehost.kafka import Producer, now_ms
from livehost.stack import kafka
from livehost.stack.process import Running
from livehost.stack.testing import kafka_client
from livehost.topics import ALL_TOPICS, AVATAR_SEGMENTS, DEAD_LETTER, REPLIES, ROOM_EVENTS, Topic
from tests.e2e.conftest import System

pytestmark = pytest.mark.e2e


async def wait_for(system: System, topics: list[Topic], match: Callable[[Topic, dict[str, Any]], bool],
                   timeout: float = 30.0) -> dict[str, Any] | None:
    """The first record on any of the topics that matches, or None after the timeout."""
    consumer = AIOKafkaConsumer(*[t.name for t in topics], **kafka_client(system.settings.kafka_bootstrap),
                                group_id=f"test-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest",
                                fetch_max_wait_ms=10)
    await consumer.start()
    by_name = {t.name: t for t in topics}
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for rec in records:
                    topic = by_name[rec.topic]
                    try:
                        value = codec.decode(topic.schema, rec.value)
                    except codec.DecodeError:
                        continue
                    if match(topic, value):
                        return value
        return None
    finally:
        await consumer.stop()


async def publish_comment(system: System, room: str, user: str, text: str) -> str:
    event_id = f"e2e-{uuid.uuid4().hex[:12]}"
    producer = Producer(system.settings)
    await producer.start()
    try:
        await producer.send(ROOM_EVENTS, room, {
            "event_id": event_id, "room_id": room, "type": "comment", "ts_ms": now_ms(), "user_id": user,
            "text": text, "link_id": None, "campaign_json": None, "viewer_count": None})
    finally:
        await producer.stop()
    return event_id


def has_event(event_id: str) -> Callable[[Topic, dict[str, Any]], bool]:
    def match(topic: Topic, value: dict[str, Any]) -> bool:
        return any(event_id in s["data_json"] for s in value["state"]["steps"] if s["kind"] == "input")
    return match


async def reply_for(system: System, event_id: str, timeout: float = 30.0) -> dict[str, Any] | None:
    return await wait_for(system, [REPLIES], has_event(event_id), timeout)


async def test_comment_to_avatar_segments_and_trajectory(system: System) -> None:
    event_id = await publish_comment(system, "room-a", "u-100", "how much is link 3?")
    reply = await reply_for(system, event_id)
    assert reply is not None, "no terminal outcome for the comment"
    assert reply["outcome"] == "reply", reply
    assert "299" in reply["text"]
    request_id = reply["state"]["request_id"]
    segment = await wait_for(system, [AVATAR_SEGMENTS], lambda t, v: v["request_id"] == request_id)
    assert segment is not None, "the reply never reached the avatar-segments topic"
    assert segment["text"] and segment["audio_ref"], segment
    conn = await asyncpg.connect(system.settings.postgres_dsn)
    try:
        row = None
        for _ in range(50):
            row = await conn.fetchrow("SELECT harness_version, outcome, steps FROM trajectories WHERE request_id=$1",
                                      request_id)
            if row:
                break
            await asyncio.sleep(0.2)
    finally:
        await conn.close()
    assert row is not None, "no trajectory row in PostgreSQL"
    assert row["harness_version"] == load(system.settings.harness_path).version()
    assert row["outcome"] == "reply"


async def test_ingest_grpc_validates_and_publishes(system: System) -> None:
    target = system.supervisor.procs["ingest"].grpc_target
    assert target
    too_long = "x" * (system.settings.max_comment_chars + 1)
    marker = uuid.uuid4().hex
    async with make_channel(target, identity="producer") as channel:
        stub = ingest_pb2_grpc.IngestServiceStub(channel)
        for text in ("", "   ", too_long + marker):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.SubmitComment(ingest_pb2.SubmitCommentRequest(room_id="room-a", user_id="u-1", text=text))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert err.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.SubmitComment(ingest_pb2.SubmitCommentRequest(room_id="", user_id="u-1", text="hi"))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        ok = await stub.SubmitComment(ingest_pb2.SubmitCommentRequest(
            room_id="room-a", user_id="u-101", text=f"what colors does link 3 come in? {marker}"))
    assert ok.accepted
    # The valid comment was published; the oversize one (same marker) never was.
    seen = await wait_for(system, [ROOM_EVENTS], lambda t, v: marker in (v.get("text") or ""))
    assert seen is not None and seen["event_id"] == ok.event_id
    reply = await reply_for(system, ok.event_id)
    assert reply is not None and reply["outcome"] == "reply"
    assert any(c in reply["text"].lower() for c in ("black", "navy", "red"))


async def test_undecodable_record_goes_to_dead_letter_and_processing_continues(system: System) -> None:
    producer = AIOKafkaProducer(**kafka_client(system.settings.kafka_bootstrap))
    await producer.start()
    garbage = b"\x00not-avro-" + uuid.uuid4().hex.encode()
    try:
        meta = await producer.send_and_wait(ROOM_EVENTS.name, key=b"room-b", value=garbage)
    finally:
        await producer.stop()
    dead = await wait_for(system, [DEAD_LETTER], lambda t, v: v["value"] == garbage)
    assert dead is not None, "the malformed record was not dead-lettered"
    assert dead["source_topic"] == ROOM_EVENTS.name
    assert (dead["partition"], dead["offset"]) == (meta.partition, meta.offset)
    assert "decode" in dead["error"]
    event_id = await publish_comment(system, "room-b", "u-102", "how much is the kettle on link 2?")
    reply = await reply_for(system, event_id)
    assert reply is not None and reply["outcome"] == "reply" and "129" in reply["text"]


async def test_abusive_comment_gets_no_reply_but_a_trajectory(system: System) -> None:
    event_id = await publish_comment(system, "room-b", "u-103", "you are an idiot")
    reply = await reply_for(system, event_id)
    assert reply is not None
    assert reply["outcome"] == "rejected" and reply["text"] is None
    assert "abus" in (reply["reason"] or "")


def policy_step(settings: Settings) -> str:
    """The service whose Kafka step asks the policy model (livehost.config: where a request's turns run)."""
    return "prompt" if settings.prompt_runs_turns or settings.prompt_calls_policy else "policy"


def on_the_request_path(settings: Settings, service: str) -> bool:
    """Whether a request needs this service's Kafka step to reach its outcome."""
    if service in ("hooks", "prompt"):
        return True
    if service == "policy":
        return policy_step(settings) == "policy"
    return service == "tools" and not settings.prompt_runs_turns


@pytest.mark.parametrize("service", ["tools", "policy", "prompt", "hooks", "trajectories", "voice"])
async def test_nothing_lost_while_a_service_is_down(system: System, service: str) -> None:
    """With a service on the request path stopped the request cannot complete; restarted, it completes
    (at-least-once). Without one off the path (downstream of the reply, or a step the prompt service
    runs in process by default) the reply comes anyway."""
    sup = system.supervisor
    sup.stop((service,))
    try:
        event_id = await publish_comment(system, "room-a", f"u-{service}", "how many jackets are left on link 3?")
        late = await reply_for(system, event_id, timeout=4.0)
        if on_the_request_path(system.settings, service):
            assert late is None, f"a reply was produced while {service} was down"
        else:
            # Downstream of the reply the trajectory / speech waits for the service; a step the prompt
            # service runs in process does not need it at all.
            assert late is not None, f"no reply while {service}, which is not on the request path, was down"
    finally:
        sup.services = (service,)
        sup.start()
        sup.wait_ready(timeout=120)
    reply = await reply_for(system, event_id, timeout=45.0)
    assert reply is not None, f"the request was lost while {service} was down"
    # A restart can outlast the request's time budget: then the request is cancelled as stale (and
    # recorded), which is the product's rule — stale work is dropped, never queued forever.
    assert reply["outcome"] == "reply" or (reply["outcome"] == "cancelled" and "stale" in reply["reason"]), reply
    request_id = reply["state"]["request_id"]
    if service == "voice" and reply["outcome"] == "reply":
        assert await wait_for(system, [AVATAR_SEGMENTS], lambda t, v: v["request_id"] == request_id, 45.0)
    if service == "trajectories":
        conn = await asyncpg.connect(system.settings.postgres_dsn)
        try:
            for _ in range(100):
                if await conn.fetchval("SELECT count(*) FROM trajectories WHERE request_id=$1", request_id):
                    break
                await asyncio.sleep(0.3)
            assert await conn.fetchval("SELECT count(*) FROM trajectories WHERE request_id=$1", request_id) == 1
        finally:
            await conn.close()


def test_kcat_lists_declared_topics_and_reads_a_reply(system: System, kafka_broker: Running) -> None:
    """Debian's kcat (librdkafka), a client independent of aiokafka, sees every declared topic with its
    partition count and consumes an Avro record from agent.replies that decodes with our schemas.

    kcat authenticates with a certificate from the installation's CA on the broker's mutual-TLS listener:
    Debian's librdkafka 2.0.2 fails SCRAM against Kafka 4 ("invalid credentials" with the right password,
    where librdkafka 2.16 and aiokafka succeed). Without a certificate it gets nothing."""
    import json
    import shutil
    import subprocess

    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (`make install` installs Debian's kcat)"
    tls = kafka.tls_client_security(kafka_broker, "operator")
    bootstrap = tls["LIVEHOST_KAFKA_BOOTSTRAP"]
    auth = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={tls['LIVEHOST_KAFKA_SSL_CAFILE']}",
            "-X", f"ssl.certificate.location={tls['LIVEHOST_KAFKA_SSL_CERTFILE']}",
            "-X", f"ssl.key.location={tls['LIVEHOST_KAFKA_SSL_KEYFILE']}"]
    listing = subprocess.run([kcat, "-b", bootstrap, *auth, "-L", "-J"], capture_output=True, timeout=60)
    assert listing.returncode == 0, listing.stderr.decode(errors="replace")[-2000:]
    metadata = {t["topic"]: len(t["partitions"]) for t in json.loads(listing.stdout)["topics"]}
    for topic in ALL_TOPICS:
        assert metadata.get(topic.name) == topic.partitions, f"{topic.name}: kcat sees {metadata.get(topic.name)}"

    # Some reply exists once the other e2e tests ran; make sure of it without depending on order.
    asyncio.run(_ensure_a_reply(system))
    out = subprocess.run([kcat, "-b", bootstrap, *auth, "-C", "-t", REPLIES.name, "-o", "beginning",
                          "-c", "1", "-e", "-q", "-f", "%h\x1f%s"], capture_output=True, timeout=60, check=True)
    headers, _, value = out.stdout.partition(b"\x1f")
    assert f"{codec.SCHEMA_HEADER}={REPLIES.schema}".encode() in headers
    reply = codec.decode(REPLIES.schema, value)
    assert reply["state"]["request_id"] and reply["outcome"]
    # Without a client certificate (TLS only) the listener refuses.
    anonymous = subprocess.run([kcat, "-b", bootstrap, "-X", "security.protocol=ssl",
                                "-X", f"ssl.ca.location={tls['LIVEHOST_KAFKA_SSL_CAFILE']}", "-L", "-m", "5"],
                               capture_output=True, timeout=60)
    assert anonymous.returncode != 0


async def _ensure_a_reply(system: System) -> None:
    room = "room-a"
    await publish_comment(system, room, "kcat-viewer", "how much is this one?")
    found = await wait_for(system, [REPLIES], lambda _t, r: r["state"]["room_id"] == room, timeout=60)
    assert found is not None, "no reply on agent.replies"


def _metric(url: str, name: str, **labels: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(url, timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_services_export_prometheus_metrics(system: System) -> None:
    event_id = await publish_comment(system, "room-a", "u-metrics", "how much is link 3?")
    assert await reply_for(system, event_id) is not None
    procs = system.supervisor.procs
    assert _metric(procs["hooks"].metrics_url, "livehost_request_outcomes_total", outcome="reply") >= 1
    assert _metric(procs["hooks"].metrics_url, "livehost_hook_verdicts_total", verdict="pass") >= 1
    assert _metric(procs["prompt"].metrics_url, "livehost_records_total", group="livehost-prompt", result="ok") >= 1
    step = policy_step(system.settings)  # the policy model is asked from this service's Kafka step
    assert _metric(procs[step].metrics_url, "livehost_record_handle_seconds_count", group=f"livehost-{step}") >= 1


async def test_room_config_switches_a_room_to_the_react_baseline(system: System) -> None:
    target = system.supervisor.procs["ingest"].grpc_target
    assert target
    async with make_channel(target, identity="operator") as channel:  # agent switching needs operator
        stub = ingest_pb2_grpc.IngestServiceStub(channel)

        async def configure(policy: str) -> None:
            await stub.SubmitRoomEvent(ingest_pb2.SubmitRoomEventRequest(
                room_id="room-b", room_config=ingest_pb2.RoomConfig(policy=policy)))

        await configure("react:policy_reference")
        try:
            event_id = await publish_comment(system, "room-b", "u-react", "how much is the kettle on link 2?")
            reply = await reply_for(system, event_id)
        finally:
            await configure("")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await configure("react:../../etc")
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reply is not None and reply["outcome"] == "reply", reply
    assert reply["state"]["policy"] == "react:policy_reference" and not reply["state"]["loaded_skills"]
    assert "129" in reply["text"]
