"""``podium train sft`` and ``podium train grpo``.

Loaded by ``podium train``. Exit status: 0 trained, 2 invalid input
(config, data, missing ``train`` extra).
"""

from pathlib import Path
from typing import Annotated

import typer

from podium.cli.common import fail, missing_checkpoint, rollout_problems
from podium.cli.fields import Flags, config_options, load_config
from podium.cli.output import make_console, shown
from podium.errors import ConfigError, PodiumError
from podium.runtime.checks import NotRunnable
from podium.train.config import GRPOConfig, SFTConfig
from podium.train.sft import TrainResult, run_sft
from podium.train.tasks import load_tasks
from podium.train.verl import VerlLaunchConfig, write_verl_launch

console = make_console()
app = typer.Typer(help="Train the orchestrator: SFT on trajectories, then GRPO on executor rollouts.")

ConfigOption = Annotated[Path, typer.Option("--config", help="Training config (YAML/JSON); flags override it.")]
TRAINER = ("output_dir", ("model.path", "--model"), "max_steps", "learning_rate")
"""Options of both training commands."""


def _require_checkpoint(path: str | None, config: Path) -> None:
    """A start checkpoint that is not there is one line naming the command that writes it (never a download)."""
    missing = missing_checkpoint(path)
    if missing is not None:
        raise ConfigError(f"{missing.message} (model.path of {config})")


def _report(result: TrainResult) -> None:
    losses = [entry["loss"] for entry in result.log if "loss" in entry]
    last = f", last loss {losses[-1]:.4g}" if losses else ""
    console.print(f"trained {result.steps} steps{last} → {shown(result.path)}", highlight=False, soft_wrap=True)


@app.command("sft")
@config_options(SFTConfig, (*TRAINER, "trajectories"))
def sft_command(config: ConfigOption, *, flags: Flags) -> None:
    """Supervised fine-tuning on trajectories; the loss covers only the orchestrator's own tokens."""
    try:
        settings = load_config(SFTConfig, config, flags)
        _require_checkpoint(settings.model.path, config)
        result = run_sft(settings)
    except PodiumError as error:
        raise fail(error) from error
    _report(result)


@app.command("grpo")
@config_options(
    GRPOConfig, (*TRAINER, "tasks", ("reward.design", "--reward"), "group_size", ("rollout.backend", "--backend"))
)
def grpo_command(config: ConfigOption, *, flags: Flags) -> None:
    """GRPO on rollouts from Podium's executor, with the chosen reward, filters and clipping."""
    try:
        settings = load_config(GRPOConfig, config, flags)
        _require_checkpoint(settings.model.path, config)
        problems = rollout_problems(settings)
        if problems:  # rollouts that cannot produce an action would train on nothing
            raise NotRunnable(f"{config} (rollout)", problems)
        # The GRPO trainer subclasses TRL's at import, so it is imported only once the train extra is needed.
        from podium.train.grpo import run_grpo

        result = run_grpo(settings)
    except PodiumError as error:
        raise fail(error) from error
    _report(result)


@app.command("verl-config")
@config_options(VerlLaunchConfig, ("out", "nodes", "gpus_per_node"))
def verl_config_command(config: ConfigOption, *, flags: Flags) -> None:
    """Write a verl launch that trains like the GRPO config across nodes, Podium's executor doing the rollouts.
    (--config is the GRPO config; the launch's own settings are flags.)"""
    try:
        settings = GRPOConfig.from_file(config)
        launch = load_config(VerlLaunchConfig, None, flags)
        script = write_verl_launch(
            settings,
            config,
            load_tasks(settings),
            Path(launch.out),
            nodes=launch.nodes,
            gpus_per_node=launch.gpus_per_node,
        )
    except PodiumError as error:
        raise fail(error) from error
    console.print(f"verl launch → {shown(script)}", highlight=False, soft_wrap=True)
