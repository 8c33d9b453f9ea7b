"""Avro encoding of topic records (schemaless Avro with the schemas in ``schemas/``).

Producers that are not Python read the same ``.avsc`` files; the record's full name travels in the
``livehost-schema`` header so a consumer can tell what it got.
"""

from __future__ import annotations

import io
import json
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.types import Schema

from livehost.config import REPO_ROOT

SCHEMA_DIR = REPO_ROOT / "schemas"
SCHEMA_HEADER = "livehost-schema"


class DecodeError(ValueError):
    """A record that does not match its topic's schema."""


def _load_json(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else [data]


@cache
def schemas() -> dict[str, Schema]:
    """All parsed schemas by full name. common.avsc first: the others refer to its named types."""
    named: dict[str, Any] = {}
    parsed: dict[str, Schema] = {}
    files = sorted(SCHEMA_DIR.glob("*.avsc"), key=lambda p: (p.name != "common.avsc", p.name))
    for path in files:
        for raw in _load_json(path):
            schema = fastavro.parse_schema(raw, named_schemas=named)
            full_name = f"{raw.get('namespace', '')}.{raw['name']}".lstrip(".")
            parsed[full_name] = schema
    return parsed


def schema(full_name: str) -> Schema:
    try:
        return schemas()[full_name]
    except KeyError as exc:
        raise KeyError(f"no Avro schema named {full_name!r} in {SCHEMA_DIR}") from exc


def encode(full_name: str, record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema(full_name), record)
    return buf.getvalue()


def decode(full_name: str, data: bytes | None) -> dict[str, Any]:
    if data is None:
        raise DecodeError("empty record (null value)")
    buf = io.BytesIO(data)
    try:
        record = fastavro.schemaless_reader(buf, schema(full_name), None)
    except Exception as exc:  # fastavro raises many types on garbage input
        raise DecodeError(f"not a valid {full_name}: {type(exc).__name__}: {exc}") from exc
    if buf.tell() != len(data):
        raise DecodeError(f"not a valid {full_name}: {len(data) - buf.tell()} trailing bytes")
    if not isinstance(record, dict):
        raise DecodeError(f"not a valid {full_name}: decoded to {type(record).__name__}")
    return record


def validate(full_name: str, record: dict[str, Any]) -> None:
    """Raise DecodeError with the offending field when a record does not fit its schema."""
    from fastavro.validation import ValidationError
    from fastavro.validation import validate as _validate

    try:
        _validate(record, schema(full_name), raise_errors=True)
    except ValidationError as exc:
        raise DecodeError(str(exc)) from exc
