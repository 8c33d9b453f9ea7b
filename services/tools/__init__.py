"""Tool execution: runs harness tools against the commerce backend, with schemas, timeouts and idempotency."""
