"""Client of the ``text_understanding`` Triton model: embeddings and screening scores of viewer text
from the Triton every replica shares (``LIVEHOST_TRITON_URL``)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

MODEL = "text_understanding"


class UnderstandingClient:
    def __init__(self, url: str, timeout_s: float = 2.0):
        import tritonclient.grpc as grpcclient  # type: ignore[import-untyped]

        self._grpc = grpcclient
        self.client = grpcclient.InferenceServerClient(url=url)
        self.timeout_s = timeout_s

    def infer(self, texts: list[str]) -> tuple[np.ndarray, list[dict[str, float]]]:
        """(embeddings [n, 384], screening scores per text)."""
        data = np.array([t.encode("utf-8") for t in texts], dtype=np.object_)
        inp = self._grpc.InferInput("text", [len(texts)], "BYTES")
        inp.set_data_from_numpy(data)
        outputs = [self._grpc.InferRequestedOutput("embedding"), self._grpc.InferRequestedOutput("screening")]
        result: Any = self.client.infer(MODEL, [inp], outputs=outputs, client_timeout=self.timeout_s)
        vectors = result.as_numpy("embedding")
        scores = [json.loads(s.decode("utf-8") if isinstance(s, bytes) else s) for s in result.as_numpy("screening")]
        return vectors, scores

    def screen(self, texts: list[str]) -> list[dict[str, float]]:
        """Screening scores only (the model skips the encoder)."""
        data = np.array([t.encode("utf-8") for t in texts], dtype=np.object_)
        inp = self._grpc.InferInput("text", [len(texts)], "BYTES")
        inp.set_data_from_numpy(data)
        result: Any = self.client.infer(MODEL, [inp], outputs=[self._grpc.InferRequestedOutput("screening")],
                                        client_timeout=self.timeout_s)
        return [json.loads(s.decode("utf-8") if isinstance(s, bytes) else s) for s in result.as_numpy("screening")]

    def close(self) -> None:
        self.client.close()
