"""What ``podium routing compare`` and ``podium routing threshold`` do with their configs: read the recording under
the price sheet, read the orchestrators' runs, fit and trace the routers, price decisions under a reward."""

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from podium.config import read_structured_file
from podium.costs.prices import PriceCatalog
from podium.errors import ConfigError
from podium.evaluate.routing.bootstrap import Bootstrap, bootstrap
from podium.evaluate.routing.compare import Comparison, compare
from podium.evaluate.routing.config import CompareConfig, ThresholdConfig
from podium.evaluate.routing.orchestrators import Worker, read_orchestrator, replay_workers
from podium.evaluate.routing.priced import (
    CostPenalty,
    calibrated,
    fit_calibration,
    orchestrator_point,
    router_points,
    score_threshold,
    worker_edges,
)
from podium.evaluate.routing.routers import router_curves
from podium.recording import Recording
from podium.routers.data import RoutedWorker, RoutingItem, routing_set
from podium.routers.fit import embed

Progress = Callable[[str], None]


def run_comparison(
    settings: CompareConfig, reward: CostPenalty | None = None, progress: Progress | None = None
) -> Comparison:
    """The comparison ``settings`` describe (see :class:`~podium.evaluate.routing.config.CompareConfig`), with
    priced rows under ``reward`` (``settings.reward_from``'s, read by the caller)."""
    sheet = price_sheet(settings.prices)
    data = routing_set(Recording.load(settings.recording), sheet)
    train, test = data.split("train")[: settings.train_limit], data.split(settings.split)[: settings.limit]
    if not test:
        raise ConfigError(f"{settings.recording}: the {settings.split} split has no scorable task")
    runs = [read_orchestrator(name, run_dir, data, test, sheet) for name, run_dir in settings.orchestrators.items()]
    if runs:  # the tasks every orchestrator was scored on
        scored = set.intersection(*({episode.item.item.id for episode in run.episodes} for run in runs))
        test = [item for item in test if item.item.id in scored]
        runs = [dataclasses.replace(run, episodes=[e for e in run.episodes if e.item in test]) for run in runs]
    if progress is not None:
        progress(f"fitting the routers on {len(train)} train tasks and tracing them on {len(test)} tasks…")
    curves = router_curves(data, train, test, embed=embed, kinds=settings.routers, seed=settings.seed)
    priced, breakeven, uncalibrated = None, None, []
    if reward is not None:
        priced = router_points(test, train, curves.fitted, curves.vectors, reward)
        validation = data.split("validation")
        by_name = {run.name: run for run in runs}
        for name, run_dir in settings.calibrations.items():
            try:
                fitted = fit_calibration(read_orchestrator(name, run_dir, data, validation, sheet))
            except ValueError as error:  # its priced row is left out, saying why; the rest of the table stands
                uncalibrated.append(f"{name} has no {name}_priced row: {error}")
                continue
            priced[name] = orchestrator_point(calibrated(by_name[name], fitted), train, by_name[name].workers, reward)
        breakeven = edges_from_cheapest([recorded_worker(w) for w in data.workers.values()], train, reward)
    comparison = compare(curves.curves, runs, test, list(data.workers), priced, breakeven)
    comparison.notes.extend([*data.notes, *uncalibrated])
    if settings.bootstrap:
        if progress is not None:
            progress(f"resampling the {len(test)} tasks {settings.bootstrap} times…")
        comparison.bootstrap = resampled(comparison, test, [run.name for run in runs if run.traceable],
                                         list(curves.fitted), settings)  # fmt: skip
    if reward is not None:
        comparison.notes.extend(f"{run.name} has no {run.name}_priced row: no validation run calibrates its escalation "
                                "probability" for run in runs if run.name not in settings.calibrations)  # fmt: skip
    return comparison


def resampled(
    comparison: Comparison,
    test: Sequence[RoutingItem],
    orchestrators: list[str],
    routers: list[str],
    settings: CompareConfig,
) -> Bootstrap:
    """The comparison's bootstrap: every curve's intervals (a ``_priced`` row has its curve's), and the paired
    differences of the best orchestrator and the best router by APGR (by COST-APGR with more than two workers)."""
    metric = "apgr" if "strong" in comparison.references else "cost_apgr"
    table = comparison.table

    def best(names: list[str]) -> str | None:
        scored = [name for name in names if table[metric].get(name) is not None]
        return max(scored, key=lambda name: table[metric][name] or 0.0) if scored else None

    pair = (best(orchestrators), best(routers))
    result = bootstrap(
        comparison.curves,
        test,
        comparison.references,
        table,
        resamples=settings.bootstrap,
        seed=settings.seed,
        pair=pair if None not in pair else None,
    )  # type: ignore[arg-type]
    for systems in result.intervals.values():
        systems.update({f"{name}_priced": systems[name] for name in list(systems) if f"{name}_priced" in table[metric]})
    return result


def edges_from_cheapest(
    workers: Sequence[Worker], train: Sequence[RoutingItem], reward: CostPenalty
) -> float | dict[str, float]:
    """The break-even probabilities of escalating from the cheapest of ``workers`` (mean train cost at its price)
    to each other one: one probability where there is one other."""
    costs = [sum(w.usd(item.outcomes[str(w.recorded)]) for item in train) / len(train) for w in workers]
    first = workers[costs.index(min(costs))]
    others = [worker for worker in workers if worker is not first]
    edges = worker_edges(train, first, others, reward)
    return edges.get(others[0].name, 1.0) if len(others) == 1 else edges


def recorded_worker(worker: RoutedWorker) -> Worker:
    """A recorded worker as an escalation target at its price under the sheet."""
    return Worker(worker.name, worker.name, worker.price)


def price_threshold(settings: ThresholdConfig, reward: CostPenalty) -> dict[str, Any]:
    """The ``escalate_above`` the sheet picks for an orchestrator under ``reward`` (``settings.reward_from``'s; see
    ``podium routing threshold``), the system written with it where one is given."""
    sheet = price_sheet(settings.prices)
    data = routing_set(Recording.load(settings.recording), sheet)
    train = data.split("train")[: settings.train_limit]
    system = read_structured_file(settings.system) if settings.system is not None else {}
    if not isinstance(system, dict):
        raise ConfigError(f"{settings.system} must hold a mapping of system fields")
    if system.get("pool") is not None:  # the workers of its pool, each at its own price
        pool = [w for w in replay_workers(system, Path(str(settings.system)), data, sheet).values() if w.recorded]
        if len(pool) < 2:
            raise ConfigError(
                f"{settings.system}: pool: pricing escalations needs two or more workers of the recording"
            )
    else:
        pool = [recorded_worker(worker) for worker in data.workers.values()]
    breakeven = edges_from_cheapest(pool, train, reward)
    fitted = None
    if settings.calibration is not None:
        run = read_orchestrator("orchestrator", settings.calibration, data, data.split("validation"), sheet)
        fitted = fit_calibration(run)
    threshold = (
        score_threshold(breakeven, fitted)
        if isinstance(breakeven, float)
        else {worker: score_threshold(edge, fitted) for worker, edge in breakeven.items()}
    )
    if settings.system is not None and settings.system_out is not None:
        write_thresholded_system(Path(settings.system), Path(settings.system_out), threshold, settings.prices)
    calibration = None if fitted is None else {"slope": fitted.slope, "bias": fitted.bias}
    return {"breakeven": breakeven, "escalate_above": threshold, "calibration": calibration,
            "system": settings.system_out}  # fmt: skip


def write_thresholded_system(system: Path, out: Path, threshold: float | dict[str, float], prices: str | None) -> None:
    """``system`` written to ``out`` with its policy's ``escalate_above: threshold``, checked as ``podium eval``
    reads it."""
    from podium.evaluate.system_config import system_config_from_dict
    from podium.runtime.config import RunConfig

    data = read_structured_file(system)
    if isinstance(data, dict):  # anything else is refused by the validation, naming the file
        policy = data.get("policy")
        settings = {"name": policy} if isinstance(policy, str) else policy
        if isinstance(settings, dict) and settings.get("name") == "escalate":
            data = {**data, "policy": {**settings, "escalate_above": threshold}}
    config = system_config_from_dict(data, source=str(system))
    if not isinstance(config, RunConfig) or config.policy.name != "escalate":
        raise ConfigError(f"{system}: escalate_above applies to an orchestrator with policy escalate")
    sheet = f"the prices of {prices}" if prices is not None else "the recorded prices"
    header = f"# {system} with the escalate_above that `podium routing threshold` computed\n# for {sheet}.\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def price_sheet(prices: str | None) -> PriceCatalog | None:
    """The price sheet in the file ``prices`` (None: none given)."""
    return PriceCatalog.from_file(prices) if prices is not None else None
