"""One member of a consumer group for tests/integration/test_rebalance.py: the services' ConsumerLoop on the
room-events topic, writing one JSON line per handled record (room, seq, wall time, pid) to argv[1]."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from livehost.config import load_settings
from livehost.kafka import ConsumerLoop, Producer
from livehost.topics import ROOM_EVENTS, Topic


async def main(out_path: str, group: str) -> None:
    settings = load_settings()
    producer = Producer(settings)
    await producer.start()
    out = open(out_path, "a", buffering=1)  # noqa: SIM115, ASYNC230 - lives as long as the process

    async def handle(topic: Topic, record: dict[str, Any], rec: Any) -> None:
        out.write(json.dumps({"room": record["room_id"], "seq": int(record["text"]), "t": time.time(),
                              "pid": os.getpid(), "partition": rec.partition}) + "\n")

    loop = ConsumerLoop(settings, group, [ROOM_EVENTS], handle, producer)
    task = asyncio.create_task(loop.run())
    await loop.ready.wait()
    print("MEMBER READY", flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
