"""``podium env``: list the tau2-format domains and replay their golden actions."""

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from podium.envs.domain import Domain, data_dir, known_domains, load_domain
from podium.envs.evaluation import judge_actions

env_app = typer.Typer(help="Tool-use environments in tau2 format (airline, retail…).", no_args_is_help=True)
console = Console()
errors = Console(stderr=True)

DataDirOption = Annotated[
    Path | None, typer.Option("--data-dir", help="Directory holding one folder per domain ($PODIUM_TAU2_DATA).")
]


def _load(name: str, directory: Path | None) -> Domain:
    try:
        return load_domain(name, directory)
    except (KeyError, FileNotFoundError) as error:
        errors.print(f"[red]error:[/red] {error}", highlight=False)
        raise typer.Exit(2) from error


@env_app.command("list")
def env_list(data: DataDirOption = None) -> None:
    """List the domains: tasks, tools (read / write / generic) and whether their data is present."""
    table = Table()
    for column in ("domain", "tasks", "read", "write", "generic", "data"):
        table.add_column(column)
    root = data_dir(data)
    for name in known_domains():
        if not (root / name).is_dir():
            table.add_row(name, "-", "-", "-", "-", f"missing in {root}")
            continue
        domain = _load(name, data)
        kinds = list(domain.toolkit.actions().values())
        counts = [str(sum(kind.value == wanted for kind in kinds)) for wanted in ("read", "write", "generic")]
        table.add_row(name, str(len(domain.tasks)), *counts, str(root / name))
    console.print(table)


@env_app.command("replay")
def env_replay(
    domain_name: Annotated[str, typer.Argument(metavar="DOMAIN", help="The domain to replay.")],
    task: Annotated[str | None, typer.Option("--task", help="Only this task id.")] = None,
    data: DataDirOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per task.")] = False,
) -> None:
    """Replay each task's golden actions on a fresh database: did every action run, did the database change,
    and do the three solved criteria hold when the golden run is judged against itself."""
    domain = _load(domain_name, data)
    try:
        tasks = [domain.task(task)] if task is not None else domain.tasks
    except KeyError as error:
        errors.print(f"[red]error:[/red] {error.args[0]}", highlight=False)
        raise typer.Exit(2) from error
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
