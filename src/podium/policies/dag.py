"""Uno-Orchestra's selective delegation: answer directly (lazy) or emit a DAG of subtasks, each routed to an
admissible (worker, primitive) pair. The grammar (SPEC §3.3) is the same in SFT, RL and inference::

    <plan round="r">
      <subtask id="k" depends_on="i,j"> description </subtask>
    </plan>
    <route subtask="k" model="WORKER" skill="PRIMITIVE"> instruction </route>
    <obs subtask="k"> the worker's return </obs>          (written by the runtime)
    <verify> self-check, may contain <replan/> </verify>
    <final_answer> answer </final_answer>

Parsing is linear in the output's length (:mod:`podium.policies.tags` reads the tags), and values quoted back in
error messages are shortened. Worker
returns in ``<obs>`` blocks are escaped (:func:`~podium.policies.hermes.escape_protocol_tags`), so a worker
cannot close its block or forge another subtask's.
"""

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Literal

from podium.backends.grammar import Grammar, Limits, choice, free_text, literal, optional, sequence
from podium.core.calls import ToolResult
from podium.core.trajectory import Turn
from podium.policies.base import Action, ActionParseError, Answer, Dispatcher, Outcome, Policy, PoolView
from podium.policies.config import PolicyConfig
from podium.policies.hermes import escape_protocol_tags
from podium.policies.tags import Element, read_elements
from podium.pool.config import PRIMITIVES
from podium.pool.primitives.tools import PERFORMERS, primitive_call

SUBTASK_CALL_PREFIX = "subtask-"
"""Call ids of a plan's nodes: ``subtask-K`` (the id ties an ``<obs>`` to its subtask)."""
QUOTED_CHARS = 60
"""Most characters of the orchestrator's own values quoted back in an error message."""
_ID = re.compile(r"\d{1,6}")
GRAMMAR_NODES = 4
"""Most subtasks per plan that the decoding grammar allows (the validator allows ``max_subtasks``): bounded
repetitions keep a small model from listing subtasks until its token budget runs out."""


@dataclass(frozen=True)
class Subtask:
    """One node of a plan."""

    id: int
    depends_on: tuple[int, ...]
    description: str


@dataclass(frozen=True)
class Route:
    """Where a subtask goes: an admissible (worker, primitive) pair and the instruction forwarded to it."""

    subtask: int
    model: str
    primitive: str
    """Written ``skill="…"`` in the grammar (see :data:`LAZY_OPENING`)."""
    instruction: str


@dataclass(frozen=True)
class Plan(Action):
    """A validated DAG round: subtasks in topological order, one route each."""

    round: int
    subtasks: list[Subtask]
    routes: dict[int, Route]


# The papers' grammar (SPEC §3.3) names a primitive a skill: ``skill="…"``. The prompt, the decoding grammar and
# the errors the orchestrator reads keep that word byte for byte, as the papers' data and Podium's trained
# adapters have it; the code says primitive, the name the pool, its configs and Uno's Table 6 use.
LAZY_OPENING = """You are an orchestrator that delegates selectively. For an easy question answer at once:
<final_answer>ANSWER</final_answer>
Otherwise decompose it into subtasks and route each to a (model, skill) pair from the pool:"""
FORCED_OPENING = """You are an orchestrator that delegates. First decompose the question into subtasks and route each \
to a (model, skill) pair from the pool; answer only after their results come back:"""
DAG_PROMPT = """{opening}
<plan round="1">
<subtask id="1">first subtask</subtask>
<subtask id="2" depends_on="1">a subtask that needs the result of 1</subtask>
</plan>
<route subtask="1" model="MODEL" skill="SKILL">instruction for the worker</route>
<route subtask="2" model="MODEL" skill="SKILL">instruction for the worker</route>

Rules: subtask ids are integers and depends_on lists only smaller ids; every subtask gets exactly one route; \
model and skill must be an admissible pair of the table. Subtasks whose dependencies are done run in parallel, \
and each receives its parents' results. Results come back as <obs subtask="k"> blocks. Then check them in \
<verify>...</verify> and either give <final_answer>ANSWER</final_answer> or write <replan/> inside <verify> and \
a new <plan> with a higher round number. Give exactly one final answer, a single short string.

The pool (model, description, price, skills with their own price on top of the model's tokens):
{table}

Skills: {skills}

Admissible (model, skill) pairs: {pairs}"""


class DagPolicy(Policy):
    """Lazy answers or plans of subtasks with routes, validated rule by rule; at most 8 turns. With
    ``lazy=False`` (forced decomposition, Uno's ablation) the first turn must be a plan: the direct-answer branch
    leaves the prompt, the grammar and the validator (unless the pool admits no pair at all)."""

    name = "dag"
    max_turns = 8

    def __init__(self, max_subtasks: int = 16, lazy: bool = True) -> None:
        if max_subtasks < 1:
            raise ValueError("max_subtasks must be at least 1")
        self.max_calls_per_round = max_subtasks
        self.lazy = lazy

    def system_prompt(self, view: PoolView) -> str:
        pairs = ", ".join(f"({model}, {primitive})" for model, primitive in sorted(view.admissible)) or "none"
        offered = sorted({primitive for _, primitive in view.admissible}, key=PRIMITIVES.index)
        summaries = "; ".join(f"{primitive}: {PERFORMERS[primitive].summary}" for primitive in offered) or "none"
        opening = LAZY_OPENING if self._may_answer_at_once(view) else FORCED_OPENING
        return DAG_PROMPT.format(opening=opening, table=view.table, skills=summaries, pairs=pairs)

    def _may_answer_at_once(self, view: PoolView) -> bool:
        return self.lazy or not view.admissible

    def parse(self, text: str, view: PoolView, previous: Sequence[Action]) -> Action:
        elements = read_elements(text)
        plans = [e for e in elements if e.name == "plan"]
        answers = [e for e in elements if e.name == "final_answer"]
        verifies = [e for e in elements if e.name == "verify"]
        earlier = [action for action in previous if isinstance(action, Plan)]
        if len(answers) > 1:
            raise ActionParseError(f"{len(answers)} <final_answer> blocks: give exactly one final answer")
        if len(plans) > 1:
            raise ActionParseError("more than one <plan>: write one plan per turn")
        if len(verifies) > 1:
            raise ActionParseError("more than one <verify>: check the observations once per turn")
        if answers and plans:
            raise ActionParseError("a turn either plans or answers: a <final_answer> cannot follow an unrun plan")
        if not answers and not plans:
            raise ActionParseError("write a <plan> with one <route> per subtask, or a <final_answer>")
        verify = verifies[0] if verifies else None
        if earlier and verify is None:
            raise ActionParseError(
                "after observations, check them in <verify>…</verify> before answering or replanning"
            )
        if answers and not earlier and not self._may_answer_at_once(view):
            raise ActionParseError("decomposition is forced: the first turn is a <plan>, the answer comes after it")
        if answers:
            answer = answers[0].body.strip()
            if not answer:
                raise ActionParseError("the <final_answer> is empty")
            return Answer(answer)
        if earlier and not any(child.name == "replan" for child in verify.children):  # type: ignore[union-attr]
            raise ActionParseError("a new plan needs <replan/> inside <verify>")
        routes = [e for e in elements if e.name == "route"]
        return _plan(plans[0], routes, earlier, view, self.max_calls_per_round)

    def observation(
        self, results: Sequence[ToolResult], remaining: str, view: PoolView, previous: Sequence[Action]
    ) -> str:
        blocks = []
        for result in results:
            body = escape_protocol_tags(result.observation or result.reason or "")
            subtask = escape(result.call.id.removeprefix(SUBTASK_CALL_PREFIX))
            blocks.append(f'<obs subtask="{subtask}" status="{result.status.value}">\n{body}\n</obs>')
        return "\n".join(blocks)

    def rejection(self, reason: str, remaining: str) -> str:
        return f"<error>\n{reason}\n</error>"

    async def execute(self, action: Action, dispatch: Dispatcher, history: Sequence[Turn], limit: int) -> Outcome:
        if isinstance(action, Plan):
            return Outcome(await run_plan(action, dispatch, earlier_observations(history)))
        return await super().execute(action, dispatch, history, limit)

    def turn_histories(self, view: PoolView) -> list[list[Action]]:
        """The first turn, and a turn after a one-node plan ran (``<verify>`` then an answer or a new plan)."""
        if not view.admissible:
            return [[]]
        model, primitive = min(view.admissible)
        plan = Plan(1, [Subtask(1, (), "a subtask")], {1: Route(1, model, primitive, "an instruction")})
        return [[], [plan]]

    def build_grammar(self, view: PoolView, limits: Limits, previous: Sequence[Action] = ()) -> Grammar | None:
        """Plans whose ids run on from the episode's last id in order, whose depends_on list earlier ids of the
        same plan, and which route every subtask once to an admissible pair, in the next round; after a plan
        ran, a ``<verify>`` comes first and only ``<replan/>`` opens a plan. Stricter than the validator (at
        most four subtasks, no dependencies across rounds), so a small model's plans are valid as decoded."""
        earlier = [action for action in previous if isinstance(action, Plan)]
        answer = sequence(literal("<final_answer>"), free_text(r"[^<\n]", 1, limits.answer), literal("</final_answer>"))
        check = free_text("[^<]", 0, limits.thinking)
        plan = self._plan_grammar(view, earlier, limits)
        if not earlier:
            if plan is None:
                return answer
            return choice(answer, plan) if self._may_answer_at_once(view) else plan
        verified = sequence(literal("<verify>"), check, literal("</verify>\n"), answer)
        if plan is None:
            return verified
        return choice(verified, sequence(literal("<verify>"), check, literal("<replan/></verify>\n"), plan))

    def _plan_grammar(self, view: PoolView, earlier: list[Plan], limits: Limits) -> Grammar | None:
        pairs = [literal(f'model="{model}" skill="{primitive}"') for model, primitive in sorted(view.admissible)]
        if not pairs:
            return None
        first = 1 + max((subtask.id for plan in earlier for subtask in plan.subtasks), default=0)
        round_index = 1 + (earlier[-1].round if earlier else 0)
        text = free_text(r"[^<\n]", 1, limits.text)
        plans = []
        for size in range(1, min(GRAMMAR_NODES, self.max_calls_per_round) + 1):
            ids = list(range(first, first + size))
            nodes = [
                sequence(literal(f'<subtask id="{node}"'), _depends_on(ids[:position]), literal(">"), text,
                         literal("</subtask>\n"))
                for position, node in enumerate(ids)
            ]  # fmt: skip
            routes = [
                sequence(literal(f'<route subtask="{node}" '), choice(*pairs), literal(">"), text,
                         literal("</route>\n"))
                for node in ids
            ]  # fmt: skip
            plans.append(sequence(*nodes, literal("</plan>\n"), *routes))
        return sequence(literal(f'<plan round="{round_index}">\n'), choice(*plans))


def _depends_on(parents: list[int]) -> Grammar:
    """The optional depends_on attribute over any non-empty subset of ``parents``, in increasing order."""
    subsets = [
        ",".join(str(parent) for bit, parent in enumerate(parents) if mask >> bit & 1)
        for mask in range(1, 2 ** len(parents))
    ]
    if not subsets:
        return literal("")
    return optional(sequence(literal(' depends_on="'), choice(*map(literal, subsets)), literal('"')))


def _integer(element: Element, attribute: str) -> int:
    value = element.attributes.get(attribute)
    if value is None:
        raise ActionParseError(f'<{element.name}> needs a {attribute}="…" attribute')
    if not _ID.fullmatch(value.strip()):
        shown = _quoted(value)
        raise ActionParseError(f'<{element.name} {attribute}="{shown}">: {attribute} must be a non-negative integer')
    return int(value)


def _plan(plan: Element, routes: list[Element], earlier: list[Plan], view: PoolView, limit: int) -> Plan:
    round_index = _integer(plan, "round")
    if earlier and round_index <= earlier[-1].round:
        raise ActionParseError(f"plan round {round_index} must be greater than the last round {earlier[-1].round}")
    done = {subtask.id for previous in earlier for subtask in previous.subtasks}
    subtasks: list[Subtask] = []
    for node in plan.children:
        subtasks.append(_subtask(node, done, {s.id for s in subtasks}))
    if not subtasks:
        raise ActionParseError("the <plan> has no <subtask>")
    if len(subtasks) > limit:
        raise ActionParseError(f"the plan has {len(subtasks)} subtasks; at most {limit} per round")
    planned = {subtask.id: subtask for subtask in subtasks}
    by_subtask: dict[int, Route] = {}
    for element in routes:
        route = _route(element, view)
        if route.subtask not in planned:
            raise ActionParseError(f"<route> names unknown subtask {route.subtask}; this plan has {sorted(planned)}")
        if route.subtask in by_subtask:
            raise ActionParseError(f"subtask {route.subtask} has two routes; give exactly one")
        by_subtask[route.subtask] = route
    missing = sorted(set(planned) - set(by_subtask))
    if missing:
        raise ActionParseError(f"subtasks {missing} have no <route>")
    return Plan(round=round_index, subtasks=subtasks, routes=by_subtask)


def _subtask(node: Element, done: set[int], seen: set[int]) -> Subtask:
    subtask_id = _integer(node, "id")
    if subtask_id in seen or subtask_id in done:
        raise ActionParseError(f"subtask id {subtask_id} is used twice; ids are unique in an episode")
    raw = node.attributes.get("depends_on", "").strip()
    parents: list[int] = []
    for part in filter(None, (piece.strip() for piece in raw.split(","))):
        if not _ID.fullmatch(part):
            raise ActionParseError(f'subtask {subtask_id}: depends_on="{_quoted(raw)}" must list integer ids')
        parent = int(part)
        if parent >= subtask_id:
            raise ActionParseError(
                f"subtask {subtask_id} depends on {parent}: depends_on ids must be smaller (this rules out cycles)"
            )
        if parent not in seen and parent not in done:
            raise ActionParseError(f"subtask {subtask_id} depends on unknown subtask {parent}")
        parents.append(parent)
    description = node.body.strip()
    if not description:
        raise ActionParseError(f"subtask {subtask_id} has no description")
    return Subtask(id=subtask_id, depends_on=tuple(dict.fromkeys(parents)), description=description)


def _route(element: Element, view: PoolView) -> Route:
    subtask_id = _integer(element, "subtask")
    model = element.attributes.get("model", "")
    primitive = element.attributes.get("skill", "")
    if model not in view.workers:
        shown = _quoted(model)
        raise ActionParseError(f"route of subtask {subtask_id}: unknown model '{shown}'; models: {view.workers}")
    if primitive not in PRIMITIVES:
        shown = _quoted(primitive)
        raise ActionParseError(f"route of subtask {subtask_id}: unknown skill '{shown}'; skills: {list(PRIMITIVES)}")
    if (model, primitive) not in view.admissible:
        offered = sorted(s for m, s in view.admissible if m == model)
        raise ActionParseError(
            f"route of subtask {subtask_id}: {model} does not offer '{primitive}'; it offers {offered}"
        )
    return Route(subtask=subtask_id, model=model, primitive=primitive, instruction=element.body.strip())


def _quoted(value: str) -> str:
    """``value`` shortened for an error message."""
    return value if len(value) <= QUOTED_CHARS else value[:QUOTED_CHARS] + "…"


def earlier_observations(history: Sequence[Turn]) -> dict[int, str]:
    """Subtask id → its observation, for the subtasks of earlier rounds."""
    return {
        int(result.call.id.removeprefix(SUBTASK_CALL_PREFIX)): result.observation or result.reason or ""
        for turn in history
        for result in turn.results
        if result.call.id.startswith(SUBTASK_CALL_PREFIX)
    }


def node_inputs(parents: dict[int, str]) -> str:
    """What a node works on besides its instruction: its parents' results, as ``<obs>`` blocks."""
    return "\n".join(
        f'<obs subtask="{parent}">\n{escape_protocol_tags(text)}\n</obs>' for parent, text in parents.items()
    )


async def run_plan(plan: Plan, dispatch: Dispatcher, earlier: dict[int, str]) -> list[ToolResult]:
    """Run every node of ``plan`` as soon as its parents finish, each as its routed (worker, primitive) pair (the
    pool's primitive tool, given the route's instruction and the parents' results);
    ``earlier`` holds observations of subtasks from previous rounds. Results come back in plan order."""
    nodes: dict[int, asyncio.Task[ToolResult]] = {}

    async def run_node(subtask: Subtask) -> ToolResult:
        parents: dict[int, str] = {}
        for parent in subtask.depends_on:
            if parent in nodes:
                result = await nodes[parent]
                parents[parent] = result.observation or result.reason or ""
            else:
                parents[parent] = earlier[parent]
        route = plan.routes[subtask.id]
        instruction = route.instruction or subtask.description
        call_id = f"{SUBTASK_CALL_PREFIX}{subtask.id}"
        call = primitive_call(route.model, route.primitive, instruction, node_inputs(parents), call_id)
        (result,) = await dispatch.run([call], "primitives")
        return result

    for subtask in plan.subtasks:  # emission order is topological: parents are created first
        nodes[subtask.id] = asyncio.create_task(run_node(subtask))
    return list(await asyncio.gather(*(nodes[subtask.id] for subtask in plan.subtasks)))


class DagConfig(PolicyConfig):
    """Uno-Orchestra's selective delegation and its setting."""

    name: Literal["dag"] = "dag"
    """Answer at once, or plan subtasks routed to (worker, primitive) pairs."""
    lazy: bool = True
    """The orchestrator may answer at once (Uno's lazy mode); false forces a plan first (forced decomposition, the
    ablation)."""
    policy_class = DagPolicy
