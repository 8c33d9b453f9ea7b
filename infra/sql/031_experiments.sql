-- Online A/B experiments: definitions (arms = harness versions or the 'react' baseline, traffic
-- split, salt, start/stop), exposures (one stable assignment per user, logged once), and outcome
-- events from the commerce side (item-page views, confirmed orders with amount).
-- Written by livehost/experiments/store.py.

CREATE TABLE experiments (
    name         text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    description  text NOT NULL DEFAULT '',
    salt         text NOT NULL,
    status       text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'running', 'stopped')),
    start_at     timestamptz,
    stop_at      timestamptz,
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (stop_at IS NULL OR start_at IS NULL OR stop_at > start_at)
);

CREATE TABLE experiment_arms (
    experiment       text NOT NULL REFERENCES experiments(name),
    arm              text NOT NULL CHECK (arm ~ '^[a-z0-9][a-z0-9_-]{0,31}$'),
    position         int NOT NULL,                      -- 0 = control
    harness_version  text NOT NULL,                     -- a harness_versions.version, or 'react'
    weight           double precision NOT NULL CHECK (weight > 0),
    PRIMARY KEY (experiment, arm),
    UNIQUE (experiment, position)
);

-- One row per (experiment, user): the assignment is computed once (hash of salt and user id) and
-- never changes, even if the split is edited later.
CREATE TABLE experiment_exposures (
    experiment    text NOT NULL REFERENCES experiments(name),
    user_id       text NOT NULL,
    arm           text NOT NULL,
    bucket        int NOT NULL,
    room_id       text,
    exposed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (experiment, user_id),
    FOREIGN KEY (experiment, arm) REFERENCES experiment_arms(experiment, arm)
);
CREATE INDEX experiment_exposures_arm_idx ON experiment_exposures (experiment, arm);

-- Outcome events are not tied to an experiment: the analysis joins them to exposures by user and
-- counts those at or after the user's exposure and before the experiment's stop.
CREATE TABLE outcome_events (
    event_id     text PRIMARY KEY,                      -- idempotent: a redelivered event is stored once
    type         text NOT NULL CHECK (type IN ('item_page_view', 'order_confirmed')),
    user_id      text NOT NULL,
    room_id      text,
    link_id      int,
    order_id     text,
    amount       numeric(14, 2),
    currency     text,
    ts           timestamptz NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (type <> 'order_confirmed' OR amount IS NOT NULL)
);
CREATE INDEX outcome_events_user_ts_idx ON outcome_events (user_id, ts);
