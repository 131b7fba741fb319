"""``podium experiment``: run the papers' ablations from their config files (``experiments/*.yaml``).

``podium experiment run FILE --scale small`` trains the arms that train, evaluates every arm and writes a summary
and an HTML report comparing them; ``--scale full`` runs the papers' sizes on the endpoints the file names.
``podium experiment check FILE…`` validates files at both scales without running anything. Exit status: 0 done,
2 invalid input (config, benchmark, missing extra).
"""

from pathlib import Path
from typing import Annotated

import typer

from podium.cli.common import ConfigFileOption, JsonOption, console, errors, fail
from podium.cli.fields import Flags, config_options, load_config
from podium.cli.output import print_json_line, shown
from podium.core.printable import printable
from podium.errors import PodiumError
from podium.experiments import ArmResult, arm_errors, load_experiment, run_experiment
from podium.experiments.config import ExperimentRunConfig

app = typer.Typer(help="The papers' ablations as configs: run them and compare the arms side by side.")


@app.command("run")
@config_options(
    ExperimentRunConfig, ("scale", "out", ("arms", "--arm"), "data_dir", "quiet"), arguments=("experiment",)
)
def run_command(config: ConfigFileOption = None, as_json: JsonOption = False, *, flags: Flags) -> None:
    """Train (where an arm trains) and evaluate every arm; write summary.json and report/index.html."""
    try:
        settings = load_config(ExperimentRunConfig, config, flags)
        experiment = load_experiment(settings.experiment, settings.scale)
        target = settings.out or Path("runs") / "experiments" / f"{experiment.name}-{experiment.scale}"
        results = run_experiment(
            experiment,
            target,
            arms=settings.arms,
            data_dir=settings.data_dir,
            say=lambda line: errors.print(printable(line), highlight=False, markup=False),
            progress=not settings.quiet and not as_json,
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
