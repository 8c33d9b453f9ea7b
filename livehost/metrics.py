"""Prometheus metrics shared by every service, declared once (served on ``LIVEHOST_METRICS_PORT``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RECORDS = Counter("livehost_records_total", "Topic records handled by a consumer group.",
                  ["group", "topic", "result"])  # result: ok, dead_letter, retry
HANDLE_SECONDS = Histogram("livehost_record_handle_seconds", "Time to handle one topic record.", ["group", "topic"],
                           buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0))
OUTCOMES = Counter("livehost_request_outcomes_total", "Terminal outcomes of requests (reply, no_reply, rejected, "
                   "fallback, cancelled).", ["outcome"])
REQUEST_SECONDS = Histogram("livehost_request_seconds", "From a request's first comment to its terminal outcome.",
                            ["outcome"], buckets=(0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 10.0, 15.0, 30.0))
HOOK_VERDICTS = Counter("livehost_hook_verdicts_total", "Hook verdicts by hook kind and verdict.", ["kind", "verdict"])

# Saturation signals (the chart's autoscaling values name them): requests in flight and queued in the
# hooks processor's rooms, its measured service time, requests shed at admission, and consumer lag.
IN_FLIGHT = Gauge("livehost_requests_in_flight", "Requests released to the agent loop and not finished yet "
                  "(per hooks worker).")
IN_FLIGHT_LIMIT = Gauge("livehost_requests_in_flight_limit", "The admission control's adaptive in-flight limit "
                        "(per hooks worker).")
QUEUE_DEPTH = Gauge("livehost_room_queue_depth", "Merged requests waiting in room queues (per hooks worker).")
SERVICE_SECONDS = Gauge("livehost_request_service_seconds", "Moving average of release-to-outcome time, the "
                        "admission control's service-time estimate.")
SHED = Counter("livehost_requests_shed_total", "Requests refused at admission, before any prompt, policy or "
               "tool work.", ["why"])  # why: system (in-flight limit) or budget (queue cannot finish in time)
# The trajectory recorder after a crash (services/trajectories/clients.py): rows stored but never marked
# published, found on agent.trajectories (marked, not sent again) or not (sent again).
TRAJECTORIES_UNMARKED = Counter("livehost_trajectories_unmarked_total", "Stored trajectories whose record was "
                                "never marked published, seen again after a restart.", ["found"])  # found: yes, no
CONSUMER_LAG = Gauge("livehost_consumer_lag_records", "Records behind the partition end, per consumer group, "
                     "topic and partition (set when a batch is read).", ["group", "topic", "partition"])
# A transactional step's cycle (livehost.kafka.ConsumerLoop): the batch's handling, then the commit (the
# offsets, EndTxn), during which the step reads nothing — the cycle is the latency a transactional hop adds.
TXN_SECONDS = Histogram("livehost_kafka_transaction_seconds", "Phases of a transactional batch: handle "
                        "(the handlers and their sends) and commit (input offsets and EndTxn).", ["group", "phase"],
                        buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5))
TXN_RECORDS = Histogram("livehost_kafka_transaction_records", "Input records per transaction.", ["group"],
                        buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
