"""The producers' compression level (aiokafka has no setting for it; livehost.kafka sets it)."""

from __future__ import annotations

import json

import pytest
from aiokafka import codec as codecs
from aiokafka.record import default_records as py_records
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from livehost.config import Settings
from livehost.kafka import producer_options, use_compression_level

try:
    from aiokafka.record._crecords import default_records as c_records
except ImportError:  # pragma: no cover - aiokafka without C extensions
    c_records = None

# Prose-like text whose lz4 output differs between the fast and the HC levels.
TEXT = json.dumps([{"turn": i, "prompt": " ".join(f"word{(i * 7 + j * 13) % 97} of step {j}" for j in range(120))}
                   for i in range(6)]).encode()


@pytest.fixture(autouse=True)
def restore_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (py_records, c_records):
        if module is not None:
            for name in ("lz4_encode", "zstd_encode", "gzip_encode"):
                monkeypatch.setattr(module, name, getattr(module, name))


def _batch(compression: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=None, key=b"room", value=TEXT, headers=[])
    return bytes(builder.build())


def test_the_setting_reaches_the_batch_builders() -> None:
    assert codecs.lz4_encode(TEXT, level=1) != codecs.lz4_encode(TEXT, level=9)
    by_default = _batch(DefaultRecordBatch.CODEC_LZ4)
    producer_options(Settings(kafka_compression_type="lz4", kafka_compression_level=1))
    for module in (py_records, c_records):
        if module is not None:
            assert module.lz4_encode(TEXT) == codecs.lz4_encode(TEXT, level=1)
    batch = _batch(DefaultRecordBatch.CODEC_LZ4)
    assert batch != by_default  # the builder itself now compresses at the chosen level
    records = list(DefaultRecordBatch(bytearray(batch)))
    assert [r.value for r in records] == [TEXT]  # and consumers read it back


def test_level_zero_keeps_the_codec_default() -> None:
    before = c_records.lz4_encode if c_records is not None else py_records.lz4_encode
    use_compression_level("lz4", 0)
    after = c_records.lz4_encode if c_records is not None else py_records.lz4_encode
    assert after is before


@pytest.mark.parametrize(("codec", "level"), [("lz4", 18), ("gzip", 10), ("zstd", 23)])
def test_a_level_outside_the_codec_range_is_refused(codec: str, level: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        use_compression_level(codec, level)


def test_zstd_level_is_applied() -> None:
    use_compression_level("zstd", 1)
    module = c_records if c_records is not None else py_records
    assert module.zstd_encode(TEXT) == codecs.zstd_encode(TEXT, level=1)
