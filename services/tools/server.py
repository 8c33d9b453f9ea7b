"""Tool execution as a service: Kafka (tool calls in, results out) and gRPC Execute / ListTools."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import grpc
from aiokafka import ConsumerRecord

from livehost.agent.sandbox import PostgresFaults
from livehost.commerce.drills import LiveDrills
from livehost.commerce.executor import ToolExecutor
from livehost.commerce.store import CommerceStore
from livehost.config import Settings, load_settings
from livehost.gen.livehost.tools.v1 import tools_pb2, tools_pb2_grpc
from livehost.harness.provider import HarnessProvider
from livehost.harness.runtime import provider_for
from livehost.kafka import ConsumerLoop, Producer
from livehost.security import pki_dir
from livehost.security.attest import Verifier
from livehost.security.parsing import loads_json
from livehost.service import ServiceRuntime
from livehost.topics import TOOL_CALLS, TOOL_RESULTS, Topic
from services.tools import settings as service_settings
from services.tools.handlers import ToolsHandler


class ToolsServicer(tools_pb2_grpc.ToolExecutionServiceServicer):
    def __init__(self, holder: dict[str, Any]):
        self._holder = holder

    async def Execute(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            arguments = loads_json(request.arguments_json or "{}", "arguments_json")
            if not isinstance(arguments, dict):
                raise ValueError("arguments_json must be a JSON object")
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        try:
            outcome = await self._holder["handler"].execute(
                request.harness_version, request.tool, arguments, request.room_id, request.user_id,
                request.request_id, request.idempotency_key if request.HasField("idempotency_key") else None)
        except KeyError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        return tools_pb2.ExecuteResponse(ok=outcome.ok, result_json=json.dumps(outcome.result, default=str),
                                         error_code=outcome.error_code or "",
                                         error_message=outcome.error_message or "",
                                         duration_ms=outcome.duration_ms)

    async def ListTools(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            harness = await self._holder["harnesses"].get(request.harness_version)
        except KeyError as exc:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        return tools_pb2.ListToolsResponse(harness_version=request.harness_version, tools=[
            tools_pb2.ToolInfo(name=t.name, description=t.description,
                               arguments_schema_json=json.dumps(t.parameters), side_effecting=t.side_effect)
            for t in harness.tools])


def make_handler(settings: Settings, pool: asyncpg.Pool, harnesses: HarnessProvider) -> ToolsHandler:
    """The tools step as this service runs it (and the prompt service, with LIVEHOST_PROMPT_RUNS_TURNS):
    the commerce store, sandbox faults, live drills, and attestation checks against the LiveHost CA."""
    return ToolsHandler(harnesses, ToolExecutor(CommerceStore(pool)), PostgresFaults(pool),
                        verifier=Verifier.from_pki(pki_dir(settings), settings.grpc_roles),
                        drills=LiveDrills(pool, settings.tool_drill_refresh_s))


def build(settings: Settings | None = None) -> ServiceRuntime:
    settings = settings or load_settings()
    producer = Producer(settings)
    runtime = ServiceRuntime("tools", settings, service_settings.grpc_port(settings), producer)
    holder: dict[str, Any] = {}
    db = runtime.database()

    async def connect() -> None:
        holder["harnesses"] = await provider_for(settings, "tools")
        holder["handler"] = make_handler(settings, db.pool, holder["harnesses"])

    async def on_call(topic: Topic, record: dict[str, Any], rec: ConsumerRecord) -> None:
        result = await holder["handler"].on_call(record)
        await producer.send(TOOL_RESULTS, result["state"]["room_id"], result)

    runtime.connect.append(connect)
    runtime.consumers.append(ConsumerLoop(settings, service_settings.GROUP_ID, [TOOL_CALLS], on_call, producer,
                                          transactional=service_settings.TRANSACTIONAL,
                                          # idle while the prompt step runs this step itself: poll rarely
                                          fetch_max_wait_ms=None if settings.tools_step_on_kafka
                                          else settings.kafka_idle_fetch_max_wait_ms))
    runtime.servicers.append((tools_pb2_grpc.add_ToolExecutionServiceServicer_to_server, ToolsServicer(holder)))
    return runtime
