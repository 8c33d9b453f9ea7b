from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RenderRequest(_message.Message):
    __slots__ = ("request_json", "harness_version")
    REQUEST_JSON_FIELD_NUMBER: _ClassVar[int]
    HARNESS_VERSION_FIELD_NUMBER: _ClassVar[int]
    request_json: str
    harness_version: str
    def __init__(self, request_json: _Optional[str] = ..., harness_version: _Optional[str] = ...) -> None: ...

class PromptSection(_message.Message):
    __slots__ = ("id", "source", "tokens", "truncated")
    ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    id: str
    source: str
    tokens: int
    truncated: bool
    def __init__(self, id: _Optional[str] = ..., source: _Optional[str] = ..., tokens: _Optional[int] = ..., truncated: _Optional[bool] = ...) -> None: ...

class RenderResponse(_message.Message):
    __slots__ = ("text", "context_json", "sections", "total_tokens")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
    SECTIONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    text: str
    context_json: str
    sections: _containers.RepeatedCompositeFieldContainer[PromptSection]
    total_tokens: int
    def __init__(self, text: _Optional[str] = ..., context_json: _Optional[str] = ..., sections: _Optional[_Iterable[_Union[PromptSection, _Mapping]]] = ..., total_tokens: _Optional[int] = ...) -> None: ...
