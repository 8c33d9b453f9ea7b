"""Ingest: accepts viewer comments and room events over gRPC and publishes them to the room-events topic."""
