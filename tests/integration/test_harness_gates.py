"""Every row of the gates table (livehost/harness/gates.py, docs/harness-gates.md) against the real
registry on PostgreSQL: for each transition and each check, a version failing only that check is
refused without force, and taken with force + reason only as ``forced: true`` in the activation and
its audit row; a version passing every check goes through unforced.

One database for the module, a fresh target and fresh versions per case: fast and independent.
Versions are the shipped harness with another description: no test names a skill, tool or hook.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from livehost.config import REPO_ROOT
from livehost.harness import gates
from livehost.harness.loader import load
from livehost.harness.registry import Activation, BadRequest, Refused, Registry
from tests.integration.conftest import create_database

pytestmark = pytest.mark.integration

DEFAULT = load(REPO_ROOT / "harness" / "default")
FAILS = {"review": "no approved review", "evaluation": "evaluation failed"}  # the refusal says which
_numbers = itertools.count(1)

Step = Callable[[bool, str], Awaitable[Activation]]


@pytest.fixture(scope="module")
async def registry(pg_server: str) -> AsyncIterator[Registry]:
    reg = await Registry.connect(await create_database(pg_server), attempts=3)
    try:
        yield reg
    finally:
        await reg.close()


async def version(reg: Registry, failing: str | None = None) -> str:
    """A new version passing every check but ``failing``."""
    v = (await reg.push(DEFAULT.model_copy(update={"description": f"gates {next(_numbers)}"}),
                        author="alice")).version
    if failing != "review":
        proposal = await reg.propose(v, author="alice")
        await reg.review(proposal.id, reviewer="bob", decision="approve")
    await reg.attach_evaluation(v, {"accuracy": 80.0 if failing == "evaluation" else 95.0},
                                passed=failing != "evaluation", actor="evaluator")
    return v


async def arrange(reg: Registry, transition: gates.Transition, target: str, v: str) -> Step:
    """Bring ``target`` to where ``transition`` makes ``v`` active; the step, to call with (force, reason)."""
    if transition is gates.ACTIVATE:
        return lambda force, reason: reg.activate(v, target=target, actor="ops", force=force, reason=reason)
    good = await version(reg)
    if transition is gates.ROLLBACK:  # v was active before the current version
        await reg.activate(v, target=target, actor="ops", force=True, reason="setting up the case")
        await reg.activate(good, target=target, actor="ops")
        return lambda force, reason: reg.rollback(target=target, actor="ops", force=force, reason=reason)
    assert transition is gates.ROLLBACK_TO
    await reg.activate(good, target=target, actor="ops")
    return lambda force, reason: reg.rollback(target=target, actor="ops", to=v, force=force, reason=reason)


CASES = [(t, check) for t in gates.TRANSITIONS if t.checks for check in t.checks]


@pytest.mark.parametrize(("transition", "check"), CASES, ids=[f"{t.name}-{c}" for t, c in CASES])
async def test_a_failed_check_needs_force_and_is_recorded_forced(registry: Registry, transition: gates.Transition,
                                                                 check: str) -> None:
    target = f"room:{transition.name}-{check}"
    v = await version(registry, failing=check)
    step = await arrange(registry, transition, target, v)
    before = await registry.active(target)

    with pytest.raises(Refused, match=FAILS[check]):
        await step(False, "")
    assert await registry.active(target) == before  # nothing changed
    refused = (await registry.audit(target=target, limit=1))[0]
    assert refused.action.endswith(".refused") and FAILS[check] in refused.details["error"]
    with pytest.raises(BadRequest, match="reason"):
        await step(True, "")

    forced = await step(True, "incident: the previous version broke checkout")
    assert forced.version == v and forced.forced and forced.reason.startswith("incident")
    assert (await registry.active(target)).version == v  # type: ignore[union-attr]
    row = next(e for e in await registry.audit(target=target, limit=5) if e.action in ("activate", "rollback"))
    assert row.version == v and row.actor == "ops"
    assert row.details["forced"] is True and row.details["break_glass"] is True
    assert any(FAILS[check] in gap for gap in row.details["overridden"])


@pytest.mark.parametrize("transition", [t for t in gates.TRANSITIONS if t.checks], ids=lambda t: t.name)
async def test_a_version_passing_every_check_goes_through_unforced(registry: Registry,
                                                                   transition: gates.Transition) -> None:
    target = f"room:{transition.name}-clean"
    v = await version(registry)
    if transition is gates.ROLLBACK:  # set up without forcing: v passes every check
        good = await version(registry)
        await registry.activate(v, target=target, actor="ops")
        await registry.activate(good, target=target, actor="ops")
        done = await registry.rollback(target=target, actor="ops")
    else:
        done = await (await arrange(registry, transition, target, v))(False, "")
    assert done.version == v and not done.forced
    row = next(e for e in await registry.audit(target=target, limit=5) if e.action in ("activate", "rollback"))
    assert row.details["forced"] is False and row.details["break_glass"] is False


async def test_clearing_an_override_activates_nothing_and_checks_nothing(registry: Registry) -> None:
    assert gates.CLEAR.checks == ()
    target = "room:clear-case"
    v = await version(registry, failing="evaluation")
    await registry.activate(v, target=target, actor="ops", force=True, reason="room trial")
    cleared = await registry.rollback(target=target, actor="ops")
    assert cleared.version is None and not cleared.forced


async def test_the_api_refuses_a_rollback_to_a_failed_evaluation_without_break_glass(registry: Registry) -> None:
    """The case that went through before: a rollback to a version whose evaluation failed."""
    import grpc

    from livehost.gen.livehost.harness.v1 import harness_pb2 as pb
    from livehost.gen.livehost.harness.v1 import harness_pb2_grpc
    from livehost.grpcutil import make_channel, start_server
    from services.harness.server import HarnessServicer

    target = "room:api-rollback"
    bad = await version(registry, failing="evaluation")
    step = await arrange(registry, gates.ROLLBACK, target, bad)
    del step  # the API makes the step
    running = await start_server([(harness_pb2_grpc.add_HarnessServiceServicer_to_server,
                                   HarnessServicer(lambda: registry))], identity="harness")
    try:
        async with make_channel(running.target, identity="releaser") as ch:
            stub = harness_pb2_grpc.HarnessServiceStub(ch)
            for request, code in (
                    (pb.RollbackRequest(target=target), grpc.StatusCode.FAILED_PRECONDITION),
                    # forcing needs the break-glass role, which a releaser does not have
                    (pb.RollbackRequest(target=target, force=True, reason="it was fine yesterday"),
                     grpc.StatusCode.PERMISSION_DENIED)):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.Rollback(request, timeout=10)
                assert err.value.code() == code, err.value.details()
        async with make_channel(running.target, identity="breakglass") as ch:
            done = await harness_pb2_grpc.HarnessServiceStub(ch).Rollback(
                pb.RollbackRequest(target=target, force=True, reason="it was fine yesterday"), timeout=10)
        assert done.active_version == bad and done.activation.forced and done.activation.actor == "breakglass"
        audit = [e for e in await registry.audit(target=target, limit=10) if e.action == "rollback"]
        assert audit[0].details["forced"] is True and audit[0].actor == "breakglass"
    finally:
        await running.stop(grace=0)
