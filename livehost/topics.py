"""Every Kafka topic of LiveHost, declared once: name, key, partitions and Avro schema.

Hot-path topics are keyed by room id so one room's events stay in order on one partition, and the
system scales out by adding partitions and consumer-group replicas.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    name: str
    key: str
    partitions: int
    schema: str  # Avro record full name, defined in schemas/*.avsc
    doc: str


ROOM_EVENTS = Topic("live.room.events", "room_id", 4, "livehost.RoomEvent",
                    "Comments, product switches and campaign changes from live-room producers and Ingest.")
REQUESTS = Topic("agent.requests", "room_id", 4, "livehost.AgentRequest",
                 "Merged, checked requests (turn 0) and continuations for the next agent turn.")
PROMPTS = Topic("agent.prompts", "room_id", 4, "livehost.AgentPrompt",
                "Assembled prompts, one per agent turn.")
ACTIONS = Topic("agent.actions", "room_id", 4, "livehost.AgentAction",
                "Parsed policy actions, checked by the step hooks.")
TOOL_CALLS = Topic("agent.tool_calls", "room_id", 4, "livehost.ToolCall",
                   "Tool calls whose arguments passed the tool-argument hooks.")
TOOL_RESULTS = Topic("agent.tool_results", "room_id", 4, "livehost.ToolResult",
                     "Tool results and structured tool errors; the next turn's prompt reads them.")
REPLIES = Topic("agent.replies", "room_id", 4, "livehost.AgentReply",
                "Terminal outcome of every request: approved reply, no reply, rejection, fallback, cancellation.")
AVATAR_SEGMENTS = Topic("avatar.segments", "room_id", 4, "livehost.AvatarSegment",
                        "Speakable chunks with timing and visemes for the avatar renderer.")
TRAJECTORIES = Topic("agent.trajectories", "room_id", 4, "livehost.Trajectory",
                     "One whole trajectory per request, tagged with its harness version.")
DEAD_LETTER = Topic("livehost.deadletter", "source", 1, "livehost.DeadLetter",
                    "Records that failed decoding or processing, with error and source offset.")
HARNESS_EVENTS = Topic("harness.events", "target", 1, "livehost.HarnessEvent",
                       "Harness activations and rollbacks; every replica hot-reloads on them.")

OUTCOMES = Topic("commerce.outcomes", "user_id", 4, "livehost.OutcomeEvent",
                 "Item-page views and confirmed orders (with amount) from the commerce side; "
                 "experiments join them to exposures.")

ALL_TOPICS: tuple[Topic, ...] = (
    ROOM_EVENTS, REQUESTS, PROMPTS, ACTIONS, TOOL_CALLS, TOOL_RESULTS, REPLIES,
    AVATAR_SEGMENTS, TRAJECTORIES, DEAD_LETTER, HARNESS_EVENTS, OUTCOMES,
)


def by_name(name: str) -> Topic:
    for topic in ALL_TOPICS:
        if topic.name == name:
            return topic
    raise KeyError(f"unknown topic {name!r}")
