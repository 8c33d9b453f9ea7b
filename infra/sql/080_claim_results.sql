-- What the claimed delivery produced, when it has a result worth repeating: Ingest stores where a client
-- event landed ("<partition>:<offset>"), so a client's retry of an event already accepted is answered
-- with the original partition and offset (accepted=false), as an idempotent API answers a retry.
ALTER TABLE delivery_claims ADD COLUMN IF NOT EXISTS result text;
