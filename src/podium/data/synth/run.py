"""The task half of ToolScale synthesis (intents, tasks, evolution, filters) and the whole run, writing the domain."""

import json
from collections import Counter
from pathlib import Path

from podium.backends.base import ChatBackend
from podium.core.files import write_atomically
from podium.data.common import finish_stage, open_stage
from podium.data.provenance import podium_version
from podium.data.solver import Solver
from podium.data.synth.config import SynthConfig
from podium.data.synth.domain_files import Candidate, task_splits, tau2_task, write_domain
from podium.data.synth.filters import golden_problem, pass_at_k, solvable_without_action
from podium.data.synth.pipeline import STAGE, Synthesis
from podium.data.synth.steps import database_excerpt
from podium.envs import Domain, load_domain
from podium.solve.records import Funnel

PROVENANCE_FILE = "provenance.json"
"""Beside ``synthesis.json``: task id → who wrote the task and which filters it passed."""


def _reason_head(reason: str) -> str:
    return reason.split(":")[0] or "no reply"


async def candidates(run: Synthesis, functions: str, database: str, names: list[str]) -> list[Candidate]:
    """Intents, a task per intent, and (when asked) a harder variant of each task."""
    proposed = (await run.one("intents", lambda: run.generator.intents(functions)) or {}).get("intents", [])
    seen: set[str] = set()

    def repeated(intent: str) -> str | None:
        folded = " ".join(intent.casefold().split())
        problem = "repeated" if folded in seen else "beyond the limit" if len(seen) >= run.config.intents else None
        seen.add(folded)
        return problem

    intents = {
        f"task:{index}": intent
        for index, intent in enumerate(run.funnel.apply("intents", "intents", proposed, repeated))
    }
    written = await run.steps(
        "tasks", list(intents), lambda key: run.generator.task(key, intents[key], functions, database, names)
    )
    tasks = [
        Candidate(key=key, intent=intents[key], value=step.value, prompt=step.prompt)
        for key, step in written.items()
        if step.value is not None
    ]
    left = Counter(f"no usable reply: {_reason_head(step.reason)}" for step in written.values() if step.value is None)
    left["not written: USD cap reached"] = len(intents) - len(written)
    run.funnel.count("tasks written", "tasks", len(intents), left)
    if not run.config.evolve:
        return tasks
    by_key = {f"evolve:{task.key}": task for task in tasks}
    evolved = await run.steps(
        "evolution",
        list(by_key),
        lambda key: run.generator.evolve(key, by_key[key].value, functions, database, names),
    )
    harder = [
        Candidate(
            key=key, intent=by_key[key].intent, value=step.value, evolved_from=by_key[key].key, prompt=step.prompt
        )
        for key, step in evolved.items()
        if step.value is not None
    ]
    left = Counter(f"no harder variant: {_reason_head(step.reason)}" for step in evolved.values() if step.value is None)
    left["not evolved: USD cap reached"] = len(by_key) - len(evolved)
    run.funnel.count("evolution (adds the harder variants)", "tasks", len(by_key), left)
    return tasks + harder


async def filtered(run: Synthesis, proposed: list[Candidate], domain: Domain, tau2_dir: Path) -> list[Candidate]:
    """The candidates (task ``i`` of ``domain`` is candidate ``i``) that pass ToolScale's three filters."""
    task_of = {candidate.key: domain.task(str(index)) for index, candidate in enumerate(proposed)}
    problems = {key: await golden_problem(domain, task, run.config.call_timeout_s) for key, task in task_of.items()}
    executed = run.funnel.apply("golden calls execute", "tasks", proposed, lambda c: problems[c.key])

    def no_action(candidate: Candidate) -> str | None:
        return "solvable without any action" if solvable_without_action(domain, task_of[candidate.key]) else None

    needing = run.funnel.apply("needs an action", "tasks", executed, no_action)
    for candidate in needing:
        run.decisions[candidate.key] = ["golden calls execute", "needs an action"]
    k = run.config.pass_k
    if k == 0:
        run.funnel.note("pass@k filter skipped (pass_k = 0)")
        return needing
    solver = Solver(run.config.solver, pools=run.pools)
    keys = {task_of[candidate.key].id: candidate for candidate in needing}
    results = await run.steps(
        "pass-at-k",
        list(keys),
        lambda task_id: pass_at_k(
            solver,
            domain,
            domain.task(task_id),
            str(tau2_dir),
            k=k,
            temperature=run.config.pass_temperature,
            seed=run.config.seed,
        ),
    )

    def unsolved(candidate: Candidate) -> str | None:
        result = results.get(task_of[candidate.key].id)
        if result is None:
            return "not attempted: USD cap reached"
        if result.value and result.value.get("solved_at"):
            run.decisions[candidate.key].append(f"solved by {solver.name} at attempt {result.value['solved_at']}")
            return None
        return f"not solved by {solver.name} in {k}"

    return run.funnel.apply(f"solvable by the pool (pass@{k})", "tasks", needing, unsolved)


def derived_policy(config: SynthConfig, functions: str) -> str:
    """The policy when the policy step gave none: the domain and its functions, said plainly."""
    title = config.name.replace("_", " ").capitalize()
    return (
        f"# {title} agent policy\n\nYou serve customers of {config.domain}. Identify the customer and the records "
        f"concerned before acting, confirm every change with the customer first, and use only these functions:\n\n"
        f"{functions}\n"
    )


async def synthesize_domain(
    config: SynthConfig, *, progress: bool = True, backend: ChatBackend | None = None
) -> Funnel:
    """Synthesize (or resume synthesizing) the domain into ``<config.out>/<config.name>``; ``backend`` replaces the
    pool's writer and validator models (any :class:`ChatBackend`)."""
    root = Path(config.out) / config.name
    stage = open_stage(root / "synthesis", STAGE, config, progress=progress)
    run = Synthesis(config, stage, backend=backend)
    tables = await run.tables(await run.subjects())
    database = await run.database(tables)
    source, kit = run.toolkit(await run.functions(tables))
    functions = run.function_text(kit)
    written = await run.one("policy", lambda: run.generator.policy(functions))
    policy = (written or {}).get("policy") or derived_policy(config, functions)
    names = sorted(kit.toolkit().tools)
    proposed = await candidates(run, functions, database_excerpt(database), names) if names else []
    staging = (
        root
        / "synthesis"
        / "candidates"
        / run.content_hash(database, source, policy, [c.model_dump() for c in proposed])
    )
    staged = [tau2_task(str(index), candidate, config.name) for index, candidate in enumerate(proposed)]
    write_domain(staging / config.name, database=database, tools_source=source, policy=policy, tasks=staged)
    kept = await filtered(run, proposed, load_domain(config.name, staging), staging) if proposed else []
    tasks = [tau2_task(str(index), candidate, config.name) for index, candidate in enumerate(kept)]
    provenance = {str(index): run.task_provenance(candidate) for index, candidate in enumerate(kept)}
    splits = task_splits([task["id"] for task in tasks], config.test_fraction, config.seed)
    write_domain(root, database=database, tools_source=source, policy=policy, tasks=tasks, splits=splits)
    record = {
        "domain": config.domain,
        "name": config.name,
        "writer": run.generator.writer.backend.model,
        "validator": run.generator.validator.backend.model,
        "pool_hash": run.generator.writer.pool_hash,
        "prompts": {name: prompt.id for name, prompt in run.generator.prompts.items()},
        "podium_version": podium_version(),
    }
    write_atomically(root / "synthesis" / "synthesis.json", json.dumps(record, indent=2) + "\n")
    write_atomically(root / "synthesis" / PROVENANCE_FILE, json.dumps(provenance, indent=2) + "\n")
    outputs = {
        "db.json": sum(len(records) for records in database.values()),
        "tools.py": len(names),
        "tasks.json": len(tasks),
    }
    return finish_stage(stage, run.funnel, outputs, ["tasks.json"])
