from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SubmitCommentRequest(_message.Message):
    __slots__ = ("room_id", "user_id", "text", "client_event_id")
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    room_id: str
    user_id: str
    text: str
    client_event_id: str
    def __init__(self, room_id: _Optional[str] = ..., user_id: _Optional[str] = ..., text: _Optional[str] = ..., client_event_id: _Optional[str] = ...) -> None: ...

class SubmitCommentResponse(_message.Message):
    __slots__ = ("event_id", "accepted", "partition", "offset")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    accepted: bool
    partition: int
    offset: int
    def __init__(self, event_id: _Optional[str] = ..., accepted: _Optional[bool] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class ProductSwitch(_message.Message):
    __slots__ = ("link_id",)
    LINK_ID_FIELD_NUMBER: _ClassVar[int]
    link_id: int
    def __init__(self, link_id: _Optional[int] = ...) -> None: ...

class CampaignChange(_message.Message):
    __slots__ = ("campaign_json",)
    CAMPAIGN_JSON_FIELD_NUMBER: _ClassVar[int]
    campaign_json: str
    def __init__(self, campaign_json: _Optional[str] = ...) -> None: ...

class RoomConfig(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: str
    def __init__(self, policy: _Optional[str] = ...) -> None: ...

class SubmitRoomEventRequest(_message.Message):
    __slots__ = ("room_id", "client_event_id", "product_switch", "campaign_change", "room_config")
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_SWITCH_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_CHANGE_FIELD_NUMBER: _ClassVar[int]
    ROOM_CONFIG_FIELD_NUMBER: _ClassVar[int]
    room_id: str
    client_event_id: str
    product_switch: ProductSwitch
    campaign_change: CampaignChange
    room_config: RoomConfig
    def __init__(self, room_id: _Optional[str] = ..., client_event_id: _Optional[str] = ..., product_switch: _Optional[_Union[ProductSwitch, _Mapping]] = ..., campaign_change: _Optional[_Union[CampaignChange, _Mapping]] = ..., room_config: _Optional[_Union[RoomConfig, _Mapping]] = ...) -> None: ...
