"""Harness: the gRPC Harness API over the harness registry (the same code the CLI runs)."""
