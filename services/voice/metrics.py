"""Prometheus metrics of the voice service (served by the shared metrics endpoint, ``metrics_port``)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

# kind: unknown_token, unsupported_chars, truncated, skipped, engine_fallback, engine_failed,
# warm_up_failed
WARNINGS = Counter("livehost_voice_warnings_total",
                   "Reply text or synthesis problems the voice service handled (stripped, skipped, fell back).",
                   ["kind"])
ENGINE_FAILURES = Counter("livehost_voice_engine_failures_total",
                          "TTS engine failures (load or synthesis); the chunk is retried on the fallback engine.",
                          ["engine"])
SEGMENTS = Counter("livehost_voice_segments_total", "Avatar segments published (cancel events excluded).",
                   ["engine"])
CANCELS = Counter("livehost_voice_cancels_total",
                  "Requests whose speech was cancelled (product_switch, cancelled, preempted, error).", ["reason"])
DISCARDED = Counter("livehost_voice_discarded_segments_total",
                    "Segments synthesized after their request was cancelled, never published.")
FIRST_SEGMENT = Histogram("livehost_voice_first_segment_seconds",
                          "From a reply's arrival at the voice service to its first published segment.",
                          buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0))
