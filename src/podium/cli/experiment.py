"""``podium experiment``: run the papers' ablations from their config files (``experiments/*.yaml``).

``podium experiment run FILE --scale small`` trains the arms that train, evaluates every arm and writes a summary
and an HTML report comparing them; ``--scale full`` runs the papers' sizes on the endpoints the file names.
``podium experiment check FILE…`` validates files at both scales without running anything. Exit status: 0 done,
2 invalid input (config, benchmark, missing extra).
"""

from pathlib import Path
from typing import Annotated, Literal

import typer

from podium.cli.common import JsonOption, QuietOption, console, errors, fail
from podium.cli.output import print_json_line, shown
from podium.core.printable import printable
from podium.errors import PodiumError
from podium.experiments import ArmResult, arm_errors, load_experiment, run_experiment

app = typer.Typer(help="The papers' ablations as configs: run them and compare the arms side by side.")

ScaleOption = Annotated[
    str, typer.Option("--scale", help="small: the embedded model, a few items; full: real endpoints, paper sizes.")
]


@app.command("run")
def run_command(
    config: Annotated[Path, typer.Argument(help="Experiment file (experiments/*.yaml).")],
    scale: ScaleOption = "small",
    out: Annotated[
        Path | None, typer.Option("--out", help="Output directory (default: runs/experiments/NAME-SCALE).")
    ] = None,
    arm: Annotated[list[str] | None, typer.Option("--arm", help="Only this arm (repeatable).")] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Benchmark data (default: $PODIUM_DATA or ../shared/data).")
    ] = None,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Train (where an arm trains) and evaluate every arm; write summary.json and report/index.html."""
    try:
        experiment = load_experiment(config, _scale(scale))
        target = out or Path("runs") / "experiments" / f"{experiment.name}-{experiment.scale}"
        results = run_experiment(
            experiment,
            target,
            arms=arm,
            data_dir=data_dir,
            say=lambda line: errors.print(printable(line), highlight=False, markup=False),
            progress=not quiet and not as_json,
        )
    except PodiumError as error:
        raise fail(error) from error
    for result in results:
        _show(result, as_json)


@app.command("check")
def check_command(
    configs: Annotated[list[Path], typer.Argument(help="Experiment files.")],
) -> None:
    """Validate experiment files at both scales (every arm's system and training configs, each system built and
    checked to produce an action); run nothing."""
    for path in configs:
        for scale in ("small", "full"):
            try:
                experiment = load_experiment(path, scale)  # type: ignore[arg-type]
                for error in arm_errors(experiment)[:1]:
                    raise error
            except PodiumError as error:
                raise fail(error) from error
            trained = sum(arm.training is not None for arm in experiment.arms)
            line = f"{path} [{scale}]: {len(experiment.arms)} arms ({trained} trained) on {experiment.benchmark}"
            console.print(printable(line), markup=False, highlight=False)


def _scale(value: str) -> Literal["small", "full"]:
    if value not in ("small", "full"):
        raise fail(PodiumError(f"--scale must be small or full, not {value!r}"))
    return value  # type: ignore[return-value]


def _show(result: ArmResult, as_json: bool) -> None:
    if as_json:
        print_json_line({"arm": result.arm, **result.metrics})
        return
    m = result.metrics
    console.print(
        f"{shown(result.arm)}: mean@k {m['mean_at_k']:.3f} over {m['items']} items, ${m['usd_per_query']:.6f}/query, "
        f"{m['tokens_per_query']:.0f} tokens/query, {m['latency_mean_s']:.1f} s/query, {m['errors']} errors",
        highlight=False,
        soft_wrap=True,
    )
