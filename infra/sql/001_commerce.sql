-- Commerce backend behind the harness tools: rooms and live links, products, inventory, FAQ,
-- coupons and grants, orders, and the idempotency ledger of side-effecting tool calls.
--
-- Every table carries a `scope`. Production data lives in scope 'live'; the evaluation sandbox
-- loads each case's catalog snapshot into its own scope ('case:<id>:<nonce>'), so two cases that
-- both describe "room-a, link 3" never see each other's products, coupons or grants.

CREATE TABLE IF NOT EXISTS rooms (
    scope         text        NOT NULL DEFAULT 'live',
    room_id       text        NOT NULL,
    current_link  integer,
    viewer_count  integer     NOT NULL DEFAULT 0 CHECK (viewer_count >= 0),
    campaign      jsonb,                               -- {name, rules[], max_discount_pct} or NULL
    pinned_link   integer,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, room_id)
);

CREATE TABLE IF NOT EXISTS products (
    scope       text          NOT NULL DEFAULT 'live',
    room_id     text          NOT NULL,
    link_id     integer       NOT NULL CHECK (link_id >= 1),
    sku         text          NOT NULL,
    title       text          NOT NULL,
    price       numeric(12,2) NOT NULL CHECK (price >= 0),
    currency    text          NOT NULL DEFAULT 'CNY',
    attributes  jsonb         NOT NULL DEFAULT '{}'::jsonb,
    -- keyword search over title, SKU and attribute values (see faq below for why FTS)
    search_tsv  tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('simple', coalesce(sku, '')), 'A') ||
        setweight(jsonb_to_tsvector('english', attributes, '["string", "numeric", "key"]'), 'B')
    ) STORED,
    PRIMARY KEY (scope, room_id, link_id),
    FOREIGN KEY (scope, room_id) REFERENCES rooms (scope, room_id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS products_search_idx ON products USING gin (search_tsv);
CREATE INDEX IF NOT EXISTS products_sku_idx ON products (scope, room_id, upper(sku));

CREATE TABLE IF NOT EXISTS inventory (
    scope       text        NOT NULL DEFAULT 'live',
    room_id     text        NOT NULL,
    link_id     integer     NOT NULL,
    stock       integer     NOT NULL CHECK (stock >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, room_id, link_id),
    FOREIGN KEY (scope, room_id, link_id) REFERENCES products (scope, room_id, link_id) ON DELETE CASCADE
);

-- FAQ retrieval is PostgreSQL full-text search (tsvector + GIN): keyword FTS is robust, needs no
-- extra service or model, and is good at the exact SKU / attribute terms viewers type. Embeddings
-- are a later option (a pgvector column beside this one), not a prerequisite.
CREATE TABLE IF NOT EXISTS faq (
    faq_id   bigserial PRIMARY KEY,
    scope    text    NOT NULL DEFAULT 'live',
    room_id  text    NOT NULL,
    link_id  integer,                                   -- NULL: merchant / room-wide entry
    q        text    NOT NULL,
    a        text    NOT NULL,
    tsv      tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', q), 'A') || setweight(to_tsvector('english', a), 'B')
    ) STORED,
    FOREIGN KEY (scope, room_id) REFERENCES rooms (scope, room_id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS faq_tsv_idx ON faq USING gin (tsv);
CREATE INDEX IF NOT EXISTS faq_room_idx ON faq (scope, room_id, link_id);

CREATE TABLE IF NOT EXISTS coupons (
    coupon_id       bigserial PRIMARY KEY,
    scope           text          NOT NULL DEFAULT 'live',
    room_id         text          NOT NULL,
    link_id         integer,                            -- NULL: valid for every link of the room
    code            text          NOT NULL,
    discount_pct    numeric(5,2)  NOT NULL CHECK (discount_pct > 0 AND discount_pct <= 100),
    min_spend       numeric(12,2) NOT NULL DEFAULT 0 CHECK (min_spend >= 0),
    per_user_limit  integer       NOT NULL DEFAULT 1 CHECK (per_user_limit >= 1),
    FOREIGN KEY (scope, room_id) REFERENCES rooms (scope, room_id) ON DELETE CASCADE,
    UNIQUE NULLS NOT DISTINCT (scope, room_id, code, link_id)
);
CREATE INDEX IF NOT EXISTS coupons_code_idx ON coupons (scope, room_id, upper(code));

-- One row per coupon handed to a viewer. grant_no counts a viewer's grants of one code, and the
-- unique key makes a per-user limit race impossible even without the row lock taken on issue.
CREATE TABLE IF NOT EXISTS coupon_grants (
    grant_id         bigserial PRIMARY KEY,
    scope            text        NOT NULL DEFAULT 'live',
    room_id          text        NOT NULL,
    user_id          text        NOT NULL,
    code             text        NOT NULL,
    grant_no         integer     NOT NULL CHECK (grant_no >= 1),
    idempotency_key  text,
    granted_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (scope, room_id, user_id, code, grant_no)
);

CREATE TABLE IF NOT EXISTS orders (
    scope      text        NOT NULL DEFAULT 'live',
    order_id   text        NOT NULL,
    user_id    text        NOT NULL,
    room_id    text,
    status     text        NOT NULL,
    carrier    text,
    eta        date,
    items      jsonb       NOT NULL DEFAULT '[]'::jsonb,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, order_id)
);

-- Exactly-once ledger of side-effecting tool calls. The row is inserted in the same transaction
-- as the side effect; a concurrent duplicate blocks on the uncommitted key, then reads the result.
CREATE TABLE IF NOT EXISTS tool_idempotency (
    scope            text        NOT NULL DEFAULT 'live',
    idempotency_key  text        NOT NULL,
    tool             text        NOT NULL,
    operation        text        NOT NULL,
    request_id       text,
    result           jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, idempotency_key)
);
CREATE INDEX IF NOT EXISTS tool_idempotency_created_idx ON tool_idempotency (created_at);
