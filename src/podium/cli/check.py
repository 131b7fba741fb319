"""``podium check FILE…``: validate config files the way the commands that use them would, without running
anything.

A file's kind is read from its fields (``--kind`` names it): a system (``podium eval --system``, ``podium
serve``), a pool, a run or solver config (``podium run --config``, ``--teacher``), a data-stage config, an SFT or
GRPO training config, an experiment (both scales), a price sheet, a routing command's config (``record``,
``compare``, ``threshold``), or a ``podium serve --config`` file. A recording that a config replays and that another
command writes is a pending file. Each is checked as its command checks it at
load (:mod:`podium.runtime.checks`): the schema, every policy's grammar against its token budget, prices that
resolve, files that exist, and with ``--online`` the servers of its HTTP workers. Every problem is printed as
``FILE:LINE: field: message``. Exit status: 0 every file is good, 2 some file has a problem.
"""

import asyncio
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.markup import escape

from podium.backends.base import BackendError, ChatBackend
from podium.backends.factory import build_backend
from podium.backends.http import HttpBackend
from podium.cli.common import ConfigFileOption, console, errors, load_settings, missing_checkpoint, rollout_problems
from podium.cli.config_kinds import KINDS, detect_kind, locate
from podium.cli.fields import Flags, config_options
from podium.config import Config, read_structured_file
from podium.costs.prices import PriceCatalog
from podium.errors import ConfigError, PodiumError
from podium.pool.pool import Pool, build_pool, load_pool_config, pool_catalog, worker_prices
from podium.runtime.checks import NotRunnable, Problem, run_problems
from podium.runtime.config import RunConfig

_LISTED = re.compile(r"^\s+(?:.+?:\d+: )?(\S[^:]*): (.+)$")
"""A problem line of a validation error: ``  [FILE:LINE: ]field: message`` (the line is found again here)."""


@dataclass(frozen=True)
class Finding:
    """A problem located in a file."""

    file: str
    field: str | None
    message: str
    written_by: str | None = None

    def line(self) -> int | None:
        return locate(Path(self.file), self.field) if self.field else None

    def __str__(self) -> str:
        line = self.line()
        where = f"{self.file}:{line}" if line else self.file
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class Findings:
    """The problems found in one checked file (and the files it names)."""

    def __init__(self, path: Path, online: bool, pool: Path | None) -> None:
        self.path, self.online, self.pool = path, online, pool
        self.found: list[Finding] = []

    def add(self, problem: Problem, *, prefix: str = "", file: Path | None = None) -> None:
        field = f"{prefix}{problem.field}" if problem.field else (prefix.rstrip(".") or None)
        self.found.append(Finding(str(file or self.path), field, problem.message, problem.written_by))

    def error(self, error: Exception, *, prefix: str = "") -> None:
        """Each problem an error names (a field list of a validation error, or the message as one problem); a
        problem of the pool goes to the pool file the checked file names, else under its ``pool`` field."""
        problems = error.problems if isinstance(error, NotRunnable) else listed_problems(error)
        for problem in problems:
            if problem.scope == "pool" and self.pool_file is not None:
                self.add(problem, file=self.pool_file)
            else:
                self.add(problem, prefix=prefix + ("pool." if problem.scope == "pool" else ""))

    pool_file: Path | None = None
    """The separate pool file the checked file names, where pool problems belong."""


def listed_problems(error: Exception) -> list[Problem]:
    """The problems of a :class:`ConfigError`: one per ``field: message`` line under its first line, else the
    whole message (its leading ``field:`` taken as the field)."""
    lines = str(error).splitlines()
    listed = [found for line in lines[1:] if (found := _LISTED.match(line))]
    if listed and len(listed) == len(lines) - 1:
        fields = [found.groups() for found in listed]
        return [Problem(None if field == "(root)" else field.strip(), message) for field, message in fields]
    return [Problem.from_error(error)]


def check_file(path: Path, kind: str | None, *, online: bool, pool: Path | None) -> tuple[str, list[Finding]]:
    """The kind of the file at ``path`` and the problems found in it."""
    findings = Findings(path, online, pool)
    try:
        data = read_structured_file(path)
    except PodiumError as error:
        findings.error(error)
        return kind or "?", findings.found
    chosen = kind or detect_kind(data)
    if chosen is None:
        message = f"cannot tell what kind of config this is; name it with --kind ({', '.join(KINDS)})"
        findings.add(Problem(None, message))
        return "?", findings.found
    unrecorded = unrecorded_replays(data)
    if unrecorded:  # the configs that replay a recording can only be built once it is there
        findings.found.extend(
            Finding(str(path), field, message, "podium routing record") for field, message in unrecorded
        )
        return chosen, findings.found
    try:
        CHECKS[chosen](findings, data)
    except (PodiumError, BackendError) as error:
        findings.error(error)
    return chosen, findings.found


def unrecorded_replays(data: Any) -> list[tuple[str, str]]:
    """(field, message) of each recording a config replays (``replay``, ``rollout.replay``) that is not there."""
    found = []
    for field, value in (("replay", data.get("replay")), ("rollout.replay", (data.get("rollout") or {}).get("replay"))):
        if isinstance(value, str) and not (Path(value) / "manifest.json").is_file():
            found.append((field, f"no recording at {value}: `podium routing record` writes one"))
    return found


def _system(findings: Findings, data: Any) -> None:
    from podium.evaluate.system_config import build_system, system_config_from_dict
    from podium.solve.router import RouterSystemConfig

    if isinstance(data.get("pool"), str):
        findings.pool_file = Path(data["pool"])
    config = system_config_from_dict(data, source=str(findings.path))
    if isinstance(config, RouterSystemConfig) and not (Path(config.recording) / "manifest.json").is_file():
        message = f"no recording at {config.recording}: `podium routing record` writes one"
        findings.add(Problem("recording", message, written_by="podium routing record"))
        return
    built = build_system(config)
    pool = getattr(built, "pool", None)
    backends = list(pool.backends.values()) if isinstance(pool, Pool) else list(_model_backends(built))
    _reach(findings, backends)


def _model_backends(system: Any) -> Iterator[ChatBackend]:
    """The backends of a model-only baseline."""
    callers = getattr(system, "callers", None) or {"": system.caller}
    for caller in callers.values():
        yield caller.backend


def _reach(findings: Findings, backends: list[ChatBackend]) -> None:
    """With --online, one model listing per HTTP server."""
    if not findings.online:
        return
    for backend in backends:
        if isinstance(backend, HttpBackend):
            reason = asyncio.run(backend.unreachable())
            if reason:
                findings.add(Problem(None, reason))


def _pool(findings: Findings, data: Any) -> None:
    pool = build_pool(load_pool_config(findings.path))
    for problem in run_problems(pool, RunConfig(constrained="never")):
        findings.add(problem)
    _reach(findings, list(pool.backends.values()))


def _run(findings: Findings, data: Any) -> None:
    from podium.solve.config import SystemConfig

    config = SystemConfig.from_dict(data, source=str(findings.path))
    if config.pool is None and findings.pool is not None:
        findings.pool_file = findings.pool
        config = config.model_copy(update={"pool": str(findings.pool)})
    elif isinstance(config.pool, str):
        findings.pool_file = Path(config.pool)
    chosen = config.pool_config()
    pool = build_pool(chosen)
    own = config.own_orchestrator()
    orchestrator = None if own is None else build_backend(own.backend, pool_catalog(chosen))
    problems = run_problems(pool, config.run_config(), orchestrator)
    if problems:
        raise NotRunnable(str(findings.path), problems)
    _reach(findings, list(pool.backends.values()))


def _stage(findings: Findings, data: Any) -> None:
    from podium.data import (
        ClassifyConfig,
        CollectConfig,
        CurriculumConfig,
        DifficultyConfig,
        PreferenceConfig,
        SynthConfig,
    )
    from podium.data.solver import Solver

    stages: list[type[Config]] = [
        CollectConfig, DifficultyConfig, CurriculumConfig, ClassifyConfig, PreferenceConfig, SynthConfig,
    ]  # fmt: skip
    fitting = [stage for stage in stages if set(data) - set(stage.moved) <= set(stage.model_fields)]
    if not fitting:
        raise ConfigError("out: fields of no data stage together; check the stage's --help for its fields")
    config = fitting[0].from_dict(data, source=str(findings.path))
    served = getattr(config, "from_served", None)
    if served is not None and not (Path(served) / "episodes.jsonl").is_file():
        message = f"no served traffic at {served}: `podium serve --served {served}` writes it"
        findings.add(Problem("from_served", message, written_by="podium serve"))
    for name in ("teacher", "solver", "cold_start"):
        solver = getattr(config, name, None)
        if solver is not None:
            try:
                Solver(solver)
            except PodiumError as error:
                findings.error(error, prefix=f"{name}.")


def _sft(findings: Findings, data: Any) -> None:
    from podium.train.config import SFTConfig

    config = SFTConfig.from_dict(data, source=str(findings.path))
    for index, trajectories in enumerate(config.trajectories):
        if not Path(trajectories).is_file():
            message = f"no trajectory file at {trajectories}: `podium data collect` (sft.jsonl) writes one"
            findings.add(Problem(f"trajectories.{index}", message, written_by="podium data collect"))
    _checkpoint(findings, config.model.path)


def _checkpoint(findings: Findings, path: str | None) -> None:
    missing = missing_checkpoint(path)
    if missing is not None:
        findings.add(missing)


def _grpo(findings: Findings, data: Any) -> None:
    from podium.train.config import GRPOConfig

    config = GRPOConfig.from_dict(data, source=str(findings.path))
    _checkpoint(findings, config.model.path)
    if config.tasks is not None and not Path(config.tasks).is_file():
        message = f"no tasks file at {config.tasks}: `podium data filter-rl` (rl.jsonl) writes one"
        findings.add(Problem("tasks", message, written_by="podium data filter-rl"))
    for sheet in config.rollout.price_sheets:
        PriceCatalog.from_file(sheet)
    findings.pool_file = Path(config.rollout.pool) if config.rollout.pool else None
    problems = rollout_problems(config)
    if problems:
        findings.error(NotRunnable(str(findings.path), problems), prefix="rollout.")


def _experiment(findings: Findings, data: Any) -> None:
    from podium.experiments import arm_errors, load_experiment

    for scale in ("small", "full"):
        for error in arm_errors(load_experiment(findings.path, scale)):  # type: ignore[arg-type]
            if isinstance(error, NotRunnable):  # fields of the arm's system: under `system` in the file
                problems = [Problem(p.field, f"{error.source} ({scale}): {p.message}", p.scope) for p in error.problems]
                findings.error(NotRunnable(error.source, problems), prefix="system.")
            else:
                findings.error(error)


def _prices(findings: Findings, data: Any) -> None:
    PriceCatalog.from_dict(data, source=str(findings.path))


def _record(findings: Findings, data: Any) -> None:
    from podium.datasets.loaders import get_benchmark
    from podium.evaluate.routing.config import RecordConfig

    config = RecordConfig.from_dict(data, source=str(findings.path))
    findings.pool_file = Path(config.pool)
    worker_prices(load_pool_config(config.pool))  # every worker priced, as recording prices each call
    if config.tasks is not None and not Path(config.tasks).is_file():
        findings.add(Problem("tasks", f"no tasks file at {config.tasks}"))
    if config.benchmark is not None:
        get_benchmark(config.benchmark)


def _routing(findings: Findings, data: Any, kind: str) -> None:
    """A ``compare`` or ``threshold`` config: its recording and runs (pending where another command writes them),
    its pricing reward and its price sheet."""
    from podium.evaluate.routing.config import CompareConfig, ThresholdConfig
    from podium.train.config import GRPOConfig

    config = (CompareConfig if kind == "compare" else ThresholdConfig).from_dict(data, source=str(findings.path))
    runs = {f"orchestrators.{k}": v for k, v in getattr(config, "orchestrators", {}).items()}
    runs |= {f"calibrations.{k}": v for k, v in getattr(config, "calibrations", {}).items()}
    runs |= {"calibration": config.calibration} if isinstance(config, ThresholdConfig) and config.calibration else {}
    for field, run_dir in runs.items():
        if not (Path(run_dir) / "manifest.json").is_file():
            findings.add(Problem(field, f"no `podium eval` run at {run_dir}", written_by="podium eval"))
    if not (Path(config.recording) / "manifest.json").is_file():
        message = f"no recording at {config.recording}: `podium routing record` writes one"
        findings.add(Problem("recording", message, written_by="podium routing record"))
    if config.reward_from is not None and GRPOConfig.from_file(config.reward_from).reward.design != "cost_penalty":
        findings.add(
            Problem("reward_from", f"{config.reward_from}: pricing decisions needs reward.design cost_penalty")
        )
    if config.prices is not None:
        PriceCatalog.from_file(config.prices)


def _serve(findings: Findings, data: Any) -> None:
    from podium.serve.settings import ServeConfig

    ServeConfig.from_dict(data, source=str(findings.path))


CHECKS: dict[str, Callable[[Findings, Any], None]] = {
    "system": _system,
    "pool": _pool,
    "run": _run,
    "stage": _stage,
    "sft": _sft,
    "grpo": _grpo,
    "experiment": _experiment,
    "prices": _prices,
    "record": _record,
    "compare": lambda findings, data: _routing(findings, data, "compare"),
    "threshold": lambda findings, data: _routing(findings, data, "threshold"),
    "serve": _serve,
}


class CheckConfig(Config):
    """What ``podium check`` checks the files as, and how far."""

    kind: Literal[KINDS] | None = None  # type: ignore[valid-type]
    """The files' kind (default: read from each file's fields)."""
    online: bool = False
    """Also reach every HTTP worker's server."""
    pool: str | None = None
    """Pool of run configs that name none (default: the embedded pool)."""
    pending_ok: bool = False
    """A missing file that another command writes (a checkpoint, collected data) is a note, not a problem."""


@config_options(CheckConfig, ("kind", "online", "pool", "pending_ok"))
def check_command(
    files: Annotated[list[Path], typer.Argument(help="Config files (YAML or JSON).")],
    config: ConfigFileOption = None,
    *,
    flags: Flags,
) -> None:
    """Validate system, pool, run, data-stage, training, experiment and price files as the commands that use them
    would; print every problem with its file and line."""
    settings = load_settings(CheckConfig, config, flags)
    pool = None if settings.pool is None else Path(settings.pool)
    pending_ok = settings.pending_ok
    problems = 0
    for path in files:
        chosen, found = check_file(path, settings.kind, online=settings.online, pool=pool)
        for finding in found:
            pending = pending_ok and finding.written_by is not None
            label = "note" if pending else "[red]error[/red]"
            errors.print(f"{label}: {escape(str(finding))}", highlight=False, soft_wrap=True)
            problems += not pending
        if not any(not (pending_ok and finding.written_by) for finding in found):
            console.print(f"{path}: ok ({chosen})", highlight=False, markup=False)
    if problems:
        errors.print(f"{problems} problem(s) in {len(files)} file(s)", highlight=False)
        raise typer.Exit(2)
