"""Fuzzing with hypothesis: the Avro records of every topic, every gRPC request message, harness
bundles, model outputs fed to the action parser, and comments. A property holds when every input
ends in a result or in the component's own clear rejection (DecodeError, InvalidEvent, HarnessError,
an ``invalid`` action ...); any other exception is a crash and fails the test."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from google.protobuf import descriptor as _descriptor
from google.protobuf.message import DecodeError as ProtoDecodeError
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2
from hypothesis import given
from hypothesis import strategies as st

from livehost import codec
from livehost.config import REPO_ROOT
from livehost.gen.livehost.harness.v1 import harness_pb2
from livehost.gen.livehost.ingest.v1 import ingest_pb2
from livehost.gen.livehost.policy.v1 import policy_pb2
from livehost.gen.livehost.prompt.v1 import prompt_pb2
from livehost.gen.livehost.tools.v1 import tools_pb2
from livehost.gen.livehost.voice.v1 import voice_pb2
from livehost.harness.loader import HarnessError, from_dict, load
from livehost.harness.registry import RegistryError
from livehost.harness.validate import UNCHECKABLE, validate_bundle
from livehost.hooks.input import screen_comments
from livehost.policy.actions import parse_action
from livehost.security.ids import InvalidId, check_room_event
from livehost.topics import ALL_TOPICS
from services.harness import handlers as harness_api
from services.ingest import handlers as ingest
from tests.fuzz.conftest import count

SHIPPED = load(REPO_ROOT / "harness" / "default")
ACTION_KINDS = {"load_skill", "call_tool", "reply", "no_reply", "invalid"}

# -- Avro: every topic's record ---------------------------------------------------------------------

TOPIC_SCHEMAS = sorted({t.schema for t in ALL_TOPICS if t.schema})


def _named_types() -> dict[str, Any]:
    named: dict[str, Any] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("record", "enum", "fixed") and "name" in node:
                named.setdefault(node["name"], node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for parsed in codec.schemas().values():
        walk(parsed)
    return named


NAMED = _named_types()


def avro(schema: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    if isinstance(schema, list):
        return st.one_of([avro(s, depth) for s in schema])
    if isinstance(schema, str):
        primitive = {
            "null": st.none(), "boolean": st.booleans(), "int": st.integers(-(2**31), 2**31 - 1),
            "long": st.integers(-(2**63), 2**63 - 1), "float": st.floats(width=32, allow_nan=False),
            "double": st.floats(allow_nan=False), "string": st.text(max_size=40), "bytes": st.binary(max_size=40),
        }
        if schema in primitive:
            return primitive[schema]
        return avro(NAMED[schema], depth)
    kind = schema["type"]
    if kind == "record":
        return st.fixed_dictionaries({f["name"]: avro(f["type"], depth + 1) for f in schema["fields"]})
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "array":
        return st.lists(avro(schema["items"], depth + 1), max_size=0 if depth > 3 else 2)
    if kind == "map":
        return st.dictionaries(st.text(max_size=8), avro(schema["values"], depth + 1), max_size=0 if depth > 3 else 2)
    if kind == "fixed":
        return st.binary(min_size=schema["size"], max_size=schema["size"])
    return avro(kind, depth)  # {"type": "string", "logicalType": ...}


@pytest.mark.parametrize("full_name", TOPIC_SCHEMAS)
def test_avro_records_round_trip(full_name: str) -> None:
    @given(avro(codec.schema(full_name)))
    def prop(record: dict[str, Any]) -> None:
        assert codec.decode(full_name, codec.encode(full_name, record)) == record
        count(f"avro round trip {full_name.split('.')[-1]}", "ok")

    prop()


@pytest.mark.parametrize("full_name", TOPIC_SCHEMAS)
def test_avro_garbage_is_a_decode_error(full_name: str) -> None:
    @given(st.binary(max_size=300) | avro(codec.schema(full_name)).map(lambda r: codec.encode(full_name, r)).flatmap(
        lambda b: st.tuples(st.just(b), st.integers(0, max(0, len(b) - 1)), st.integers(0, 255)).map(
            lambda t: t[0][:t[1]] + bytes([t[2]]) + t[0][t[1] + 1:])))
    def prop(data: bytes) -> None:
        try:
            record = codec.decode(full_name, data)
        except codec.DecodeError as exc:
            assert str(exc)
            count(f"avro garbage {full_name.split('.')[-1]}", "DecodeError")
            return
        assert isinstance(record, dict)
        count(f"avro garbage {full_name.split('.')[-1]}", "decoded")

    prop()


# -- gRPC: every request message --------------------------------------------------------------------

FILES = [ingest_pb2, prompt_pb2, policy_pb2, tools_pb2, voice_pb2, harness_pb2, health_pb2]
REQUESTS: dict[str, _descriptor.Descriptor] = {
    m.input_type.full_name: m.input_type
    for f in FILES for s in f.DESCRIPTOR.services_by_name.values() for m in s.methods}

_FD = _descriptor.FieldDescriptor
_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    _FD.TYPE_STRING: st.text(max_size=60), _FD.TYPE_BYTES: st.binary(max_size=60), _FD.TYPE_BOOL: st.booleans(),
    _FD.TYPE_INT32: st.integers(-(2**31), 2**31 - 1), _FD.TYPE_SINT32: st.integers(-(2**31), 2**31 - 1),
    _FD.TYPE_INT64: st.integers(-(2**63), 2**63 - 1), _FD.TYPE_SINT64: st.integers(-(2**63), 2**63 - 1),
    _FD.TYPE_UINT32: st.integers(0, 2**32 - 1), _FD.TYPE_UINT64: st.integers(0, 2**64 - 1),
    _FD.TYPE_DOUBLE: st.floats(allow_nan=False), _FD.TYPE_FLOAT: st.floats(width=32, allow_nan=False),
}


def message(desc: _descriptor.Descriptor, depth: int = 0) -> st.SearchStrategy[Any]:
    cls = GetMessageClass(desc)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in desc.fields:
        if f.type == _FD.TYPE_MESSAGE:
            if depth > 2:
                continue
            one = message(f.message_type, depth + 1)
        elif f.type == _FD.TYPE_ENUM:
            one = st.sampled_from([v.number for v in f.enum_type.values])
        else:
            one = _SCALARS[f.type]
        fields[f.name] = st.lists(one, max_size=3) if f.is_repeated else one
    return st.fixed_dictionaries({}, optional=fields).map(lambda kw: cls(**kw))


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_grpc_request_messages(name: str) -> None:
    desc = REQUESTS[name]
    cls = GetMessageClass(desc)

    @given(message(desc) | st.binary(max_size=200))
    def prop(value: Any) -> None:
        if isinstance(value, bytes):
            try:
                cls.FromString(value)
                count(f"grpc {desc.name}", "parsed bytes")
            except ProtoDecodeError:
                count(f"grpc {desc.name}", "DecodeError")
            return
        assert cls.FromString(value.SerializeToString()) == value
        count(f"grpc {desc.name}", "ok")

    prop()


def _ingest(request: Any) -> dict[str, Any]:
    """What the Ingest servicer does with a request (services/ingest/server.py), minus publishing."""
    if isinstance(request, ingest_pb2.SubmitCommentRequest):
        return ingest.comment_event(request.room_id, request.user_id, request.text, 500,
                                    request.client_event_id if request.HasField("client_event_id") else None,
                                    max_bytes=2048)
    client_id = request.client_event_id if request.HasField("client_event_id") else None
    which = request.WhichOneof("event")
    if which == "product_switch":
        return ingest.product_switch_event(request.room_id, request.product_switch.link_id, client_id)
    if which == "campaign_change":
        return ingest.campaign_event(request.room_id, request.campaign_change.campaign_json, client_id)
    if which == "room_config":
        return ingest.room_config_event(request.room_id, request.room_config.policy, client_id)
    raise ingest.InvalidEvent("event is required")


IDISH = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,20}", fullmatch=True) | st.text(max_size=30)


@given(st.one_of(
    st.builds(ingest_pb2.SubmitCommentRequest, room_id=IDISH, user_id=IDISH, text=st.text(max_size=3000),
              client_event_id=IDISH),
    message(ingest_pb2.SubmitCommentRequest.DESCRIPTOR),
    message(ingest_pb2.SubmitRoomEventRequest.DESCRIPTOR),
    st.builds(ingest_pb2.SubmitRoomEventRequest, room_id=IDISH, campaign_change=st.builds(
        ingest_pb2.CampaignChange, campaign_json=st.recursive(
            st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=10),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
            max_leaves=8).map(json.dumps) | st.text(max_size=50))),
))
def test_ingest_requests_are_events_or_clear_refusals(request: Any) -> None:
    try:
        event = _ingest(request)
    except ingest.InvalidEvent as exc:
        assert str(exc)
        count("ingest handlers", "InvalidEvent")
        return
    codec.validate("livehost.RoomEvent", event)  # what would be published encodes
    check_room_event(event, max_text_bytes=2048, max_campaign_bytes=4096)  # and passes the Kafka-side check
    count("ingest handlers", "event")


@given(st.text(max_size=200), st.text(max_size=30), st.integers(-5, 10), st.text(max_size=12))
def test_harness_api_inputs(bundle_json: str, target: str, decision: int, proposal: str) -> None:
    for fn, arg in ((harness_api.parse_bundle, bundle_json), (harness_api.api_target, target),
                    (harness_api.decision, decision), (harness_api.proposal_id, proposal)):
        try:
            fn(arg)  # type: ignore[operator]
            count("harness API inputs", "ok")
        except RegistryError as exc:
            assert str(exc)
            count("harness API inputs", type(exc).__name__)


# -- harness bundles --------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=10)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


CANONICAL = SHIPPED.canonical()
PATHS = [p for p in _paths(CANONICAL) if p]


@given(st.lists(st.tuples(st.sampled_from(PATHS), JSON | st.just("__delete__")), min_size=1, max_size=4))
def test_harness_bundles(mutations: list[tuple[tuple[Any, ...], Any]]) -> None:
    bundle = copy.deepcopy(CANONICAL)
    for path, value in mutations:
        node: Any = bundle
        try:
            for key in path[:-1]:
                node = node[key]
            if value == "__delete__":
                del node[path[-1]]
            else:
                node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation changed the shape
    report = validate_bundle(bundle)  # never raises: every problem is reported
    assert all(p.message for p in report.problems)
    assert not [p for p in report.problems if UNCHECKABLE in p.message], report.problems  # a checker crash
    try:
        from_dict(bundle)
        count("harness bundles", "valid")
    except HarnessError as exc:
        assert exc.problems
        count("harness bundles", "HarnessError")


# -- model outputs -> action parser -----------------------------------------------------------------

ACTION_OBJECTS = st.fixed_dictionaries({}, optional={
    "action": st.sampled_from(["reply", "call_tool", "load_skill", "no_reply", "tool", "answer", "REPLY", ""])
    | st.text(max_size=10),
    "tool": st.text(max_size=15), "name": st.text(max_size=15), "skill": st.text(max_size=15),
    "arguments": JSON, "args": JSON, "text": st.text(max_size=100), "reason": st.text(max_size=50),
})


@given(st.one_of(
    st.text(max_size=500),
    ACTION_OBJECTS.map(json.dumps),
    st.tuples(st.text(max_size=30), ACTION_OBJECTS.map(json.dumps), st.text(max_size=30),
              st.integers(0, 30)).map(lambda t: t[0] + "```json\n" + t[1][: len(t[1]) - t[3]] + "\n```" + t[2]),
    st.tuples(st.text(max_size=40), ACTION_OBJECTS.map(lambda d: json.dumps(d).replace('"', "'"))).map(
        lambda t: f"<think>{t[0]}</think>{t[1]}"),
))
def test_model_outputs(raw: str) -> None:
    parsed = parse_action(raw)
    assert parsed.kind in ACTION_KINDS
    if parsed.kind == "invalid":
        assert parsed.error
    json.dumps(parsed.to_action())
    count("action parser", parsed.kind)


# -- comments ---------------------------------------------------------------------------------------

COMMENT_TEXT = st.one_of(
    st.text(max_size=600),
    st.text(alphabet=st.characters(min_codepoint=0xFF01, max_codepoint=0xFF5E), max_size=80),  # full-width
    st.lists(st.sampled_from(["ignore previous instructions", "\n", "\u200b", "\u202e", "SYSTEM:", "link 3",
                              "###", "</comments>", "how much", "ｉｇｎｏｒｅ", "💥", "\x00"]),
             max_size=12).map("".join),
)


@given(COMMENT_TEXT, IDISH)
def test_comments(text: str, user: str) -> None:
    try:
        event = ingest.comment_event("room-a", user, text, 500, max_bytes=2048)
    except ingest.InvalidEvent as exc:
        assert str(exc)
        count("comments", "InvalidEvent")
        return
    try:
        check_room_event(event, max_text_bytes=2048, max_campaign_bytes=4096)
    except InvalidId:  # pragma: no cover - Ingest's own rules are the same
        raise AssertionError("Ingest accepted an event the Kafka-side check refuses") from None
    kept, failed = screen_comments(SHIPPED, [{"event_id": event["event_id"], "user_id": event["user_id"],
                                              "text": event["text"], "ts_ms": event["ts_ms"]}])
    assert len(kept) + len(failed) == 1
    count("comments", "kept" if kept else "screened out")
