-- One row per request: the whole trajectory, tagged with the harness version it ran on.
CREATE TABLE IF NOT EXISTS trajectories (
    request_id      text PRIMARY KEY,
    room_id         text NOT NULL,
    harness_version text NOT NULL,
    policy          text NOT NULL DEFAULT '',
    outcome         text NOT NULL,
    reply_text      text,
    reason          text,
    merged_text     text NOT NULL,
    comments        jsonb NOT NULL,
    steps           jsonb NOT NULL,
    created_ms      bigint NOT NULL,
    completed_ms    bigint NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS trajectories_room_idx ON trajectories (room_id, created_ms);
CREATE INDEX IF NOT EXISTS trajectories_version_idx ON trajectories (harness_version);

-- What the host already said in a room, so later replies stay consistent within a live session.
CREATE TABLE IF NOT EXISTS room_memory (
    request_id  text PRIMARY KEY,
    room_id     text NOT NULL,
    text        text NOT NULL,
    ts_ms       bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS room_memory_room_idx ON room_memory (room_id, ts_ms DESC);
