-- Durable "once" for deliveries whose services keep no other state: a claim is taken (INSERT) before
-- the effect and survives a restart, so a redelivered record finds it. Scopes: 'voice' (key: the
-- request id of a spoken reply — a reply redelivered after a voice restart is spoken once) and 'ingest'
-- (key: room id + client_event_id — a resubmitted event is answered accepted=false within
-- `ingest_dedup_window_s`). Old claims are purged with `retention_idempotency_days`.
CREATE TABLE IF NOT EXISTS delivery_claims (
    scope text NOT NULL,
    key text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS delivery_claims_at ON delivery_claims (at);
