"""Settings of the voice service: the shared settings (livehost.config) plus what is its own."""

import os

from livehost.config import Settings

GROUP_ID = "livehost-voice"  # replies, keyed by room
ROOMS_GROUP_ID = f"{GROUP_ID}-rooms"  # room events, read apart from the replies (services/voice/server.py)
# The consumer groups a process of this service is a member of: the supervisor removes a crashed
# replica from them at once when a peer replica runs (livehost.kafka.remove_static_members).
CONSUMER_GROUPS = (GROUP_ID, ROOMS_GROUP_ID)
# The room-events reader acts on product switches only, but receives every comment: its fetches wait
# for this many bytes (about a hundred comments) or the shared fetch wait (100 ms), whichever comes
# first, instead of returning with each comment. A product switch then stops speech up to that wait
# later; under load the wait is shorter, as the comments fill the fetch.
ROOMS_FETCH_MIN_BYTES = int(os.environ.get("LIVEHOST_VOICE_ROOMS_FETCH_MIN_BYTES", str(16 * 1024)))


def grpc_port(s: Settings) -> int:
    return s.voice_grpc_port


def synth_workers() -> int:
    """Synthesis threads (``LIVEHOST_VOICE_SYNTH_WORKERS``, default 1).

    One thread is enough for fairness: rooms interleave chunk by chunk, and piper already uses every
    core inside one inference (and serialises its phonemizer). More threads help with espeak.
    """
    try:
        return max(1, int(os.environ.get("LIVEHOST_VOICE_SYNTH_WORKERS", "1")))
    except ValueError:
        return 1
