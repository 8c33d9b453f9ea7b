"""Prompt assembly as a service: Kafka (requests and tool results in, prompts out — or actions, with
LIVEHOST_PROMPT_CALLS_POLICY or LIVEHOST_PROMPT_RUNS_TURNS) and gRPC Render."""

from __future__ import annotations

from typing import Any

import grpc
from aiokafka import ConsumerRecord

from livehost.agent.prompt import context_json
from livehost.config import Settings, load_settings
from livehost.gen.livehost.prompt.v1 import prompt_pb2, prompt_pb2_grpc
from livehost.harness.runtime import provider_for
from livehost.kafka import ConsumerLoop, Producer
from livehost.security.parsing import loads_json
from livehost.service import ServiceRuntime
from livehost.topics import REQUESTS, TOOL_RESULTS, Topic
from services.policy import clients as policy_clients
from services.policy.handlers import PolicyHandler
from services.prompt import settings as service_settings
from services.prompt.clients import PostgresFacts
from services.prompt.handlers import PromptHandler
from services.tools import server as tools_server


class PromptServicer(prompt_pb2_grpc.PromptAssemblyServiceServicer):
    def __init__(self, holder: dict[str, PromptHandler]):
        self._holder = holder

    async def Render(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            state = loads_json(request.request_json, "request_json")
            if request.HasField("harness_version"):
                state["harness_version"] = request.harness_version
            rendered = await self._holder["handler"].render(state)
        except (ValueError, KeyError, TypeError) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"cannot render: {exc}")
        return prompt_pb2.RenderResponse(
            text=rendered.text, context_json=context_json(rendered.context),
            total_tokens=rendered.total_tokens,
            sections=[prompt_pb2.PromptSection(id=s.id, source=s.source, tokens=s.tokens, truncated=s.truncated)
                      for s in rendered.sections])


def build(settings: Settings | None = None) -> ServiceRuntime:
    settings = settings or load_settings()
    producer = Producer(settings)
    runtime = ServiceRuntime("prompt", settings, service_settings.grpc_port(settings), producer)
    holder: dict[str, Any] = {}
    db = runtime.database()

    # LIVEHOST_PROMPT_CALLS_POLICY: this step also runs the policy step (the same handler and Triton
    # clients as the policy service), so a turn costs one Kafka hop and one transaction, not two.
    # LIVEHOST_PROMPT_RUNS_TURNS: and the step hooks and tools too, turn after turn, until the action
    # that ends the request.
    calls_policy = settings.prompt_calls_policy or settings.prompt_runs_turns
    decider = PolicyHandler(policy_clients.generators(settings), settings.policy_model,
                            policy_clients.UNAVAILABLE) if calls_policy else None

    async def connect() -> None:
        if decider is not None:
            await policy_clients.wait_for_triton(settings)
        harnesses = await provider_for(settings, "prompt")
        tools = tools_server.make_handler(settings, db.pool, harnesses) if settings.prompt_runs_turns else None
        holder["handler"] = PromptHandler(harnesses, PostgresFacts(db.pool), decider, tools)

    async def on_record(topic: Topic, record: dict[str, Any], rec: ConsumerRecord) -> None:
        out_topic, out = await holder["handler"].next_record(record["state"])
        await producer.send(out_topic, out["state"]["room_id"], out)

    runtime.connect.append(connect)
    runtime.consumers.append(ConsumerLoop(settings, service_settings.GROUP_ID, [REQUESTS, TOOL_RESULTS],
                                          on_record, producer, transactional=service_settings.TRANSACTIONAL))
    runtime.servicers.append((prompt_pb2_grpc.add_PromptAssemblyServiceServicer_to_server, PromptServicer(holder)))
    return runtime
