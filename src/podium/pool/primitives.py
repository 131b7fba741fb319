"""Uno-Orchestra's primitives (seed 003, Table 6): what a worker is asked to do with a subtask, and how the
pool performs a routed (worker, primitive) pair. The vocabulary is defined here once; pool configs, the DAG
grammar and its validator all use it."""

from typing import Literal, get_args

from podium.core.calls import ToolCall
from podium.pool.registry import ToolRegistry

Primitive = Literal[
    "direct_answer",
    "reason",
    "web_search",
    "database_query",
    "fact_check",
    "read_document",
    "read_code",
    "extract_field",
    "parse_structured",
    "execute_python",
    "execute_shell",
    "call_api",
    "symbolic_math",
]
PRIMITIVES: tuple[str, ...] = get_args(Primitive)
"""Every primitive, in the order of Uno's Table 6."""

PRIMITIVE_ROLES: dict[str, str] = {
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


def primitive_call(worker: str, primitive: str, task: str, registry: ToolRegistry, call_id: str) -> ToolCall:
    """The pool call that performs ``primitive`` on ``task`` with ``worker`` (a shown label): the primitive's
    role run by that worker, or, in a pool without that role, the worker itself as a model tool told which
    skill to apply."""
    role = PRIMITIVE_ROLES[primitive]
    if role not in registry and worker in registry:
        return ToolCall(name=worker, arguments={"prompt": f"Skill: {primitive}\n\n{task}"}, id=call_id)
    return ToolCall(name=role, arguments={"subtask": task, "model": worker}, id=call_id)
