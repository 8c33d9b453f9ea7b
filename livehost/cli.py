"""``livehost``: the command line of the embedded stack, the demo, and the operator tools."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="LiveHost: an open runtime for AI livestream-shopping hosts.", no_args_is_help=True)
stack_app = typer.Typer(help="The embedded stack: Apache Kafka (or Tansu), PostgreSQL and Triton.",
                        no_args_is_help=True)
app.add_typer(stack_app, name="stack")
console = Console()


@stack_app.command("up")
def stack_up(broker: str = typer.Option("", help="kafka (Apache Kafka, durable; the default) or tansu "
                                                "(memory-only, for machines without Java).")) -> None:
    """Start (or reuse) the broker, PostgreSQL and Triton; write the env file."""
    from livehost.config import load_settings
    from livehost.security.redact import redact
    from livehost.stack import StackError, up

    settings = load_settings(**({"stack_broker": broker} if broker else {}))
    try:
        info = up(settings, echo=console.print)
    except StackError as exc:
        console.print(f"[red]stack up failed[/]\n{exc}")
        raise typer.Exit(1) from None
    console.print(f"[green]stack ready[/]; settings in {info.env_file}")
    for key, value in info.env.items():
        shown = redact(f"{key}={value}")  # passwords (the DSN's, Kafka's SCRAM) stay in the env file
        console.print(f"  {shown}")


@stack_app.command("down")
def stack_down() -> None:
    """Stop every component the embedded stack started."""
    from livehost.stack import down

    stopped = down(echo=console.print)
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")


@stack_app.command("status")
def stack_status() -> None:
    """Show each component: pid, ports, healthy."""
    from livehost.stack import status

    table = Table("component", "pid", "ports", "alive", "healthy")
    for name, info in status().items():
        table.add_row(name, str(info.get("pid") or "-"), json.dumps(info.get("ports") or {}),
                      str(info.get("alive")), str(info.get("healthy")))
    console.print(table)


@app.command("up")
def services_up(
    replicas: int = typer.Option(1, "--replicas", min=1, help="Processes per service (one consumer group)."),
    stack: bool = typer.Option(True, "--stack/--no-stack",
                               help="Start (or reuse) the embedded stack; --no-stack uses the LIVEHOST_* "
                                    "settings of external Kafka, PostgreSQL and Triton."),
    wait: float = typer.Option(180.0, help="Seconds to wait until every replica is ready (0: do not wait)."),
    services: str = typer.Option("", help="Comma-separated subset of the services (default: all eight)."),
) -> None:
    """Run every service long-lived under a supervisor that restarts crashed processes with backoff."""
    from livehost.services_ctl import ServicesError, up

    try:
        up(replicas=replicas, stack=stack, wait_s=wait, echo=console.print,
           services=tuple(s for s in services.split(",") if s) or None)
    except ServicesError as exc:
        console.print(f"[red]livehost up failed[/]\n{exc}")
        raise typer.Exit(1) from None
    services_ps(as_json=False)


@app.command("ps")
def services_ps(as_json: bool = typer.Option(False, "--json", help="Print the state as JSON.")) -> None:
    """Each replica of each service: pid, state, restarts, ports and log path."""
    from livehost.services_ctl import ps

    doc = ps()
    if doc is None:
        console.print("no services are running (start them with `livehost up`)")
        return
    if as_json:
        print(json.dumps(doc, indent=2))
        return
    table = Table("replica", "pid", "alive", "state", "restarts", "gRPC", "metrics", "last exit", "log",
                  title=f"supervisor pid {doc['supervisor_pid']} ({'alive' if doc['supervisor_alive'] else 'DEAD'})")
    for row in doc["procs"]:
        table.add_row(row["name"], str(row["pid"]), str(row["alive"]), row["state"], str(row["restarts"]),
                      row["grpc_target"] or "-", row["metrics_url"].removeprefix("http://"),
                      row["last_exit"] or "-", row["log_path"])
    console.print(table)


@app.command("down")
def services_down(keep_stack: bool = typer.Option(False, help="Leave the embedded stack running.")) -> None:
    """Stop the supervisor and every service process (and the embedded stack unless --keep-stack)."""
    from livehost.services_ctl import down

    down(keep_stack=keep_stack, echo=console.print)


topics_app = typer.Typer(help="Kafka topics as declared in livehost/topics.py.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")


@topics_app.command("show")
def topics_show() -> None:
    """The declared topics: key, partitions, schema, retention and cleanup policy."""
    from livehost.topics import ALL_TOPICS, DAY_MS, HOUR_MS

    def span(ms: int) -> str:
        return "forever" if ms < 0 else f"{ms // DAY_MS} d" if ms % DAY_MS == 0 else f"{ms // HOUR_MS} h"

    table = Table("topic", "key", "partitions", "schema", "retention", "cleanup")
    for t in ALL_TOPICS:
        table.add_row(t.name, t.key, str(t.partitions), t.schema or "(Faust changelog)", span(t.retention_ms),
                      t.cleanup_policy)
    console.print(table)


@topics_app.command("apply")
def topics_apply() -> None:
    """Create missing topics, add missing partitions, set changed topic configs on the configured broker."""
    import asyncio

    from livehost.config import load_settings
    from livehost.kafka import apply_topics, wait_for_broker

    settings = load_settings()

    async def run() -> list[Any]:
        await wait_for_broker(settings, attempts=30)
        return await apply_topics(settings)

    for change in asyncio.run(run()):
        console.print(f"{change.action:>10}  {change.topic}  {change.detail}".rstrip())


@app.command("demo")
def demo(keep_stack: bool = typer.Option(False, help="Leave the embedded stack running afterwards."),
         engine: str = typer.Option("", help="TTS engine: piper, espeak or text (default from settings)."),
         policy: str = typer.Option("", help="Triton model of the policy (policy_reference or policy_llm).")) -> None:
    """Start the stack and every service, play the scripted live-room session, print it, stop everything."""
    from livehost.demo.main import run_demo

    code = run_demo(console, keep_stack=keep_stack, engine=engine or None, policy=policy or None)
    raise typer.Exit(code)


pki_app = typer.Typer(help="The local certificate authority and per-identity mutual-TLS credentials.",
                      no_args_is_help=True)
app.add_typer(pki_app, name="pki")


@pki_app.command("init")
def pki_init() -> None:
    """Create the CA and a credential for every identity bound in LIVEHOST_GRPC_ROLES (keeps existing ones)."""
    from livehost.security import ensure_local_pki, pki_dir

    made = ensure_local_pki()
    console.print(f"{pki_dir()}: {'made ' + ', '.join(made) if made else 'every credential exists'}")


@pki_app.command("rotate")
def pki_rotate(identities: Annotated[list[str] | None, typer.Argument(
                   help="Identities to reissue (default: all bound).")] = None,
               ca: Annotated[bool, typer.Option("--ca", help="Also make a new CA (every credential is reissued).")]
               = False) -> None:
    """Reissue credentials (same CA), or make a new CA and reissue everything. Restart the services after."""
    from livehost.config import load_settings
    from livehost.security import pki_dir
    from livehost.security.pki import rotate

    settings = load_settings()
    names = list(settings.grpc_roles) if ca or not identities else identities
    unknown = [n for n in names if n not in settings.grpc_roles]
    if unknown:
        console.print(f"[red]not bound to any role:[/] {', '.join(unknown)} (LIVEHOST_GRPC_ROLES)")
        raise typer.Exit(1)
    done = rotate(pki_dir(settings), names, new_ca=ca)
    console.print(f"reissued in {pki_dir(settings)}: {', '.join(done)}" + (" (new CA)" if ca else ""))


@app.command("purge")
def purge(dry_run: bool = typer.Option(False, "--dry-run", help="Count what would be deleted; delete nothing."),
          audio_only: bool = typer.Option(False, help="Only the audio folder (no database connection).")) -> None:
    """Delete data past its retention (LIVEHOST_RETENTION_*_DAYS): WAVs, room memory, idempotency keys,
    trajectories."""
    import asyncio

    from livehost.config import load_settings
    from livehost.retention import purge as run_purge
    from livehost.security.redact import redact

    try:
        report = asyncio.run(run_purge(load_settings(), dry_run=dry_run, database=not audio_only))
    except (OSError, ConnectionError) as exc:
        console.print(f"[red]purge failed:[/] {redact(str(exc))}")
        raise typer.Exit(2) from None
    for line in report.lines():
        console.print(line)


def _mount_optional() -> None:
    """Operator tool groups live next to their domain; mount each one that is installed."""
    from livehost.harness.cli import app as harness_app

    app.add_typer(harness_app, name="harness", help="Validate, version, review, activate and roll back harnesses.")
    from livehost.preview.cli import app as preview_app

    app.add_typer(preview_app, name="preview")
    from livehost.eval.cli import app as eval_app
    from livehost.eval.gate_cli import app as gate_app
    from livehost.experiments.cli import app as experiment_app
    from livehost.sim.cli import app as sim_app

    harness_app.add_typer(gate_app)  # adds `harness evaluate` and `harness propose-fixes`
    from livehost.runner.cli import run as eval_run

    eval_app.command("run")(eval_run)
    app.add_typer(eval_app, name="eval", help="Run, judge, calibrate, report, pairwise, distributions.")
    app.add_typer(experiment_app, name="experiment", help="Online A/B experiments.")
    app.add_typer(sim_app, name="sim", help="Live-room simulator.")
    from livehost.training.cli import augment_app, trajectories_app

    app.add_typer(trajectories_app, name="trajectories", help="Export recorded trajectories for training.")
    app.add_typer(augment_app, name="augment", help="Harness-State Augmentation: variants and rewritten trajectories.")


_mount_optional()

if __name__ == "__main__":
    app()
