"""``podium run``: one question through :meth:`podium.solve.system.System.solve`, with a live display while it runs
and a trace of every call (status, reason, tokens, USD, seconds) when it ends."""

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from podium.backends.base import BackendError
from podium.cli.common import (
    BACKEND_FAILED,
    LiveEpisode,
    PoolOption,
    PricesOption,
    UnisolatedOption,
    backend_failure,
    fail,
    open_pool,
    print_trace,
)
from podium.cli.fields import Flags, config_options, load_config
from podium.cli.output import print_json_line
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory, write_trajectories
from podium.errors import ConfigError, PodiumError
from podium.runtime.config import RunConfig
from podium.solve.config import SystemConfig
from podium.solve.router import load_system
from podium.solve.system import Chat, System


@config_options(RunConfig, ("policy", "max_episode_usd", "max_turns", "max_seconds", "max_tokens", "allow", "deny"))
def run_command(
    question: Annotated[str, typer.Argument(help="The task for the orchestrator.")],
    system: Annotated[
        Path | None,
        typer.Option(
            "--system", help="A system file (an orchestrator, or a router: kind router) instead of --pool and --config."
        ),
    ] = None,
    pool: PoolOption = None,
    config: Annotated[Path | None, typer.Option("--config", help="RunConfig YAML; flags override it.")] = None,
    preference: Annotated[str | None, typer.Option("--preference", help="Preference instruction for the task.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the blind worker labels.")] = None,
    trace: Annotated[Path | None, typer.Option("--trace", help="Append the full trajectory to this JSONL.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the trajectory as one JSON line instead of the trace.")
    ] = False,
    prices: PricesOption = None,
    allow_unisolated: UnisolatedOption = False,
    *,
    flags: Flags,
) -> None:
    """Run the orchestrator on QUESTION over the pool; print the answer and a trace of every call. Exits 2 on a
    bad configuration, 3 when the orchestrator's backend cannot be reached or fails."""
    try:
        if system is not None:
            given = [flag for flag, value in (("--pool", pool), ("--config", config)) if value]
            given += list(flags.names.values())
            if given:
                raise ConfigError(f"--system is the whole system: give it without {', '.join(given)}")
            chosen = load_system(system)
        else:
            settings = load_config(RunConfig, config, flags)
            built = open_pool(pool, prices=prices, allow_unisolated=allow_unisolated)
            described = SystemConfig(**settings.model_dump(), pool=built.config)
            chosen = System.build(described, pool=built, source=str(config or "run options"))  # every problem at once
        wanted = Preference(instruction=preference) if preference else None
        trajectory = _play(chosen, question, wanted, seed, live=not as_json)
    except BackendError as error:
        raise fail(error, BACKEND_FAILED) from error
    except PodiumError as error:
        raise fail(error) from error
    if trace is not None:
        write_trajectories(trace, [trajectory])
    failure = backend_failure(trajectory)
    if failure is not None and not trajectory.turns:
        raise failure
    if as_json:
        print_json_line(trajectory.model_dump_json())
    else:
        print_trace(trajectory)
    if failure is not None:
        raise failure


def _play(system: System, question: str, preference: Preference | None, seed: int | None, live: bool) -> Trajectory:
    if not live:
        return asyncio.run(system.solve(question, preference=preference, seed=seed))
    with LiveEpisode(f"{system.config.policy.name} · {system.model}") as display:
        chat = Chat(on_event=display.update)
        return asyncio.run(system.solve(question, preference=preference, seed=seed, chat=chat))
