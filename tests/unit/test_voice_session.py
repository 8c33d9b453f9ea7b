"""One WAV per room for a session: real espeak segments concatenated, cancels cut, gaps between requests."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import pytest

from livehost.voice import cancel_segment, concat_session, concat_sessions, read_wav, synthesize_reply


def _segments(tmp_path: Path, request_id: str, room: str, text: str) -> list[dict]:
    return synthesize_reply(text, engine="espeak", out_dir=tmp_path / room, request_id=request_id,
                            room_id=room).segments


def _frames(segs: list[dict]) -> int:
    return sum(len(read_wav(s["audio_ref"])[0]) for s in segs)


def test_room_session_is_its_segments_back_to_back_with_gaps(tmp_path: Path) -> None:
    a = _segments(tmp_path, "r1", "room-a", "Welcome to the show. Link three is the scarf.")
    b = _segments(tmp_path, "r2", "room-b", "Hello room B.")
    c = _segments(tmp_path, "r3", "room-a", "Thanks for watching!")
    text_only = {**c[0], "seq": 1, "audio_ref": None, "engine": "text", "final": True}
    stream = [a[0], b[0], a[1], a[1], c[0], text_only]  # a duplicate (redelivery) and a text-only segment
    path = concat_session(tmp_path, "room-a", stream, gap_s=0.5)
    assert path == tmp_path / "session-room-a.wav"
    with wave.open(str(path), "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 22050)
        n = w.getnframes()
    assert n == _frames(a) + int(0.5 * 22050) + _frames(c)
    x, _ = read_wav(path)
    head = _frames(a)
    assert np.all(x[head: head + int(0.5 * 22050)] == 0)  # the gap between the two requests
    assert np.array_equal(x[:head], np.concatenate([read_wav(s["audio_ref"])[0] for s in a]))


def test_cancelled_request_is_cut_at_the_cancel_play_head(tmp_path: Path) -> None:
    a = _segments(tmp_path, "r1", "room-a", "Welcome to the show. Link three is the scarf. It is soft.")
    cut_ms = a[0]["end_ms"] + 300.0
    stream = [*a[:2], cancel_segment("r1", "room-a", 2, cut_ms)]
    x, sr = read_wav(concat_session(tmp_path, "room-a", stream))
    assert len(x) == round(cut_ms * sr / 1000)


def test_room_without_audio_still_gets_a_valid_wav(tmp_path: Path) -> None:
    path = concat_session(tmp_path / "audio", "room/with spaces", [])
    assert path.name == "session-room_with_spaces.wav" and path.parent == tmp_path / "audio"
    x, sr = read_wav(path)
    assert len(x) == 0 and sr > 0


def test_missing_files_are_skipped_and_every_room_written(tmp_path: Path) -> None:
    a = _segments(tmp_path, "r1", "room-a", "One. Two.")
    b = _segments(tmp_path, "r2", "room-b", "Three.")
    Path(a[1]["audio_ref"].removeprefix("file://")).unlink()
    paths = concat_sessions(tmp_path, [*a, *b])
    assert set(paths) == {"room-a", "room-b"}
    assert len(read_wav(paths["room-a"])[0]) == _frames(a[:1])
    assert len(read_wav(paths["room-b"])[0]) == _frames(b)


def test_mixed_sample_rates_are_resampled(tmp_path: Path) -> None:
    from livehost.voice.engines import Audio
    from livehost.voice.synth import write_wav

    a = _segments(tmp_path, "r1", "room-a", "Hello.")
    other = tmp_path / "other.wav"
    write_wav(other, Audio(np.full(16000, 1000, dtype=np.int16), 16000))
    seg = {**a[0], "request_id": "r2", "audio_ref": other.resolve().as_uri(), "sample_rate": 16000}
    x, sr = read_wav(concat_session(tmp_path, "room-a", [a[0], seg], gap_s=0))
    assert sr == 22050
    assert len(x) == _frames(a) + 22050
    assert x[-100:].tolist() == pytest.approx([1000] * 100, abs=1)
