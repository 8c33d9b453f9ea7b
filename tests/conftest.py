"""Every test session gets its own local CA and credentials (mutual TLS is on by default): the
``LIVEHOST_GRPC_PKI_DIR`` they live in is inherited by every service process a test starts."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from livehost.config import Settings
from livehost.security.pki import ensure_pki
from livehost.stack import kafka
from livehost.stack.process import Running
from livehost.stack.testing import reset_topics, running_broker


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


# --- The broker: one Apache Kafka per test session, shared like PostgreSQL, fresh topics per test ---


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """End-to-end tests run last: their system (every service, consuming the shared broker's topics in
    the services' own consumer groups) lives until the session ends and must not see other tests'
    records, nor have its topics reset under it."""
    items.sort(key=lambda item: "/e2e/" in str(item.path).replace(os.sep, "/"))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory, test_pki: str) -> Iterator[Running]:
    """Apache Kafka as users run it: SASL_SSL + SCRAM, certificate from the session's CA. Its client
    settings go into the environment, so every Settings() and every service process a test starts
    connects the way the stack's env file would make them."""
    with running_broker(tmp_path_factory.mktemp("kafka"), secure=True) as rec:
        security = kafka.client_security(rec)
        assert security, "the session broker must run with authentication"
        old = {key: os.environ.get(key) for key in security}
        os.environ.update(security)
        try:
            yield rec
        finally:
            for key, value in old.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@pytest.fixture
def kafka_bootstrap(kafka_broker: Running) -> str:
    """The session's broker with no topics left by earlier tests."""
    bootstrap = kafka.bootstrap(kafka_broker)
    reset_topics(bootstrap)
    return bootstrap


@pytest.fixture(scope="module")
def module_kafka_bootstrap(kafka_broker: Running) -> str:
    """The session's broker with fresh topics for a module whose fixtures are module-scoped."""
    bootstrap = kafka.bootstrap(kafka_broker)
    reset_topics(bootstrap)
    return bootstrap
