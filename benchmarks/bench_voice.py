"""Voice engine benchmark: model load, time-to-first-audio and real-time factor per engine.

    python benchmarks/bench_voice.py [--repeat N] [--engines piper,espeak]

Time to first audio (TTFA) = wall time from calling the streaming API to the first segment's WAV
being written (planning + first chunk synthesis + file write). Real-time factor (RTF) = total
synthesis wall time / seconds of audio produced (lower is faster; 0.1 = 10x real time). CPU RTF =
the process's CPU seconds (all its threads) / seconds of audio: piper's onnxruntime runs on every core,
so wall-clock RTF overstates what one core does, and rooms per core is 1 / CPU RTF.
Model load is measured separately (warm_up) and excluded from TTFA/RTF.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from livehost.voice import stream_reply, warm_up  # noqa: E402

REPLIES = [
    "Link three is the silk scarf, it's twenty-nine ninety-nine today. <sil_L2> Grab the coupon below!",
    "[speed_e2]Only twelve left in stock! <sil_L3> The jacket comes in black, navy and olive, "
    "sizes small to extra large, and shipping is free for members.",
    "Great question! <sil_L2> This serum is fragrance-free and suitable for sensitive skin. "
    "[speed_d2]Please patch-test first. <sil_L4> Anything else you'd like to know about it?",
    "Hi everyone, welcome to the live room! Tonight we have three flash deals, a stackable coupon, "
    "and a surprise gift for the first fifty orders. Stay tuned, the first deal starts in a minute.",
]


def bench(engine: str, repeat: int) -> dict[str, float]:
    ttfa: list[float] = []
    rtf: list[float] = []
    audio_s = 0.0
    cpu0 = time.process_time()
    with tempfile.TemporaryDirectory() as d:
        for r in range(repeat):
            for i, text in enumerate(REPLIES):
                t0 = time.perf_counter()
                stream = stream_reply(
                    text, out_dir=Path(d), request_id=f"b{r}-{i}", room_id="bench", engine=engine, fallback=None
                )
                first = None
                total_audio = 0.0
                for seg in stream:
                    if first is None:
                        first = time.perf_counter() - t0
                    total_audio += (seg["end_ms"] - seg["start_ms"]) / 1000.0
                wall = time.perf_counter() - t0
                assert stream.result.engine_used == engine, stream.result.warnings
                ttfa.append(first or 0.0)
                rtf.append(wall / total_audio)
                audio_s += total_audio
    cpu_s = time.process_time() - cpu0
    return {
        "cpu_rtf": cpu_s / audio_s,
        "ttfa_p50_ms": 1000 * statistics.median(ttfa),
        "ttfa_max_ms": 1000 * max(ttfa),
        "rtf_mean": statistics.fmean(rtf),
        "rtf_max": max(rtf),
        "audio_s": audio_s,
        "replies": len(ttfa),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engines", default="piper,espeak")
    args = ap.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    loads = warm_up(*engines)
    print(
        f"{'engine':8} {'load_s':>7} {'TTFA p50 ms':>12} {'TTFA max ms':>12} {'RTF mean':>9} {'RTF max':>8} "
        f"{'CPU RTF':>8} {'rooms/core':>10} {'audio s':>8} {'replies':>7}"
    )
    for e in engines:
        b = bench(e, args.repeat)
        print(
            f"{e:8} {loads[e]:7.2f} {b['ttfa_p50_ms']:12.1f} {b['ttfa_max_ms']:12.1f} {b['rtf_mean']:9.3f} "
            f"{b['rtf_max']:8.3f} {b['cpu_rtf']:8.3f} {1 / b['cpu_rtf']:10.1f} {b['audio_s']:8.1f} {b['replies']:7d}"
        )


if __name__ == "__main__":
    main()
