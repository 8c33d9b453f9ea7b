"""Triton python-backend model: the deterministic reference policy (livehost.policy.reference).

Tensors of Triton's vLLM backend: text_input (here: the context JSON) -> text_output (one action JSON
object, or ReAct text for a "mode": "react" context) + finish_reason. Not decoupled: one response per
request, returned from execute. Batched (config.pbtxt): a request's tensors are [rows, 1], one policy
context per row, answered row by row; a row that fails answers finish_reason "error" with the reason
as its text, so one bad context never fails the other rows of its request.
"""

import json
import sys
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

# The venv's site-packages are visible when its bin dir is first on PATH; also find the repo root
# (the folder holding livehost/) above this file, for a checkout that is not pip-installed.
for _parent in Path(__file__).resolve().parents:
    if (_parent / "livehost" / "__init__.py").is_file():
        if str(_parent) not in sys.path:
            sys.path.insert(0, str(_parent))
        break

from livehost.policy.reference import respond  # noqa: E402


def _rows(request, name):  # type: ignore[no-untyped-def]
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return []
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in tensor.as_numpy().reshape(-1)]


def _answer(raw):  # type: ignore[no-untyped-def]
    """(text, finish_reason) for one row's context JSON."""
    try:
        context = json.loads(raw)
        if not isinstance(context, dict):
            raise ValueError("text_input must be a JSON object (the policy context)")
        # one JSON action; ReAct text for a "mode": "react" context (the ReAct baseline)
        return respond(context), "stop"
    except Exception as exc:  # noqa: BLE001 - reported to the caller of this row
        return f"policy_reference: {type(exc).__name__}: {exc}", "error"


def _response(answers):  # type: ignore[no-untyped-def]
    def column(values):  # type: ignore[no-untyped-def]
        return np.array([[v.encode("utf-8")] for v in values], dtype=np.object_).reshape(len(values), 1)

    return pb_utils.InferenceResponse(output_tensors=[
        pb_utils.Tensor("text_output", column([text for text, _ in answers])),
        pb_utils.Tensor("finish_reason", column([reason for _, reason in answers])),
    ])


class TritonPythonModel:
    def initialize(self, args):  # type: ignore[no-untyped-def]
        self.logger = pb_utils.Logger
        # load the understanding models (embeddings, screening classifier) before the first request
        from livehost.understanding import choice, embed, screening

        screening.model()
        if embed.available():
            embed.embed(["warm up"])
            choice.warm_up()  # the labelled intent examples and the needs' descriptions

    def execute(self, requests):  # type: ignore[no-untyped-def]
        responses = []
        for request in requests:
            try:
                rows = _rows(request, "text_input")
                if not rows:
                    raise ValueError("text_input is missing")
                responses.append(_response([_answer(raw) for raw in rows]))
            except Exception as exc:  # noqa: BLE001 - reported to the client as a Triton error
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"policy_reference: {exc}")))
        return responses
