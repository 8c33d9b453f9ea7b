"""One listenable WAV per room: a session's avatar segments concatenated in playback order.

The voice service writes one WAV per segment (``<audio_dir>/<room>/<request>_<seq>.wav``). For a
person who wants to *hear* a session, :func:`concat_session` joins a room's segments into
``<audio_dir>/session-<room>.wav``:

* segments are taken in the order given (the order they were published on ``avatar.segments``,
  which is a room's playback order), filtered to ``room_id``;
* a request's segments tile its timeline already (pauses are inside the WAVs), so they are joined
  back to back; between two requests ``gap_s`` of silence is inserted;
* a cancel segment carries no audio but the play-head at which the renderer stopped
  (``start_ms``, reply timeline): the cancelled request's audio is cut there (segments never
  published were never heard);
* text-only segments (no ``audio_ref``) and missing files are skipped (logged);
* a segment with another sample rate than the first one is resampled (linear) to the first rate;
* duplicates (same request id and seq, e.g. an at-least-once redelivery) are kept once.

A room without any audio still gets a valid (empty) WAV, so the caller can always print the path.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from livehost.voice.engines import Audio
from livehost.voice.synth import audio_ref_path, read_wav, write_wav

log = logging.getLogger(__name__)

DEFAULT_GAP_S = 0.4
DEFAULT_SAMPLE_RATE = 22050


def session_path(audio_dir: Path | str, room_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", room_id)[:80] or "room"
    return Path(audio_dir) / f"session-{safe}.wav"


def _resample(x: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    if sr_in == sr_out or len(x) == 0:
        return x
    n_out = int(round(len(x) * sr_out / sr_in))
    t_in = np.arange(len(x)) / sr_in
    t_out = np.arange(n_out) / sr_out
    return np.interp(t_out, t_in, x.astype(np.float64)).round().clip(-32768, 32767).astype(np.int16)


def concat_session(audio_dir: Path | str, room_id: str, segments: Iterable[Mapping[str, Any]],
                   *, gap_s: float = DEFAULT_GAP_S) -> Path:
    """Write ``<audio_dir>/session-<room>.wav`` from the room's segments; returns its path."""
    out = session_path(audio_dir, room_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    requests: dict[str, list[Mapping[str, Any]]] = {}
    cut_ms: dict[str, float] = {}
    seen: set[tuple[str, int]] = set()
    for seg in segments:
        if seg.get("room_id") != room_id:
            continue
        rid = str(seg.get("request_id"))
        if seg.get("cancel"):
            cut_ms.setdefault(rid, float(seg.get("start_ms") or 0.0))
            continue
        key = (rid, int(seg.get("seq", 0)))
        if key in seen or rid in cut_ms:
            continue
        seen.add(key)
        requests.setdefault(rid, []).append(seg)
    parts: list[np.ndarray] = []
    rate = 0
    for rid, segs in requests.items():
        pieces: list[np.ndarray] = []
        origin = float(segs[0].get("start_ms") or 0.0)
        for seg in segs:
            if not seg.get("audio_ref"):
                continue  # text-only segment
            try:
                samples, sr = read_wav(audio_ref_path(str(seg["audio_ref"])))
            except (OSError, EOFError) as exc:
                log.warning("session %s: segment %s/%s skipped, audio unreadable: %s", room_id, rid, seg.get("seq"),
                            exc)
                continue
            rate = rate or sr
            pieces.append(_resample(samples, sr, rate))
        if not pieces:
            continue
        audio = np.concatenate(pieces)
        if rid in cut_ms:  # the renderer stopped the request at the cancel's play-head
            audio = audio[: max(0, int(round((cut_ms[rid] - origin) * rate / 1000.0)))]
        if parts and gap_s > 0:
            parts.append(np.zeros(int(round(gap_s * rate)), dtype=np.int16))
        parts.append(audio)
    audio = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
    write_wav(out, Audio(audio, rate or DEFAULT_SAMPLE_RATE))
    return out


def concat_sessions(audio_dir: Path | str, segments: Iterable[Mapping[str, Any]],
                    *, gap_s: float = DEFAULT_GAP_S) -> dict[str, Path]:
    """:func:`concat_session` for every room that appears in ``segments``."""
    segs = list(segments)
    rooms = list(dict.fromkeys(str(s["room_id"]) for s in segs))
    return {room: concat_session(audio_dir, room, segs, gap_s=gap_s) for room in rooms}
