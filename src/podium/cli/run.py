"""``podium run``: one question through the orchestrator runtime, with a live display while it runs and a trace
of every call (status, reason, tokens, USD, seconds) when it ends."""

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
from podium.cli.output import print_json_line
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory, write_trajectories
from podium.errors import PodiumError
from podium.policies import PolicyName
from podium.runtime.checks import require_runnable
from podium.runtime.config import RunConfig
from podium.runtime.executor import Executor

PolicyOption = Annotated[
    PolicyName | None,
    typer.Option("--policy", help="serial (ToolOrchestra), parallel (ParaManager) or dag (Uno) (default: serial)."),
]
TurnsOption = Annotated[
    int | None, typer.Option("--max-turns", help="Most orchestrator turns (default: the policy's: 50, 12, 8).")
]
SecondsOption = Annotated[
    float | None, typer.Option("--max-seconds", help="Wall-clock deadline in seconds (default: none).")
]
TokensOption = Annotated[
    int | None,
    typer.Option(
        "--max-tokens", help="Completion budget of one turn in tokens; actions are sized to fit it (default: 1024)."
    ),
]


def run_command(
    question: Annotated[str, typer.Argument(help="The task for the orchestrator.")],
    policy: PolicyOption = None,
    pool: PoolOption = None,
    config: Annotated[Path | None, typer.Option("--config", help="RunConfig YAML; flags override it.")] = None,
    max_usd: Annotated[float | None, typer.Option("--max-usd", help="USD cap of the episode (default: none).")] = None,
    max_turns: TurnsOption = None,
    max_seconds: SecondsOption = None,
    max_tokens: TokensOption = None,
    preference: Annotated[str | None, typer.Option("--preference", help="Preference instruction for the task.")] = None,
    allow: Annotated[list[str] | None, typer.Option("--allow", help="Only this tool/role/worker (repeatable).")] = None,
    deny: Annotated[list[str] | None, typer.Option("--deny", help="Not this tool/role/worker (repeatable).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the blind worker labels.")] = None,
    trace: Annotated[Path | None, typer.Option("--trace", help="Append the full trajectory to this JSONL.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the trajectory as one JSON line instead of the trace.")
    ] = False,
    prices: PricesOption = None,
    allow_unisolated: UnisolatedOption = False,
) -> None:
    """Run the orchestrator on QUESTION over the pool; print the answer and a trace of every call. Exits 2 on a
    bad configuration, 3 when the orchestrator's backend cannot be reached or fails."""
    overrides = {
        "policy": policy,
        "max_usd": max_usd,
        "max_turns": max_turns,
        "max_seconds": max_seconds,
        "max_tokens": max_tokens,
        "allow": allow,
        "deny": deny,
    }
    try:
        settings = RunConfig.from_file(config) if config else RunConfig()
        settings = RunConfig.from_dict(
            {**settings.model_dump(exclude_unset=True), **{k: v for k, v in overrides.items() if v is not None}},
            source="run options",
        )
        built = open_pool(pool, prices=prices, allow_unisolated=allow_unisolated)
        require_runnable(built, settings, str(config or "run options"))  # every problem at once, before any work
        executor = Executor(built, settings)
        wanted = Preference(instruction=preference) if preference else None
        trajectory = _play(executor, question, wanted, seed, live=not as_json)
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


def _play(executor: Executor, question: str, preference: Preference | None, seed: int | None, live: bool) -> Trajectory:
    if not live:
        return asyncio.run(executor.run(question, preference=preference, seed=seed))
    with LiveEpisode(f"{executor.policy.name} · {executor.orchestrator.model}") as display:
        return asyncio.run(executor.run(question, preference=preference, seed=seed, on_event=display.update))
