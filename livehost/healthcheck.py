"""Container health check: exit 0 when a gRPC server's standard health service says SERVING, else 1.

    python -m livehost.healthcheck ingest                  # 127.0.0.1:<LIVEHOST_INGEST_GRPC_PORT>
    python -m livehost.healthcheck 127.0.0.1:50061         # any target
    python -m livehost.healthcheck ingest --service livehost.ingest.v1.IngestService --timeout 3

Used by docker-compose healthchecks (Kubernetes uses its native ``grpc:`` probe instead). A service
reports NOT_SERVING until its broker, database and Triton are reachable (livehost.service), so this
is a readiness check. Deliberately small: no asyncio, no settings beyond the port and the mutual-TLS
credential it presents (``LIVEHOST_GRPC_IDENTITY``, default ``operator``, from the PKI folder).
"""

from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def resolve_target(target: str) -> str:
    """``host:port`` stays as given; a service name becomes ``127.0.0.1:<its configured gRPC port>``."""
    if ":" in target:
        return target
    from livehost.config import load_settings

    port = getattr(load_settings(), f"{target}_grpc_port", None)
    if not isinstance(port, int) or port <= 0:
        raise ValueError(f"no gRPC port configured for {target!r}")
    return f"127.0.0.1:{port}"


def check(target: str, service: str = "", timeout: float = 2.0) -> str:
    """The reported status name (``SERVING``, ``NOT_SERVING``, ...) or the transport error's code."""
    from livehost.grpcutil import make_sync_channel

    with make_sync_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            return code.name if code is not None else "ERROR"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m livehost.healthcheck",
                                     description="Exit 0 if the gRPC health service reports SERVING.")
    parser.add_argument("target", help="host:port, or a service name (ingest, prompt, policy, ...)")
    parser.add_argument("--service", default="", help='health service name ("" = the whole server)')
    parser.add_argument("--timeout", type=float, default=2.0, help="deadline of the check in seconds")
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing")
    args = parser.parse_args(argv)
    try:
        target = resolve_target(args.target)
    except ValueError as exc:
        print(f"healthcheck: {exc}", file=sys.stderr)
        return 1
    status = check(target, args.service, args.timeout)
    if not args.quiet:
        print(f"{target} {args.service or '(server)'}: {status}")
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main())
