-- Faults injected into the sandbox tools of one evaluation case (shared/eval/CASES.md `faults`):
-- per catalog scope and capability (product, inventory, coupon, order, faq) one of timeout,
-- malformed, permission_denied. Stored here rather than in process memory so that the tools
-- *service* applies them too, and eval cases can run through the real Kafka path.
-- The live scope never has faults (refused by the writer).
CREATE TABLE IF NOT EXISTS sandbox_faults (
    scope       text        NOT NULL CHECK (scope <> 'live'),
    capability  text        NOT NULL,
    fault       text        NOT NULL CHECK (fault IN ('timeout', 'malformed', 'permission_denied')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, capability)
);
