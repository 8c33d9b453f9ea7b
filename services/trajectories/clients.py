"""What the trajectory recorder reads besides its replies: its own output topic, after a crash.

A recorder killed between publishing a batch's trajectory records and marking their rows published
leaves rows that say "not published" for records that are on ``agent.trajectories``. When those
replies come back (their offsets were never committed), the topic itself says which records went out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaConsumer, TopicPartition

from livehost import codec
from livehost.config import Settings
from livehost.kafka import consumer_options
from livehost.topics import TRAJECTORIES

log = logging.getLogger(__name__)

# request ids still to check, the earliest time their records can carry -> those found on the topic
PublishedLookup = Callable[[set[str], int], Awaitable[set[str]]]


class PublishedScan:
    """Finds which of some request ids already have a record on ``agent.trajectories``.

    It reads every partition from the first record stamped at or after ``since_ms`` up to the end
    offsets taken when it starts (everything a dead predecessor wrote is before them), at most
    ``max_records`` records or for ``max_s`` seconds; past that it reports what it found, and the rest
    are published again (at-least-once, as before this check)."""

    def __init__(self, settings: Settings, *, max_records: int, max_s: float, client_id: str):
        self._settings = settings
        self._max_records = max_records
        self._max_s = max_s
        self._client_id = client_id

    async def __call__(self, request_ids: set[str], since_ms: int) -> set[str]:
        wanted = set(request_ids)
        found: set[str] = set()
        consumer = AIOKafkaConsumer(**consumer_options(self._settings), group_id=None, client_id=self._client_id,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            partitions = consumer.partitions_for_topic(TRAJECTORIES.name) or set(range(TRAJECTORIES.partitions))
            tps = [TopicPartition(TRAJECTORIES.name, p) for p in sorted(partitions)]
            consumer.assign(tps)
            ends = await consumer.end_offsets(tps)
            starts = await consumer.offsets_for_times({tp: max(0, since_ms) for tp in tps})
            todo: dict[TopicPartition, int] = {}
            for tp in tps:
                start = starts.get(tp)
                if start is not None and start.offset < ends[tp]:
                    consumer.seek(tp, start.offset)
                    todo[tp] = ends[tp]
            read, deadline = 0, time.monotonic() + self._max_s
            while todo and wanted - found and read < self._max_records and time.monotonic() < deadline:
                for tp, records in (await consumer.getmany(*todo, timeout_ms=1000)).items():
                    for rec in records:
                        if rec.offset >= todo.get(tp, -1) or read >= self._max_records:
                            break
                        read += 1
                        try:
                            request_id = codec.decode(TRAJECTORIES.schema, rec.value)["request_id"]
                        except codec.DecodeError:
                            continue  # not ours to judge here; its readers dead-letter it
                        if request_id in wanted:
                            found.add(request_id)
                    if tp in todo and await consumer.position(tp) >= todo[tp]:
                        del todo[tp]
            if todo and wanted - found:
                log.warning("stopped looking for %d trajectory records after %d records: they are published again",
                            len(wanted - found), read)
        finally:
            await consumer.stop()
        return found
