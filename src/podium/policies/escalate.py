"""Escalation, a delegation action space small enough for a 135M orchestrator: name the worker that answers, read
its reply, then keep it or escalate to another worker (a cascade the orchestrator steers).

Named for the decision the orchestrator makes after each reply (escalate, or accept); "route" already names the DAG
grammar's ``<route>`` and RouteLLM's routers (:mod:`podium.evaluate.routing`).

Each turn the orchestrator writes one word: the label of a worker it has not asked yet (that worker answers the
original question through the ``standard_reasoner`` role, so the question reaches it verbatim) or, once some
worker has answered, ``accept``, which makes the last reply the episode's answer (the caller extracts the answer
its verifier needs from it). The observation is the worker's whole reply and, with a ``verify`` tool, that tool's
report on the reply (``check_arithmetic`` recomputes its arithmetic): what a cheap model's reply shows about its
own errors is the signal for escalating. With ``prices_at_decision`` the observation ends with the price of each
worker not asked yet, next to the decision it bears on. Every output is one of a finite set of words
(:meth:`choices`), so a backend decodes it exactly and tells each word's probability.
"""

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, NonNegativeInt

from podium.backends.base import BackendError
from podium.backends.grammar import Grammar, Limits, choice, literal
from podium.core.calls import ToolCall, ToolResult
from podium.core.trajectory import Turn
from podium.policies.base import Action, ActionParseError, Answer, Calls, Dispatcher, Outcome, Policy, PoolView
from podium.policies.config import PolicyConfig, PolicySetup

ACCEPT = "accept"
"""The word that keeps the last worker's reply."""
ROLE = "standard_reasoner"
"""The role that forwards the original question to the chosen worker."""

Probability = Annotated[float, Field(ge=0.0, le=1.0)]

ESCALATION_PROMPT = """Name a worker to answer. Read its reply, then say accept, or name another worker. \
Be accurate and cheap.
{table}"""


class EscalationPolicy(Policy):
    """One word per turn: a worker not asked yet, or ``accept`` once one has answered."""

    name = "escalate"
    max_turns = 4
    max_calls_per_round = 1

    def __init__(
        self,
        verify: str | None = None,
        reply_chars: int | None = None,
        escalate_above: float | Mapping[str, float] | None = None,
        prices_at_decision: bool = False,
    ) -> None:
        self.verify = verify
        """A pool tool called with each successful reply as its ``text`` argument; its report joins the
        observation (None: the reply alone)."""
        self.reply_chars = reply_chars
        """Characters of a reply shown (its end); None: all of it; 0: its length and the ``verify`` report, or
        without ``verify`` nothing: the orchestrator then decides from the question alone (routing)."""
        self.escalate_above = escalate_above
        """After a reply, escalate exactly where the probability of not accepting exceeds this; as worker → score,
        to the worker with the highest score it exceeds (None: the most probable word decides)."""
        self.prices_at_decision = prices_at_decision
        """After a reply, also name the price of each worker not asked yet, so that the price sits right before
        the decision it bears on and not only in the system prompt (False: the reply and the report alone)."""

    def system_prompt(self, view: PoolView) -> str:
        return ESCALATION_PROMPT.format(table=worker_table(view.table, view.workers))

    def choices(self, view: PoolView, previous: Sequence[Action] = ()) -> list[str]:
        asked = {str(call.arguments.get("model")) for action in previous if isinstance(action, Calls)
                 for call in action.calls if isinstance(call.arguments, dict)}  # fmt: skip
        return [*(worker for worker in view.workers if worker not in asked), *([ACCEPT] if asked else [])]

    def parse(self, text: str, view: PoolView, previous: Sequence[Action]) -> Action:
        word = text.strip()
        allowed = self.choices(view, previous)
        if word not in allowed:
            raise ActionParseError(f"write one of: {', '.join(allowed)}")
        if word == ACCEPT:
            return Answer(ACCEPT)
        return Calls([ToolCall(name=ROLE, arguments={"model": word}, id=f"ask_{len(previous)}")])

    def observation(
        self, results: Sequence[ToolResult], remaining: str, view: PoolView, previous: Sequence[Action]
    ) -> str:
        lines = []
        for result in results:
            if result.call.name != ROLE:
                lines.append(f"{result.call.name}: {(result.observation or result.reason or '').strip()}")
                continue
            worker = str(result.call.arguments.get("model", "?")) if isinstance(result.call.arguments, dict) else "?"
            reply = (result.observation or "").strip()
            if result.ok and self.reply_chars == 0 and self.verify is None:
                lines.append(f"{worker} replied.")
            elif result.ok and self.reply_chars == 0:
                lines.append(f"{worker} replied ({len(reply.split())} words).")
            elif result.ok:
                shown = (
                    reply
                    if self.reply_chars is None or len(reply) <= self.reply_chars
                    else f"…{reply[-self.reply_chars :]}"
                )
                lines.append(f"{worker} replied:\n{shown}")
            else:
                lines.append(f"{worker} failed ({result.status.value}): {(result.reason or '').strip()}")
        unasked = worker_rows(view.table, self.choices(view, previous)) if self.prices_at_decision else {}
        if unasked:
            prices = "; ".join(f"{worker} at {price}" for worker, (_, price) in unasked.items())
            lines.append(f"Not asked yet: {prices}.")
        return "\n".join(lines)

    def decide(self, generated: str, probabilities: Mapping[str, float] | None, previous: Sequence[Action] = ()) -> str:
        """With ``escalate_above``, the decision after a reply is the threshold's: where 1 − P(accept) (the
        escalation score that :mod:`podium.evaluate.routing` thresholds) exceeds it, the worker ranked first among
        those not asked yet, else ``accept``. With one score per worker (the break-even edges of several workers,
        each valued as the last one asked), the decision after the first reply goes to the worker whose score is
        the highest the escalation score exceeds, and every later one, or one whose worker has answered already,
        is ``accept``. Other turns, and without it, keep the generated word."""
        if self.escalate_above is None:
            return generated
        if probabilities is None:
            raise BackendError("escalate_above: the orchestrator's backend gave no choice probabilities to threshold")
        if ACCEPT not in probabilities or len(probabilities) == 1:
            return generated
        score = 1.0 - probabilities[ACCEPT] / sum(probabilities.values())
        if isinstance(self.escalate_above, Mapping):
            passed = [(above, worker) for worker, above in self.escalate_above.items() if score > above]
            chosen = max(passed)[1] if passed and sum(isinstance(action, Calls) for action in previous) == 1 else ACCEPT
            return chosen if chosen in probabilities else ACCEPT
        if score <= self.escalate_above:
            return ACCEPT
        return max((word for word in probabilities if word != ACCEPT), key=probabilities.__getitem__)

    def rejection(self, reason: str, remaining: str) -> str:
        return reason

    def build_grammar(self, view: PoolView, limits: Limits, previous: Sequence[Action] = ()) -> Grammar | None:
        return choice(*(literal(word) for word in self.choices(view, previous)))

    async def execute(self, action: Action, dispatch: Dispatcher, history: Sequence[Turn], limit: int) -> Outcome:
        if isinstance(action, Answer):
            return Outcome(answer=last_reply(history))
        outcome = await super().execute(action, dispatch, history, limit)
        if self.verify is None:
            return outcome
        replies = [result for result in outcome.results if result.ok and result.call.name == ROLE]
        checks = [ToolCall(name=self.verify, arguments={"text": str(reply.observation or "")}, id=f"verify_{n}")
                  for n, reply in enumerate(replies)]  # fmt: skip
        return Outcome([*outcome.results, *await dispatch.run(checks)])


def observed_reply(observation: str, worker: str) -> str | None:
    """The reply of ``worker`` that an observation of this policy shows in full (None: the worker failed, or the
    observation shows less than the whole reply)."""
    head = f"{worker} replied:\n"
    return observation[len(head) :] if observation.startswith(head) else None


def last_reply(history: Sequence[Turn]) -> str:
    """The last successful worker reply (empty when none succeeded): the accepted answer."""
    for turn in reversed(history):
        for result in reversed(turn.results):
            if result.ok and result.call.name == ROLE and result.observation:
                return result.observation
    return ""


def worker_table(table: str, workers: Sequence[str]) -> str:
    """The pool table's rows for ``workers`` only, without the primitives column (fewer prompt tokens)."""
    return "\n".join(f"- {worker}: {about}, {price}" for worker, (about, price) in worker_rows(table, workers).items())


def worker_rows(table: str, workers: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Each of ``workers``' description and price, read from its row of the pool table, in the table's order."""
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells and cells[0] in workers:
            rows[cells[0]] = (cells[2], cells[3])
    return rows


class EscalateConfig(PolicyConfig):
    """The escalation policy and its settings."""

    name: Literal["escalate"] = "escalate"
    """One word a turn: a worker to answer, then accept its reply or escalate to another."""
    verify: str | None = None
    """A tool of the pool (e.g. ``check_arithmetic``) called on each worker reply, whose report the orchestrator
    reads with the reply before it accepts or escalates."""
    reply_chars: NonNegativeInt | None = None
    """Characters of each worker reply shown to the orchestrator (its end); 0 shows its length and the ``verify``
    tool's report on it, or without ``verify`` nothing (the orchestrator routes from the question alone); default:
    the whole reply."""
    escalate_above: Probability | dict[str, Probability] | None = None
    """At temperature 0: after a worker's reply, escalate (to the worker the orchestrator ranks first) exactly
    where its probability of not accepting exceeds this, and accept elsewhere, instead of taking its most probable
    word; the operating point a price sheet picks (``podium routing threshold`` computes it). As a mapping worker →
    score, with several workers to escalate to: after the first reply (which ``podium routing threshold`` prices as
    the weak model's), the worker with the highest score that its probability of not accepting exceeds answers
    next, and its reply is accepted (accept at once where it exceeds none, or where that worker has answered
    already). Needs an orchestrator whose backend scores its choices (a local model). Default: the most probable
    word."""
    prices_at_decision: bool = False
    """After each worker reply, the observation also names the price of every worker not asked yet (``Not asked
    yet: gpt4 at $10/$30 per 1M in/out tokens.``), so the price sits right before the decision it bears on rather
    than only in the system prompt, hundreds of tokens earlier. Off by default: it changes the prompt, and an
    orchestrator trained without it reads another one."""
    policy_class = EscalationPolicy

    def sampling_problem(self, temperature: float) -> str | None:
        if self.escalate_above is not None and temperature > 0:
            return (
                f"escalate_above decides by a threshold, which leaves nothing to sample: it needs temperature 0, "
                f"not {temperature}"
            )
        return None

    def check(self, setup: PolicySetup) -> None:
        if self.verify is not None and self.verify not in setup.tools:
            raise ValueError(f"verify: '{self.verify}' is not a tool of the pool ({list(setup.tools)})")
        if self.escalate_above is not None and not setup.scores_choices:
            raise ValueError(
                f"escalate_above: thresholds the probabilities of the orchestrator's choices, which its backend "
                f"'{setup.orchestrator}' does not give with constrained: '{setup.constrained}' (a local model gives "
                "them, constrained 'auto' or 'always')"
            )
        if isinstance(self.escalate_above, dict):
            check_escalation_targets(list(self.escalate_above), list(setup.workers), setup.blind)

    def recorded(self) -> dict[str, Any]:
        return {"escalate_above": self.escalate_above} if self.escalate_above is not None else {}

    def unexplorable(self) -> str | None:
        if self.escalate_above is not None:
            return "escalate_above: exploring plays every path, and a threshold would keep one"
        return None


def check_escalation_targets(targets: list[str], workers: list[str], blind: bool) -> None:
    """``escalate_above`` given per worker names workers of the pool, as the orchestrator sees them."""
    unknown = [target for target in targets if target not in workers]
    if unknown:
        raise ValueError(f"escalate_above: {unknown} are no workers of the pool (workers: {workers})")
    if blind:
        raise ValueError(
            "escalate_above: given per worker, it names workers that a blind pool hides behind new labels every "
            "episode; give one threshold, or turn blind labels off"
        )
