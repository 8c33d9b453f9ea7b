-- Side effects per room and viewer, for the side-effect gate's budgets (livehost/hooks/gate.py).
-- One row per side effect that ran (inserted in the side effect's own transaction, keyed by its
-- idempotency key so a replay is not counted twice); purged with the idempotency keys.
CREATE TABLE IF NOT EXISTS side_effect_ledger (
    scope            text        NOT NULL DEFAULT 'live',
    idempotency_key  text        NOT NULL,
    room_id          text        NOT NULL,
    user_id          text,
    tool             text        NOT NULL,
    operation        text        NOT NULL,
    at               timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, idempotency_key)
);
CREATE INDEX IF NOT EXISTS side_effect_ledger_room_idx ON side_effect_ledger (scope, room_id, at);
CREATE INDEX IF NOT EXISTS side_effect_ledger_at_idx ON side_effect_ledger (at);
