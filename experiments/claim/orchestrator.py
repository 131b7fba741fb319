"""The claim's orchestrator: SmolLM2-135M-Instruct with a LoRA adapter, playing the ``route`` policy over a pool of
two replay workers (Mixtral-8x7B and GPT-4 on GSM8K) through Podium's executor.

Shared by training (``train.py``) and evaluation (``evaluate.py``).
"""

import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.backends.local import LocalBackend, LocalBackendConfig
from podium.core.trajectory import Trajectory
from podium.costs.prices import PriceCatalog
from podium.evaluate.routing.data import STRONG, WEAK, RoutingItem, recording_path
from podium.graders.math import math_equivalent
from podium.policies import RoutePolicy
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import Pool, build_pool
from podium.runtime import Executor, RunConfig

LABELS = {WEAK: "mixtral", STRONG: "gpt4"}
"""Recorded model → worker name in the pool."""
LORA = {"r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
"""The adapter's shape."""


def pool_config(recording: Path | None = None) -> PoolConfig:
    """The claim's pool: the two replay workers (and the python tool, unused by the route policy)."""
    path = str(recording or recording_path())
    workers = [
        WorkerConfig(name=LABELS[WEAK], backend="replay", model=WEAK, path=path, description="cheap"),
        WorkerConfig(name=LABELS[STRONG], backend="replay", model=STRONG, path=path, description="strong, dear"),
    ]
    return PoolConfig(workers=workers, tools=["python"], roles=["standard_reasoner"], workers_as_tools=False)


def claim_pool(prices: PriceCatalog | None = None, recording: Path | None = None) -> Pool:
    """The pool, priced by Podium's sheet merged with ``prices``."""
    return build_pool(pool_config(recording), prices)


def load_base() -> tuple[Any, Any, Any]:
    """(torch, model, tokenizer) of the embedded SmolLM2-135M-Instruct, on one CPU thread."""
    return LocalBackend(LocalBackendConfig(cpu_threads=1)).load()


def with_adapter(model: Any, adapter: Path | None, trainable: bool) -> Any:
    """The base model with the adapter at ``adapter`` loaded (or a fresh one when None)."""
    import peft

    if adapter is not None:
        return peft.PeftModel.from_pretrained(model, str(adapter), is_trainable=trainable)
    return peft.get_peft_model(model, peft.LoraConfig(task_type="CAUSAL_LM", **LORA))


def executor(pool: Pool, model: Any, tokenizer: Any, temperature: float) -> Executor:
    """An executor whose orchestrator is the in-memory ``model`` deciding under the route grammar."""
    backend = LocalBackend.from_loaded(model, tokenizer, LocalBackendConfig(model="orchestrator"))
    run = RunConfig(policy="route", max_turns=3, max_tokens=4, temperature=temperature, constrained="always")
    return Executor(pool, run, orchestrator=backend, policy=RoutePolicy(answer_kind="math"))


@dataclass(frozen=True)
class Episode:
    """One orchestrated question and how it went."""

    trajectory: Trajectory
    correct: bool
    strong_called: bool
    usd: float


def score(item: RoutingItem, trajectory: Trajectory) -> Episode:
    """Grade ``trajectory`` on ``item`` (Podium's math verifier) and read off its cost and strong calls."""
    answer = trajectory.answer or ""
    correct = bool(answer) and math_equivalent(answer, str(item.item.gold))
    called = {
        str(result.call.arguments.get("model"))
        for result in trajectory.results
        if isinstance(result.call.arguments, dict)
    }
    return Episode(trajectory, correct, LABELS[STRONG] in called, trajectory.usage.usd)


def play(run: Executor, items: list[RoutingItem], label: str = "episodes") -> list[Episode]:
    """One episode per item, in order, with progress on stderr."""
    episodes = []
    started = time.perf_counter()
    for index, item in enumerate(items, start=1):
        episodes.append(score(item, asyncio.run(run.run(item.question))))
        if index % 10 == 0 or index == len(items):
            elapsed = time.perf_counter() - started
            print(f"{label}: {index}/{len(items)} ({elapsed:.0f} s)", file=sys.stderr, flush=True)
    return episodes
