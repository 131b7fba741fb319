"""Uno-Orchestra's primitives (seed 003, Table 6): what a worker is asked to do with a subtask. The vocabulary is
defined here once; pool configs, the DAG grammar and its validator all use it. Each primitive is performed by its
own tool (:mod:`podium.pool.primitives.tools`), which turns the route's instruction into the worker's task with
the primitive's prompt template (``podium/pool/prompts/primitives/*.md``) and does what the name says."""

from typing import Literal, get_args

from podium.core.calls import ToolCall

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


def primitive_call(worker: str, primitive: str, instruction: str, inputs: str, call_id: str) -> ToolCall:
    """The call that performs ``primitive`` with ``worker`` (a shown label): the route's ``instruction`` and the
    ``inputs`` it works on (the results of the subtasks it depends on; may be empty)."""
    arguments = {"model": worker, "instruction": instruction}
    if inputs:
        arguments["inputs"] = inputs
    return ToolCall(name=primitive, arguments=arguments, id=call_id)
