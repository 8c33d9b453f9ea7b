"""Reply synthesis with the REAL engines (piper + joe voice, espeak-ng via ctypes); no mocks.

The only fake is a deliberately broken engine object, to exercise the fallback code.
"""

from __future__ import annotations

import json
import threading
import wave
from pathlib import Path

import numpy as np
import pytest

from livehost.voice import (
    Audio,
    EngineError,
    audio_ref_path,
    cancel_segment,
    read_wav,
    stream_reply,
    synthesize_reply,
)
from livehost.voice.chunking import SKIP_EMPTY, SKIP_ONLY_TOKENS
from livehost.voice.tokens import PAUSE_SECONDS

ENGINES = ["piper", "espeak"]
SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "avatar_segment.avsc"
NEAR_ZERO = 100  # int16 amplitude
# engine padding kept around a pause (<= 30 ms leading + 120 ms trailing, plus quiet onsets)
PAUSE_SLACK_S = 0.25


def _reply(text: str, tmp_path: Path, engine: str = "piper", **kw):
    return synthesize_reply(text, engine=engine, out_dir=tmp_path, request_id="req-1", room_id="room-9", **kw)


def _audio(result) -> tuple[np.ndarray, int]:
    parts, rate = [], 0
    for seg in result.segments:
        x, sr = read_wav(seg["audio_ref"])
        parts.append(x)
        rate = sr
    return np.concatenate(parts), rate


def _longest_silence_s(x: np.ndarray, sr: int) -> float:
    quiet = np.abs(x.astype(np.int32)) <= NEAR_ZERO
    # run lengths of True
    padded = np.concatenate([[False], quiet, [False]])
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    runs = edges[1::2] - edges[0::2]
    return float(runs.max()) / sr if len(runs) else 0.0


@pytest.mark.parametrize("engine", ENGINES)
def test_valid_wav_segments(engine, tmp_path):
    res = _reply("Welcome to the live room! Link three is a silk scarf, twenty dollars.", tmp_path, engine)
    assert res.skipped_reason is None
    assert res.engine_used == engine and not res.fallback_used
    assert len(res.segments) == 2
    prev_end = 0.0
    for i, seg in enumerate(res.segments):
        assert seg["seq"] == i and seg["engine"] == engine
        assert seg["audio_ref"].startswith("file://")
        path = audio_ref_path(seg["audio_ref"])
        assert path.parent == tmp_path.resolve()
        with wave.open(str(path), "rb") as w:
            assert w.getnchannels() == 1 and w.getsampwidth() == 2
            assert w.getframerate() == seg["sample_rate"] == 22050
            frames = w.getnframes()
            assert frames > 0
            x = np.frombuffer(w.readframes(frames), dtype=np.int16)
            assert np.abs(x).max() > 1000  # real speech, not silence
        dur_ms = frames * 1000.0 / seg["sample_rate"]
        assert seg["start_ms"] == pytest.approx(prev_end, abs=0.01)
        assert seg["end_ms"] - seg["start_ms"] == pytest.approx(dur_ms, abs=0.01)
        prev_end = seg["end_ms"]
    assert [s["final"] for s in res.segments] == [False, True]


def test_segments_match_avro_schema(tmp_path):
    import fastavro
    schema = fastavro.parse_schema(json.loads(SCHEMA.read_text()))
    res = _reply("Hi there. <sil_L2> Grab the coupon now!", tmp_path, "espeak", start_offset_ms=250)
    assert res.segments[0]["start_ms"] == 250
    for seg in res.segments:
        assert fastavro.validation.validate(seg, schema, raise_errors=True)
    assert fastavro.validation.validate(cancel_segment("req-1", "room-9", 2, 900.0), schema)


@pytest.mark.parametrize("engine", ENGINES)
def test_pause_token_renders_measurable_silence(engine, tmp_path):
    text = "Welcome to the live room, everyone. {} Today we have a great deal for you."
    measured = {}
    for level in ("L2", "L4", "L6"):
        res = _reply(text.format(f"<sil_{level}>"), tmp_path / level, engine)
        x, sr = _audio(res)
        measured[level] = _longest_silence_s(x, sr)
        expected = PAUSE_SECONDS[f"sil_{level}"]
        assert expected <= measured[level] <= expected + PAUSE_SLACK_S, (level, measured[level])
    baseline = _longest_silence_s(*_audio(_reply(text.format(""), tmp_path / "none", engine)))
    assert baseline < PAUSE_SECONDS["sil_L2"]
    assert measured["L2"] < measured["L4"] < measured["L6"]
    assert measured["L6"] - measured["L2"] == pytest.approx(1.25, abs=0.15)


@pytest.mark.parametrize("engine", ENGINES)
def test_speed_tokens_change_duration(engine, tmp_path):
    text = "This cashmere scarf is soft, warm and on sale today."
    dur = {}
    for tok in ("[speed_e2]", "", "[speed_d2]"):
        res = _reply(tok + text, tmp_path / (tok.strip("[]") or "normal"), engine)
        dur[tok] = res.segments[-1]["end_ms"]
        assert res.segments[0]["text"] == text
    assert dur["[speed_e2]"] < dur[""] < dur["[speed_d2]"]
    assert dur["[speed_d2]"] > 1.2 * dur["[speed_e2]"]


@pytest.mark.parametrize("engine", ENGINES)
def test_visemes_monotonic_and_within_audio(engine, tmp_path):
    res = _reply("Hello there! <sil_L3> [speed_e2]This jacket is fifty percent off, just today.", tmp_path, engine)
    valid = {"sil", "PP", "FF", "TH", "DD", "kk", "CH", "SS", "nn", "RR", "aa", "E", "ih", "oh", "ou"}
    for seg in res.segments:
        vis = seg["visemes"]
        dur_ms = seg["end_ms"] - seg["start_ms"]
        assert len(vis) >= 5
        times = [v["t_ms"] for v in vis]
        assert times == sorted(times) and len(set(times)) == len(times)
        assert times[0] == 0.0 and times[-1] <= dur_ms
        assert {v["viseme"] for v in vis} <= valid
        assert vis[-1]["viseme"] == "sil"
        assert all(a["viseme"] != b["viseme"] for a, b in zip(vis, vis[1:], strict=False))
        # lips close for the /p/ of "percent" / mouth opens for vowels
    all_v = {v["viseme"] for s in res.segments for v in s["visemes"]}
    assert {"PP", "aa", "SS", "sil"} <= all_v


@pytest.mark.parametrize("engine", ENGINES)
def test_skip_empty_and_token_only(engine, tmp_path):
    for text, reason in [("", SKIP_EMPTY), ("   ", SKIP_EMPTY), ("<sil_L2>[speed_e2]<sil_L4>", SKIP_ONLY_TOKENS)]:
        res = _reply(text, tmp_path, engine)
        assert res.skipped_reason == reason
        assert res.segments == [] and res.engine_used is None
        assert res.warnings
    assert not any(tmp_path.glob("*.wav"))


def test_unknown_tokens_stripped_never_spoken(tmp_path):
    res = _reply("Buy <foo>now [bar_x1]please! <sil_L2>Thanks.", tmp_path, "espeak")
    texts = [s["text"] for s in res.segments]
    assert texts == ["Buy now please!", "Thanks."]
    assert any("<foo>" in w for w in res.warnings) and any("[bar_x1]" in w for w in res.warnings)
    # never spoken: the audio has the same length as the clean text's audio
    clean = _reply("Buy now please! <sil_L2>Thanks.", tmp_path / "clean", "espeak")
    assert res.segments[-1]["end_ms"] == pytest.approx(clean.segments[-1]["end_ms"], abs=1.0)


def test_emoji_stripped_and_reported(tmp_path):
    res = _reply("Great deal 😀🎉 today!", tmp_path, "espeak")
    assert res.segments[0]["text"] == "Great deal today!"
    assert any("unsupported characters" in w for w in res.warnings)


class _BrokenEngine:
    name = "broken"

    def __init__(self) -> None:
        self.calls = 0

    def synthesize(self, text: str, rate: float = 1.0) -> Audio:
        self.calls += 1
        raise EngineError("model file corrupted")


def test_fallback_to_other_engine_when_primary_raises(tmp_path):
    broken = _BrokenEngine()
    res = _reply("First sentence here. Second sentence here.", tmp_path, engine=broken, fallback="espeak")  # type: ignore[arg-type]
    assert res.fallback_used
    assert res.engine_used == "espeak"
    assert [s["engine"] for s in res.segments] == ["espeak", "espeak"]
    assert broken.calls == 1  # sticky: the rest of the reply stays on the fallback
    assert any("broken" in w and "model file corrupted" in w and "espeak" in w for w in res.warnings)
    for seg in res.segments:
        x, sr = read_wav(seg["audio_ref"])
        assert len(x) > 0 and sr == 22050


def test_fallback_auto_from_piper_engine_object(tmp_path):
    class BrokenPiper(_BrokenEngine):
        name = "piper"

    res = _reply("Hello.", tmp_path, engine=BrokenPiper())  # type: ignore[arg-type]
    assert res.engine_used == "espeak" and res.fallback_used


def test_all_engines_fail_gives_text_only_segments(tmp_path):
    res = _reply("Hello there. Bye.", tmp_path, engine=_BrokenEngine(), fallback=_BrokenEngine())  # type: ignore[arg-type]
    assert res.engine_used == "text"
    assert [s["audio_ref"] for s in res.segments] == [None, None]
    assert all(s["end_ms"] > s["start_ms"] for s in res.segments)
    assert any("text-only" in w for w in res.warnings)


def test_very_long_text_bounded(tmp_path):
    text = " ".join(f"Item {i} is in stock." for i in range(2000))  # ~45k chars
    res = _reply(text, tmp_path, "espeak", max_total_chars=600)
    spoken = " ".join(s["text"] for s in res.segments)
    assert len(spoken) <= 600
    assert spoken.endswith(".")
    assert any("truncated" in w for w in res.warnings)
    assert res.segments[-1]["final"]
    # default bound too (no kwargs): the plan never exceeds DEFAULT_MAX_TOTAL_CHARS
    from livehost.voice.chunking import DEFAULT_MAX_TOTAL_CHARS, plan_chunks

    assert sum(len(c.text) + 1 for c in plan_chunks(text).chunks) <= DEFAULT_MAX_TOTAL_CHARS + 1


def test_stream_yields_first_segment_before_rest_and_cancels(tmp_path):
    stop = threading.Event()
    stream = stream_reply(
        "One. Two. Three. Four.", out_dir=tmp_path, request_id="r/9", room_id="x", engine="espeak", cancel=stop
    )
    assert stream.skipped_reason is None and stream.chunk_count == 4
    it = iter(stream)
    first = next(it)
    assert first["seq"] == 0 and first["text"] == "One." and not first["final"]
    assert len(list(tmp_path.glob("*.wav"))) == 1  # nothing synthesized ahead
    stop.set()
    assert list(it) == []
    assert stream.cancelled and stream.result.cancelled
    assert len(stream.result.segments) == 1


def test_piper_phonemes_cover_audio():
    from livehost.voice import get_engine

    audio = get_engine("piper").synthesize("Coupons stack with the flash sale.", 1.0)
    assert audio.sample_rate == 22050 and audio.samples.dtype == np.int16
    starts = [p[1] for p in audio.phonemes]
    assert starts == sorted(starts)
    assert audio.phonemes[-1][2] == pytest.approx(audio.duration_s, abs=0.02)
