"""ParaManager's parallel rounds: reason, then up to n_max calls run concurrently; ``final_answer`` hands the
history to the pool's summarizer role (:mod:`podium.pool.summarizer`), which writes the answer."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from podium.backends.grammar import Grammar, Limits, free_text, literal, repeated, sequence
from podium.core.answers import extract_answer
from podium.core.calls import ToolCall, ToolResult
from podium.core.trajectory import Turn
from podium.policies.base import (
    Action,
    ActionParseError,
    Calls,
    Dispatcher,
    Outcome,
    Policy,
    PoolView,
)
from podium.policies.config import PolicyConfig
from podium.policies.hermes import call_grammar, read_tool_calls, render_results, render_tools
from podium.pool.summarizer import FINAL_ANSWER


@dataclass(frozen=True)
class Summarize(Action):
    """ParaManager's ``final_answer`` call: a frozen summarizer model writes the answer from the history."""

    call: ToolCall


PARALLEL_PROMPT = """You are a manager agent. You solve the user's task in rounds by delegating to the agents and \
tools of the pool below; every call returns a value and an explicit status.

Each round, write your reasoning inside <reasoning>...</reasoning>, then 1 to {n_max} calls, which run in \
parallel:
<tool_call>{{"name": "TOOL", "arguments": {{...}}}}</tool_call>
Statuses: OK; PARSE_ERR (malformed call, not run: fix it); EXEC_ERR (it failed: change the arguments or switch \
tools); TIMEOUT. When the evidence suffices, call final_answer alone; a summarizer then writes the answer.

Useful strategies: ask several models and compare (multi-model consensus); check one result with another tool \
(multi-tool consensus); rephrase a subtask (prompt variation); ensemble reasoning; have a different model review \
a solution (heterogeneous review). Spend the budget where it changes the answer.

The pool:
{table}

Tool signatures:
{tools}"""


class ParallelPolicy(Policy):
    """``<reasoning>`` then 1..n_max ``<tool_call>`` blocks per round, at most 12 rounds; ``final_answer`` and
    running out of rounds both end with the summarizer's answer (ParaManager's termination instruction)."""

    name = "parallel"
    max_turns = 12
    calls_tools = True
    reserved_names = (FINAL_ANSWER.name,)
    summarize_on_stop = True

    def __init__(self, max_calls_per_round: int = 4) -> None:
        if max_calls_per_round < 1:
            raise ValueError("max_calls_per_round must be at least 1")
        self.max_calls_per_round = max_calls_per_round

    def system_prompt(self, view: PoolView) -> str:
        tools = render_tools([*view.tools, FINAL_ANSWER])
        return PARALLEL_PROMPT.format(n_max=self.max_calls_per_round, table=view.table, tools=tools)

    def parse(self, text: str, view: PoolView, previous: Sequence[Action]) -> Action:
        calls, invalid = read_tool_calls(text)
        finals = [call for call in calls if call.name == FINAL_ANSWER.name]
        if finals:
            if len(calls) > 1 or invalid:
                raise ActionParseError("final_answer must be the only call of its round")
            return Summarize(finals[0])
        if not calls and not invalid:
            raise ActionParseError(
                f"no <tool_call> block: each round makes 1 to {self.max_calls_per_round} calls, "
                "or calls final_answer alone"
            )
        return Calls(calls, invalid)

    def observation(
        self, results: Sequence[ToolResult], remaining: str, view: PoolView, previous: Sequence[Action]
    ) -> str:
        return f"{render_results(results)}\n{remaining}"

    def rejection(self, reason: str, remaining: str) -> str:
        return f'<tool_response status="PARSE_ERR">\n{reason}\n</tool_response>\n{remaining}'

    def build_grammar(self, view: PoolView, limits: Limits, previous: Sequence[Action] = ()) -> Grammar | None:
        tools = [*view.tools, FINAL_ANSWER] if view.may_answer else view.tools
        call = sequence(call_grammar(tools, limits), literal("\n"))
        reasoning = sequence(literal("<reasoning>"), free_text("[^<]", 0, limits.thinking), literal("</reasoning>\n"))
        return sequence(reasoning, repeated(call, 1, self.max_calls_per_round))

    async def execute(self, action: Action, dispatch: Dispatcher, history: Sequence[Turn], limit: int) -> Outcome:
        if isinstance(action, Summarize):
            (result,) = await dispatch.run([action.call], "summarizer")
            return Outcome([result], extract_answer(str(result.value)) if result.ok else None)
        return await super().execute(action, dispatch, history, limit)


class ParallelConfig(PolicyConfig):
    """ParaManager's rounds of parallel calls (no settings of its own)."""

    name: Literal["parallel"] = "parallel"
    """Rounds of calls, then the summarizer's answer."""
    policy_class = ParallelPolicy
