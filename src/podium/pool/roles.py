"""Agent roles as tools (ParaManager Table 7): each takes a ``subtask`` (default: the original problem) and
a ``model`` (default: the pool's role worker) and calls that model with its own system prompt."""

import json
from collections.abc import Awaitable, Callable
from typing import Any

from podium.backends.base import ChatBackend
from podium.backends.grammar import fit_schema
from podium.core.answers import extract_answer, majority
from podium.core.calls import Status, ToolCall
from podium.core.messages import Message
from podium.costs.bounds import CostBound, generation_bound
from podium.pool.context import current_episode
from podium.pool.kit import PoolKit, Spent
from podium.pool.tool import Tool, ToolOutput
from podium.pool.workers import ask

REASONER_PROMPT = (
    "You are a careful problem solver. Think the problem through step by step, checking each step, using "
    "reasoning only. End with the final answer in \\boxed{}."
)
REVIEWER_PROMPT = (
    "You are a critical reviewer. Read the work so far and attack it: find logical flaws, unverified "
    "assumptions, calculation errors and misused tool calls. List concrete problems and how to fix them; "
    "if the work is sound, say so briefly and state the answer it supports."
)
QUERY_PROMPT = (
    "You write search queries. Given a question, write one to three short, specific search queries whose "
    "results would answer it."
)
CODE_PROMPT = (
    "You solve problems by writing Python. Write one complete Python 3 script that computes the answer and "
    "prints it. Use only the standard library, numpy or sympy; no network, no input()."
)
MAX_QUERIES = 3
"""Most search queries knowledge_searcher writes and runs."""
QUERY_SCHEMA = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "items": {"type": "string", "maxLength": 200},
            "minItems": 1,
            "maxItems": MAX_QUERIES,
        }
    },
    "required": ["queries"],
    "additionalProperties": False,
}
CODE_SCHEMA = {
    "type": "object",
    "properties": {"code": {"type": "string", "maxLength": 4000}},
    "required": ["code"],
    "additionalProperties": False,
}


def role_tools(kit: PoolKit, names: list[str]) -> list[Tool]:
    """The role tools called ``names``."""
    return [_ROLES[name](kit) for name in names]


def _bound(
    kit: PoolKit,
    arguments: dict[str, Any],
    prompt: str,
    generations: int = 1,
    helper: str | None = None,
    calls: int = 0,
) -> CostBound:
    """The most a role call can cost: ``generations`` full generations on the chosen worker with this prompt,
    plus ``calls`` calls of the ``helper`` tool."""
    label = arguments.get("model") or kit.default_label
    generation = generation_bound(kit.backends[label].price, prompt, kit.workers[label].max_tokens) * generations
    return generation + CostBound(usd=calls * kit.tool_bound(helper))


def _role_tool(
    kit: PoolKit,
    name: str,
    description: str,
    task_help: str,
    run: Callable[..., Awaitable[ToolOutput]],
    prompt: Callable[[dict[str, Any]], str],
    *,
    generations: int = 1,
    helper: str | None = None,
    calls: int = 0,
) -> Tool:
    """A role as the orchestrator calls it (a (sub)task and a worker of its choice), under the roles' time limit and
    bounded by :func:`_bound` on the ``prompt`` its arguments make."""
    return Tool.from_schema(
        name,
        description,
        _schema(kit, task_help),
        run,
        timeout_s=kit.role_timeout_s,
        cost_bound=lambda arguments: _bound(kit, arguments, prompt(arguments), generations, helper, calls),
    )


def _schema(kit: PoolKit, subtask_help: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "subtask": {"type": "string", "description": subtask_help},
            "model": {
                "type": "string",
                "enum": sorted(kit.backends),
                "description": f"Which worker does it (default {kit.default_label}).",
            },
        },
        "additionalProperties": False,
    }


def _question() -> str:
    episode = current_episode.get()
    return episode.question if episode else ""


def _history() -> str:
    episode = current_episode.get()
    return episode.history if episode else ""


def _prompt_task(arguments: dict[str, Any]) -> str:
    return str(arguments.get("subtask") or _question())


def _task(subtask: str | None) -> str:
    task = subtask or _question()
    if not task:
        raise ValueError("no subtask given and no episode question to default to")
    return task


def _reasoning_messages(task: str) -> list[Message]:
    return [
        Message(role="system", content=REASONER_PROMPT),
        Message(role="user", content=f"<user_query>\n{task}\n</user_query>"),
    ]


def _backend(kit: PoolKit, model: str | None) -> tuple[str, ChatBackend]:
    label = model or kit.default_label
    return label, kit.backends[label]


def _standard_reasoner(kit: PoolKit) -> Tool:
    async def run(subtask: str | None = None, model: str | None = None) -> ToolOutput:
        label, backend = _backend(kit, model)
        messages = _reasoning_messages(_task(subtask))
        return await ask(backend, messages, max_tokens=kit.workers[label].max_tokens)

    return _role_tool(
        kit,
        "standard_reasoner",
        "Answers a (sub)problem by step-by-step reasoning only, final answer in \\boxed{}.",
        "The problem to reason about; default: the original problem.",
        run,
        lambda arguments: REASONER_PROMPT + _prompt_task(arguments),
    )


def _critical_reviewer(kit: PoolKit) -> Tool:
    async def run(subtask: str | None = None, model: str | None = None) -> ToolOutput:
        label, backend = _backend(kit, model)
        history = _history()
        focus = f"\n<focus>\n{subtask}\n</focus>" if subtask else ""
        user = (
            f"<conversation_history>\n{history}\n</conversation_history>\n"
            f"<user_query>\n{_question() or subtask}\n</user_query>{focus}"
        )
        messages = [Message(role="system", content=REVIEWER_PROMPT), Message(role="user", content=user)]
        return await ask(backend, messages, max_tokens=kit.workers[label].max_tokens)

    return _role_tool(
        kit,
        "critical_reviewer",
        "Reviews the work so far: finds logical flaws, unverified assumptions, calculation errors and bad tool "
        "calls. Best with a different model than the one that did the work.",
        "What to scrutinise in particular; default: the whole history.",
        run,
        lambda arguments: REVIEWER_PROMPT + _history() + _prompt_task(arguments) * 2,
    )


def _knowledge_searcher(kit: PoolKit) -> Tool:
    async def run(subtask: str | None = None, model: str | None = None) -> ToolOutput:
        label, backend = _backend(kit, model)
        task = _task(subtask)
        spent = Spent()
        written = await ask(
            backend,
            [Message(role="system", content=QUERY_PROMPT), Message(role="user", content=task)],
            max_tokens=min(256, kit.workers[label].max_tokens),
            json_schema=fit_schema(QUERY_SCHEMA, min(256, kit.workers[label].max_tokens)),
        )
        spent.add(written)
        queries = _queries(written, task)
        assert kit.search_tool is not None  # PoolConfig requires a search tool for this role
        results = [await kit.run_tool(ToolCall(name=kit.search_tool, arguments={"query": q})) for q in queries]
        for result in results:
            spent.add(result)
        evidence = "\n\n".join(f"[query] {q}\n{r.observation}" for q, r in zip(queries, results, strict=True))
        failed = [r for r in results if not r.ok]
        status = Status.EXEC_ERR if len(failed) == len(results) else Status.OK
        return spent.output(
            {"queries": queries, "evidence": evidence},
            backend.model,
            status,
            failed[0].reason if status is not Status.OK else None,
            observation=evidence,
        )

    return _role_tool(
        kit,
        "knowledge_searcher",
        "Writes search queries for a (sub)problem, runs them with the pool's search tool and returns the evidence.",
        "What to find out; default: the original problem.",
        run,
        lambda arguments: QUERY_PROMPT + _prompt_task(arguments),
        helper=kit.search_tool,
        calls=MAX_QUERIES,
    )


def _queries(written: ToolOutput, fallback: str) -> list[str]:
    if written.status is Status.OK:
        try:
            queries = [q.strip() for q in json.loads(written.value)["queries"] if q.strip()]
        except (json.JSONDecodeError, KeyError, TypeError):
            queries = []
        if queries:
            return queries[:MAX_QUERIES]
    return [fallback[:200]]


def _code_reasoner(kit: PoolKit) -> Tool:
    async def run(subtask: str | None = None, model: str | None = None) -> ToolOutput:
        label, backend = _backend(kit, model)
        spent = Spent()
        written = await ask(
            backend,
            [Message(role="system", content=CODE_PROMPT), Message(role="user", content=_task(subtask))],
            max_tokens=kit.workers[label].max_tokens,
            json_schema=fit_schema(CODE_SCHEMA, kit.workers[label].max_tokens),
        )
        spent.add(written)
        if written.status is not Status.OK:
            return spent.output(None, backend.model, written.status, written.reason)
        code = _code(written.value)
        result = await kit.run_tool(ToolCall(name="python", arguments={"code": code}))
        spent.add(result)
        observation = f"[code]\n{code}\n[output]\n{result.observation}"
        value = {"code": code, "output": result.value}
        return spent.output(value, backend.model, result.status, result.reason, observation=observation)

    return _role_tool(
        kit,
        "code_reasoner",
        "Writes a complete Python script for a (sub)problem, runs it in the sandbox and returns code and output.",
        "What to compute; default: the original problem.",
        run,
        lambda arguments: CODE_PROMPT + _prompt_task(arguments),
        helper="python",
        calls=1,
    )


def _code(reply: str) -> str:
    try:
        return str(json.loads(reply)["code"])
    except (json.JSONDecodeError, KeyError, TypeError):
        # A backend without constrained decoding may answer with a fenced block instead of JSON.
        if "```" in reply:
            block = reply.split("```")[1]
            return block.removeprefix("python").lstrip("\n")
        return reply


def _ensemble_solver(kit: PoolKit) -> Tool:
    async def run(subtask: str | None = None, model: str | None = None) -> ToolOutput:
        label, backend = _backend(kit, model)
        messages = _reasoning_messages(_task(subtask))
        spent = Spent()
        answers = []
        for _ in range(kit.config.ensemble_samples):
            sample = await ask(backend, messages, max_tokens=kit.workers[label].max_tokens, temperature=0.8)
            spent.add(sample)
            answer = extract_answer(sample.value) if sample.status is Status.OK else None
            if answer is not None:
                answers.append(answer)
        if not answers:
            return spent.output(None, backend.model, Status.EXEC_ERR, "every sample failed")
        answer, votes = majority(answers)
        value = {"answer": answer, "votes": votes, "samples": kit.config.ensemble_samples}
        return spent.output(value, backend.model, observation=f"majority answer: {answer} (votes: {votes})")

    return _role_tool(
        kit,
        "ensemble_solver",
        f"Samples {kit.config.ensemble_samples} independent solutions to the problem and returns the majority answer.",
        "The problem to solve; default: the original problem.",
        run,
        lambda arguments: REASONER_PROMPT + _prompt_task(arguments),
        generations=kit.config.ensemble_samples,
    )


_ROLES: dict[str, Callable[[PoolKit], Tool]] = {
    "standard_reasoner": _standard_reasoner,
    "critical_reviewer": _critical_reviewer,
    "knowledge_searcher": _knowledge_searcher,
    "code_reasoner": _code_reasoner,
    "ensemble_solver": _ensemble_solver,
}
