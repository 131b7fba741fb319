"""A delegation action space small enough for a 135M orchestrator: name the worker that answers, read its
answer, then keep it or escalate.

Each turn the orchestrator writes one word: a worker's label (that worker answers the original question
through the ``standard_reasoner`` role, so the question reaches it verbatim) or, once some worker has
answered, ``accept`` (the episode's answer is the final answer stated in the last worker's reply). The
observation it reads is the tail of the reply (where the final answer is stated), so prompts stay short. The
grammar offers exactly the legal words, so every output parses.
"""

from collections.abc import Sequence

from podium.backends.grammar import Grammar, Limits, choice, literal
from podium.core.answers import VerifierKind, extract_answer
from podium.core.calls import ToolCall, ToolResult
from podium.core.trajectory import Turn
from podium.policies.base import Action, ActionParseError, Answer, Calls, Dispatcher, Outcome, Policy, PoolView

ACCEPT = "accept"
"""The word that keeps the last worker's answer."""
ROLE = "standard_reasoner"
"""The role that forwards the original question to the chosen worker."""
TAIL_CHARS = 120
"""Characters of a worker's reply shown to the orchestrator (its end, where the answer is stated)."""

ROUTE_PROMPT = """Choose who answers the question. Say one worker's name; after reading its answer say \
"accept" to keep it, or another worker's name to ask that one instead. Accurate and cheap is best.
{table}"""


class RoutePolicy(Policy):
    """One word per turn: a worker to answer the question, or ``accept``."""

    name = "route"
    max_turns = 3
    max_calls_per_round = 1

    def __init__(self, answer_kind: VerifierKind | None = None) -> None:
        self.answer_kind = answer_kind
        """How the answer is read from an accepted reply (``math``: the boxed or stated answer, else the last
        number); None: the last ``\\boxed{}``, else the reply's final line."""

    def system_prompt(self, view: PoolView) -> str:
        return ROUTE_PROMPT.format(table=worker_table(view.table, view.workers))

    def parse(self, text: str, view: PoolView, previous: Sequence[Action]) -> Action:
        word = text.strip()
        if word == ACCEPT and any(isinstance(action, Calls) for action in previous):
            return Answer(ACCEPT)
        if word in view.workers:
            return Calls([ToolCall(name=ROLE, arguments={"model": word}, id=f"route_{len(previous)}")])
        choices = [*view.workers, *([ACCEPT] if previous else [])]
        raise ActionParseError(f"write one of: {', '.join(choices)}")

    def observation(self, results: Sequence[ToolResult], remaining: str) -> str:
        lines = []
        for result in results:
            worker = str(result.call.arguments.get("model", "?")) if isinstance(result.call.arguments, dict) else "?"
            body = (result.observation or result.reason or "").strip()
            lines.append(f"{worker} ({result.status.value}): …{body[-TAIL_CHARS:]}")
        return "\n".join(lines)

    def rejection(self, reason: str, remaining: str) -> str:
        return reason

    def build_grammar(self, view: PoolView, limits: Limits, previous: Sequence[Action] = ()) -> Grammar | None:
        words = [*view.workers, *([ACCEPT] if any(isinstance(a, Calls) for a in previous) else [])]
        return choice(*(literal(word) for word in words))

    async def execute(self, action: Action, dispatch: Dispatcher, history: Sequence[Turn], limit: int) -> Outcome:
        if isinstance(action, Answer):
            return Outcome(answer=last_answer(history, self.answer_kind))
        return await super().execute(action, dispatch, history, limit)


def last_answer(history: Sequence[Turn], kind: VerifierKind | None = None) -> str:
    """The final answer stated in the last successful worker reply (empty when none succeeded)."""
    for turn in reversed(history):
        for result in reversed(turn.results):
            if result.ok and result.observation:
                return extract_answer(result.observation, kind) or ""
    return ""


def worker_table(table: str, workers: Sequence[str]) -> str:
    """The pool table's rows for ``workers`` only, without the primitives column (fewer prompt tokens)."""
    rows = []
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells and cells[0] in workers:
            rows.append(f"- {cells[0]}: {cells[2]}, {cells[3]}")
    return "\n".join(rows)
