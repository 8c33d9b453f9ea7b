from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReviewDecision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REVIEW_DECISION_UNSPECIFIED: _ClassVar[ReviewDecision]
    REVIEW_DECISION_APPROVE: _ClassVar[ReviewDecision]
    REVIEW_DECISION_REJECT: _ClassVar[ReviewDecision]
    REVIEW_DECISION_REQUEST_CHANGES: _ClassVar[ReviewDecision]
REVIEW_DECISION_UNSPECIFIED: ReviewDecision
REVIEW_DECISION_APPROVE: ReviewDecision
REVIEW_DECISION_REJECT: ReviewDecision
REVIEW_DECISION_REQUEST_CHANGES: ReviewDecision

class Problem(_message.Message):
    __slots__ = ("path", "message", "severity")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    path: str
    message: str
    severity: str
    def __init__(self, path: _Optional[str] = ..., message: _Optional[str] = ..., severity: _Optional[str] = ...) -> None: ...

class ValidateRequest(_message.Message):
    __slots__ = ("bundle_json",)
    BUNDLE_JSON_FIELD_NUMBER: _ClassVar[int]
    bundle_json: str
    def __init__(self, bundle_json: _Optional[str] = ...) -> None: ...

class ValidateResponse(_message.Message):
    __slots__ = ("valid", "problems")
    VALID_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    problems: _containers.RepeatedCompositeFieldContainer[Problem]
    def __init__(self, valid: _Optional[bool] = ..., problems: _Optional[_Iterable[_Union[Problem, _Mapping]]] = ...) -> None: ...

class PushRequest(_message.Message):
    __slots__ = ("bundle_json", "author", "message", "parent")
    BUNDLE_JSON_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    bundle_json: str
    author: str
    message: str
    parent: str
    def __init__(self, bundle_json: _Optional[str] = ..., author: _Optional[str] = ..., message: _Optional[str] = ..., parent: _Optional[str] = ...) -> None: ...

class PushResponse(_message.Message):
    __slots__ = ("version", "created")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    version: str
    created: bool
    def __init__(self, version: _Optional[str] = ..., created: _Optional[bool] = ...) -> None: ...

class VersionInfo(_message.Message):
    __slots__ = ("version", "parent", "author", "message", "created_at")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    version: str
    parent: str
    author: str
    message: str
    created_at: str
    def __init__(self, version: _Optional[str] = ..., parent: _Optional[str] = ..., author: _Optional[str] = ..., message: _Optional[str] = ..., created_at: _Optional[str] = ...) -> None: ...

class ShowRequest(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    def __init__(self, version: _Optional[str] = ...) -> None: ...

class ShowResponse(_message.Message):
    __slots__ = ("info", "bundle_json")
    INFO_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_JSON_FIELD_NUMBER: _ClassVar[int]
    info: VersionInfo
    bundle_json: str
    def __init__(self, info: _Optional[_Union[VersionInfo, _Mapping]] = ..., bundle_json: _Optional[str] = ...) -> None: ...

class LogRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class LogResponse(_message.Message):
    __slots__ = ("versions",)
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[VersionInfo]
    def __init__(self, versions: _Optional[_Iterable[_Union[VersionInfo, _Mapping]]] = ...) -> None: ...

class DiffRequest(_message.Message):
    __slots__ = ("a", "b")
    A_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    a: str
    b: str
    def __init__(self, a: _Optional[str] = ..., b: _Optional[str] = ...) -> None: ...

class DiffResponse(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ProposeRequest(_message.Message):
    __slots__ = ("version", "author", "message")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    version: str
    author: str
    message: str
    def __init__(self, version: _Optional[str] = ..., author: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ProposeResponse(_message.Message):
    __slots__ = ("proposal_id",)
    PROPOSAL_ID_FIELD_NUMBER: _ClassVar[int]
    proposal_id: str
    def __init__(self, proposal_id: _Optional[str] = ...) -> None: ...

class ReviewRequest(_message.Message):
    __slots__ = ("proposal_id", "reviewer", "decision", "comment")
    PROPOSAL_ID_FIELD_NUMBER: _ClassVar[int]
    REVIEWER_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    proposal_id: str
    reviewer: str
    decision: ReviewDecision
    comment: str
    def __init__(self, proposal_id: _Optional[str] = ..., reviewer: _Optional[str] = ..., decision: _Optional[_Union[ReviewDecision, str]] = ..., comment: _Optional[str] = ...) -> None: ...

class ReviewResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: str
    def __init__(self, status: _Optional[str] = ...) -> None: ...

class ActivateRequest(_message.Message):
    __slots__ = ("version", "target", "actor", "force", "reason")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    version: str
    target: str
    actor: str
    force: bool
    reason: str
    def __init__(self, version: _Optional[str] = ..., target: _Optional[str] = ..., actor: _Optional[str] = ..., force: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class ActivateResponse(_message.Message):
    __slots__ = ("activation", "rollout_id", "previous_version", "active_version")
    ACTIVATION_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_VERSION_FIELD_NUMBER: _ClassVar[int]
    activation: Activation
    rollout_id: str
    previous_version: str
    active_version: str
    def __init__(self, activation: _Optional[_Union[Activation, _Mapping]] = ..., rollout_id: _Optional[str] = ..., previous_version: _Optional[str] = ..., active_version: _Optional[str] = ...) -> None: ...

class RollbackRequest(_message.Message):
    __slots__ = ("target", "actor", "to_version", "force", "reason")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    TO_VERSION_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    target: str
    actor: str
    to_version: str
    force: bool
    reason: str
    def __init__(self, target: _Optional[str] = ..., actor: _Optional[str] = ..., to_version: _Optional[str] = ..., force: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class RollbackResponse(_message.Message):
    __slots__ = ("activation", "rollout_id", "previous_version", "active_version")
    ACTIVATION_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_VERSION_FIELD_NUMBER: _ClassVar[int]
    activation: Activation
    rollout_id: str
    previous_version: str
    active_version: str
    def __init__(self, activation: _Optional[_Union[Activation, _Mapping]] = ..., rollout_id: _Optional[str] = ..., previous_version: _Optional[str] = ..., active_version: _Optional[str] = ...) -> None: ...

class GetActiveRequest(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: str
    def __init__(self, target: _Optional[str] = ...) -> None: ...

class GetActiveResponse(_message.Message):
    __slots__ = ("version", "activated_at")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTIVATED_AT_FIELD_NUMBER: _ClassVar[int]
    version: str
    activated_at: str
    def __init__(self, version: _Optional[str] = ..., activated_at: _Optional[str] = ...) -> None: ...

class AttachEvaluationRequest(_message.Message):
    __slots__ = ("version", "result_json", "passed")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    version: str
    result_json: str
    passed: bool
    def __init__(self, version: _Optional[str] = ..., result_json: _Optional[str] = ..., passed: _Optional[bool] = ...) -> None: ...

class Evaluation(_message.Message):
    __slots__ = ("id", "version", "passed", "result_json", "actor", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: int
    version: str
    passed: bool
    result_json: str
    actor: str
    created_at: str
    def __init__(self, id: _Optional[int] = ..., version: _Optional[str] = ..., passed: _Optional[bool] = ..., result_json: _Optional[str] = ..., actor: _Optional[str] = ..., created_at: _Optional[str] = ...) -> None: ...

class ListProposalsRequest(_message.Message):
    __slots__ = ("version", "status", "limit")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    version: str
    status: str
    limit: int
    def __init__(self, version: _Optional[str] = ..., status: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class Proposal(_message.Message):
    __slots__ = ("id", "version", "author", "message", "status", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: int
    version: str
    author: str
    message: str
    status: str
    created_at: str
    def __init__(self, id: _Optional[int] = ..., version: _Optional[str] = ..., author: _Optional[str] = ..., message: _Optional[str] = ..., status: _Optional[str] = ..., created_at: _Optional[str] = ...) -> None: ...

class ListProposalsResponse(_message.Message):
    __slots__ = ("proposals",)
    PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    proposals: _containers.RepeatedCompositeFieldContainer[Proposal]
    def __init__(self, proposals: _Optional[_Iterable[_Union[Proposal, _Mapping]]] = ...) -> None: ...

class ListEvaluationsRequest(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    def __init__(self, version: _Optional[str] = ...) -> None: ...

class ListEvaluationsResponse(_message.Message):
    __slots__ = ("evaluations",)
    EVALUATIONS_FIELD_NUMBER: _ClassVar[int]
    evaluations: _containers.RepeatedCompositeFieldContainer[Evaluation]
    def __init__(self, evaluations: _Optional[_Iterable[_Union[Evaluation, _Mapping]]] = ...) -> None: ...

class Activation(_message.Message):
    __slots__ = ("id", "target", "version", "action", "previous_version", "actor", "forced", "reason", "created_at", "announced")
    ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_VERSION_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    FORCED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ANNOUNCED_FIELD_NUMBER: _ClassVar[int]
    id: int
    target: str
    version: str
    action: str
    previous_version: str
    actor: str
    forced: bool
    reason: str
    created_at: str
    announced: bool
    def __init__(self, id: _Optional[int] = ..., target: _Optional[str] = ..., version: _Optional[str] = ..., action: _Optional[str] = ..., previous_version: _Optional[str] = ..., actor: _Optional[str] = ..., forced: _Optional[bool] = ..., reason: _Optional[str] = ..., created_at: _Optional[str] = ..., announced: _Optional[bool] = ...) -> None: ...

class ListActivationsRequest(_message.Message):
    __slots__ = ("target", "history")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    target: str
    history: bool
    def __init__(self, target: _Optional[str] = ..., history: _Optional[bool] = ...) -> None: ...

class ListActivationsResponse(_message.Message):
    __slots__ = ("activations",)
    ACTIVATIONS_FIELD_NUMBER: _ClassVar[int]
    activations: _containers.RepeatedCompositeFieldContainer[Activation]
    def __init__(self, activations: _Optional[_Iterable[_Union[Activation, _Mapping]]] = ...) -> None: ...

class AuditRequest(_message.Message):
    __slots__ = ("limit", "version", "target", "actor")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    limit: int
    version: str
    target: str
    actor: str
    def __init__(self, limit: _Optional[int] = ..., version: _Optional[str] = ..., target: _Optional[str] = ..., actor: _Optional[str] = ...) -> None: ...

class AuditEntry(_message.Message):
    __slots__ = ("id", "at", "actor", "action", "version", "target", "proposal_id", "details_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PROPOSAL_ID_FIELD_NUMBER: _ClassVar[int]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: int
    at: str
    actor: str
    action: str
    version: str
    target: str
    proposal_id: int
    details_json: str
    def __init__(self, id: _Optional[int] = ..., at: _Optional[str] = ..., actor: _Optional[str] = ..., action: _Optional[str] = ..., version: _Optional[str] = ..., target: _Optional[str] = ..., proposal_id: _Optional[int] = ..., details_json: _Optional[str] = ...) -> None: ...

class AuditResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AuditEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[AuditEntry, _Mapping]]] = ...) -> None: ...

class LoadStatusRequest(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    def __init__(self, version: _Optional[str] = ...) -> None: ...

class LoadStatusEntry(_message.Message):
    __slots__ = ("service", "version", "ok", "error", "replica", "updated_at")
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    service: str
    version: str
    ok: bool
    error: str
    replica: str
    updated_at: str
    def __init__(self, service: _Optional[str] = ..., version: _Optional[str] = ..., ok: _Optional[bool] = ..., error: _Optional[str] = ..., replica: _Optional[str] = ..., updated_at: _Optional[str] = ...) -> None: ...

class LoadStatusResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[LoadStatusEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[LoadStatusEntry, _Mapping]]] = ...) -> None: ...
