"""The whole system for end-to-end tests: real Apache Kafka (the session's broker, fresh topics), PostgreSQL
and Triton, every service as a process."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from livehost.commerce.store import DEMO_CATALOG_PATH, CommerceStore
from livehost.config import Settings
from livehost.db import connect_pool, migrate
from livehost.demo.runner import open_rooms
from livehost.kafka import Producer, ensure_topics
from livehost.stack import kafka
from livehost.stack.process import Running
from livehost.stack.testing import reset_topics, running_postgres, running_triton
from livehost.supervisor import Supervisor


@dataclass
class System:
    settings: Settings
    env: dict[str, str]
    supervisor: Supervisor
    state_dir: Path


async def _prepare(settings: Settings) -> None:
    pool = await connect_pool(settings.postgres_dsn, attempts=10)
    try:
        await migrate(pool)
        await CommerceStore(pool).load_demo_catalog()
    finally:
        await pool.close()
    await ensure_topics(settings)
    producer = Producer(settings)
    await producer.start()
    try:
        await open_rooms(producer, json.loads(DEMO_CATALOG_PATH.read_text())["rooms"])
    finally:
        await producer.stop()


@pytest.fixture(scope="session")
def system(tmp_path_factory: pytest.TempPathFactory, kafka_broker: Running) -> Iterator[System]:
    root = tmp_path_factory.mktemp("e2e")
    repo = Path(__file__).resolve().parents[2]
    bootstrap = kafka.bootstrap(kafka_broker)
    reset_topics(bootstrap)
    with running_postgres(root) as dsn, \
            running_triton(root, repo / "infra" / "triton" / "models") as triton_url:
        env = {"LIVEHOST_KAFKA_BOOTSTRAP": bootstrap, "LIVEHOST_POSTGRES_DSN": dsn,
               "LIVEHOST_TRITON_URL": triton_url, "LIVEHOST_STATE_DIR": str(root / "state"),
               "LIVEHOST_VOICE_ENGINE": "espeak", "LIVEHOST_INGEST_GRPC_PORT": "0",
               "LIVEHOST_PROMPT_GRPC_PORT": "0", "LIVEHOST_POLICY_GRPC_PORT": "0",
               "LIVEHOST_TOOLS_GRPC_PORT": "0", "LIVEHOST_VOICE_GRPC_PORT": "0",
               "LIVEHOST_HARNESS_GRPC_PORT": "0"}
        settings = Settings(**{k.removeprefix("LIVEHOST_").lower(): v for k, v in env.items()
                               if k != "LIVEHOST_STATE_DIR"})
        asyncio.run(_prepare(settings))
        old = dict(os.environ)
        os.environ.update(env)
        sup = Supervisor(settings, root / "logs", env)
        try:
            sup.start()
            sup.wait_ready(timeout=120)
            yield System(settings, env, sup, root / "state")
        finally:
            sup.stop()
            os.environ.clear()
            os.environ.update(old)
