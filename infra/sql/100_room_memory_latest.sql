-- The prompt reads a room's latest few memory rows (ORDER BY ts_ms DESC, request_id DESC LIMIT n). The
-- index on (room_id, ts_ms DESC) left the request-id tie-break to a sort of every row the room had kept
-- (30 days by default, retention_room_memory_days), on every request; with the tie-break in the index
-- the read stops after n rows whatever the room's history.
CREATE INDEX IF NOT EXISTS room_memory_latest_idx ON room_memory (room_id, ts_ms DESC, request_id DESC);
DROP INDEX IF EXISTS room_memory_room_idx;
