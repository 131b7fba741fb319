"""Writing a synthesized domain in the tau2 on-disk format that ``podium.envs`` loads: ``db.json``, ``tasks.json``,
``policy.md``, ``tools.py`` and ``split_tasks.json`` (train / test / base task ids)."""

import json
import random
from pathlib import Path
from typing import Any

from podium.core.files import write_atomically
from podium.core.record import Record


class Candidate(Record):
    """A task proposed for the domain, before the filters."""

    key: str
    """``task:<intent>`` or ``evolve:<task key>``."""
    intent: str
    """The customer intent it serves."""
    value: dict[str, Any]
    """The task as the LLM wrote it (reason_for_call, known_info, unknown_info, actions, communicate_info)."""
    evolved_from: str | None = None
    """The key of the task it makes harder."""
    prompt: str = ""
    """The versioned prompt that wrote it."""


def tau2_task(task_id: str, candidate: Candidate, domain: str) -> dict[str, Any]:
    """A candidate as tau2 task JSON (``tau2.data_model.tasks.Task``: nothing tau2 would drop on loading it; who
    wrote it and which filters it passed are kept beside, in ``synthesis/provenance.json``)."""
    value = candidate.value
    actions = [
        {"action_id": f"{task_id}_{index}", "name": call["name"], "arguments": call.get("arguments", {}), "info": None}
        for index, call in enumerate(value.get("actions", []))
    ]
    notes = f"synthesized by podium synth domain ({candidate.prompt})"
    if candidate.evolved_from:
        notes += f"; evolved from {candidate.evolved_from}"
    return {
        "id": task_id,
        "description": {
            "purpose": candidate.intent,
            "relevant_policies": None,
            "notes": notes,
        },
        "user_scenario": {
            "persona": None,
            "instructions": {
                "task_instructions": "",
                "domain": domain,
                "reason_for_call": value.get("reason_for_call", ""),
                "known_info": value.get("known_info", ""),
                "unknown_info": value.get("unknown_info", ""),
            },
        },
        "initial_state": None,
        "evaluation_criteria": {
            "actions": actions,
            "communicate_info": list(value.get("communicate_info", [])),
            "nl_assertions": None,
        },
    }


def task_splits(task_ids: list[str], test_fraction: float, seed: int) -> dict[str, list[str]]:
    """tau2's ``split_tasks.json``: a seeded shuffle into train and test, and every id as ``base``."""
    order = list(task_ids)
    random.Random(seed).shuffle(order)
    held = round(len(order) * test_fraction)
    return {"train": sorted(order[held:], key=int), "test": sorted(order[:held], key=int), "base": list(task_ids)}


def write_domain(
    directory: Path,
    *,
    database: dict[str, dict[str, Any]],
    tools_source: str,
    policy: str,
    tasks: list[dict[str, Any]],
    splits: dict[str, list[str]] | None = None,
) -> None:
    """Write (or replace) a domain directory; each file is replaced atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    write_atomically(directory / "db.json", json.dumps(database, indent=2, ensure_ascii=False) + "\n")
    write_atomically(directory / "tools.py", tools_source)
    write_atomically(directory / "policy.md", policy.rstrip() + "\n")
    write_atomically(directory / "tasks.json", json.dumps(tasks, indent=2, ensure_ascii=False) + "\n")
    if splits is not None:
        write_atomically(directory / "split_tasks.json", json.dumps(splits, indent=2) + "\n")
