"""Time to reject an oversize comment (the issue measured 2.2 s of event-loop CPU for 30 MiB).

    python benchmarks/bench_reject.py [--mib 30] [--repeat 20]

Three figures, median and max over ``--repeat`` runs:

* handler   — ``services.ingest.handlers.comment_event`` on a 30 MiB text (the size check now comes
              before cleaning: what Ingest's event loop spends if such a text ever reached it);
* interceptor — the auth interceptor's per-method size check on the 30 MiB serialized request
              (what a server spends on a request over the method's limit but under gRPC's cap);
* grpc      — wall time seen by a client sending a 30 MiB SubmitComment to a real mutual-TLS server
              (start_server + the Ingest servicer) until RESOURCE_EXHAUSTED: this includes the
              client encrypting and writing 30 MiB over loopback, and gRPC refusing the message at
              the transport (its receive cap is the largest per-method limit, 8 MiB).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from livehost.config import Settings  # noqa: E402
from livehost.gen.livehost.ingest.v1 import ingest_pb2, ingest_pb2_grpc  # noqa: E402
from livehost.grpcutil import make_channel, start_server  # noqa: E402
from livehost.security.authz import _size_checked  # noqa: E402
from livehost.security.pki import ensure_pki  # noqa: E402
from services.ingest import handlers  # noqa: E402


def figures(name: str, samples: list[float]) -> None:
    print(f"{name:12} median {statistics.median(samples) * 1000:8.3f} ms   max {max(samples) * 1000:8.3f} ms"
          f"   (n={len(samples)})")


class _NoPublish(ingest_pb2_grpc.IngestServiceServicer):
    async def SubmitComment(self, request: Any, context: Any) -> Any:
        handlers.comment_event(request.room_id, request.user_id, request.text, 500, max_bytes=2048)
        return ingest_pb2.SubmitCommentResponse(event_id="x", accepted=True)


async def grpc_figure(text: str, repeat: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(grpc_pki_dir=Path(tmp))
        ensure_pki(Path(tmp), settings.grpc_roles.keys())
        running = await start_server([(ingest_pb2_grpc.add_IngestServiceServicer_to_server, _NoPublish())],
                                     identity="ingest", settings=settings)
        samples = []
        try:
            async with make_channel(running.target, identity="producer", settings=settings) as channel:
                stub = ingest_pb2_grpc.IngestServiceStub(channel)
                request = ingest_pb2.SubmitCommentRequest(room_id="room-a", user_id="u-1", text=text)
                for _ in range(repeat):
                    started = time.perf_counter()
                    try:
                        await stub.SubmitComment(request, timeout=30)
                        raise SystemExit("a 30 MiB comment was accepted")
                    except grpc.aio.AioRpcError as exc:
                        if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                            raise SystemExit(f"unexpected {exc.code()}: {exc.details()}") from None
                    samples.append(time.perf_counter() - started)
        finally:
            await running.stop(grace=0)
        return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    text = "a\x01" * (args.mib * 1024 * 1024 // 2)
    print(f"rejecting a {args.mib} MiB comment")

    samples = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        try:
            handlers.comment_event("room-a", "u-1", text, 500, max_bytes=2048)
        except handlers.InvalidEvent:
            pass
        samples.append(time.perf_counter() - started)
    figures("handler", samples)

    payload = ingest_pb2.SubmitCommentRequest(room_id="room-a", user_id="u-1", text=text).SerializeToString()
    check = _size_checked(ingest_pb2.SubmitCommentRequest.FromString, 64 * 1024)
    samples = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        check(payload)
        samples.append(time.perf_counter() - started)
    figures("interceptor", samples)

    figures("grpc", asyncio.run(grpc_figure(text, max(3, args.repeat // 4))))


if __name__ == "__main__":
    main()
