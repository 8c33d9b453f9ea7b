"""After a rebalance, Faust resumes a stream partition only once it was sought to its committed offset,
and the aiokafka consumer under it is paused while Faust has it paused
(livehost.faustutil._patch_faust_seek_before_resume). Stock Faust resumed first and sought second, with
its fetcher already running: records of the first batch were consumed and never reached an agent."""

from __future__ import annotations

from types import MethodType, SimpleNamespace
from typing import Any

from aiokafka import TopicPartition
from faust.transport.consumer import Consumer
from faust.types import TP as FaustTP

from livehost.faustutil import _patch_faust_seek_before_resume, resume_after_seek

STREAM = FaustTP("live.room.events", 0)
CHANGELOG = FaustTP("rooms-changelog", 0)


class Client:
    """The aiokafka consumer's pause/resume surface, recording what it was told."""

    def __init__(self) -> None:
        self.paused: set[TopicPartition] = set()
        self.calls: list[str] = []

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(*STREAM), TopicPartition(*CHANGELOG)}

    def pause(self, *tps: TopicPartition) -> None:
        assert all(type(tp) is TopicPartition for tp in tps)  # aiokafka type-checks its partitions
        self.paused.update(tps)
        self.calls.append(f"pause {sorted(tp.topic for tp in tps)}")

    def resume(self, *tps: TopicPartition) -> None:
        assert all(type(tp) is TopicPartition for tp in tps)
        self.paused.difference_update(tps)
        self.calls.append(f"resume {sorted(tp.topic for tp in tps)}")


def fake_consumer(client: Client) -> Any:
    """Faust's Consumer methods on a bare object (its constructor needs a running app)."""
    c: Any = SimpleNamespace(_active_partitions={STREAM, CHANGELOG}, _paused_partitions=set(),
                             _thread=SimpleNamespace(_ensure_consumer=lambda: client),
                             _read_offset={}, _committed_offset={})
    c._get_active_partitions = lambda: c._active_partitions
    c._is_changelog_tp = lambda tp: tp.topic.endswith("-changelog")
    for name in ("pause_partitions", "resume_partitions", "perform_seek"):
        setattr(c, name, MethodType(getattr(Consumer, name), c))

    async def seek_to_committed() -> dict[FaustTP, int]:
        client.calls.append("seek")
        return {STREAM: 7}

    c.seek_to_committed = seek_to_committed
    return c


async def test_a_stream_partition_resumes_only_after_its_seek() -> None:
    _patch_faust_seek_before_resume()
    client = Client()
    consumer = fake_consumer(client)
    consumer.pause_partitions({STREAM, CHANGELOG})
    assert client.paused == {TopicPartition(*STREAM)}  # the changelog is left to Faust's recovery
    paused_after_faust_resumed: list[set[TopicPartition]] = []

    async def stock_order(self: Any, generation_id: int = 0) -> None:  # Faust's: resume, then seek
        self.app.consumer.resume_partitions({STREAM})
        paused_after_faust_resumed.append(set(client.paused))
        await self.app.consumer.perform_seek()

    await resume_after_seek(stock_order)(SimpleNamespace(app=SimpleNamespace(consumer=consumer)), 1)
    assert paused_after_faust_resumed == [{TopicPartition(*STREAM)}]
    assert client.calls == ["pause ['live.room.events']", "seek", "resume ['live.room.events']"]
    assert consumer._read_offset[STREAM] == 7
    assert not client.paused and consumer._paused_partitions == {CHANGELOG}
    assert STREAM in consumer._active_partitions


async def test_a_step_that_returns_before_its_seek_still_resumes() -> None:
    """Faust returns early when another rebalance began; the partitions it resumed are not left paused."""
    _patch_faust_seek_before_resume()
    client = Client()
    consumer = fake_consumer(client)
    consumer.pause_partitions({STREAM})

    async def rebalancing_again(self: Any, generation_id: int = 0) -> None:
        self.app.consumer.resume_partitions({STREAM})

    await resume_after_seek(rebalancing_again)(SimpleNamespace(app=SimpleNamespace(consumer=consumer)), 1)
    assert client.calls == ["pause ['live.room.events']", "resume ['live.room.events']"]
    assert not client.paused


async def test_outside_a_recovery_step_resume_is_immediate() -> None:
    _patch_faust_seek_before_resume()
    client = Client()
    consumer = fake_consumer(client)
    consumer.pause_partitions({STREAM})
    consumer.resume_partitions({STREAM})
    assert not client.paused and STREAM in consumer._active_partitions


async def test_the_table_manager_starts_without_a_pause() -> None:
    """Faust's TableManager.on_start slept 1.0 s before registering tables (livehost.faustutil.
    _patch_faust_table_start); LiveHost declares its tables before the worker starts."""
    from faust.tables.manager import TableManager

    from livehost.faustutil import _patch_faust_table_start

    _patch_faust_table_start()
    slept: list[float] = []
    calls: list[str] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def update_channels() -> None:
        calls.append("channels")

    async def start() -> None:
        calls.append("recovery")

    manager = SimpleNamespace(sleep=sleep, should_stop=False, _update_channels=update_channels,
                              recovery=SimpleNamespace(start=start))
    await TableManager.on_start(manager)  # type: ignore[arg-type]
    assert sum(slept) == 0
    assert calls == ["channels", "recovery"]
