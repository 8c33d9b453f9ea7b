"""Faust builds its worker consumer itself; LiveHost's settings must still reach it."""

from __future__ import annotations

from livehost.config import Settings
from livehost.faustutil import make_app
from services.hooks import settings as hooks_settings
from services.trajectories import server as trajectories
from services.trajectories import settings as traj_settings


async def _worker_consumer(app: object) -> object:
    consumer = app.consumer  # type: ignore[attr-defined]
    made = consumer._thread._create_worker_consumer(consumer.transport)
    await made.stop()  # never started: nothing to close, but aiokafka asks for it
    return made


async def test_the_trajectory_recorder_fetches_in_batches() -> None:
    settings = Settings()
    made = await _worker_consumer(trajectories.build(settings).app)
    assert made._fetch_min_bytes == traj_settings.FETCH_MIN_BYTES > 1  # type: ignore[attr-defined]
    assert made._fetch_max_wait_ms == traj_settings.FETCH_WAIT_MS  # type: ignore[attr-defined]
    assert made._isolation_level == "read_committed"  # type: ignore[attr-defined]


async def test_other_apps_fetch_each_record_as_it_comes() -> None:
    settings = Settings()
    made = await _worker_consumer(make_app(hooks_settings.APP_ID, settings))
    assert made._fetch_min_bytes == 1  # type: ignore[attr-defined]
    assert made._fetch_max_wait_ms == settings.kafka_fetch_max_wait_ms  # type: ignore[attr-defined]
