"""``podium run``: one question through :meth:`podium.solve.system.System.solve`, with a live display while it runs
and a trace of every call (status, reason, tokens, USD, seconds) when it ends."""

import asyncio
from typing import Annotated

import typer

from podium.backends.base import BackendError
from podium.cli.common import BACKEND_FAILED, ConfigFileOption, LiveEpisode, backend_failure, fail, print_trace
from podium.cli.fields import Flags, config_options, load_config
from podium.cli.output import print_json_line
from podium.core.preference import Preference
from podium.core.trajectory import Trajectory, write_trajectories
from podium.errors import ConfigError, PodiumError
from podium.solve.config import QuestionConfig
from podium.solve.router import load_system
from podium.solve.system import Chat, System

RUN_FIELDS = (
    "system", "pool", "policy", "max_episode_usd", "max_turns", "max_seconds", "max_tokens", "allow", "deny",
    "preference", "seed", "trace", "prices", "sandbox_config", "allow_unisolated",
)  # fmt: skip
"""The fields of :class:`QuestionConfig` offered as flags (the others: in its ``--config`` file, a system file)."""
EPISODE = frozenset({"system", "preference", "seed", "trace"})
"""What may be given beside ``--system`` (the rest is the system file's)."""


@config_options(QuestionConfig, RUN_FIELDS)
def run_command(
    question: Annotated[str, typer.Argument(help="The task for the orchestrator.")],
    config: ConfigFileOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the trajectory as one JSON line instead of the trace.")
    ] = False,
    *,
    flags: Flags,
) -> None:
    """Run the orchestrator on QUESTION over the pool; print the answer and a trace of every call. Exits 2 on a
    bad configuration, 3 when the orchestrator's backend cannot be reached or fails."""
    try:
        settings = load_config(QuestionConfig, config, flags)
        if settings.system is not None:
            given = sorted({flags.names.get(field, "--config") for field in settings.model_fields_set - EPISODE})
            if given:
                raise ConfigError(f"--system is the whole system: give it without {', '.join(given)}")
            chosen = load_system(settings.system)
        else:
            built = settings.open(settings.pool_config())
            chosen = System.build(settings, pool=built, source=str(config or "run options"))  # every problem at once
        wanted = Preference(instruction=settings.preference) if settings.preference else None
        trajectory = _play(chosen, question, wanted, settings.seed, live=not as_json)
    except BackendError as error:
        raise fail(error, BACKEND_FAILED) from error
    except PodiumError as error:
        raise fail(error) from error
    if settings.trace is not None:
        write_trajectories(settings.trace, [trajectory])
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
