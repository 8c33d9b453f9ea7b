"""Policy as a service: Kafka (prompts in, actions out) and gRPC Decide / ListModels."""

from __future__ import annotations

import json
import time
from typing import Any

import grpc
from aiokafka import ConsumerRecord

from livehost.config import Settings, load_settings
from livehost.gen.livehost.policy.v1 import policy_pb2, policy_pb2_grpc
from livehost.kafka import ConsumerLoop, Producer
from livehost.policy.actions import parse_action
from livehost.security.parsing import loads_json
from livehost.service import ServiceRuntime
from livehost.topics import ACTIONS, PROMPTS, Topic
from services.policy import clients
from services.policy import settings as service_settings
from services.policy.handlers import PolicyHandler


class PolicyServicer(policy_pb2_grpc.PolicyServiceServicer):
    def __init__(self, handler: PolicyHandler, default_model: str):
        self._handler = handler
        self._default = default_model

    async def Decide(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            name, gen = self._handler.generator(request.model if request.HasField("model") else None)
            sampling = loads_json(request.sampling_json or "{}", "sampling_json")
            if request.context_json:  # a JSON object (proto): held to the same limits before a model parses it
                loads_json(request.context_json, "context_json")
        except (KeyError, ValueError) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        started = time.perf_counter()
        try:
            result = await gen.generate(request.prompt_text, request.context_json, sampling)
        except clients.UNAVAILABLE as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"policy model unavailable: {exc}")
        parsed = parse_action(result.text)
        return policy_pb2.DecideResponse(
            raw_output=result.text, action_json=json.dumps(parsed.to_action()), valid=parsed.valid,
            error=parsed.error or "", model=name, latency_ms=(time.perf_counter() - started) * 1000)

    async def ListModels(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return policy_pb2.ListModelsResponse(models=[
            policy_pb2.ModelInfo(name=name, ready=True, is_default=name == self._default)
            for name in self._handler.models()])


def build(settings: Settings | None = None) -> ServiceRuntime:
    settings = settings or load_settings()
    producer = Producer(settings)
    runtime = ServiceRuntime("policy", settings, service_settings.grpc_port(settings), producer)
    generators = clients.generators(settings)
    handler = PolicyHandler(generators, settings.policy_model, clients.UNAVAILABLE)

    async def connect() -> None:
        await clients.wait_for_triton(settings)

    async def on_prompt(topic: Topic, record: dict[str, Any], rec: ConsumerRecord) -> None:
        action = await handler.act(record)
        await producer.send(ACTIONS, action["state"]["room_id"], action)

    runtime.connect.append(connect)
    runtime.consumers.append(ConsumerLoop(settings, service_settings.GROUP_ID, [PROMPTS], on_prompt, producer,
                                          transactional=service_settings.TRANSACTIONAL,
                                          # idle while the prompt step runs this step itself: poll rarely
                                          fetch_max_wait_ms=None if settings.policy_step_on_kafka
                                          else settings.kafka_idle_fetch_max_wait_ms))
    runtime.servicers.append((policy_pb2_grpc.add_PolicyServiceServicer_to_server,
                              PolicyServicer(handler, settings.policy_model)))
    return runtime
