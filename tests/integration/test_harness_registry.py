"""The harness registry against real PostgreSQL, and hot reload through the real Tansu broker.

Harness variants are derived from the shipped harness generically (a different description): no
test names a shipped skill, tool, hook or section.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
import yaml
from prometheus_client import REGISTRY
from typer.testing import CliRunner

from livehost.config import REPO_ROOT, Settings
from livehost.harness.cli import app
from livehost.harness.hotreload import KafkaHarnessPublisher, RegistryHarnessProvider, ensure_events_topic
from livehost.harness.loader import HarnessError, dump, load
from livehost.harness.model import Harness
from livehost.harness.registry import BadRequest, NotFound, Refused, Registry, SelfReview
from tests.integration.conftest import create_database

pytestmark = pytest.mark.integration

DEFAULT_PATH = REPO_ROOT / "harness" / "default"
DEFAULT = load(DEFAULT_PATH)


def variant(n: int) -> Harness:
    return DEFAULT.model_copy(update={"description": f"variant {n}"})


@pytest.fixture(scope="module")
def kafka_server(module_kafka_bootstrap: str) -> str:
    return module_kafka_bootstrap


@pytest.fixture
async def dsn(pg_server: str) -> AsyncIterator[str]:
    """A fresh database per test."""
    url = await create_database(pg_server)
    yield url


@pytest.fixture
async def registry(dsn: str) -> AsyncIterator[Registry]:
    reg = await Registry.connect(dsn, attempts=3)
    try:
        yield reg
    finally:
        await reg.close()


async def approve(reg: Registry, version: str, *, passed: bool | None = True) -> int:
    proposal = await reg.propose(version, author="alice", message="please ship")
    await reg.review(proposal.id, reviewer="bob", decision="approve", comment="lgtm")
    if passed is not None:
        await reg.attach_evaluation(version, {"accuracy": 93.0 if passed else 80.0}, passed)
    return proposal.id


# -- versions ---------------------------------------------------------------------------------------

async def test_push_show_log_diff(registry: Registry, tmp_path: Path) -> None:
    first = await registry.push(DEFAULT_PATH, author="alice", message="initial")
    assert first.created and first.version == DEFAULT.version()
    again = await registry.push(DEFAULT_PATH, author="carol", message="same content")
    assert again.version == first.version and not again.created

    edited = variant(1)
    folder = dump(edited, tmp_path / "edited")
    second = await registry.push(folder, author="alice", message="edit", parent=first.version[:8])
    assert second.created and second.version == edited.version()

    info, harness = await registry.show(second.version[:6])
    assert info.parent == first.version and info.author == "alice" and info.message == "edit"
    assert harness == edited
    assert [v.version for v in await registry.log()] == [second.version, first.version]
    text = await registry.diff(first.version, second.version)
    assert "== harness" in text and "variant 1" in text
    assert await registry.diff(first.version, first.version) == ""
    with pytest.raises(NotFound):
        await registry.info("ffffffff")
    with pytest.raises(BadRequest):
        await registry.info("ab")

    # versions are immutable, also for someone with SQL access
    with pytest.raises(asyncpg.RaiseError, match="immutable"):
        await registry.pool.execute("UPDATE harness_versions SET message = 'x'")
    actions = [e.action for e in await registry.audit()]
    assert actions.count("push") == 3


async def test_invalid_bundle_refused_nothing_stored(registry: Registry, tmp_path: Path) -> None:
    bad = Path(shutil.copytree(DEFAULT_PATH, tmp_path / "bad"))
    rules = yaml.safe_load((bad / "rules.yaml").read_text())
    rules["max_discount_pct"] = 500
    (bad / "rules.yaml").write_text(yaml.safe_dump(rules))
    prompt = yaml.safe_load((bad / "prompt.yaml").read_text())
    prompt["truncation_order"] = ["nowhere"]
    (bad / "prompt.yaml").write_text(yaml.safe_dump(prompt))
    with pytest.raises(HarnessError) as exc:
        await registry.push(bad, author="alice", message="broken")
    fields = {p.field for p in exc.value.problems}
    assert {"max_discount_pct", "truncation_order"} <= fields
    data = DEFAULT.canonical()
    data["skills"] = []
    with pytest.raises(HarnessError):
        await registry.push(data, author="alice")
    assert await registry.pool.fetchval("SELECT count(*) FROM harness_versions") == 0
    assert await registry.log() == []


# -- review workflow --------------------------------------------------------------------------------

async def test_review_workflow_and_gates(registry: Registry) -> None:
    v = (await registry.push(variant(1), author="alice", message="v1")).version
    proposal = await registry.propose(v, author="alice", message="try this")
    assert proposal.status == "proposed"
    with pytest.raises(SelfReview):
        await registry.review(proposal.id, reviewer="alice", decision="approve")
    with pytest.raises(SelfReview):
        await registry.review(proposal.id, reviewer=" ALICE ", decision="approve")
    with pytest.raises(Refused, match="no approved review"):
        await registry.activate(v, actor="ops")

    p = await registry.review(proposal.id, reviewer="bob", decision="request_changes", comment="tighten")
    assert p.status == "changes_requested"
    p = await registry.review(proposal.id, reviewer="bob", decision="approve", comment="ok now")
    assert p.status == "approved"
    assert [r.decision for r in await registry.reviews(proposal.id)] == ["request_changes", "approve"]

    # evaluation gate: none attached, then a failing one
    with pytest.raises(Refused, match="no evaluation"):
        await registry.activate(v, actor="ops")
    await registry.attach_evaluation(v, {"accuracy": 80.1}, passed=False)
    with pytest.raises(Refused, match="failed"):
        await registry.activate(v, actor="ops")
    with pytest.raises(BadRequest, match="reason"):
        await registry.activate(v, actor="ops", force=True)
    forced = await registry.activate(v, actor="ops", force=True, reason="hotfix for a live incident")
    assert forced.forced and forced.version == v and forced.reason == "hotfix for a live incident"
    assert (await registry.proposal(proposal.id)).status == "active"

    # a clean path: approved and evaluated
    v2 = (await registry.push(variant(2), author="carol", message="v2")).version
    pid = await approve(registry, v2)
    assert (await registry.proposal(pid)).status == "evaluated"
    act = await registry.activate(v2, actor="ops")
    assert not act.forced and act.previous_version == v
    rejected = await registry.propose(v2, author="carol")
    assert (await registry.review(rejected.id, reviewer="dave", decision="reject")).status == "rejected"
    with pytest.raises(Refused, match="no longer be reviewed"):
        await registry.review(rejected.id, reviewer="erin", decision="approve")

    audit = await registry.audit()
    actions = [e.action for e in reversed(audit)]
    for expected in ("push", "propose", "review.refused", "review", "evaluate", "activate.refused", "activate"):
        assert expected in actions
    refused = next(e for e in reversed(audit) if e.action == "review.refused")
    assert refused.actor == "alice" and "must not be the author" in refused.details["error"]
    forced_row = next(e for e in audit if e.action == "activate" and e.version == v)
    assert forced_row.details["forced"] and forced_row.details["reason"] == "hotfix for a live incident"


async def test_evaluation_gate_can_be_switched_off(dsn: str) -> None:
    reg = await Registry.connect(dsn, require_evaluation=False)
    try:
        v = (await reg.push(variant(1), author="alice")).version
        await approve(reg, v, passed=None)
        assert (await reg.activate(v, actor="ops")).forced is False
    finally:
        await reg.close()


# -- activation and rollback ------------------------------------------------------------------------

async def test_activate_rollback_targets_and_audit(registry: Registry) -> None:
    versions = [(await registry.push(variant(i), author="alice", message=f"v{i}")).version for i in range(3)]
    for v in versions:
        await approve(registry, v)
    for v in versions:
        await registry.activate(v, actor="ops")
    assert (await registry.active()).version == versions[2]  # type: ignore[union-attr]

    back = await registry.rollback(actor="ops")
    assert back.version == versions[1] and back.previous_version == versions[2] and back.action == "rollback"
    back = await registry.rollback(actor="ops")
    assert back.version == versions[0]
    with pytest.raises(Refused, match="nothing to roll back to"):
        await registry.rollback(actor="ops")
    assert (await registry.proposals(version=versions[2]))[0].status == "rolled_back"

    # per-room and per-arm targets
    await registry.activate(versions[2], target="room:7", actor="ops")
    await registry.activate(versions[1], target="arm:exp1/treatment", actor="ops")
    assert await registry.active_all() == {"global": versions[0], "room:7": versions[2],
                                           "arm:exp1/treatment": versions[1]}
    cleared = await registry.rollback(target="room:7", actor="ops")
    assert cleared.version is None
    assert "room:7" not in await registry.active_all()
    with pytest.raises(BadRequest):
        await registry.activate(versions[0], target="planet:mars", actor="ops")
    with pytest.raises(Refused, match="never activated"):
        await registry.rollback(target="room:unknown", actor="ops")

    # rollback to a version that never passed review: refused unless forced with a reason
    unreviewed = (await registry.push(variant(9), author="mallory")).version
    with pytest.raises(Refused, match="no approved review"):
        await registry.rollback(actor="ops", to=unreviewed)
    with pytest.raises(BadRequest):
        await registry.rollback(actor="ops", to=unreviewed, force=True)
    forced = await registry.rollback(actor="ops", to=unreviewed, force=True, reason="known-good build from staging")
    assert forced.forced and forced.version == unreviewed
    # rollback --to a reviewed version works without force
    to = await registry.rollback(actor="ops", to=versions[2])
    assert to.version == versions[2] and not to.forced

    history = await registry.history()
    assert [a.version for a in history][:3] == [versions[2], unreviewed, versions[0]]
    audit = [e for e in await registry.audit(target="global") if e.action in ("activate", "rollback")]
    assert len(audit) == len(history)
    assert any(e.details.get("reason") == "known-good build from staging" for e in audit)


async def test_concurrent_activations_are_serialised(registry: Registry) -> None:
    versions = [(await registry.push(variant(i), author="alice")).version for i in range(4)]
    for v in versions:
        await approve(registry, v)
    base = await registry.activate(versions[0], actor="ops")
    # two concurrent activations of one target, then a wider burst
    await asyncio.gather(registry.activate(versions[1], actor="ops-a"), registry.activate(versions[2], actor="ops-b"))
    await asyncio.gather(*(registry.activate(versions[i % 4], actor=f"ops-{i}") for i in range(12)))
    history = list(reversed(await registry.history(limit=100)))
    assert history[0].id == base.id and len(history) >= 3
    # activating the version that is already active changes nothing
    again = await registry.activate(history[-1].version or "", actor="ops")
    assert again.id == history[-1].id and len(await registry.history(limit=100)) == len(history)
    # no lost update: each activation saw the one committed right before it as its previous version
    for before, after in zip(history, history[1:], strict=False):
        assert after.previous_version == before.version
    assert (await registry.active()).version == history[-1].version  # type: ignore[union-attr]
    # and the rollback stack follows the same order
    back = await registry.rollback(actor="ops")
    assert back.version == history[-2].version


# -- CLI --------------------------------------------------------------------------------------------

def test_cli_end_to_end(dsn: str, kafka_server: str, tmp_path: Path) -> None:
    """The CLI holds no database credentials: it goes through the real harness service over mutual TLS,
    acting as the identity of its client certificate."""
    import os
    import sys

    from livehost.grpcutil import wait_healthy
    from livehost.stack.process import free_port, log_tail, run_async, start_detached, stop_pid

    port = free_port()
    env = {**os.environ, "LIVEHOST_STATE_DIR": str(tmp_path / "state"), "LIVEHOST_POSTGRES_DSN": dsn,
           "LIVEHOST_KAFKA_BOOTSTRAP": kafka_server, "LIVEHOST_HARNESS_GRPC_PORT": str(port),
           "PYTHONPATH": str(REPO_ROOT)}
    proc = start_detached([sys.executable, "-m", "services.harness"], tmp_path / "harness.log", env=env, cwd=REPO_ROOT)
    runner = CliRunner()
    # the CLI's environment: no DSN at all, only where the API is and which credential to present
    cli_env = {"LIVEHOST_STATE_DIR": str(tmp_path / "cli-state"), "LIVEHOST_POSTGRES_DSN": "postgresql://nobody@x/y",
               "LIVEHOST_HARNESS_API_URL": f"127.0.0.1:{port}", "COLUMNS": "200"}

    def run(*args: str, code: int = 0, who: str = "operator") -> str:
        result = runner.invoke(app, list(args), env={**cli_env, "LIVEHOST_GRPC_IDENTITY": who})
        assert result.exit_code == code, f"{args} as {who}: {result.output}"
        return result.output

    try:
        try:
            run_async(lambda: wait_healthy(f"127.0.0.1:{port}", "livehost.harness.v1.HarnessService", 60))
        except TimeoutError:
            raise AssertionError(log_tail(tmp_path / "harness.log")) from None
        v1 = DEFAULT.version()
        assert "permission denied" in run("push", str(DEFAULT_PATH), code=1, who="reviewer")
        assert v1 in run("push", str(DEFAULT_PATH), "-m", "initial", who="author")
        assert "already stored" in run("push", str(DEFAULT_PATH), who="author")
        edited = dump(variant(5), tmp_path / "edited")
        v2 = variant(5).version()
        assert v2 in run("push", str(edited), "-m", "shorter answers", who="author")
        out = run("log")
        assert v1 in out and v2 in out
        out = run("show", v2[:8], "--out", str(tmp_path / "shown"))
        assert "shorter answers" in out and load(tmp_path / "shown").version() == v2
        assert "variant 5" in run("diff", v1, v2)
        assert "variant 5" in run("diff", str(DEFAULT_PATH), v2)
        assert "no differences" in run("diff", str(DEFAULT_PATH), v1)

        out = run("propose", v2, "-m", "ship it", who="author")
        pid = out.split("#", 1)[1].split()[0]
        assert "permission denied" in run("review", pid, "--approve", code=1, who="author")
        run("review", pid, "--approve", "--reject", code=2, who="reviewer")
        assert "approved" in run("review", pid, "--approve", "--comment", "fine", who="reviewer")
        assert "no evaluation" in run("activate", v2, code=1, who="releaser")
        result_file = tmp_path / "eval.json"
        result_file.write_text(json.dumps({"accuracy": 92.5, "effectiveness": 92.7}))
        # only the evaluator attaches results; a self-declared --passed from anyone else is refused
        assert "permission denied" in run("attach-evaluation", v2, "--result", str(result_file), "--passed",
                                          code=1, who="releaser")
        run("attach-evaluation", v2, "--result", str(result_file), "--passed", who="evaluator")
        out = run("activate", v2, who="releaser")
        assert v2 in out and "not announced" not in out
        # forcing is break-glass: a releaser without it is refused, the break-glass identity is flagged
        assert "permission denied" in run("activate", v1, "--target", "room:42", "--force", "--reason", "x",
                                          code=1, who="releaser")
        assert "cleared" not in run("activate", v1, "--target", "room:42", "--force",
                                    "--reason", "pin the old one for this room", who="breakglass")
        out = run("active")
        assert "room:42" in out and "global" in out
        assert "no approved review" in run("rollback", "--to", v1, code=1, who="releaser")
        out = run("rollback", "--target", "room:42", who="releaser")
        assert "cleared" in out
        run("active", "--target", "room:42", code=3)
        out = run("audit", "--limit", "100")
        for action in ("push", "propose", "review", "evaluate", "activate", "activate.refused", "rollback"):
            assert action in out
        for identity in ("author", "reviewer", "evaluator", "releaser", "breakglass"):
            assert identity in out  # every audit row carries the authenticated identity
        assert "break_glass" in out
    finally:
        stop_pid(proc.pid, timeout=10)


# -- hot reload -------------------------------------------------------------------------------------

@pytest.fixture
async def announced_registry(dsn: str, kafka_server: str) -> AsyncIterator[Registry]:
    await ensure_events_topic(Settings(kafka_bootstrap=kafka_server))
    publisher = KafkaHarnessPublisher(Settings(kafka_bootstrap=kafka_server))
    await publisher.start()
    reg = await Registry.connect(dsn, publisher=publisher)
    try:
        yield reg
    finally:
        await reg.close()
        await publisher.stop()


def _settings(bootstrap: str) -> Settings:
    # The followers poll at the idle wait; 5 s here, so a switch within 2 s shows the broker answered
    # the waiting fetch when the announcement arrived.
    return Settings(kafka_bootstrap=bootstrap, kafka_fetch_max_wait_ms=10, kafka_idle_fetch_max_wait_ms=5000)


async def test_hot_reload_two_replicas(announced_registry: Registry, kafka_server: str) -> None:
    reg = announced_registry
    v1 = (await reg.push(variant(1), author="alice")).version
    v2 = (await reg.push(variant(2), author="alice")).version
    for v in (v1, v2):
        await approve(reg, v)
    await reg.activate(v1, actor="ops")
    settings = _settings(kafka_server)
    # poll fallback off (1 hour): the switch must come from the announcement
    replicas = [RegistryHarnessProvider(reg, service=name, settings=settings, poll_interval_s=3600, fallback=DEFAULT)
                for name in ("svc-a", "svc-b")]
    for r in replicas:
        await r.start()  # started after the activation: reads it from the registry
    try:
        assert [(await r.for_new_request("room1")).version() for r in replicas] == [v1, v1]
        await asyncio.sleep(0.5)  # let the consumers reach the topic
        pinned = (await replicas[0].for_new_request("room1")).version()  # an in-flight request

        t0 = time.monotonic()
        act = await reg.activate(v2, actor="ops")
        assert act.announced
        switched = await asyncio.gather(*(r.wait_for(lambda a: a.get("global") == v2, 2.0) for r in replicas))
        elapsed = time.monotonic() - t0
        assert all(switched), f"replicas did not switch within 2 s: {[r.active_versions() for r in replicas]}"
        assert elapsed < 2.0
        assert [(await r.for_new_request("room1")).version() for r in replicas] == [v2, v2]
        # the in-flight request still gets the version it started with
        assert (await replicas[0].get(pinned)).version() == v1 == pinned

        # a room-specific activation, then its rollback (the room follows global again)
        await reg.activate(v1, target="room:9", actor="ops")
        assert all(await asyncio.gather(*(r.wait_for(lambda a: a.get("room:9") == v1, 2.0) for r in replicas)))
        assert (await replicas[1].for_new_request("9")).version() == v1
        assert (await replicas[1].for_new_request("10")).version() == v2
        await reg.rollback(target="room:9", actor="ops")
        assert all(await asyncio.gather(*(r.wait_for(lambda a: "room:9" not in a, 2.0) for r in replicas)))
        assert (await replicas[1].for_new_request("9")).version() == v2

        # a replica started later gets the current state and can still fetch old pinned versions
        late = RegistryHarnessProvider(reg, service="svc-late", settings=None, poll_interval_s=0)
        await late.start()
        assert (await late.for_new_request("9")).version() == v2
        assert (await late.get(v1)).version() == v1
        with pytest.raises(KeyError):
            await late.get("0123456789abcdef")
        await late.stop()
    finally:
        for r in replicas:
            await r.stop()


async def test_failed_load_keeps_previous_version(announced_registry: Registry, kafka_server: str) -> None:
    reg = announced_registry
    good = (await reg.push(variant(1), author="alice")).version
    await approve(reg, good)
    await reg.activate(good, actor="ops")
    # a stored version this service cannot load: its bundle fails validation (stored behind the
    # registry's back, as a corrupted row or a bundle from a newer format would be)
    broken = DEFAULT.canonical()
    broken["skills"] = [dict(s, kind="strategy") for s in broken["skills"]]
    bad_version = "badbadbadbad0001"
    await reg.pool.execute(
        "INSERT INTO harness_versions(version, name, bundle, author) VALUES ($1, 'broken', $2::jsonb, 'x')",
        bad_version, json.dumps(broken))

    provider = RegistryHarnessProvider(reg, service="svc-fail", settings=_settings(kafka_server), poll_interval_s=3600)
    await provider.start()
    try:
        before = REGISTRY.get_sample_value("livehost_harness_load_failures_total", {"service": "svc-fail"}) or 0.0
        await asyncio.sleep(0.5)
        await reg.activate(bad_version, actor="ops", force=True, reason="testing a broken version")
        assert await provider.wait_until(lambda: bad_version in provider.failed_versions(), 2.0)
        assert (await provider.for_new_request("r")).version() == good  # kept serving the previous one
        after = REGISTRY.get_sample_value("livehost_harness_load_failures_total", {"service": "svc-fail"})
        assert after == before + 1
        status = {s.version: s for s in await reg.load_status()}
        assert status[bad_version].ok is False and "no reply skill" in status[bad_version].error
        assert status[bad_version].service == "svc-fail"
        assert status[good].ok is True
        assert any(e.action == "load_failed" for e in await reg.audit(version=bad_version))

        # the next good activation is picked up as usual
        fixed = (await reg.push(variant(2), author="alice")).version
        await approve(reg, fixed)
        await reg.activate(fixed, actor="ops")
        assert await provider.wait_for(lambda a: a.get("global") == fixed, 2.0)
    finally:
        await provider.stop()


async def test_poll_fallback_without_broker(registry: Registry) -> None:
    v1 = (await registry.push(variant(1), author="a")).version
    v2 = (await registry.push(variant(2), author="a")).version
    for v in (v1, v2):
        await approve(registry, v)
    await registry.activate(v1, actor="ops")
    provider = RegistryHarnessProvider(registry, service="svc-poll", settings=None, poll_interval_s=0.2)
    await provider.start()
    try:
        await registry.activate(v2, actor="ops")  # no publisher: nothing is announced
        assert await provider.wait_for(lambda a: a.get("global") == v2, 2.0)
    finally:
        await provider.stop()


# -- gRPC Harness API -------------------------------------------------------------------------------

async def test_grpc_api_shares_the_registry(registry: Registry) -> None:
    import grpc

    from livehost.gen.livehost.harness.v1 import harness_pb2 as pb
    from livehost.gen.livehost.harness.v1 import harness_pb2_grpc
    from livehost.grpcutil import make_channel, start_server
    from services.harness.server import HarnessServicer

    running = await start_server([(harness_pb2_grpc.add_HarnessServiceServicer_to_server,
                                   HarnessServicer(lambda: registry))], identity="harness")
    channels = {who: make_channel(running.target, identity=who)
                for who in ("author", "reviewer", "releaser", "evaluator", "breakglass", "operator")}
    try:
        stubs = {who: harness_pb2_grpc.HarnessServiceStub(ch) for who, ch in channels.items()}
        stub = stubs["author"]

        async def code_of(call: object) -> grpc.StatusCode:
            with pytest.raises(grpc.aio.AioRpcError) as exc:
                await call  # type: ignore[misc]
            return exc.value.code()

        bad = DEFAULT.canonical()
        bad["rules"] = dict(bad["rules"], max_discount_pct=250)
        bad["prompt"] = dict(bad["prompt"], truncation_order=["nowhere"])
        checked = await stub.Validate(pb.ValidateRequest(bundle_json=json.dumps(bad)))
        assert not checked.valid and len([p for p in checked.problems if p.severity == "error"]) == 2
        assert await code_of(stub.Push(pb.PushRequest(bundle_json=json.dumps(bad)))) == \
            grpc.StatusCode.INVALID_ARGUMENT
        assert await code_of(stub.Push(pb.PushRequest(bundle_json="{nope"))) == grpc.StatusCode.INVALID_ARGUMENT

        # the author field of the request is ignored: the certificate's identity is recorded
        v1 = (await stub.Push(pb.PushRequest(bundle_json=json.dumps(variant(1).canonical()), author="mallory",
                                             message="one"))).version
        pushed = await stub.Push(pb.PushRequest(bundle_json=json.dumps(variant(2).canonical()), parent=v1))
        v2 = pushed.version
        assert pushed.created and v2 == variant(2).version()
        shown = await stub.Show(pb.ShowRequest(version=v2[:8]))
        assert shown.info.parent == v1 and json.loads(shown.bundle_json)["description"] == "variant 2"
        assert shown.info.author == "author"
        assert await code_of(stub.Show(pb.ShowRequest(version="ffffffffff"))) == grpc.StatusCode.NOT_FOUND
        assert [v.version for v in (await stub.Log(pb.LogRequest())).versions] == [v2, v1]
        assert "variant 2" in (await stub.Diff(pb.DiffRequest(a=v1, b=v2))).text

        pid = (await stub.Propose(pb.ProposeRequest(version=v2, author="bob"))).proposal_id
        assert await code_of(stub.Review(pb.ReviewRequest(proposal_id=pid, decision=pb.REVIEW_DECISION_APPROVE))) \
            == grpc.StatusCode.PERMISSION_DENIED  # the author has no reviewer role
        review = await stubs["reviewer"].Review(pb.ReviewRequest(proposal_id=pid, reviewer="alice",
                                                                 decision=pb.REVIEW_DECISION_APPROVE))
        assert review.status == "approved"
        assert await code_of(stubs["releaser"].Activate(pb.ActivateRequest(version=v2))) == \
            grpc.StatusCode.FAILED_PRECONDITION
        # only the evaluator attaches evaluation results
        for who in ("author", "releaser", "reviewer"):
            assert await code_of(stubs[who].AttachEvaluation(pb.AttachEvaluationRequest(
                version=v2, result_json="{}", passed=True))) == grpc.StatusCode.PERMISSION_DENIED
        evaluation = await stubs["evaluator"].AttachEvaluation(pb.AttachEvaluationRequest(
            version=v2, result_json=json.dumps({"accuracy": 92.55}), passed=True))
        assert evaluation.actor == "evaluator" and evaluation.passed
        assert await code_of(stub.Activate(pb.ActivateRequest(version=v2))) == grpc.StatusCode.PERMISSION_DENIED
        act = await stubs["releaser"].Activate(pb.ActivateRequest(version=v2, target="default", actor="root"))
        assert act.active_version == v2 and act.previous_version == "" and act.activation.actor == "releaser"
        # forcing needs the break-glass role, and a reason
        assert await code_of(stubs["releaser"].Activate(pb.ActivateRequest(
            version=v1, target="77", force=True, reason="room trial"))) == grpc.StatusCode.PERMISSION_DENIED
        assert await code_of(stubs["breakglass"].Activate(pb.ActivateRequest(version=v1, target="77", force=True))) \
            == grpc.StatusCode.INVALID_ARGUMENT
        room = await stubs["breakglass"].Activate(pb.ActivateRequest(version=v1, target="77", force=True,
                                                                     reason="room trial"))
        assert room.active_version == v1 and room.activation.forced and room.activation.actor == "breakglass"
        assert (await registry.active("room:77")).version == v1  # type: ignore[union-attr]
        assert (await stub.GetActive(pb.GetActiveRequest(target="default"))).version == v2
        back = await stubs["releaser"].Rollback(pb.RollbackRequest(target="77"))
        assert back.active_version == "" and back.previous_version == v1
        assert await code_of(stub.GetActive(pb.GetActiveRequest(target="77"))) == grpc.StatusCode.NOT_FOUND
        assert await code_of(stubs["releaser"].Rollback(pb.RollbackRequest(to_version=v1))) == \
            grpc.StatusCode.FAILED_PRECONDITION
        entries = (await stubs["operator"].Audit(pb.AuditRequest(limit=100))).entries
        assert entries and all(e.actor in {"author", "reviewer", "releaser", "evaluator", "breakglass"}
                               for e in entries), [e.actor for e in entries]
        forced = [e for e in entries if e.action == "activate" and json.loads(e.details_json).get("break_glass")]
        assert [e.actor for e in forced] == ["breakglass"]
        assert [a.target for a in (await stub.ListActivations(pb.ListActivationsRequest())).activations] == ["global"]
        assert [p.id for p in (await stub.ListProposals(pb.ListProposalsRequest())).proposals] == [int(pid)]
    finally:
        for ch in channels.values():
            await ch.close()
        await running.stop(grace=0)


async def test_approver_must_not_have_authored_any_change_in_the_version(registry: Registry) -> None:
    """An identity holding both author and reviewer roles may not approve a version containing a change
    of its own — even one pushed as a parent of the proposed version, or proposed by someone else."""
    import grpc

    from livehost.gen.livehost.harness.v1 import harness_pb2 as pb
    from livehost.gen.livehost.harness.v1 import harness_pb2_grpc
    from livehost.grpcutil import make_channel, pki_dir, start_server
    from livehost.security.pki import ensure_pki
    from services.harness.server import HarnessServicer

    roles = {**Settings().grpc_roles, "dana": ["author", "reviewer"], "erin": ["author", "reviewer"]}
    settings = Settings(grpc_roles=roles)
    ensure_pki(pki_dir(settings), ["dana", "erin"])
    running = await start_server([(harness_pb2_grpc.add_HarnessServiceServicer_to_server,
                                   HarnessServicer(lambda: registry))], identity="harness", settings=settings)
    dana_ch, erin_ch = make_channel(running.target, identity="dana"), make_channel(running.target, identity="erin")
    try:
        dana, erin = harness_pb2_grpc.HarnessServiceStub(dana_ch), harness_pb2_grpc.HarnessServiceStub(erin_ch)
        base = (await dana.Push(pb.PushRequest(bundle_json=json.dumps(variant(11).canonical())))).version
        top = (await erin.Push(pb.PushRequest(bundle_json=json.dumps(variant(12).canonical()), parent=base))).version
        pid = (await erin.Propose(pb.ProposeRequest(version=top))).proposal_id
        for reviewer in (dana, erin):  # dana wrote the parent's change, erin the version's
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await reviewer.Review(pb.ReviewRequest(proposal_id=pid, decision=pb.REVIEW_DECISION_APPROVE))
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "author" in (err.value.details() or "")
        audit = await registry.audit(limit=50)
        assert {e.actor for e in audit if e.action == "review.refused"} == {"dana", "erin"}
        # a reviewer with no change in it approves
        async with make_channel(running.target, identity="reviewer") as ch:
            approved = await harness_pb2_grpc.HarnessServiceStub(ch).Review(
                pb.ReviewRequest(proposal_id=pid, decision=pb.REVIEW_DECISION_APPROVE))
        assert approved.status == "approved"
    finally:
        await dana_ch.close()
        await erin_ch.close()
        await running.stop(grace=0)


async def test_pushes_are_rate_limited_per_identity(registry: Registry) -> None:
    import grpc

    from livehost.gen.livehost.harness.v1 import harness_pb2 as pb
    from livehost.gen.livehost.harness.v1 import harness_pb2_grpc
    from livehost.grpcutil import make_channel, start_server
    from services.harness.server import HarnessServicer

    running = await start_server([(harness_pb2_grpc.add_HarnessServiceServicer_to_server,
                                   HarnessServicer(lambda: registry, pushes_per_minute=2))], identity="harness")
    try:
        async with make_channel(running.target, identity="author") as channel:
            stub = harness_pb2_grpc.HarnessServiceStub(channel)
            for n in (31, 32):
                await stub.Push(pb.PushRequest(bundle_json=json.dumps(variant(n).canonical())))
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Push(pb.PushRequest(bundle_json=json.dumps(variant(33).canonical())))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "in the last minute" in (err.value.details() or "")
        assert variant(33).version() not in {v.version for v in await registry.log(10)}
    finally:
        await running.stop(grace=0)
