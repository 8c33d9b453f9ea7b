"""``livehost harness ...``: validate, version, review, activate and roll back harnesses.

Every verb but ``validate`` (and ``diff`` of two folders) goes through the Harness gRPC API
(``LIVEHOST_HARNESS_API_URL``, default the local harness service) over mutual TLS: the CLI holds no
database credentials, and the identity it acts as is its client certificate
(``LIVEHOST_GRPC_IDENTITY``: author, reviewer, releaser, evaluator, breakglass, ...), never an
option. The harness service announces activations and rollbacks on Kafka so every replica reloads.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from livehost.harness.diff import format_diff
from livehost.harness.loader import HarnessError, Problem, dump, load
from livehost.harness.model import Harness
from livehost.harness.registry import (
    Activation,
    HarnessSettings,
    Registry,
    RegistryError,
    load_harness_settings,
)
from livehost.harness.validate import validate_path

app = typer.Typer(help="Harness versions: validate, push, review, activate, roll back.", no_args_is_help=True)
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
T = TypeVar("T")

Target = Annotated[str, typer.Option("--target", "-t", help="global | room:<id> | arm:<experiment>/<arm>")]
Force = Annotated[bool, typer.Option("--force", help="Override the review/evaluation gate (break-glass role; "
                                                     "needs --reason; flagged in the audit log).")]
Reason = Annotated[str, typer.Option("--reason", help="Why (recorded in the audit log).")]


def _ts(value: datetime | None) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _print_problems(problems: list[Problem]) -> None:
    for p in problems:
        colour = "red" if p.severity == "error" else "yellow"
        err.print(f"[{colour}]{p.severity:7}[/] {escape(p.file)}: [bold]{escape(p.field)}[/]: {escape(p.message)}")


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[red]error:[/] {escape(message)}")
    return typer.Exit(code)


def _run(fn: Callable[[Any, HarnessSettings], Awaitable[T]], *, announce: bool = False) -> T:
    """Run ``fn`` against the registry through the Harness API; refusals and invalid bundles exit 1,
    an unreachable API exits 2. (``announce``: the harness service announces its changes itself.)"""
    del announce
    settings = load_harness_settings()

    async def main() -> T:
        from livehost.harness.remote import RemoteRegistry

        registry = RemoteRegistry(settings)
        try:
            return await fn(registry, settings)
        finally:
            await registry.close()

    try:
        return asyncio.run(main())
    except HarnessError as exc:
        _print_problems(exc.problems)
        raise _fail(f"invalid harness ({len(exc.problems)} problems); nothing stored") from None
    except RegistryError as exc:
        raise _fail(str(exc)) from None
    except (ConnectionError, FileNotFoundError) as exc:
        raise _fail(str(exc), 2) from None


def _activation_line(a: Activation) -> str:
    forced = " [red](forced)[/]" if a.forced else ""
    version = a.version or "(cleared: follows global)"
    return (f"{a.action} #{a.id}: {a.target} → [bold]{version}[/] (was {a.previous_version or '-'}) "
            f"by {escape(a.actor)} at {_ts(a.created_at)}{forced}"
            + (f" reason: {escape(a.reason)}" if a.reason else ""))


@app.command()
def validate(path: Annotated[Path, typer.Argument(help="Harness folder.")],
             strict: Annotated[bool, typer.Option(help="Treat warnings as errors.")] = False) -> None:
    """Check a harness folder and report EVERY problem with file and field."""
    report = validate_path(path)
    _print_problems(report.problems)
    failing = report.errors + (report.warnings if strict else [])
    if failing or report.harness is None:
        raise _fail(f"{path}: {len(report.errors)} errors, {len(report.warnings)} warnings")
    h = report.harness
    console.print(f"[green]ok[/] {path}: version {h.version()} — {len(h.skills)} skills, {len(h.tools)} tools, "
                  f"{len(h.hooks)} hooks, {len(h.prompt.sections)} prompt sections"
                  + (f", {len(report.warnings)} warnings" if report.warnings else ""))


@app.command()
def push(path: Annotated[Path, typer.Argument(help="Harness folder.")],
         message: Annotated[str, typer.Option("--message", "-m", help="Why.")] = "",
         parent: Annotated[str, typer.Option(help="Parent version (default: the global active one).")] = "") -> None:
    """Store a harness folder as an immutable version (identical content returns the same version)."""
    result = _run(lambda r, _s: r.push(path, message=message, parent=parent or None))
    _print_problems(list(result.warnings))
    state = "stored" if result.created else "already stored"
    console.print(f"{state}: [bold]{result.version}[/]")


@app.command()
def show(version: str,
         out: Annotated[Path | None, typer.Option(help="Write the version as a harness folder here.")] = None,
         as_json: Annotated[bool, typer.Option("--json", help="Print the canonical JSON bundle.")] = False) -> None:
    """Show a version (metadata, contents, evaluations, proposals, load status)."""
    async def fn(r: Registry, _s: HarnessSettings) -> tuple[Any, ...]:
        info, harness = await r.show(version)
        return (info, harness, await r.proposals(version=info.version), await r.evaluations(info.version),
                await r.load_status(info.version))

    info, harness, proposals, evaluations, statuses = _run(fn)
    if as_json:
        console.print_json(json.dumps(harness.canonical()))
        return
    console.print(f"version [bold]{info.version}[/] ({escape(info.name)})")
    console.print(f"  parent  {info.parent or '-'}\n  author  {escape(info.author)}\n  date    {_ts(info.created_at)}")
    console.print(f"  message {escape(info.message)}")
    _summary(harness)
    for p in proposals:
        console.print(f"  proposal #{p.id} {escape(f'[{p.status}]')} by {escape(p.author)}: {escape(p.message)}")
    for e in evaluations:
        console.print(f"  evaluation #{e.id} {'[green]passed[/]' if e.passed else '[red]failed[/]'} "
                      f"by {escape(e.actor)} at {_ts(e.created_at)}")
    for st in statuses:
        console.print(f"  load in {st.service}: {'ok' if st.ok else '[red]failed[/] ' + escape(st.error)}")
    if out is not None:
        dump(harness, out)
        console.print(f"written to {out}")


def _summary(h: Harness) -> None:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("component")
    table.add_column("contents")
    table.add_row("skills", ", ".join(f"{s.id} ({s.kind})" for s in h.skills))
    table.add_row("tools", ", ".join(t.name + (" *" if t.side_effect else "") for t in h.tools))
    table.add_row("hooks", ", ".join(f"{x.id} ({x.stage}/{x.kind})" for x in h.hooks))
    table.add_row("prompt", " > ".join(s.id for s in h.prompt.sections) + f"  [budget {h.prompt.token_budget}]")
    table.add_row("rules", f"max discount {h.rules.max_discount_pct:g}%, {len(h.rules.banned_phrases)} banned "
                           f"phrases, max reply {h.rules.max_reply_chars} chars")
    console.print(table)


@app.command("log")
def log_(limit: Annotated[int, typer.Option(help="How many versions.")] = 20) -> None:
    """Stored versions, newest first."""
    async def fn(r: Registry, _s: HarnessSettings) -> tuple[Any, dict[str, str]]:
        return await r.log(limit), await r.active_all()

    versions, active = _run(fn)
    where: dict[str, list[str]] = {}
    for target, v in active.items():
        where.setdefault(v, []).append(target)
    table = Table(Column("version", no_wrap=True), Column("date", no_wrap=True), "author",
                  Column("parent", no_wrap=True), "active on", "message", header_style="bold")
    for v in versions:
        table.add_row(v.version, _ts(v.created_at), escape(v.author), v.parent or "-",
                      ", ".join(sorted(where.get(v.version, []))), escape(v.message))
    console.print(table)


@app.command("diff")
def diff_(a: Annotated[str, typer.Argument(help="Older: version, version prefix or folder.")],
          b: Annotated[str, typer.Argument(help="Newer: version, version prefix or folder.")]) -> None:
    """Per-component diff of two harnesses (versions or folders)."""
    def local(ref: str) -> Harness | None:
        return load(ref) if Path(ref).is_dir() else None

    try:
        ha, hb = local(a), local(b)
    except HarnessError as exc:
        _print_problems(exc.problems)
        raise _fail("invalid harness folder") from None
    if ha is None or hb is None:
        async def fn(r: Registry, _s: HarnessSettings) -> tuple[Harness, Harness]:
            return ha or await r.harness(a), hb or await r.harness(b)

        ha, hb = _run(fn)
    text = format_diff(ha, hb)
    if not text:
        console.print("no differences")
        return
    for line in text.splitlines():
        stripped = line.strip()
        style = ("bold cyan" if line.startswith("==") else "green" if stripped.startswith("+") else
                 "red" if stripped.startswith("-") else "yellow" if line.startswith("~") else "")
        console.print(f"[{style}]{escape(line)}[/]" if style else escape(line))


@app.command()
def propose(version: str,
            message: Annotated[str, typer.Option("--message", "-m")] = "") -> None:
    """Propose a version for activation (it then needs an approving review by someone else)."""
    p = _run(lambda r, _s: r.propose(version, message=message))
    console.print(f"proposal [bold]#{p.id}[/] for {p.version}: {p.status}")


@app.command()
def proposals(version: Annotated[str, typer.Option(help="Only this version.")] = "",
              status: Annotated[str, typer.Option(help="Only this status.")] = "") -> None:
    """List proposals, newest first."""
    rows = _run(lambda r, _s: r.proposals(version=version or None, status=status or None))
    table = Table("id", Column("version", no_wrap=True), "status", "author", Column("date", no_wrap=True),
                  "message", header_style="bold")
    for p in rows:
        table.add_row(str(p.id), p.version, p.status, escape(p.author), _ts(p.created_at), escape(p.message))
    console.print(table)


@app.command()
def review(proposal: int,
           approve: Annotated[bool, typer.Option("--approve")] = False,
           reject: Annotated[bool, typer.Option("--reject")] = False,
           request_changes: Annotated[bool, typer.Option("--request-changes")] = False,
           comment: Annotated[str, typer.Option()] = "") -> None:
    """Approve, reject or request changes on a proposal (the author may not review it)."""
    chosen = [d for d, on in (("approve", approve), ("reject", reject), ("request_changes", request_changes)) if on]
    if len(chosen) != 1:
        raise _fail("choose exactly one of --approve, --reject, --request-changes", 2)
    p = _run(lambda r, _s: r.review(proposal, decision=chosen[0], comment=comment))
    console.print(f"proposal #{p.id} ({p.version}): [bold]{p.status}[/]")


@app.command("attach-evaluation")
def attach_evaluation(version: str,
                      result: Annotated[Path, typer.Option(help="JSON file with the evaluation result.")],
                      passed: Annotated[bool, typer.Option("--passed/--failed")]) -> None:
    """Attach an evaluation result to a version (the evaluator identity only)."""
    data = json.loads(result.read_text())
    e = _run(lambda r, _s: r.attach_evaluation(version, data, passed))
    console.print(f"evaluation #{e.id} attached to {e.version}: {'passed' if e.passed else 'failed'}")


@app.command()
def activate(version: str, target: Target = "global",
             force: Force = False, reason: Reason = "") -> None:
    """Activate a version for a target (needs an approved review and a passing evaluation)."""
    a = _run(lambda r, _s: r.activate(version, target=target, force=force, reason=reason),
             announce=True)
    console.print(_activation_line(a) + ("" if a.announced else " [yellow](not announced)[/]"))


@app.command()
def rollback(target: Target = "global",
             to: Annotated[str, typer.Option("--to", help="Version to return to (default: the previous one).")] = "",
             force: Force = False, reason: Reason = "") -> None:
    """Return a target to its previous activation (or to --to VERSION)."""
    a = _run(lambda r, _s: r.rollback(target=target, to=to or None, force=force, reason=reason),
             announce=True)
    console.print(_activation_line(a) + ("" if a.announced else " [yellow](not announced)[/]"))


@app.command()
def active(target: Annotated[str, typer.Option("--target", "-t", help="One target (default: all).")] = "",
           history: Annotated[bool, typer.Option(help="Show the target's activation history.")] = False) -> None:
    """Active version per target."""
    async def fn(r: Registry, _s: HarnessSettings) -> list[Activation]:
        if target:
            if history:
                return await r.history(target)
            one = await r.active(target)
            return [one] if one and one.version else []  # a cleared override is no activation
        return [a for t in sorted(await r.active_all()) if (a := await r.active(t)) is not None]

    rows = _run(fn)
    if not rows:
        global_active = _run(lambda r, _s: r.active("global")) if target and target != "global" else None
        console.print(no_active_message(target, global_active))
        if target:
            raise typer.Exit(3)
    for a in rows:
        console.print(_activation_line(a))


def no_active_message(target: str, global_active: Activation | None) -> str:
    """What runs when ``target`` has no activation: the global one, else the shipped folder."""
    from livehost.config import load_settings

    folder = load_settings().harness_path
    try:
        shipped = f"the shipped folder {folder} (version {load(folder).version()})"
    except HarnessError:
        shipped = f"the shipped folder {folder}"
    if target and target != "global":
        if global_active is not None and global_active.version:
            return (f"no harness activated on {target}: its new requests use the global activation, "
                    f"{global_active.version}")
        return f"no harness activated on {target}, nor globally: the runtime uses {shipped}"
    return f"no active harness: the runtime uses {shipped}"


@app.command()
def audit(limit: Annotated[int, typer.Option()] = 50,
          version: Annotated[str, typer.Option()] = "",
          target: Annotated[str, typer.Option()] = "",
          actor: Annotated[str, typer.Option()] = "") -> None:
    """The audit log, newest first."""
    rows = _run(lambda r, _s: r.audit(limit=limit, version=version or None, target=target or None,
                                      actor=actor or None))
    console.print(audit_table(rows))


def _detail(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ", ".join(_detail(v) for v in value)
    return json.dumps(value, ensure_ascii=False)


def audit_table(rows: list[Any]) -> Table:
    """The audit log as a table that reads at 80 columns: the action, its target and proposal and
    its details share one wrapping column; versions are shown by their first 8 hex digits."""
    table = Table("#", Column("when", no_wrap=True), "actor", Column("what", ratio=1, overflow="fold"),
                  Column("version", no_wrap=True), header_style="bold", expand=False)
    for e in rows:
        style = "red" if e.action.endswith(".refused") or e.action == "load_failed" else "bold"
        what = f"[{style}]{escape(e.action)}[/]"
        if e.target:
            what += f" {escape(e.target)}"
        if e.proposal_id:
            what += f" (proposal {e.proposal_id})"
        details = {k: v for k, v in e.details.items() if v not in (None, "", [], False)}
        if details:
            what += "\n[dim]" + escape("; ".join(f"{k}: {_detail(v)}" for k, v in details.items())) + "[/]"
        table.add_row(str(e.id), _ts(e.at)[:16], escape(e.actor), what, (e.version or "")[:8])
    return table


@app.command()
def status(version: Annotated[str, typer.Argument(help="Only this version.")] = "") -> None:
    """What each service reported loading harness versions (ok, or the error it served through)."""
    rows = _run(lambda r, _s: r.load_status(version or None))
    table = Table("service", Column("version", no_wrap=True), "ok", "replica", Column("when", no_wrap=True),
                  "error", header_style="bold")
    for st in rows:
        table.add_row(st.service, st.version, "yes" if st.ok else "[red]no[/]", st.replica, _ts(st.updated_at),
                      escape(st.error))
    console.print(table)
