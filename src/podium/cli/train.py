"""``podium train sft`` and ``podium train grpo``.

Loaded by ``podium train``. Exit status: 0 trained, 2 invalid input
(config, data, missing ``train`` extra).
"""

from pathlib import Path
from typing import Annotated, Any

import typer

from podium.cli.common import missing_checkpoint, rollout_problems
from podium.cli.output import make_console, shown
from podium.config import read_structured_file
from podium.errors import ConfigError, PodiumError
from podium.runtime.checks import NotRunnable
from podium.train.config import GRPOConfig, SFTConfig
from podium.train.sft import TrainResult, run_sft
from podium.train.tasks import load_tasks
from podium.train.verl import write_verl_launch

console = make_console()
errors = make_console(stderr=True)
app = typer.Typer(help="Train the orchestrator: SFT on trajectories, then GRPO on executor rollouts.")

ConfigOption = Annotated[Path, typer.Option("--config", help="Training config (YAML/JSON); flags override it.")]
OutputOption = Annotated[Path | None, typer.Option("--output-dir", help="Where checkpoints and the model go.")]
ModelOption = Annotated[
    Path | None, typer.Option("--model", help="Checkpoint directory to start from (default: the config's).")
]
StepsOption = Annotated[int | None, typer.Option("--max-steps", min=1, help="Stop after this many optimiser steps.")]
RateOption = Annotated[float | None, typer.Option("--learning-rate", min=0.0, help="Peak learning rate.")]


def _fail(error: Exception) -> typer.Exit:
    errors.print(f"[red]error:[/red] {shown(error)}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _settings(path: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """The config file's fields with the flags that were given written over them (dotted keys nest)."""
    data = read_structured_file(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config fields")
    for key, value in overrides.items():
        if value is None:
            continue
        target = data
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = str(value) if isinstance(value, Path) else value
    return data


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
def sft_command(
    config: ConfigOption,
    output_dir: OutputOption = None,
    model: ModelOption = None,
    max_steps: StepsOption = None,
    learning_rate: RateOption = None,
    trajectories: Annotated[
        list[Path] | None, typer.Option("--trajectories", help="Trajectory JSONL (repeatable; replaces the config's).")
    ] = None,
) -> None:
    """Supervised fine-tuning on trajectories; the loss covers only the orchestrator's own tokens."""
    overrides = {
        "output_dir": output_dir,
        "model.path": model,
        "max_steps": max_steps,
        "learning_rate": learning_rate,
        "trajectories": [str(path) for path in trajectories] if trajectories else None,
    }
    try:
        settings = SFTConfig.from_dict(_settings(config, overrides), source=str(config))
        _require_checkpoint(settings.model.path, config)
        result = run_sft(settings)
    except PodiumError as error:
        raise _fail(error) from error
    _report(result)


@app.command("grpo")
def grpo_command(
    config: ConfigOption,
    output_dir: OutputOption = None,
    model: ModelOption = None,
    max_steps: StepsOption = None,
    learning_rate: RateOption = None,
    reward: Annotated[
        str | None, typer.Option("--reward", help="Reward design: uno, toolorchestra or paramanager.")
    ] = None,
    group_size: Annotated[int | None, typer.Option("--group-size", min=2, help="G: rollouts per question.")] = None,
    backend: Annotated[
        str | None, typer.Option("--backend", help="Rollouts on the live model (local) or a trl vllm-serve server.")
    ] = None,
) -> None:
    """GRPO on rollouts from Podium's executor, with the chosen reward, filters and clipping."""
    overrides = {
        "output_dir": output_dir,
        "model.path": model,
        "max_steps": max_steps,
        "learning_rate": learning_rate,
        "reward.design": reward,
        "group_size": group_size,
        "rollout.backend": backend,
    }
    try:
        settings = GRPOConfig.from_dict(_settings(config, overrides), source=str(config))
        _require_checkpoint(settings.model.path, config)
        problems = rollout_problems(settings)
        if problems:  # rollouts that cannot produce an action would train on nothing
            raise NotRunnable(f"{config} (rollout)", problems)
        # The GRPO trainer subclasses TRL's at import, so it is imported only once the train extra is needed.
        from podium.train.grpo import run_grpo

        result = run_grpo(settings)
    except PodiumError as error:
        raise _fail(error) from error
    _report(result)


@app.command("verl-config")
def verl_config_command(
    config: ConfigOption,
    out: Annotated[Path, typer.Option("--out", help="Directory for the parquet tasks, agent-loop file and script.")],
    nodes: Annotated[int, typer.Option("--nodes", min=1, help="Nodes of the verl run.")] = 1,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", min=1, help="GPUs per node.")] = 8,
) -> None:
    """Write a verl launch that trains like the GRPO config across nodes, Podium's executor doing the rollouts."""
    try:
        settings = GRPOConfig.from_file(config)
        script = write_verl_launch(
            settings, config, load_tasks(settings), out, nodes=nodes, gpus_per_node=gpus_per_node
        )
    except PodiumError as error:
        raise _fail(error) from error
    console.print(f"verl launch → {shown(script)}", highlight=False, soft_wrap=True)
