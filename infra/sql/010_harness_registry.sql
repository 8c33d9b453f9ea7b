-- Harness registry: immutable content-addressed versions, proposals and reviews, evaluation
-- results, activations per target (with history for rollback), load status reported by services,
-- and an audit log of every step. Written by livehost/harness/registry.py.

CREATE TABLE harness_versions (
    version     text PRIMARY KEY,                          -- Harness.version(): sha256 of canonical JSON
    name        text NOT NULL,
    bundle      jsonb NOT NULL,                            -- canonical JSON bundle
    parent      text REFERENCES harness_versions(version),
    author      text NOT NULL,
    message     text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX harness_versions_created_idx ON harness_versions (created_at DESC);

-- Versions are immutable: content-addressed rows never change or disappear.
CREATE FUNCTION harness_versions_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'harness versions are immutable (% on %)', TG_OP, OLD.version;
END $$;
CREATE TRIGGER harness_versions_immutable BEFORE UPDATE OR DELETE ON harness_versions
    FOR EACH ROW EXECUTE FUNCTION harness_versions_immutable();

CREATE TABLE harness_proposals (
    id          bigserial PRIMARY KEY,
    version     text NOT NULL REFERENCES harness_versions(version),
    author      text NOT NULL,
    message     text NOT NULL DEFAULT '',
    status      text NOT NULL DEFAULT 'proposed' CHECK (status IN (
                    'proposed', 'approved', 'rejected', 'changes_requested', 'evaluated', 'active',
                    'rolled_back')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX harness_proposals_version_idx ON harness_proposals (version);

CREATE TABLE harness_reviews (
    id           bigserial PRIMARY KEY,
    proposal_id  bigint NOT NULL REFERENCES harness_proposals(id),
    reviewer     text NOT NULL,
    decision     text NOT NULL CHECK (decision IN ('approve', 'reject', 'request_changes')),
    comment      text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX harness_reviews_proposal_idx ON harness_reviews (proposal_id);

CREATE TABLE harness_evaluations (
    id          bigserial PRIMARY KEY,
    version     text NOT NULL REFERENCES harness_versions(version),
    passed      boolean NOT NULL,
    result      jsonb NOT NULL,
    actor       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX harness_evaluations_version_idx ON harness_evaluations (version, id DESC);

-- One row per activation or rollback of a target ("global", "room:<id>", "arm:<experiment>/<arm>").
-- version NULL = the target's override was cleared (a room/arm falls back to global).
-- back_to = the activation a plain rollback from this one returns to (a stack of activations).
CREATE TABLE harness_activations (
    id                bigserial PRIMARY KEY,
    target            text NOT NULL,
    version           text REFERENCES harness_versions(version),
    action            text NOT NULL CHECK (action IN ('activate', 'rollback')),
    previous_version  text,
    back_to           bigint REFERENCES harness_activations(id),
    actor             text NOT NULL,
    forced            boolean NOT NULL DEFAULT false,
    reason            text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX harness_activations_target_idx ON harness_activations (target, id DESC);

-- The current activation of each target (locked FOR UPDATE while it changes).
CREATE TABLE harness_targets (
    target         text PRIMARY KEY,
    version        text REFERENCES harness_versions(version),
    activation_id  bigint NOT NULL REFERENCES harness_activations(id),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- What each service reported when it loaded a version (ok, or the error it kept serving through).
CREATE TABLE harness_load_status (
    service     text NOT NULL,
    version     text NOT NULL,
    ok          boolean NOT NULL,
    error       text NOT NULL DEFAULT '',
    replica     text NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (service, version)
);

CREATE TABLE harness_audit (
    id           bigserial PRIMARY KEY,
    at           timestamptz NOT NULL DEFAULT now(),
    actor        text NOT NULL,
    action       text NOT NULL,
    version      text,
    target       text,
    proposal_id  bigint,
    details      jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX harness_audit_at_idx ON harness_audit (id DESC);
