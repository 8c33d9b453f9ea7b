from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExecuteRequest(_message.Message):
    __slots__ = ("harness_version", "tool", "arguments_json", "room_id", "user_id", "request_id", "idempotency_key")
    HARNESS_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    harness_version: str
    tool: str
    arguments_json: str
    room_id: str
    user_id: str
    request_id: str
    idempotency_key: str
    def __init__(self, harness_version: _Optional[str] = ..., tool: _Optional[str] = ..., arguments_json: _Optional[str] = ..., room_id: _Optional[str] = ..., user_id: _Optional[str] = ..., request_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ("ok", "result_json", "error_code", "error_message", "duration_ms")
    OK_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    result_json: str
    error_code: str
    error_message: str
    duration_ms: float
    def __init__(self, ok: _Optional[bool] = ..., result_json: _Optional[str] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ..., duration_ms: _Optional[float] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ("harness_version",)
    HARNESS_VERSION_FIELD_NUMBER: _ClassVar[int]
    harness_version: str
    def __init__(self, harness_version: _Optional[str] = ...) -> None: ...

class ToolInfo(_message.Message):
    __slots__ = ("name", "description", "arguments_schema_json", "side_effecting")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    SIDE_EFFECTING_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    arguments_schema_json: str
    side_effecting: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., arguments_schema_json: _Optional[str] = ..., side_effecting: _Optional[bool] = ...) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ("harness_version", "tools")
    HARNESS_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    harness_version: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolInfo]
    def __init__(self, harness_version: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[ToolInfo, _Mapping]]] = ...) -> None: ...
