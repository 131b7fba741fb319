"""``podium pool``: keep a pool's model descriptions current.

``podium pool refresh-descriptions`` re-describes every worker (or those named) on one seeded sample of tasks and
records each description, with its provenance, in the pool's descriptions file, which the pool then shows the
orchestrator. Exit status: 0 all described, 1 a worker's model failed (the others are still recorded), 2 invalid
input (pool, tasks, no descriptions file).
"""

import asyncio

import typer

from podium.backends.base import BackendError
from podium.cli.common import DESCRIBE, ConfigFileOption, JsonOption, console, describing, errors, fail
from podium.cli.fields import Flags, config_options
from podium.cli.output import print_json_line, shown
from podium.errors import ConfigError
from podium.evaluate.describe import DescribeConfig, describe_worker, record_description
from podium.pool.descriptions import description_states, read_descriptions

app = typer.Typer(help="The pool: refresh the model descriptions it shows the orchestrator.")


@app.callback()
def pool_group() -> None:
    """The pool: refresh the model descriptions it shows the orchestrator."""


@app.command("refresh-descriptions")
@config_options(DescribeConfig, (*DESCRIBE, ("workers", "--worker")))
def refresh_descriptions_command(config: ConfigFileOption = None, as_json: JsonOption = False, *, flags: Flags) -> None:
    """Re-describe the pool's workers from their results on sampled tasks and record the descriptions."""
    request, built, target = describing(config, flags)
    if target is None:
        raise fail(ConfigError("no descriptions file: give --out, or set descriptions: in the pool file"))
    names = request.workers or [w.name for w in built.config.workers]
    unknown = sorted(set(names) - set(built.backends))
    if unknown:
        raise fail(ConfigError(f"--worker: no worker {unknown} (workers: {', '.join(built.backends)})"))
    try:
        before = description_states(built.config, read_descriptions(target))
    except ConfigError as error:
        raise fail(error) from error
    failed = 0
    for index, name in enumerate(names, 1):
        errors.print(f"[{index}/{len(names)}] describing {shown(name)} (was {before[name]})…", highlight=False)
        try:
            entry = asyncio.run(describe_worker(built, name, request, lambda step, name=name: _progress(name, step)))
        except ConfigError as error:
            raise fail(error) from error
        except BackendError as error:
            failed += 1
            _report(as_json, {"worker": name, "before": before[name], "error": str(error)})
            continue
        record_description(target, name, entry)
        solved = {"solved": entry.provenance.solved, "tasks": len(entry.provenance.task_ids)}
        row = {"worker": name, "before": before[name], **solved, "description": entry.description, "file": str(target)}
        row |= {"figures": entry.figures.model_dump() if entry.figures else None, "rejected": entry.rejected}
        _report(as_json, row)
    if failed:
        raise typer.Exit(1)


def _progress(worker: str, step: str) -> None:
    errors.print(f"  {shown(worker)}: {shown(step)}", highlight=False)


def _report(as_json: bool, row: dict[str, object]) -> None:
    if as_json:
        print_json_line(row)
    elif "error" in row:
        errors.print(f"[red]{shown(row['worker'])}: failed:[/red] {shown(row['error'])}", highlight=False)
    else:
        console.print(
            f"{shown(row['worker'])} ({row['before']} → fresh, solved {row['solved']}/{row['tasks']}): "
            f"{shown(row['description'])}",
            highlight=False,
            soft_wrap=True,
        )
        for sentence in row["rejected"]:  # type: ignore[attr-defined]
            console.print(f"  left out (contradicts the figures): {sentence}", markup=False, highlight=False)
