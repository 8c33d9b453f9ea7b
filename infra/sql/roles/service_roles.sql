-- Least-privilege PostgreSQL group roles, one per service that uses the database (NOLOGIN). A
-- deployment creates one LOGIN role per component IN ROLE its group and gives that DSN to that
-- component only (charts/livehost: components.<name>.postgresSecretKey). No group may change the
-- schema: the migrations run as their own job with the owner's DSN (`python -m livehost.db --roles`
-- applies the migrations, then this file; idempotent; needs a role with CREATEROLE).
-- policy uses no database and gets no role; ingest and voice only take delivery claims.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['livehost_prompt', 'livehost_tools', 'livehost_hooks', 'livehost_trajectories',
                           'livehost_harness'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
      EXECUTE format('CREATE ROLE %I NOLOGIN', r);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA public TO %I', r);
    -- reads: the catalog, the harness registry, room state
    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA public TO %I', r);
    EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO %I', r);
    -- every service that hot-reloads harnesses reports what it loaded (and audits a failed load)
    EXECUTE format('GRANT INSERT, UPDATE ON harness_load_status TO %I', r);
    EXECUTE format('GRANT INSERT ON harness_audit TO %I', r);
  END LOOP;
END $$;

-- tools: side effects (coupon grants, pinned products) with their idempotency keys and gate ledger
GRANT INSERT, UPDATE ON rooms, coupons, coupon_grants, tool_idempotency, side_effect_ledger TO livehost_tools;
-- hooks: experiment exposures and outcomes
GRANT INSERT ON experiment_exposures, outcome_events TO livehost_hooks;
-- trajectories: recorded requests and room memory
GRANT INSERT ON trajectories, room_memory TO livehost_trajectories;
GRANT UPDATE (published) ON trajectories TO livehost_trajectories;  -- marks a row's record as sent
-- harness: the registry workflow
GRANT INSERT, UPDATE ON harness_versions, harness_proposals, harness_reviews, harness_evaluations,
  harness_activations, harness_targets TO livehost_harness;

-- ingest and voice: only their delivery claims (durable deduplication), nothing else
DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['livehost_ingest', 'livehost_voice'] LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
      EXECUTE format('CREATE ROLE %I NOLOGIN', r);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA public TO %I', r);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON delivery_claims TO %I', r);
  END LOOP;
END $$;
