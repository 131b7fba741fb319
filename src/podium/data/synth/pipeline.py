"""``podium synth domain``: ToolScale's synthesis pipeline (SPEC §6.2; ToolOrchestra appendix 17-19), resumable.

domain → subjects → schema → records → record validation (rules, then an LLM on three conditions) → functions
(real Python over the database, read or write, checked) → policy → intents → tasks (instruction, golden calls,
information to communicate) → evolution to harder tasks → filters (golden calls execute; not solvable without any
action; solved by an orchestrator over the pool within k attempts) → the domain directory ``<out>/<name>/`` in
tau2's format (``db.json``, ``tasks.json``, ``policy.md``, ``tools.py``, ``split_tasks.json``), which ``podium env``
and ``podium eval --benchmark tau2_<name> --data-dir <parent of out>`` load like airline and retail.

Each LLM step's reply is kept in ``<out>/<name>/synthesis/work/`` so a rerun resumes; the funnel and the manifest
sit beside it.
"""

import ast
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from podium.backends.base import ChatBackend
from podium.data.common import Stage
from podium.data.funnel import FunnelBuilder
from podium.data.pools import PoolCache
from podium.data.provenance import podium_version, short_hash
from podium.data.synth.code import build_toolkit, function_problem, kit_tools, parse_function, toolkit_source
from podium.data.synth.config import StepResult, SynthConfig
from podium.data.synth.domain_files import Candidate
from podium.data.synth.schema import IDENTIFIER, TableSpec, record_problem, reference_problem, table_problem
from podium.data.synth.steps import CONDITIONS, Generator
from podium.envs import DomainKit
from podium.solve.jsonl import JsonlLog

STAGE = "synth-domain"


class Synthesis:
    """One synthesis run: the generator, the stage's runner and work logs, the funnel."""

    def __init__(self, config: SynthConfig, stage: Stage, *, backend: ChatBackend | None = None) -> None:
        self.config = config
        self.stage = stage
        self.pools: PoolCache = {}
        self.generator = Generator(config, backend=backend, pools=self.pools)
        self.funnel = FunnelBuilder(STAGE)
        self.header = {
            "name": config.name,
            "domain": config.domain.replace('"', "'"),
            "model": self.generator.writer.backend.model,
            "prompt": self.generator.prompts["functions"].id,
            "cls": _class_name(config.name) + "Tools",
            "db_cls": _class_name(config.name) + "DB",
        }
        self.beyond: dict[str, int] = {}
        """Records a step wrote beyond what was asked for, per step."""
        self.decisions: dict[str, list[str]] = {}
        """Candidate task → the filters it passed."""

    async def steps(
        self, phase: str, keys: list[str], make: Callable[[str], Awaitable[StepResult]], bound: float = 0.0
    ) -> dict[str, StepResult]:
        """Run (or resume) the steps ``keys`` of one phase."""
        log = JsonlLog(self.stage.out / "work" / f"{phase}.jsonl", StepResult, lambda step: step.key)
        self.stage.runner.charge(sum(step.usd for step in log.values()))
        done = await self.stage.runner.run(
            phase, keys, str, make, log, cost=lambda step: step.usd, bound=lambda _key: bound or None
        )
        return {step.key: step for step in done}

    async def one(self, phase: str, make: Callable[[], Awaitable[StepResult]]) -> Any:
        """A single-step phase's value; its failure is noted and gives ``None``."""
        found = (await self.steps(phase, [phase], lambda _: make())).get(phase)
        if found is None or found.value is None:
            self.funnel.note(f"{phase}: {found.reason if found else 'not run: USD cap reached'}")
            return None
        return found.value

    async def subjects(self) -> list[str]:
        proposed = (await self.one("subjects", self.generator.subjects) or {}).get("subjects", [])
        seen: set[str] = set()

        def reason(subject: str) -> str | None:
            name = "_".join(subject.lower().split())
            problem = (
                "not an identifier"
                if not IDENTIFIER.match(name)
                else "repeated"
                if name in seen
                else "beyond the limit"
                if len(seen) >= self.config.subjects
                else None
            )
            seen.add(name)
            return problem

        kept = self.funnel.apply("subjects", "subjects", proposed, reason)
        return ["_".join(subject.lower().split()) for subject in kept]

    async def tables(self, subjects: list[str]) -> list[TableSpec]:
        raw = (await self.one("schema", lambda: self.generator.schema(subjects))) if subjects else None
        raw_tables = (raw or {}).get("tables", [])
        parsed: list[TableSpec | str] = []
        for entry in raw_tables:
            try:
                parsed.append(TableSpec.model_validate(entry))
            except ValidationError:
                parsed.append("malformed table")
        names = {table.name for table in parsed if isinstance(table, TableSpec)}
        taken: set[str] = set()

        def reason(table: TableSpec | str) -> str | None:
            if isinstance(table, str):
                return table
            problem = "repeated table" if table.name in taken else table_problem(table, names)
            if problem is None and len(taken) >= self.config.subjects:
                problem = "beyond the limit"
            taken.add(table.name)
            return problem

        kept = self.funnel.apply("schema tables", "tables", parsed, reason)
        return [table for table in kept if isinstance(table, TableSpec)]

    async def database(self, tables: list[TableSpec]) -> dict[str, dict[str, Any]]:
        """Records per table (written in order, each seeing the keys before it), checked by rule, then validated."""
        written: dict[str, list[Any]] = {}
        keys: dict[str, list[str]] = {}
        for table in tables:
            found = await self.steps(
                f"records-{table.name}",
                [f"records:{table.name}"],
                lambda _, table=table: self.generator.records(table, tables, dict(keys)),
            )
            step = found.get(f"records:{table.name}")
            written[table.name] = list((step.value or {}).get("records", [])) if step else []
            self.beyond[f"records:{table.name}"] = len(written[table.name][self.config.records :])
            written[table.name] = written[table.name][: self.config.records]
            keys[table.name] = [str(r.get(table.key, "")) for r in written[table.name] if isinstance(r, dict)]
        return await self._checked_records(tables, written)

    async def _checked_records(self, tables: list[TableSpec], written: dict[str, list[Any]]) -> dict[str, Any]:
        left: Counter[str] = Counter()
        database: dict[str, dict[str, Any]] = {table.name: {} for table in tables}
        for table in tables:
            for record in written[table.name]:
                problem = record_problem(table, record, set(database[table.name]))
                if problem:
                    left[problem] += 1
                else:
                    database[table.name][record[table.key]] = record
        extra = sum(count for key, count in self.beyond.items() if key.startswith("records:"))
        left["beyond the limit"] += extra
        self.funnel.count("record rules", "records", sum(len(records) for records in written.values()) + extra, left)
        return self._resolved(tables, await self._validated(tables, database))

    async def _validated(self, tables: list[TableSpec], database: dict[str, dict[str, Any]]) -> dict[str, Any]:
        by_table = {table.name: table for table in tables}
        units = {f"{table}/{key}": (table, key) for table, records in database.items() for key in records}
        verdicts = await self.steps(
            "validation",
            list(units),
            lambda unit: self.generator.validate(
                unit, by_table[units[unit][0]], tables, database[units[unit][0]][units[unit][1]]
            ),
        )
        left: Counter[str] = Counter()
        for unit, (table, key) in units.items():
            verdict = verdicts.get(unit)
            failed = [c for c in CONDITIONS if verdict and verdict.value and verdict.value[c] != "satisfied"]
            if verdict is None:
                problem: str | None = "not validated: USD cap reached"
            elif verdict.value is None:
                problem = "validator gave no verdict"
            else:
                problem = f"validator: {failed[0].replace('_', ' ')} not satisfied" if failed else None
            if problem:
                left[problem] += 1
                del database[table][key]
        self.funnel.count("record validation (LLM)", "records", len(units), left)
        return database

    def _resolved(self, tables: list[TableSpec], database: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Drop records whose references name no record, until none is left dangling."""
        entered = sum(len(records) for records in database.values())
        dropped = 0
        changed = True
        while changed:
            changed = False
            for table in tables:
                for key, record in list(database[table.name].items()):
                    if reference_problem(table, record, database):
                        del database[table.name][key]
                        dropped, changed = dropped + 1, True
        self.funnel.count("references resolve", "records", entered, {"a reference names no record": dropped})
        return database

    async def functions(self, tables: list[TableSpec]) -> list[tuple[str, ast.FunctionDef]]:
        found = await self.steps(
            "functions",
            [f"functions:{table.name}" for table in tables],
            lambda key: self.generator.functions(next(t for t in tables if f"functions:{t.name}" == key), tables, []),
        )
        per_table = [(step.value or {}).get("functions", []) for step in found.values()]
        limit = self.config.functions
        proposed = [
            {**entry, "beyond": position >= limit} for entries in per_table for position, entry in enumerate(entries)
        ]
        accepted: list[tuple[str, ast.FunctionDef]] = []
        names: set[str] = set()

        def reason(entry: dict[str, Any]) -> str | None:
            if entry["beyond"]:
                return "beyond the limit"
            function, problem = parse_function(entry["code"])
            if function is None:
                return problem
            if function.name in names:
                return "repeats a function name"
            problem = function_problem(function, entry["kind"], self.header)
            if problem is None:
                names.add(function.name)
                accepted.append((entry["kind"], function))
            return problem

        self.funnel.apply("functions", "functions", proposed, reason)
        return accepted

    def function_text(self, kit: DomainKit) -> str:
        """The functions as the task and policy prompts show them: name, kind, description, arguments."""
        lines = []
        for made in kit_tools(kit):
            arguments = json.dumps(made.tool.spec.parameters.get("properties", {}), ensure_ascii=False)
            lines.append(f"- {made.tool.name} [{made.kind.value}]: {made.tool.spec.description} Arguments: {arguments}")
        return "\n".join(lines) or "(none)"

    def toolkit(self, functions: list[tuple[str, ast.FunctionDef]]) -> tuple[str, DomainKit]:
        source = toolkit_source(functions, self.header)
        return source, build_toolkit(source, self.header)

    def task_provenance(self, candidate: Candidate) -> dict[str, Any]:
        """Who wrote a kept task and what it passed: stored in the task's description."""
        return {
            "stage": STAGE,
            "model": self.generator.writer.backend.model,
            "prompt": candidate.prompt,
            "pool_hash": self.generator.writer.pool_hash,
            "podium_version": podium_version(),
            "decisions": self.decisions.get(candidate.key, []),
        }

    def content_hash(self, *parts: Any) -> str:
        return short_hash(list(parts))


def _class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))
