"""What a Kafka transaction costs one consume-process-produce hop, on the embedded Apache Kafka.

    python benchmarks/bench_kafka_txn.py [--records N] [--rates 5,50,200]

One hop = LiveHost's ConsumerLoop reading ``live.room.events`` and producing one record per input; a
read_committed reader times each record from the input's send to the output's arrival. For each
offered rate (open loop) it runs the hop at-least-once (idempotent producer, offsets committed after
the batch) and transactional (batch output + offsets in one transaction), in the same run, and prints
p50 / p95 hop latency and the ratio. The README's "Delivery guarantees" table comes from here.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka import AIOKafkaConsumer  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402

from livehost.config import Settings  # noqa: E402
from livehost.kafka import ConsumerLoop, Producer, ensure_topics, now_ms  # noqa: E402
from livehost.stack.testing import kafka_client, reset_topics, running_kafka  # noqa: E402
from livehost.topics import ROOM_EVENTS  # noqa: E402


async def one_run(bootstrap: str, transactional: bool, rate: float, n: int) -> list[float]:
    reset_topics(bootstrap)
    group = f"bench-{uuid.uuid4().hex[:6]}"
    out_topic = f"bench.out.{group}"
    settings = Settings(kafka_bootstrap=bootstrap)
    await ensure_topics(settings, [ROOM_EVENTS])
    admin = AIOKafkaAdminClient(**kafka_client(bootstrap))
    await admin.start()
    await admin.create_topics([NewTopic(out_topic, 4, 1)])
    await admin.close()
    producer = Producer(settings)
    await producer.start()

    async def handler(topic: Any, record: dict[str, Any], rec: Any) -> None:
        await producer.send_raw(out_topic, rec.key, str(record["ts_ms"]).encode())

    loop = ConsumerLoop(settings, group, [ROOM_EVENTS], handler, producer, transactional=transactional)
    task = asyncio.create_task(loop.run())
    await loop.ready.wait()
    reader = AIOKafkaConsumer(out_topic, **kafka_client(bootstrap), group_id=None, auto_offset_reset="earliest",
                              isolation_level="read_committed")
    await reader.start()
    await asyncio.sleep(2.0)  # let the loop's group join settle
    latencies: list[float] = []

    async def feed() -> None:
        t0 = time.perf_counter()
        for i in range(n):
            await asyncio.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
            room = f"room-{i % 16}"
            await producer.send(ROOM_EVENTS, room, {
                "event_id": f"b{i}", "room_id": room, "type": "comment", "ts_ms": now_ms(), "user_id": "u",
                "text": "x" * 200, "link_id": None, "campaign_json": None, "viewer_count": None})

    feeder = asyncio.create_task(feed())
    deadline = time.monotonic() + n / rate + 30
    while len(latencies) < n and time.monotonic() < deadline:
        for records in (await reader.getmany(timeout_ms=100)).values():
            arrived = now_ms()
            latencies += [arrived - int(r.value or b"0") for r in records]
    await feeder
    loop.stop()
    await task
    await reader.stop()
    await producer.stop()
    return latencies


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else float("nan")


async def main(records: int, rates: list[float]) -> None:
    with tempfile.TemporaryDirectory() as tmp, running_kafka(tmp) as bootstrap:
        print(f"one consume-process-produce hop, {records} records per run, read_committed reader")
        print(f"{'rate/s':>7} {'mode':>15} {'n':>5} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7}")
        for rate in rates:
            rows = {}
            for transactional in (False, True):
                lat = await one_run(bootstrap, transactional, rate, records)
                mode = "transactional" if transactional else "at-least-once"
                rows[mode] = lat
                print(f"{rate:7.0f} {mode:>15} {len(lat):5d} {pct(lat, 50):7.1f} {pct(lat, 95):7.1f} "
                      f"{pct(lat, 99):7.1f}")
            base, txn = rows["at-least-once"], rows["transactional"]
            print(f"{'':7} {'ratio txn/alo':>15} {'':5} {pct(txn, 50) / max(pct(base, 50), 0.1):7.2f} "
                  f"{pct(txn, 95) / max(pct(base, 95), 0.1):7.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--rates", default="5,50,200")
    args = parser.parse_args()
    asyncio.run(main(args.records, [float(r) for r in args.rates.split(",")]))
