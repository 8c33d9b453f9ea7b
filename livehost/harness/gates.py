"""Which checks every change of a target's active harness runs: one table the registry enforces and
``docs/harness-gates.md`` shows (a unit test keeps the page equal to :func:`markdown`).

Every way a version becomes active on a target — activation, rollback to the previous activation,
rollback to a named version — runs the same checks on that version. Forcing (break-glass role, with a
reason) overrides the checks that failed; the activation and its audit row then say ``forced: true``,
list what was overridden and keep the reason. Clearing a room's or arm's override activates no version
of its own (the target follows global again), so it has nothing to check.

Regenerate the page's table with ``python -m livehost.harness.gates``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The role that may force a transition past failed checks (besides the method's own role).
FORCE_ROLE = "break-glass"
#: The gRPC service whose methods make the transitions (roles per method: livehost.security.authz).
SERVICE = "/livehost.harness.v1.HarnessService/"

#: Each check on the version a transition makes active: name -> what must hold.
CHECKS: dict[str, str] = {
    "review": "an approved review of a proposal of the version (the approver authored no change in it)",
    "evaluation": "the latest evaluation attached to the version passed "
                  "(skipped when `LIVEHOST_HARNESS_REQUIRE_EVALUATION=false`)",
}


@dataclass(frozen=True)
class Transition:
    name: str  # how the registry refers to it
    usage: str  # the CLI form
    makes_active: str  # which version the target has afterwards
    method: str  # the Harness API method (its roles: livehost.security.authz.METHOD_ROLES)
    checks: tuple[str, ...]  # names in CHECKS, run on the version made active
    forcible: bool  # whether --force --reason (FORCE_ROLE) overrides failed checks


ACTIVATE = Transition("activate", "`harness activate VERSION [--target T]`", "VERSION", "Activate",
                      ("review", "evaluation"), True)
ROLLBACK = Transition("rollback", "`harness rollback [--target T]`", "the version active before the current one",
                      "Rollback", ("review", "evaluation"), True)
ROLLBACK_TO = Transition("rollback_to", "`harness rollback --to VERSION [--target T]`", "VERSION", "Rollback",
                         ("review", "evaluation"), True)
CLEAR = Transition("clear", "`harness rollback --target room:<id>` (or `arm:…`) past its first activation",
                   "none of its own: the target follows global", "Rollback", (), False)

TRANSITIONS: tuple[Transition, ...] = (ACTIVATE, ROLLBACK, ROLLBACK_TO, CLEAR)


def roles(transition: Transition) -> tuple[str, ...]:
    from livehost.security.authz import METHOD_ROLES

    return tuple(METHOD_ROLES[SERVICE + transition.method])


def markdown() -> str:
    """The tables of transitions and of checks, as docs/harness-gates.md shows them."""
    lines = ["| transition | the target afterwards | role | checks on that version | when a check fails |",
             "|---|---|---|---|---|"]
    for t in TRANSITIONS:
        failing = f"refused, unless forced (`{FORCE_ROLE}` role, `--force --reason`)" if t.forcible else "-"
        lines.append(f"| {t.usage} | {t.makes_active} | {', '.join(f'`{r}`' for r in roles(t))} "
                     f"| {', '.join(t.checks) or 'none'} | {failing} |")
    lines += ["", "| check | what must hold |", "|---|---|"]
    lines += [f"| {name} | {what} |" for name, what in CHECKS.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
