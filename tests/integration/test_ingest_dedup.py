"""Ingest deduplicates a client_event_id durably (the proto's promise: accepted=false on the duplicate):
across a restart of the service, per room, within ``ingest_dedup_window_s``; only the first submission
reaches the room-events topic. Real broker and PostgreSQL, the service's own runtime on a free port."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from livehost import codec
from livehost.config import Settings
from livehost.gen.livehost.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from livehost.grpcutil import make_channel, wait_healthy
from livehost.service import run
from livehost.stack.testing import kafka_client
from livehost.topics import ROOM_EVENTS
from services.ingest.server import build

from .conftest import create_database

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@asynccontextmanager
async def ingest(settings: Settings) -> AsyncIterator[ingest_pb2_grpc.IngestServiceStub]:
    runtime = build(settings)
    stop = asyncio.Event()
    service = asyncio.create_task(run(runtime, stop))
    try:
        for _ in range(1200):
            if runtime.server is not None or service.done():
                break
            await asyncio.sleep(0.05)
        assert runtime.server is not None, "ingest did not start its gRPC server"
        await wait_healthy(runtime.server.target, timeout=60)
        async with make_channel(runtime.server.target, identity="producer") as channel:
            yield ingest_pb2_grpc.IngestServiceStub(channel)
    finally:
        stop.set()
        await asyncio.wait_for(service, 30)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def events_of(settings: Settings, room: str) -> list[str]:
    consumer = AIOKafkaConsumer(**kafka_client(settings.kafka_bootstrap), group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(ROOM_EVENTS.name, p) for p in range(ROOM_EVENTS.partitions)]
        consumer.assign(parts)
        await consumer.seek_to_beginning()
        ends = await consumer.end_offsets(parts)
        out: list[str] = []
        while True:
            for msgs in (await consumer.getmany(timeout_ms=200)).values():
                for m in msgs:
                    rec = codec.decode(ROOM_EVENTS.schema, m.value)
                    if rec["room_id"] == room:
                        out.append(rec["event_id"])
            positions = [await consumer.position(tp) for tp in parts]
            if all(pos >= ends[tp] for pos, tp in zip(positions, parts, strict=True)):
                return out
    finally:
        await consumer.stop()


async def test_duplicate_client_event_id_is_not_accepted_across_a_restart(kafka_bootstrap: str,
                                                                          pg_server: str) -> None:
    dsn = await create_database(pg_server)
    settings = Settings(kafka_bootstrap=kafka_bootstrap, postgres_dsn=dsn, ingest_grpc_port=0, metrics_port=0)
    room, other = f"room-{uuid.uuid4().hex[:6]}", f"room-{uuid.uuid4().hex[:6]}"

    def comment(room_id: str, cid: str) -> ingest_pb2.SubmitCommentRequest:
        return ingest_pb2.SubmitCommentRequest(room_id=room_id, user_id="u-1", text="is link 2 in stock?",
                                               client_event_id=cid)

    async with ingest(settings) as stub:
        first = await stub.SubmitComment(comment(room, "c-1"))
        again = await stub.SubmitComment(comment(room, "c-1"))
        assert first.accepted and first.event_id == "c-1"
        assert not again.accepted and again.event_id == "c-1"
        assert (again.partition, again.offset) == (first.partition, first.offset)  # the first result
        assert first.offset >= 0
        assert (await stub.SubmitComment(comment(other, "c-1"))).accepted  # per room
        assert (await stub.SubmitComment(ingest_pb2.SubmitCommentRequest(
            room_id=room, user_id="u-1", text="no id: never deduplicated"))).accepted
    async with ingest(settings) as stub:  # a restarted Ingest remembers
        retried = await stub.SubmitComment(comment(room, "c-1"))
        assert not retried.accepted and (retried.partition, retried.offset) == (first.partition, first.offset)
        assert (await stub.SubmitComment(comment(room, "c-2"))).accepted
    assert (await events_of(settings, room)).count("c-1") == 1
    short = settings.model_copy(update={"ingest_dedup_window_s": 0.5})
    await asyncio.sleep(0.6)
    async with ingest(short) as stub:  # outside the window the id is accepted again
        assert (await stub.SubmitComment(comment(room, "c-1"))).accepted
