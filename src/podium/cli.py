"""The ``podium`` command: one Typer app with each area's commands registered here."""

from typing import Annotated

import typer

from podium import __version__
from podium.envs.cli import env_app
from podium.evaluate.cli import eval_command, report_command
from podium.pool.cli import ask_command, describe_model_command, serve_model_command, tools_app
from podium.retrieval.cli import index_app
from podium.runtime.cli import run_command
from podium.train.cli import train_app

app = typer.Typer(help="Podium: run, evaluate and train small orchestrator models.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")
app.add_typer(env_app, name="env")
app.add_typer(index_app, name="index")
app.command("run")(run_command)
app.add_typer(train_app, name="train")
app.command("ask")(ask_command)
app.command("describe-model")(describe_model_command)
app.command("serve-model")(serve_model_command)
app.command("eval")(eval_command)
app.command("report")(report_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"podium {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Podium: run, evaluate and train small orchestrator models."""
