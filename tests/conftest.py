"""Every test session gets its own local CA and credentials (mutual TLS is on by default): the
``LIVEHOST_GRPC_PKI_DIR`` they live in is inherited by every service process a test starts."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from livehost.config import Settings
from livehost.security.pki import ensure_pki


@pytest.fixture(scope="session", autouse=True)
def test_pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("pki")
    ensure_pki(directory, Settings().grpc_roles.keys())
    old = os.environ.get("LIVEHOST_GRPC_PKI_DIR")
    os.environ["LIVEHOST_GRPC_PKI_DIR"] = str(directory)
    yield str(directory)
    if old is None:
        os.environ.pop("LIVEHOST_GRPC_PKI_DIR", None)
    else:
        os.environ["LIVEHOST_GRPC_PKI_DIR"] = old
