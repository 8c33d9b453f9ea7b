"""Every Kafka topic of LiveHost, declared once: name, key, partitions, Avro schema, retention.

Hot-path topics are keyed by room id so one room's events stay in order on one partition, and the
system scales out by adding partitions and consumer-group replicas.

Retention and compaction are applied when a topic is created (``livehost.kafka.ensure_topics``); the
Helm chart and docker-compose.yml carry no topic settings of their own (their init job runs the same
code), and a test checks that nothing else declares them. Hot-path topics keep a day: a request lives
seconds, and a day covers replay after an outage. What people read later (replies, trajectories,
outcomes, dead letters) keeps longer. Keyed state (harness activations, Faust table changelogs) is
compacted: the latest value per key is what a restarting reader needs.
"""

from __future__ import annotations

from dataclasses import dataclass

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


@dataclass(frozen=True)
class Topic:
    name: str
    key: str
    partitions: int
    schema: str  # Avro record full name, defined in schemas/*.avsc ("" for a Faust changelog)
    doc: str
    retention_ms: int = DAY_MS  # -1 = keep forever (compacted topics)
    cleanup_policy: str = "delete"  # "delete" or "compact"
    max_message_bytes: int = 1_048_576  # the broker refuses larger records; producers check first

    def configs(self) -> dict[str, str]:
        """Topic-level broker settings applied at creation."""
        out = {"cleanup.policy": self.cleanup_policy, "retention.ms": str(self.retention_ms),
               "max.message.bytes": str(self.max_message_bytes)}
        if self.cleanup_policy == "compact":
            # Compact soon after a segment rolls, so a restarting table reads little history.
            out.update({"segment.ms": str(HOUR_MS), "min.cleanable.dirty.ratio": "0.1"})
        return out


ROOM_EVENTS = Topic("live.room.events", "room_id", 4, "livehost.RoomEvent",
                    "Comments, product switches and campaign changes from live-room producers and Ingest.",
                    retention_ms=7 * DAY_MS)
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
                "Terminal outcome of every request: approved reply, no reply, rejection, fallback, cancellation.",
                retention_ms=7 * DAY_MS)
AVATAR_SEGMENTS = Topic("avatar.segments", "room_id", 4, "livehost.AvatarSegment",
                        "Speakable chunks with timing and visemes for the avatar renderer.")
TRAJECTORIES = Topic("agent.trajectories", "room_id", 4, "livehost.Trajectory",
                     "One whole trajectory per request, tagged with its harness version.",
                     retention_ms=30 * DAY_MS)
DEAD_LETTER = Topic("livehost.deadletter", "source", 1, "livehost.DeadLetter",
                    "Records that failed decoding or processing, with error and source offset.",
                    retention_ms=14 * DAY_MS)
HARNESS_EVENTS = Topic("harness.events", "target", 1, "livehost.HarnessEvent",
                       "Harness activations and rollbacks; every replica hot-reloads on them.",
                       retention_ms=-1, cleanup_policy="compact")

OUTCOMES = Topic("commerce.outcomes", "user_id", 4, "livehost.OutcomeEvent",
                 "Item-page views and confirmed orders (with amount) from the commerce side; "
                 "experiments join them to exposures.", retention_ms=30 * DAY_MS)

# Faust table changelogs (``<app id>-<table>-changelog``): compacted, one partition per source partition.
HOOKS_ROOMS_CHANGELOG = Topic("livehost-hooks-rooms-changelog", "room_id", ROOM_EVENTS.partitions, "",
                              "Changelog of the hooks processor's per-room table (product on screen, "
                              "campaign, agent); a restarted worker rebuilds the table from it.",
                              retention_ms=-1, cleanup_policy="compact")

ALL_TOPICS: tuple[Topic, ...] = (
    ROOM_EVENTS, REQUESTS, PROMPTS, ACTIONS, TOOL_CALLS, TOOL_RESULTS, REPLIES,
    AVATAR_SEGMENTS, TRAJECTORIES, DEAD_LETTER, HARNESS_EVENTS, OUTCOMES, HOOKS_ROOMS_CHANGELOG,
)


def by_name(name: str) -> Topic:
    for topic in ALL_TOPICS:
        if topic.name == name:
            return topic
    raise KeyError(f"unknown topic {name!r}")
