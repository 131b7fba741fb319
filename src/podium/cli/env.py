"""``podium env``: list the tau2-format domains, replay their golden actions, and run a task through the
orchestrator runtime against a simulated user."""

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from podium.backends.base import BackendError
from podium.cli.common import PoolOption, UnisolatedOption, console, errors, fail, open_pool, print_trace
from podium.core.trajectory import write_trajectories
from podium.envs.conversation import UserSimulatorConfig, run_task
from podium.envs.domain import Domain, Task, data_dir, known_domains, load_domain
from podium.envs.evaluation import TaskCriteria, judge_actions, judge_trajectory
from podium.errors import PodiumError
from podium.policies import PolicyName
from podium.runtime import RunConfig

app = typer.Typer(help="Tool-use environments in tau2 format (airline, retail…).", no_args_is_help=True)

DataDirOption = Annotated[
    Path | None, typer.Option("--data-dir", help="Directory holding one folder per domain ($PODIUM_TAU2_DATA).")
]


def _load(name: str, directory: Path | None) -> Domain:
    try:
        return load_domain(name, directory)
    except (KeyError, FileNotFoundError) as error:
        errors.print(f"[red]error:[/red] {error}", highlight=False)
        raise typer.Exit(2) from error


@app.command("list")
def env_list(data: DataDirOption = None) -> None:
    """List the domains: tasks, tools (read / write / generic) and whether their data is present."""
    table = Table()
    for column in ("domain", "tasks", "read", "write", "generic", "data"):
        table.add_column(column)
    root = data_dir(data)
    for name in known_domains(root):
        if not (root / name).is_dir():
            table.add_row(name, "-", "-", "-", "-", f"missing in {root}")
            continue
        domain = _load(name, data)
        kinds = list(domain.toolkit.actions().values())
        counts = [str(sum(kind.value == wanted for kind in kinds)) for wanted in ("read", "write", "generic")]
        table.add_row(name, str(len(domain.tasks)), *counts, str(root / name))
    console.print(table)


def _task(domain: Domain, task_id: str) -> Task:
    try:
        return domain.task(task_id)
    except KeyError as error:
        errors.print(f"[red]error:[/red] {error.args[0]}", highlight=False)
        raise typer.Exit(2) from error


@app.command("replay")
def env_replay(
    domain_name: Annotated[str, typer.Argument(metavar="DOMAIN", help="The domain to replay.")],
    task: Annotated[str | None, typer.Option("--task", help="Only this task id.")] = None,
    data: DataDirOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per task.")] = False,
) -> None:
    """Replay each task's golden actions on a fresh database: did every action run, did the database change,
    and do the three solved criteria hold when the golden run is judged against itself."""
    domain = _load(domain_name, data)
    tasks = [_task(domain, task)] if task is not None else domain.tasks
    table = Table()
    for column in ("task", "actions", "replay", "db changed", "entries", "info", "solved", "failed actions"):
        table.add_column(column, overflow="fold")
    clean = changed = 0
    for item in tasks:
        result = judge_actions(domain, item, item.golden_actions, item.communicate_info)
        golden = result.golden
        clean += golden.ok
        changed += golden.changed
        row = {
            "task": item.id,
            "actions": len(golden.outcomes),
            "replay_ok": golden.ok,
            "db_changed": golden.changed,
            "db_hash": golden.db_hash,
            "entries_touched": len(golden.touched),
            "info_items": len(item.communicate_info),
            "solved": result.solved,
            "failed_actions": golden.errors,
        }
        if as_json:
            console.print_json(json.dumps(row))
            continue
        table.add_row(
            item.id,
            str(row["actions"]),
            "OK" if golden.ok else "failures",
            "yes" if golden.changed else "no",
            str(row["entries_touched"]),
            str(row["info_items"]),
            "yes" if result.solved else "no",
            "\n".join(golden.errors),
        )
    if not as_json:
        console.print(table)
    errors.print(
        f"{domain.name}: {len(tasks)} tasks, {clean} replay without a failing action, "
        f"{len(tasks) - clean} with failing actions (listed), {changed} change the database",
        highlight=False,
    )


@app.command("run")
def env_run(
    domain_name: Annotated[str, typer.Argument(metavar="DOMAIN", help="The domain of the task.")],
    task: Annotated[str, typer.Option("--task", help="Task id.")],
    pool: PoolOption = None,
    policy: Annotated[PolicyName, typer.Option("--policy", help="Action space (only serial can converse).")] = "serial",
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Most orchestrator turns, all replies.")] = 10,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Completion budget of one turn.")] = 256,
    max_usd: Annotated[float | None, typer.Option("--max-usd", help="USD cap of the agent's episode.")] = None,
    allow: Annotated[
        list[str] | None,
        typer.Option(
            "--allow", help="Only this pool tool/role/worker (repeatable); the domain's tools are always allowed."
        ),
    ] = None,
    deny: Annotated[list[str] | None, typer.Option("--deny", help="Not this tool/role/worker (repeatable).")] = None,
    user_worker: Annotated[
        str | None, typer.Option("--user-worker", help="Pool worker playing the user [default: the orchestrator].")
    ] = None,
    user_turns: Annotated[int, typer.Option("--user-turns", min=1, help="Most user messages.")] = 10,
    user_tokens: Annotated[
        int, typer.Option("--user-tokens", min=1, help="Completion budget of a user message.")
    ] = 128,
    trace: Annotated[Path | None, typer.Option("--trace", help="Append the trajectory to this JSONL.")] = None,
    data: DataDirOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the criteria as one JSON object.")] = False,
    allow_unisolated: UnisolatedOption = False,
) -> None:
    """Run one task end to end: the orchestrator over the pool plus the domain's tools converses with a
    simulated user, then the three solved criteria are computed by replaying its calls."""
    domain = _load(domain_name, data)
    chosen = _task(domain, task)
    try:
        settings = RunConfig(
            policy=policy, max_turns=max_turns, max_tokens=max_tokens, max_usd=max_usd, allow=allow, deny=deny or []
        )
        user = UserSimulatorConfig(worker=user_worker, max_turns=user_turns, max_tokens=user_tokens)
        opened = open_pool(pool, allow_unisolated=allow_unisolated)
        episode = asyncio.run(run_task(opened, settings, domain, chosen, user=user))
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    trajectory = episode.trajectory
    if trace is not None:
        write_trajectories(trace, [trajectory])
    criteria = judge_trajectory(domain, chosen, trajectory)
    row = _criteria_row(domain.name, chosen.id, trajectory.metadata, criteria)
    row["turns"], row["stop_reason"] = len(trajectory.turns), str(trajectory.stop_reason)
    if as_json:
        console.print_json(json.dumps(row))
        return
    print_trace(trajectory)
    for message in episode.user.history[1:]:
        speaker = "agent" if message.role == "user" else "user"
        console.print(f"[bold]{speaker}:[/bold] {message.content}", highlight=False)
    table = Table(title=f"{domain.name} task {chosen.id}", title_justify="left")
    table.add_column("criterion")
    table.add_column("value", overflow="fold")
    for key, value in row.items():
        table.add_row(key, str(value))
    console.print(table)


def _criteria_row(domain: str, task_id: str, metadata: dict[str, object], criteria: TaskCriteria) -> dict:
    return {
        "domain": domain,
        "task": task_id,
        "user_turns": metadata.get("user_turns"),
        "agent_actions": len(criteria.trajectory.outcomes),
        "live_db_matches_replay": metadata.get("env_db_hash") == criteria.trajectory.db_hash,
        "execution_correct": criteria.execution_correct,
        "process_fidelity": criteria.process_fidelity,
        "missing_info": criteria.missing_info,
        "operation_complete": criteria.operation_complete,
        "missing_entries": [f"{table}/{key}" for table, key in criteria.missing_entries],
        "solved": criteria.solved,
    }
