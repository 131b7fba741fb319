"""Running an Uno-Orchestra plan: each route becomes a pool call, nodes run as soon as their parents are done,
and a dependent node receives its parents' observations."""

import asyncio
from collections.abc import Awaitable, Callable

from podium.core.calls import ToolCall, ToolResult
from podium.policies.base import Plan, Route, Subtask
from podium.pool.registry import ToolRegistry

SKILL_ROLES: dict[str, str] = {
    "direct_answer": "standard_reasoner",
    "reason": "standard_reasoner",
    "read_document": "standard_reasoner",
    "read_code": "standard_reasoner",
    "extract_field": "standard_reasoner",
    "parse_structured": "standard_reasoner",
    "web_search": "knowledge_searcher",
    "database_query": "knowledge_searcher",
    "fact_check": "knowledge_searcher",
    "execute_python": "code_reasoner",
    "execute_shell": "code_reasoner",
    "call_api": "code_reasoner",
    "symbolic_math": "code_reasoner",
}
"""The agent role that performs each primitive with the routed worker as its model."""

Dispatch = Callable[[ToolCall], Awaitable[ToolResult]]


def route_call(route: Route, task: str, registry: ToolRegistry) -> ToolCall:
    """The pool call that performs ``route``: the primitive's role run by the routed worker, or, in a pool
    without that role, the worker itself as a model tool told which skill to apply."""
    call_id = f"subtask-{route.subtask}"
    role = SKILL_ROLES[route.skill]
    if role not in registry and route.model in registry:
        return ToolCall(name=route.model, arguments={"prompt": f"Skill: {route.skill}\n\n{task}"}, id=call_id)
    return ToolCall(name=role, arguments={"subtask": task, "model": route.model}, id=call_id)


def node_task(subtask: Subtask, route: Route, parents: dict[int, str]) -> str:
    """What the worker is asked: the route's instruction (or the subtask) and its parents' results."""
    task = route.instruction or subtask.description
    if not parents:
        return task
    evidence = "\n".join(f'<obs subtask="{parent}">\n{text}\n</obs>' for parent, text in parents.items())
    return f"{task}\n\nResults of the subtasks this one depends on:\n{evidence}"


async def run_plan(plan: Plan, registry: ToolRegistry, dispatch: Dispatch, earlier: dict[int, str]) -> list[ToolResult]:
    """Run every node of ``plan`` as soon as its parents finish; ``earlier`` holds observations of subtasks
    from previous rounds. Results come back in plan order."""
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
        return await dispatch(route_call(route, node_task(subtask, route, parents), registry))

    for subtask in plan.subtasks:  # emission order is topological: parents are created first
        nodes[subtask.id] = asyncio.create_task(run_node(subtask))
    return list(await asyncio.gather(*(nodes[subtask.id] for subtask in plan.subtasks)))
