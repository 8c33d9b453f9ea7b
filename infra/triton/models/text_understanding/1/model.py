"""Triton python-backend model: embeddings and screening scores of viewer text.

text (BYTES [n]) -> embedding (FP32 [n, 384], unit vectors of the configured model: multilingual-e5-small
by default, all-MiniLM-L6-v2 with LIVEHOST_EMBEDDINGS=minilm) and screening
(BYTES [n], JSON: class -> posterior of the screening classifier, over the normalised text).
"""

import json
import sys
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

for _parent in Path(__file__).resolve().parents:
    if (_parent / "livehost" / "__init__.py").is_file():
        if str(_parent) not in sys.path:
            sys.path.insert(0, str(_parent))
        break

from livehost.understanding.embed import embed  # noqa: E402
from livehost.understanding.screening import model, screen  # noqa: E402


class TritonPythonModel:
    def initialize(self, args):  # type: ignore[no-untyped-def]
        embed(["warm up"])  # load the weights once, before the first request
        model()

    def execute(self, requests):  # type: ignore[no-untyped-def]
        responses = []
        for request in requests:
            try:
                raw = pb_utils.get_input_tensor_by_name(request, "text").as_numpy().reshape(-1)
                texts = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in raw]
                wanted = set(request.requested_output_names() or ("embedding", "screening"))
                # screening alone (the input hook's question) skips the encoder: well under a millisecond
                vectors = embed(texts) if texts and "embedding" in wanted else np.zeros((len(texts), 384),
                                                                                        dtype=np.float32)
                scores = [json.dumps(screen(t).scores).encode("utf-8") for t in texts]
                responses.append(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("embedding", vectors.astype(np.float32)),
                    pb_utils.Tensor("screening", np.array(scores, dtype=np.object_)),
                ]))
            except Exception as exc:  # noqa: BLE001 - reported to the client as a Triton error
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"text_understanding: {exc}")))
        return responses
