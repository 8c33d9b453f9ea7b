"""Prometheus metrics shared by every service, declared once (served on ``LIVEHOST_METRICS_PORT``)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

RECORDS = Counter("livehost_records_total", "Topic records handled by a consumer group.",
                  ["group", "topic", "result"])  # result: ok, dead_letter, retry
HANDLE_SECONDS = Histogram("livehost_record_handle_seconds", "Time to handle one topic record.", ["group", "topic"],
                           buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0))
OUTCOMES = Counter("livehost_request_outcomes_total", "Terminal outcomes of requests (reply, no_reply, rejected, "
                   "fallback, cancelled).", ["outcome"])
REQUEST_SECONDS = Histogram("livehost_request_seconds", "From a request's first comment to its terminal outcome.",
                            ["outcome"], buckets=(0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 10.0, 15.0, 30.0))
HOOK_VERDICTS = Counter("livehost_hook_verdicts_total", "Hook verdicts by hook kind and verdict.", ["kind", "verdict"])
