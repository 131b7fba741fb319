"""``podium data preferences``: ToolOrchestra's preference pairs (SPEC §4). From the pool's tools, prices and
latencies an LLM proposes (instruction, vector) pairs; rule checks (see :mod:`podium.data.preference_rules`) and a
second LLM pass judge each pair's consistency; the survivors are split into train and eval sets.

Outputs in ``--out``: ``train.jsonl`` and ``eval.jsonl`` (one pair per line: ``instruction``, ``weights`` by tool
name, ``vector``, ``tools``, provenance; ``podium eval --preferences`` reads them, and ``podium data filter-rl`` or
``curriculum --preferences`` attach them to RL tasks, where ToolOrchestra's reward reads them), ``funnel.json``.
"""

import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import Field, NonNegativeFloat, PositiveInt, ValidationError

from podium.backends.base import ChatBackend
from podium.config import read_structured_file
from podium.core.preference import OUTCOME_KEYS, Preference
from podium.core.record import Record
from podium.data.common import LLMStageSettings, finish_stage, open_stage
from podium.data.funnel import FunnelBuilder
from podium.data.llm import StepModel, ask_json, load_prompt, request_bound
from podium.data.pools import PoolCache, shared_pool
from podium.data.preference_rules import PoolTool, pool_tools, rule_problems
from podium.data.provenance import podium_version
from podium.data.store import DataError
from podium.pool.pool import resolve_pool_config
from podium.solve.jsonl import JsonlLog, RecordError, read_jsonl, write_jsonl
from podium.solve.records import FilterDecision, Funnel, Provenance

STAGE = "preferences"
CHECK_TOKENS = 160
"""Completion budget of one consistency check."""


class PreferenceConfig(LLMStageSettings):
    """Preference pairs for a pool."""

    pool: str | None = None
    """The pool whose tools the preferences weigh (YAML); default: the embedded offline pool."""
    llm_pool: str | None = None
    """Pool holding the proposer and validator models; default: ``pool``."""
    proposer: str | None = None
    """The model that proposes pairs (a worker of ``llm_pool``); default: its first worker."""
    validator: str | None = None
    """The model that checks each pair (second pass); default: the proposer."""
    pairs: PositiveInt = 8
    """Pairs to propose."""
    per_request: PositiveInt = 4
    """Pairs asked for in one proposal request."""
    eval_fraction: float = Field(0.25, ge=0.0, lt=1.0)
    """Share of the surviving pairs held out for evaluation."""
    latencies: dict[str, float] = Field(default_factory=dict)
    """Measured seconds per call of a tool, shown to the proposer; default: each tool's time limit."""
    temperature: NonNegativeFloat = 0.8
    """Sampling temperature of proposals (validation runs at 0)."""
    max_tokens: PositiveInt = 768
    """Completion budget of one proposal request."""


class PreferencePair(Record):
    """One (instruction, vector) pair and what was decided about it."""

    id: str
    """``p<request>-<index>``."""
    instruction: str
    """PI: what the user says."""
    weights: dict[str, float]
    """P by name: each tool, then ``outcome``, ``compute``, ``latency``."""
    vector: list[float]
    """P in the order of ``tools`` followed by outcome, compute, latency."""
    tools: list[str]
    """The tools the vector weighs, in order."""
    provenance: Provenance
    """The proposer and prompt."""
    decisions: list[FilterDecision] = Field(default_factory=list)
    """The checks it went through."""
    usd: NonNegativeFloat = 0.0
    """Its share of the proposal's cost plus its check's."""

    def preference(self) -> Preference:
        return Preference(instruction=self.instruction, weights=self.weights)


class Proposal(Record):
    """One proposal request (a unit of work)."""

    index: int
    pairs: list[dict[str, Any]] = Field(default_factory=list)
    """The raw pairs proposed (``instruction``, ``vector``)."""
    reason: str = ""
    """Why the request gave nothing, if it did not."""
    usd: NonNegativeFloat = 0.0


class Check(Record):
    """The second LLM pass on one pair."""

    id: str
    consistent: bool
    reason: str = ""
    usd: NonNegativeFloat = 0.0


def read_preferences(path: str | Path) -> list[Preference]:
    """Preferences from a pairs file (JSONL rows with ``instruction`` and ``weights``) or a YAML/JSON list."""
    path = Path(path)
    try:
        if path.suffix == ".jsonl":
            rows = [row for _, row in read_jsonl(path)]
        else:
            loaded = read_structured_file(path)
            rows = loaded if isinstance(loaded, list) else [loaded]
        preferences = [Preference(instruction=row.get("instruction", ""), weights=row["weights"]) for row in rows]
    except (RecordError, KeyError, AttributeError, ValidationError) as error:
        raise DataError(f"{path} holds no preference pairs (instruction, weights): {error}") from error
    if not preferences:
        raise DataError(f"{path} holds no preference pairs")
    return preferences


def _table(tools: list[PoolTool], latencies: dict[str, float], limits: dict[str, float]) -> str:
    lines = []
    for position, tool in enumerate(tools, 1):
        seconds = f"{latencies[tool.name]:.2f} s measured" if tool.name in latencies else f"≤ {limits[tool.name]:g} s"
        lines.append(
            f"{position}. {tool.name} ({tool.kind}): {tool.description}. Price: {tool.price}. Latency: {seconds}."
        )
    return "\n".join(lines)


class Proposer:
    """Proposes and checks pairs for one pool."""

    def __init__(self, config: PreferenceConfig, backend: ChatBackend | None = None) -> None:
        self.config = config
        pools: PoolCache = {}
        chosen = resolve_pool_config(config.pool)
        pool = shared_pool(chosen, pools)
        prices = {name: (b.price.input_per_mtok, b.price.output_per_mtok) for name, b in pool.backends.items()}
        self.tools = pool_tools(chosen, pool.prices, prices)
        limits = {name: pool.registry.get(name).timeout_s for name in pool.registry.names()}
        self.table = _table(self.tools, config.latencies, limits)
        llm_pool = config.llm_pool or config.pool
        self.proposer = StepModel.from_pool(llm_pool, config.proposer, pools)
        self.validator = StepModel.from_pool(llm_pool, config.validator or config.proposer, pools)
        if backend is not None:
            self.proposer = StepModel(backend, self.proposer.pool_hash, self.proposer.prices_hash)
            self.validator = StepModel(backend, self.validator.pool_hash, self.validator.prices_hash)
        self.propose_prompt = load_prompt("preferences/propose", config.prompts_dir)
        self.validate_prompt = load_prompt("preferences/validate", config.prompts_dir)
        self.source = config.pool or "embedded pool"

    @property
    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    def request(self, count: int) -> str:
        return self.propose_prompt.render(tools=self.table, length=len(self.tools) + 3, count=count)

    def schema(self, count: int) -> dict[str, Any]:
        """The reply's shape; the vector's length and range are left to the rule checks, so that one bad pair
        is counted as such instead of spoiling its whole request."""
        pair = {
            "type": "object",
            "properties": {
                "instruction": {"type": "string", "minLength": 10, "maxLength": 400},
                "vector": {"type": "array", "items": {"type": "number"}, "maxItems": 64},
            },
            "required": ["instruction", "vector"],
        }
        pairs = {"type": "array", "items": pair, "minItems": 1}
        return {"type": "object", "properties": {"pairs": pairs}, "required": ["pairs"]}

    async def propose(self, index: int) -> Proposal:
        count = min(self.config.per_request, self.config.pairs - index * self.config.per_request)
        reply = await ask_json(
            self.proposer.backend,
            self.request(count),
            self.schema(count),
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
            attempts=self.config.attempts,
        )
        pairs = (reply.value or {}).get("pairs", [])
        return Proposal(index=index, pairs=pairs, reason=reply.reason or "", usd=reply.usage.usd)

    def pair(self, proposal: Proposal, position: int) -> PreferencePair:
        raw = proposal.pairs[position]
        vector = [float(weight) for weight in raw["vector"]]
        keys = [*self.names, *OUTCOME_KEYS]
        return PreferencePair(
            id=f"p{proposal.index}-{position}",
            instruction=" ".join(str(raw["instruction"]).split()),
            weights=dict(zip(keys, vector, strict=False)),
            vector=vector,
            tools=self.names,
            provenance=Provenance(
                stage=STAGE,
                source=self.source,
                item_id=f"p{proposal.index}-{position}",
                model=self.proposer.backend.model,
                temperature=self.config.temperature,
                seed=self.config.seed,
                pool_hash=self.proposer.pool_hash,
                prices_hash=self.proposer.prices_hash,
                podium_version=podium_version(),
                prompt=self.propose_prompt.id,
            ),
            usd=proposal.usd / max(1, len(proposal.pairs)),
        )

    def check_request(self, pair: PreferencePair) -> str:
        weights = "\n".join(f"- {name}: {weight:g}" for name, weight in pair.weights.items())
        return self.validate_prompt.render(tools=self.table, instruction=pair.instruction, weights=weights)

    def propose_bound(self) -> float:
        request = self.request(self.config.per_request)
        return request_bound(self.proposer.backend, request, self.config.max_tokens, self.config.attempts)

    def check_bound(self, pair: PreferencePair) -> float:
        return request_bound(self.validator.backend, self.check_request(pair), CHECK_TOKENS, self.config.attempts)

    async def check(self, pair: PreferencePair) -> Check:
        schema = {
            "type": "object",
            "properties": {"consistent": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 300}},
            "required": ["consistent", "reason"],
        }
        reply = await ask_json(
            self.validator.backend, self.check_request(pair), schema, max_tokens=160, attempts=self.config.attempts
        )
        if reply.value is None:
            return Check(id=pair.id, consistent=False, reason=f"no verdict: {reply.reason}", usd=reply.usage.usd)
        return Check(
            id=pair.id, consistent=reply.value["consistent"], reason=reply.value["reason"], usd=reply.usage.usd
        )


def split(pairs: list[PreferencePair], fraction: float, seed: int) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """``(train, eval)``: a seeded shuffle, ``fraction`` of the pairs (at least one when there are two) held out."""
    order = list(pairs)
    random.Random(seed).shuffle(order)
    held = math.floor(len(order) * fraction + 0.5) if fraction > 0 else 0
    if fraction > 0 and len(order) >= 2:
        held = max(1, held)
    return order[held:], order[:held]


def rule_check(proposer: Proposer, funnel: FunnelBuilder, pairs: list[PreferencePair]) -> list[PreferencePair]:
    """The pairs that pass every rule (and do not repeat an earlier instruction), counted in ``funnel``."""
    seen: set[str] = set()

    def problem(pair: PreferencePair) -> str | None:
        problems = rule_problems(pair.instruction, pair.vector, proposer.tools)
        if not problems and pair.instruction.casefold() in seen:
            problems = ["repeats an earlier instruction"]
        seen.add(pair.instruction.casefold())
        decision = FilterDecision(stage=STAGE, filter="rules", kept=not problems, reason="; ".join(problems))
        pair.decisions.append(decision)
        return problems[0].split(",")[0] if problems else None

    return funnel.apply("rule checks", "pairs", pairs, problem)


def llm_check(funnel: FunnelBuilder, pairs: list[PreferencePair], checks: list[Check]) -> list[PreferencePair]:
    """The pairs the second LLM pass found consistent, counted in ``funnel``."""
    verdicts = {check.id: check for check in checks}

    def problem(pair: PreferencePair) -> str | None:
        check = verdicts.get(pair.id)
        if check is None:
            return "not checked: USD cap reached"
        decision = FilterDecision(stage=STAGE, filter="LLM check", kept=check.consistent, reason=check.reason)
        pair.decisions.append(decision)
        pair.usd += check.usd
        return None if check.consistent else "inconsistent (second LLM pass)"

    return funnel.apply("LLM consistency check", "pairs", pairs, problem)


async def propose_preferences(
    config: PreferenceConfig, *, progress: bool = True, backend: ChatBackend | None = None
) -> Funnel:
    """Propose, check and split preference pairs (resuming whatever ``config.out`` holds); ``backend`` replaces
    the pool's proposer and validator models (any :class:`ChatBackend`)."""
    out = Path(config.out)
    proposer = Proposer(config, backend)
    stage = open_stage(out, STAGE, config, progress=progress)  # only once the inputs are known to be good
    funnel = FunnelBuilder(STAGE)
    requests = list(range(math.ceil(config.pairs / config.per_request)))
    proposals_log = JsonlLog(out / "work" / "proposals.jsonl", Proposal, lambda unit: str(unit.index))
    checks_log = JsonlLog(out / "work" / "checks.jsonl", Check, lambda unit: unit.id)
    stage.runner.charge(sum(unit.usd for unit in [*proposals_log.values(), *checks_log.values()]))
    proposal_bound = proposer.propose_bound() or None  # every request asks for the same number of pairs
    proposals = await stage.runner.run(
        "proposing",
        requests,
        str,
        proposer.propose,
        proposals_log,
        cost=lambda unit: unit.usd,
        bound=lambda _index: proposal_bound,
    )
    unsent = ["not sent: USD cap reached"] * (len(requests) - len(proposals))
    empty = [f"gave no pairs: {unit.reason.split(':')[0]}" for unit in proposals if not unit.pairs]
    funnel.count("proposal requests", "requests", len(requests), Counter(empty + unsent))
    pairs = [proposer.pair(unit, position) for unit in proposals for position in range(len(unit.pairs))]
    ruled = rule_check(proposer, funnel, pairs)
    checks = await stage.runner.run(
        "checking",
        ruled,
        lambda pair: pair.id,
        proposer.check,
        checks_log,
        cost=lambda unit: unit.usd,
        bound=lambda pair: proposer.check_bound(pair) or None,
    )
    kept = llm_check(funnel, ruled, checks)
    train, held_out = split(kept, config.eval_fraction, config.seed)
    outputs = {
        "train.jsonl": write_jsonl(out / "train.jsonl", train),
        "eval.jsonl": write_jsonl(out / "eval.jsonl", held_out),
    }
    return finish_stage(stage, funnel, outputs, ["train.jsonl", "eval.jsonl"])
