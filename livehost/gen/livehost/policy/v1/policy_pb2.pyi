from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DecideRequest(_message.Message):
    __slots__ = ("prompt_text", "context_json", "model", "sampling_json")
    PROMPT_TEXT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_JSON_FIELD_NUMBER: _ClassVar[int]
    prompt_text: str
    context_json: str
    model: str
    sampling_json: str
    def __init__(self, prompt_text: _Optional[str] = ..., context_json: _Optional[str] = ..., model: _Optional[str] = ..., sampling_json: _Optional[str] = ...) -> None: ...

class DecideResponse(_message.Message):
    __slots__ = ("raw_output", "action_json", "valid", "error", "model", "latency_ms")
    RAW_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    ACTION_JSON_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    raw_output: str
    action_json: str
    valid: bool
    error: str
    model: str
    latency_ms: float
    def __init__(self, raw_output: _Optional[str] = ..., action_json: _Optional[str] = ..., valid: _Optional[bool] = ..., error: _Optional[str] = ..., model: _Optional[str] = ..., latency_ms: _Optional[float] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("name", "version", "ready", "is_default")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    ready: bool
    is_default: bool
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., ready: _Optional[bool] = ..., is_default: _Optional[bool] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ...) -> None: ...
