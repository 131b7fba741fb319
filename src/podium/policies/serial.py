"""ToolOrchestra's serial action space: reason, make one tool call, read the result, repeat, then answer."""

from collections.abc import Sequence
from typing import Literal

from podium.backends.grammar import Grammar, Limits, choice, free_text, json_value, literal, optional, sequence
from podium.core.answers import last_boxed
from podium.core.calls import ToolResult
from podium.policies.base import Action, ActionParseError, Answer, Calls, Policy, PoolView
from podium.policies.config import PolicyConfig
from podium.policies.hermes import (
    call_grammar,
    read_tool_calls,
    render_results,
    render_tools,
    strip_thinking,
    tagged_blocks,
)

SERIAL_PROMPT = """You are an orchestrator. Solve the user's task by calling tools from the pool below, one call \
per turn, and then answer.

Each turn, optionally think inside <think>...</think>, then do exactly one of:
- call one tool: <tool_call>{{"name": "TOOL", "arguments": {{...}}}}</tool_call>
- give the final answer, with no tool call: <answer>FINAL ANSWER</answer>

Results come back in <tool_response> blocks with a status: OK; PARSE_ERR (the call was malformed and did not \
run: fix it); EXEC_ERR (it ran and failed); TIMEOUT. Prefer cheap tools when they suffice.

The pool:
{table}

Tool signatures:
{tools}"""


class SerialPolicy(Policy):
    """One ``<tool_call>`` per turn in the Hermes / Qwen3 format; a turn without a call is the final answer."""

    name = "serial"
    max_turns = 50
    calls_tools = True
    converses = True
    max_calls_per_round = 1

    def system_prompt(self, view: PoolView) -> str:
        return SERIAL_PROMPT.format(table=view.table, tools=render_tools(view.tools))

    def parse(self, text: str, view: PoolView, previous: Sequence[Action]) -> Action:
        calls, invalid = read_tool_calls(text)
        if calls or invalid:
            return Calls(calls, invalid)
        return Answer(final_answer(text))

    def observation(
        self, results: Sequence[ToolResult], remaining: str, view: PoolView, previous: Sequence[Action]
    ) -> str:
        return render_results(results)

    def rejection(self, reason: str, remaining: str) -> str:
        return f'<tool_response status="PARSE_ERR">\n{reason}\n</tool_response>'

    def build_grammar(self, view: PoolView, limits: Limits, previous: Sequence[Action] = ()) -> Grammar | None:
        answer = (
            free_text("[^<]", 1, limits.answer)
            if view.answer_schema is None
            else json_value(view.answer_schema, limits)
        )
        options = [sequence(literal("<answer>"), answer, literal("</answer>"))] if view.may_answer else []
        if view.tools:
            options.insert(0, call_grammar(view.tools, limits))
        thinking = sequence(literal("<think>"), free_text("[^<]", 0, limits.thinking), literal("</think>\n"))
        return sequence(optional(thinking), choice(*options))


def final_answer(text: str) -> str:
    """The answer in a turn without a call: ``<answer>`` content, else the last ``\\boxed{}``, else the text
    outside ``<think>`` blocks."""
    tagged, _, _ = tagged_blocks(text, "<answer>", "</answer>")
    if tagged:
        answer = tagged[-1].strip()
    else:
        visible = strip_thinking(text)
        answer = last_boxed(visible) or visible.strip()
    if not answer:
        raise ActionParseError("the output has neither a <tool_call> nor an answer: call a tool or write <answer>")
    return answer


class SerialConfig(PolicyConfig):
    """ToolOrchestra's serial action space (no settings of its own)."""

    name: Literal["serial"] = "serial"
    """One tool call a turn, then an answer."""
    policy_class = SerialPolicy
