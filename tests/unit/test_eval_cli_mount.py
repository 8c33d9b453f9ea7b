"""The command groups mount as documented (``livehost eval|experiment|sim`` and two ``harness`` verbs)."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from livehost.eval.cli import app as eval_app
from livehost.eval.gate_cli import app as gate_app
from livehost.experiments.cli import app as experiment_app
from livehost.sim.cli import app as sim_app


def test_mounts_and_help() -> None:
    root = typer.Typer()
    harness = typer.Typer()

    @harness.command("validate")
    def _validate() -> None:  # stands in for the existing harness commands
        pass

    harness.registered_commands += gate_app.registered_commands
    root.add_typer(harness, name="harness")
    root.add_typer(eval_app, name="eval")
    root.add_typer(experiment_app, name="experiment")
    root.add_typer(sim_app, name="sim")
    runner = CliRunner()
    for args in (["eval", "--help"], ["eval", "pairwise", "export", "--help"],
                 ["eval", "pairwise", "analyze", "--help"],
                 ["eval", "judge", "--help"], ["eval", "calibrate", "--help"], ["eval", "report", "--help"],
                 ["eval", "distribution", "--help"], ["harness", "evaluate", "--help"],
                 ["harness", "propose-fixes", "--help"], ["experiment", "analyze", "--help"],
                 ["experiment", "create", "--help"], ["sim", "generate", "--help"], ["sim", "play", "--help"],
                 ["sim", "outcomes", "--help"]):
        res = runner.invoke(root, args)
        assert res.exit_code == 0, (args, res.output)
