-- Whether the trajectory record of a row went out on agent.trajectories: a reply delivered twice
-- (a stream processor that restarted re-emits it) publishes its trajectory once, while a recorder
-- killed between the row and the record still publishes it when the reply comes again.
-- Rows stored before this column existed were published when they were stored.
ALTER TABLE trajectories ADD COLUMN IF NOT EXISTS published boolean NOT NULL DEFAULT true;
ALTER TABLE trajectories ALTER COLUMN published SET DEFAULT false;
