-- Fault drills on the live tools (issue 12: "tool timeouts and malformed tool results"): while a row is
-- active, every live tool call of that capability (product, inventory, coupon, order, faq) times out,
-- returns a malformed result or is refused, the way an evaluation case's sandbox faults do
-- (030_sandbox_faults.sql), so an operator can see the system say what went wrong and keep serving.
-- Off by default (no row). Only the schema owner writes it (`python -m livehost.commerce.drills`):
-- the service roles may only read (roles/service_roles.sql), and nothing a viewer, a Kafka record or a
-- gRPC call sends reaches it. A drill always ends by itself: at most one hour.
CREATE TABLE IF NOT EXISTS tool_fault_drills (
    capability  text        PRIMARY KEY,
    fault       text        NOT NULL CHECK (fault IN ('timeout', 'malformed', 'permission_denied')),
    started_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    started_by  text        NOT NULL DEFAULT current_user,
    CHECK (expires_at > started_at AND expires_at <= started_at + interval '1 hour')
);
