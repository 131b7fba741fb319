"""``podium env``: list the tau2-format domains, replay their golden actions, run a task through the orchestrator
runtime against a simulated user, and score a results file that ``tau2 run`` (or ``podium eval --tau2-results``)
saved. Every score is the official tau2 reward (with its DB / COMMUNICATE / ACTION parts) and, beside it,
Podium's stricter verdict ``strict_solved`` (SPEC §6.3); see :mod:`podium.envs.evaluation`."""

import asyncio
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from podium.backends.base import BackendError
from podium.cli.common import ConfigFileOption, JsonOption, console, errors, fail, load_settings, print_trace
from podium.cli.fields import FieldSpec, Flags, config_options
from podium.cli.output import print_json_line, shown
from podium.core.progress import ProgressBar
from podium.core.trajectory import write_trajectories
from podium.envs.domain import (
    Domain,
    DomainData,
    communicate_info,
    data_dir,
    golden_actions,
    known_domains,
    load_domain,
)
from podium.envs.evaluation import ReplayConfig, gold_grade, grade_trajectory, replay
from podium.envs.scoring import SimulationScore, read_results, score_results
from podium.envs.transcript import DIALOGUE_KEY
from podium.errors import PodiumError
from podium.solve.config import DomainTaskConfig
from podium.solve.system import System

app = typer.Typer(help="Tool-use environments in tau2 format (airline, retail…).", no_args_is_help=True)

DomainArgument = Annotated[str, typer.Argument(metavar="DOMAIN", help="The domain (a folder of the data directory).")]
T = TypeVar("T")


def _load(name: str, directory: str | None) -> Domain:
    try:
        return load_domain(name, directory)
    except (KeyError, FileNotFoundError, PodiumError) as error:
        raise fail(error) from error


DomainSettings = TypeVar("DomainSettings", bound=DomainData)
DomainBody = Callable[[Domain, DomainSettings, Path | None, bool], None]


def domain_command(
    name: str, config_type: type[DomainSettings], fields: Sequence[FieldSpec]
) -> Callable[[DomainBody[DomainSettings]], DomainBody[DomainSettings]]:
    """Register ``body`` as the command ``name`` of one domain: its DOMAIN argument, ``--config``, ``--json`` and
    the ``fields`` of ``config_type`` as options; ``body`` gets the domain (from the settings' data directory),
    the settings, the config file and whether JSON was asked for. Its docstring is the command's help."""

    def decorate(body: DomainBody[DomainSettings]) -> DomainBody[DomainSettings]:
        def command(
            domain_name: DomainArgument,
            config: ConfigFileOption = None,
            as_json: JsonOption = False,
            *,
            flags: Flags,
        ) -> None:
            settings = load_settings(config_type, config, flags)
            body(_load(domain_name, settings.data_dir), settings, config, as_json)

        command.__name__, command.__doc__ = body.__name__, body.__doc__
        app.command(name)(config_options(config_type, fields)(command))
        return body

    return decorate


def _progress(items: Iterable[T], total: int, what: str) -> Iterator[T]:
    """``items`` with a progress bar on stderr (scoring takes about 0.2-1 s per conversation)."""
    columns = (TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with ProgressBar(*columns, console=errors, transient=True) as bar:
        task = bar.add_task(what, total=total)
        for item in items:
            yield item
            bar.advance(task)


@app.command("list")
@config_options(DomainData, ("data_dir",))
def env_list(config: ConfigFileOption = None, *, flags: Flags) -> None:
    """List the domains: tasks, tools (read / write / think / generic) and whether their data is present."""
    data = load_settings(DomainData, config, flags).data_dir
    table = Table()
    for column in ("domain", "tasks", "read", "write", "think", "generic", "data"):
        table.add_column(column)
    root = data_dir(data)
    for name in known_domains(root):
        if not (root / name).is_dir():
            table.add_row(shown(name), "-", "-", "-", "-", "-", shown(f"missing in {root}"))
            continue
        domain = _load(name, data)
        kinds = list(domain.tool_kinds.values())
        wanted = ("read", "write", "think", "generic")
        counts = [str(sum(kind.value == kind_name for kind in kinds)) for kind_name in wanted]
        table.add_row(shown(name), str(len(domain.tasks)), *counts, shown(root / name))
    console.print(table)


def _task(domain: Domain, task_id: str) -> Any:
    try:
        return domain.task(task_id)
    except KeyError as error:
        raise fail(error.args[0]) from error


def _replay_row(domain: Domain, task: Any) -> dict[str, Any]:
    golden = replay(domain, task, golden_actions(task))
    grade = gold_grade(domain, task)
    return {
        "task": task.id,
        "actions": len(golden.outcomes),
        "replay_ok": golden.ok,
        "db_changed": golden.changed,
        "db_hash": golden.db_hash,
        "info_items": len(communicate_info(task)),
        "tau2_reward": grade.reward,
        "strict_solved": grade.strict_solved,
        "failed_actions": golden.errors,
    }


@domain_command("replay", ReplayConfig, ("task", "data_dir"))
def env_replay(domain: Domain, settings: ReplayConfig, config: Path | None, as_json: bool) -> None:
    """Replay each task's golden actions on a fresh database (did every action run, did the database change) and
    score the conversation that performs them and tells every required fact: its tau2 reward and strict verdict."""
    tasks = [_task(domain, settings.task)] if settings.task is not None else domain.tasks
    table = Table()
    for column in ("task", "actions", "replay", "db changed", "info", "tau2 reward", "strict", "failed actions"):
        table.add_column(column, overflow="fold")
    rows = [_replay_row(domain, item) for item in _progress(tasks, len(tasks), f"replaying {domain.name}")]
    for row in rows:
        if as_json:
            print_json_line(row)
            continue
        table.add_row(
            shown(row["task"]),
            str(row["actions"]),
            "OK" if row["replay_ok"] else "failures",
            "yes" if row["db_changed"] else "no",
            str(row["info_items"]),
            f"{row['tau2_reward']:g}",
            "yes" if row["strict_solved"] else "no",
            shown("\n".join(row["failed_actions"])),
        )
    if not as_json:
        console.print(table)
    clean, changed = sum(r["replay_ok"] for r in rows), sum(r["db_changed"] for r in rows)
    errors.print(
        f"{shown(domain.name)}: {len(tasks)} tasks, {clean} replay without a failing action, "
        f"{len(tasks) - clean} with actions that fail by design (listed), {changed} change the database",
        highlight=False,
    )


DOMAIN_TASK_FIELDS = (
    "task", "pool", "policy", "max_turns", "max_tokens", "max_episode_usd", "allow", "deny",
    ("user.worker", "--user-worker"), ("user.max_turns", "--user-turns"), ("user.max_tokens", "--user-tokens"),
    "trace", "data_dir", "prices", "sandbox_config", "allow_unisolated",
)  # fmt: skip
"""The fields of :class:`DomainTaskConfig` offered as flags (the others: in its ``--config`` file, a system file)."""


@domain_command("run", DomainTaskConfig, DOMAIN_TASK_FIELDS)
def env_run(domain: Domain, settings: DomainTaskConfig, config: Path | None, as_json: bool) -> None:
    """Run one task end to end: the orchestrator over the pool plus the domain's tools converses with a
    simulated user; then its tau2 reward (DB / COMMUNICATE / ACTION) and Podium's strict verdict."""
    chosen = _task(domain, settings.task)
    try:
        pool = settings.open(settings.pool_config())
        system = System.build(settings, pool=pool, source=str(config or "env run options"))
        trajectory = asyncio.run(system.solve(domain.item(chosen, settings.data_dir)))
        if settings.trace is not None:
            write_trajectories(settings.trace, [trajectory])
        grade = grade_trajectory(domain, chosen, trajectory)
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    row = {"domain": domain.name, "task": chosen.id, "user_turns": trajectory.metadata.get("user_turns")}
    row |= {"agent_actions": trajectory.metadata.get("env_actions"), "turns": len(trajectory.turns)}
    row |= {"stop_reason": str(trajectory.stop_reason), **grade.summary()}
    if as_json:
        print_json_line(row)
        return
    print_trace(trajectory)
    for message in trajectory.metadata.get(DIALOGUE_KEY, []):
        speaker = "agent" if message["role"] == "assistant" else "user"
        console.print(f"[bold]{speaker}:[/bold] {shown(message['content'])}", highlight=False)
    console.print(_row_table(shown(f"{domain.name} task {chosen.id}"), row))


def _row_table(title: str, row: dict[str, Any]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("criterion")
    table.add_column("value", overflow="fold")
    for key, value in row.items():
        table.add_row(shown(key), shown(value))
    return table


def _score_table(scores: list[SimulationScore]) -> Table:
    table = Table()
    for column in ("simulation", "task", "trial", "tau2 reward", "DB", "COMM", "ACTION", "strict", "note"):
        table.add_column(column, overflow="fold")
    for score in scores:
        grade = score.grade
        if grade is None:
            ids = (shown(score.id), shown(score.task_id), str(score.trial))
            table.add_row(*ids, "-", "-", "-", "-", "-", shown(f"error: {score.error}"))
            continue
        parts = [f"{value:g}" if value is not None else "-" for value in (grade.db, grade.communicate, grade.action)]
        strict = "yes" if grade.strict_solved else "no"
        ids = (shown(score.id), shown(score.task_id), str(score.trial))
        table.add_row(*ids, f"{grade.reward:g}", *parts, strict, shown(grade.note or ""))
    return table


@app.command("score")
@config_options(DomainData, ("data_dir",))
def env_score(
    results_path: Annotated[Path, typer.Argument(metavar="RESULTS.json", help="A results file tau2 run saved.")],
    config: ConfigFileOption = None,
    as_json: JsonOption = False,
    *,
    flags: Flags,
) -> None:
    """Score every simulation of a tau2 results file with Podium's tau2 grading (no LLM calls): the official tau2
    reward, its DB / COMMUNICATE / ACTION parts and Podium's strict verdict. With --json, one JSON line per
    simulation (id, task_id, trial, reward, …); otherwise a table and the mean reward. Exit status 1 when a
    simulation could not be scored (its line says why), 2 when the file cannot be read."""
    data = load_settings(DomainData, config, flags).data_dir
    try:
        results = read_results(results_path)
        scored = score_results(results, data)
        scores = []
        for score in _progress(scored, len(results.simulations), f"scoring {results_path.name}"):
            scores.append(score)
            if as_json:
                print_json_line(score.row())
    except PodiumError as error:
        raise fail(error) from error
    graded = [score.grade for score in scores if score.grade is not None]
    if not as_json:
        console.print(_score_table(scores))
        mean = sum(grade.reward for grade in graded) / len(graded) if graded else 0.0
        strict = sum(grade.strict_solved for grade in graded)
        console.print(
            f"{len(graded)}/{len(scores)} simulations scored: mean tau2 reward {mean:.4f}; "
            f"strict_solved {strict}/{len(graded)}",
            highlight=False,
        )
    if len(graded) < len(scores):
        errors.print(f"{len(scores) - len(graded)} simulation(s) could not be scored", highlight=False)
        raise typer.Exit(1)
