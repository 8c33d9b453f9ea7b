from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SynthesizeRequest(_message.Message):
    __slots__ = ("text", "voice", "engine")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    VOICE_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    text: str
    voice: str
    engine: str
    def __init__(self, text: _Optional[str] = ..., voice: _Optional[str] = ..., engine: _Optional[str] = ...) -> None: ...

class SynthesizeResponse(_message.Message):
    __slots__ = ("segments",)
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    segments: _containers.RepeatedCompositeFieldContainer[Segment]
    def __init__(self, segments: _Optional[_Iterable[_Union[Segment, _Mapping]]] = ...) -> None: ...

class StreamSegmentsRequest(_message.Message):
    __slots__ = ("room_id",)
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    room_id: str
    def __init__(self, room_id: _Optional[str] = ...) -> None: ...

class Viseme(_message.Message):
    __slots__ = ("t_ms", "viseme")
    T_MS_FIELD_NUMBER: _ClassVar[int]
    VISEME_FIELD_NUMBER: _ClassVar[int]
    t_ms: int
    viseme: str
    def __init__(self, t_ms: _Optional[int] = ..., viseme: _Optional[str] = ...) -> None: ...

class Segment(_message.Message):
    __slots__ = ("request_id", "room_id", "seq", "text", "start_ms", "end_ms", "audio_ref", "sample_rate", "engine", "visemes", "final", "cancel")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    END_MS_FIELD_NUMBER: _ClassVar[int]
    AUDIO_REF_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_RATE_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    VISEMES_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    room_id: str
    seq: int
    text: str
    start_ms: int
    end_ms: int
    audio_ref: str
    sample_rate: int
    engine: str
    visemes: _containers.RepeatedCompositeFieldContainer[Viseme]
    final: bool
    cancel: bool
    def __init__(self, request_id: _Optional[str] = ..., room_id: _Optional[str] = ..., seq: _Optional[int] = ..., text: _Optional[str] = ..., start_ms: _Optional[int] = ..., end_ms: _Optional[int] = ..., audio_ref: _Optional[str] = ..., sample_rate: _Optional[int] = ..., engine: _Optional[str] = ..., visemes: _Optional[_Iterable[_Union[Viseme, _Mapping]]] = ..., final: _Optional[bool] = ..., cancel: _Optional[bool] = ...) -> None: ...
