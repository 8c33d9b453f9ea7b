"""The table of harness transitions and their checks (livehost/harness/gates.py): the page that shows
it is generated from it, every check it names is implemented by the registry, every transition's
method has roles. (tests/integration/test_harness_gates.py walks each row against PostgreSQL.)"""

from __future__ import annotations

from typing import Any

import pytest

from livehost.config import REPO_ROOT
from livehost.harness import gates
from livehost.harness.registry import Refused, Registry
from livehost.security.authz import METHOD_ROLES

PAGE = REPO_ROOT / "docs" / "harness-gates.md"


def test_the_page_shows_the_table_the_registry_enforces() -> None:
    text = PAGE.read_text()
    begin, end = "<!-- gates:begin -->\n", "<!-- gates:end -->"
    shown = text[text.index(begin) + len(begin):text.index(end)]
    assert shown == gates.markdown(), "docs/harness-gates.md is stale: regenerate with python -m livehost.harness.gates"


def test_the_table_is_consistent() -> None:
    names = [t.name for t in gates.TRANSITIONS]
    assert len(names) == len(set(names))
    for t in gates.TRANSITIONS:
        assert set(t.checks) <= set(gates.CHECKS), t
        assert gates.SERVICE + t.method in METHOD_ROLES, t
        assert t.forcible == bool(t.checks), t  # force overrides checks; with none there is nothing to force
    # every transition that makes a version active runs every check
    for t in gates.TRANSITIONS:
        if t is not gates.CLEAR:
            assert set(t.checks) == set(gates.CHECKS), t
    # forcing is a role of its own, held by somebody
    from livehost.config import Settings

    assert any(gates.FORCE_ROLE in roles for roles in Settings().grpc_roles.values())


class _Conn:
    """Answers the registry's two check queries: is the version approved, did its latest evaluation pass."""

    def __init__(self, approved: bool, passed: bool | None):
        self.approved, self.passed = approved, passed

    async def fetchval(self, sql: str, *args: Any) -> Any:
        if "harness_reviews" in sql:
            return self.approved
        if "harness_evaluations" in sql:
            return self.passed
        raise AssertionError(f"unexpected query {sql}")


@pytest.mark.parametrize("transition", gates.TRANSITIONS, ids=lambda t: t.name)
@pytest.mark.parametrize(("approved", "passed", "failing"), [
    (True, True, set()), (False, True, {"review"}), (True, False, {"evaluation"}), (True, None, {"evaluation"}),
    (False, False, {"review", "evaluation"}),
])
async def test_every_check_of_every_transition_is_enforced(transition: gates.Transition, approved: bool,
                                                          passed: bool | None, failing: set[str]) -> None:
    registry = Registry(None)  # type: ignore[arg-type]  # the checks run on the connection given
    conn = _Conn(approved, passed)
    expected = failing & set(transition.checks)
    failed = await registry._failed_checks(conn, "v", transition)  # type: ignore[arg-type]
    assert len(failed) == len(expected)
    if expected:
        with pytest.raises(Refused, match="use force with a reason"):
            await registry._gate(conn, "v", "global", transition, force=False)  # type: ignore[arg-type]
        assert await registry._gate(conn, "v", "global", transition, force=True) == failed  # type: ignore[arg-type]
    else:
        assert await registry._gate(conn, "v", "global", transition, force=False) == []  # type: ignore[arg-type]
    # with the evaluation gate switched off, only the review counts
    off = Registry(None, require_evaluation=False)  # type: ignore[arg-type]
    assert len(await off._failed_checks(conn, "v", transition)) == len(expected - {"evaluation"})  # type: ignore[arg-type]
