"""Transport security and authorization: the local PKI (:mod:`.pki`), roles per gRPC method
(:mod:`.authz`), secret redaction (:mod:`.redact`) and untrusted-id validation (:mod:`.ids`)."""

from __future__ import annotations

from pathlib import Path

from livehost.config import Settings, load_settings, state_dir
from livehost.security.pki import ensure_pki


def pki_dir(settings: Settings | None = None) -> Path:
    """Where this process finds credentials: ``LIVEHOST_GRPC_PKI_DIR`` or ``<state_dir>/pki``."""
    settings = settings or load_settings()
    return Path(settings.grpc_pki_dir) if settings.grpc_pki_dir else state_dir() / "pki"


def ensure_local_pki(settings: Settings | None = None) -> list[str]:
    """The local CA and a credential for every identity bound in ``grpc_roles`` (idempotent)."""
    settings = settings or load_settings()
    return ensure_pki(pki_dir(settings), settings.grpc_roles.keys())
