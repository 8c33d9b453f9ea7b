"""Voice engine: reply text with TTS control tokens → avatar segments (WAV + timing + visemes).

Transport-free; the voice service wires it to Kafka/gRPC. Importing this package loads no model:
engines load lazily on first use (or :func:`warm_up`).
"""

from livehost.voice.chunking import ChunkPlan, plan_chunks
from livehost.voice.engines import (
    ENGINE_NAMES,
    Audio,
    EngineError,
    EspeakEngine,
    PiperEngine,
    TTSEngine,
    get_engine,
    warm_up,
)
from livehost.voice.session import concat_session, concat_sessions, session_path
from livehost.voice.synth import (
    TEXT_ENGINE,
    EngineFailure,
    ReplyStream,
    SynthesisResult,
    audio_ref_path,
    cancel_segment,
    read_wav,
    stream_reply,
    synthesize_reply,
)
from livehost.voice.tokens import Pause, TextPiece, parse_control_tokens

__all__ = [
    "ENGINE_NAMES",
    "Audio",
    "ChunkPlan",
    "EngineError",
    "EngineFailure",
    "EspeakEngine",
    "Pause",
    "PiperEngine",
    "ReplyStream",
    "SynthesisResult",
    "TEXT_ENGINE",
    "TTSEngine",
    "TextPiece",
    "audio_ref_path",
    "cancel_segment",
    "concat_session",
    "concat_sessions",
    "get_engine",
    "parse_control_tokens",
    "plan_chunks",
    "read_wav",
    "session_path",
    "stream_reply",
    "synthesize_reply",
    "warm_up",
]
