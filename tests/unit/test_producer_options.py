"""Producer batch compression: one setting, checked, and off on Tansu."""

import pytest

from livehost.config import Settings
from livehost.kafka import producer_options


def test_every_producer_compresses_with_the_configured_codec() -> None:
    assert producer_options(Settings(kafka_compression_type="zstd")) == {"compression_type": "zstd"}
    assert producer_options(Settings(kafka_compression_type="none")) == {"compression_type": None}


def test_an_unknown_codec_is_a_clear_error_when_the_settings_load() -> None:
    with pytest.raises(ValueError, match=r"kafka_compression_type\n.*'none', 'gzip', 'snappy', 'lz4' or 'zstd'"):
        Settings(kafka_compression_type="brotli")  # type: ignore[arg-type]


def test_tansu_gets_uncompressed_batches() -> None:
    assert producer_options(Settings(kafka_flavour="tansu", kafka_compression_type="lz4")) == {"compression_type": None}


def test_the_default_codec_is_available_to_the_client() -> None:
    from aiokafka.codec import has_lz4

    kind = producer_options(Settings())["compression_type"]
    assert kind is not None and has_lz4(), "the default codec needs cramjam installed"
