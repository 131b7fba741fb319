"""ParaManager's frozen summarizer, a pool role: ``final_answer`` hands the episode's history to a worker that
writes the answer. The parallel policy calls it to end an episode, and the runtime calls it when turns or parse
errors run out before an answer (``summarize_on_stop``). It is not among the tools offered to the orchestrator:
the parallel policy lists it itself (:data:`FINAL_ANSWER`)."""

import contextlib
from typing import Any

from podium.backends.base import ChatBackend
from podium.backends.grammar import BudgetTooSmall, Grammar, Limits, fit, fit_schema, free_text, literal, sequence
from podium.core.calls import ToolSpec
from podium.core.messages import Message
from podium.pool.context import current_episode
from podium.pool.tool import Tool, ToolOutput
from podium.pool.workers import ask

FINAL_ANSWER = ToolSpec(
    name="final_answer",
    description="End the episode: a summarizer model reads the whole history and writes the final answer. "
    "Call it alone, once the evidence suffices.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
)
"""The summarizer as the orchestrator calls it."""
SUMMARIZER_PROMPT = (
    "You write the final answer to a user's question from the work of a team of agents and tools. Read the "
    "history, weigh the evidence (prefer results that were verified or agreed on; ignore failed calls), and "
    "answer the question. Be brief, and end with the final answer in \\boxed{}."
)
JSON_SUMMARIZER_PROMPT = SUMMARIZER_PROMPT.replace(
    "Be brief, and end with the final answer in \\boxed{}.",
    "Write the answer as the JSON the question asks for, alone.",
)
"""The prompt when the answer must be JSON of a schema (the reply is decoded under it)."""


def _request() -> str:
    episode = current_episode.get()
    question, history = (episode.question, episode.history) if episode else ("", "")
    return (
        f"<user_query>\n{question}\n</user_query>\n<conversation_history>\n{history}\n</conversation_history>\n"
        "The manager has ended the episode: write the final answer now."
    )


def _messages(prompt: str = SUMMARIZER_PROMPT) -> list[Message]:
    return [Message(role="system", content=prompt), Message(role="user", content=_request())]


def summary_grammar(limits: Limits) -> Grammar:
    """Brief reasoning, then the answer in ``\\boxed{}``: what the prompt asks for, so that a small model that
    would echo the prompt or open a tag still ends with an answer."""
    reasoning = free_text(r"[^<\\{}]", 0, limits.thinking)
    return sequence(reasoning, literal("\\boxed{"), free_text(r"[^{}<\n]", 1, limits.answer), literal("}"))


def summarizer_tool(
    backend: ChatBackend, max_tokens: int, timeout_s: float, answer_schema: dict[str, Any] | None = None
) -> Tool:
    """The ``final_answer`` tool, backed by ``backend``; decoded under :func:`summary_grammar` where the backend
    takes regular expressions, or, when the answer must be JSON of ``answer_schema``, under that schema (as the
    backend constrains JSON: a local model's grammar, a server's structured output)."""
    options: dict[str, object] = {}
    prompt = SUMMARIZER_PROMPT
    # A budget too small for the grammar leaves the reply free rather than impossible.
    with contextlib.suppress(BudgetTooSmall):
        if answer_schema is not None:
            options["json_schema"] = fit_schema(answer_schema, max_tokens)
            prompt = JSON_SUMMARIZER_PROMPT
        elif backend.supports_regex:
            options["regex"] = fit(summary_grammar, max_tokens).regex

    async def run() -> ToolOutput:
        return await ask(backend, _messages(prompt), max_tokens=max_tokens, **options)

    return Tool.from_schema(
        FINAL_ANSWER.name,
        FINAL_ANSWER.description,
        FINAL_ANSWER.parameters,
        run,
        timeout_s=timeout_s,
        cost_bound=lambda _arguments: backend.generation_bound(_messages(), max_tokens),
    )
