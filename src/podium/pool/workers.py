"""Workers: one generation as a tool output, and a model exposed as a tool."""

from podium.backends.base import BackendError, ChatBackend
from podium.core.messages import Message
from podium.costs.bounds import CostBound, generation_bound
from podium.pool.config import WorkerConfig
from podium.pool.tool import Tool, ToolOutput


async def ask(backend: ChatBackend, messages: list[Message], *, max_tokens: int, **options: object) -> ToolOutput:
    """One generation as a tool output (failures become EXEC_ERR / TIMEOUT with the backend's reason)."""
    try:
        generation = await backend.generate(messages, max_tokens=max_tokens, **options)  # type: ignore[arg-type]
    except BackendError as error:
        return ToolOutput(None, error.status, str(error), worker=backend.model)
    cut = generation.text_chars
    return ToolOutput(
        generation.text,
        reason=None if cut is None else f"the reply ({cut} characters) was cut to what max_tokens={max_tokens} allows",
        worker=generation.model,
        usage=generation.token_usage(),
    )


def model_tool(label: str, worker: WorkerConfig, backend: ChatBackend) -> Tool:
    """A worker as a tool named ``label``: it answers the prompt it is given."""

    async def answer(prompt: str) -> ToolOutput:
        return await ask(backend, [Message(role="user", content=prompt)], max_tokens=worker.max_tokens)

    price = backend.price

    def cost_bound(arguments: dict[str, object]) -> CostBound:
        return generation_bound(price, str(arguments.get("prompt", "")), worker.max_tokens)

    description = worker.description or "A language model that answers the prompt it is given."
    description += (
        f" Price: ${price.input_per_mtok:g} per 1M input tokens, ${price.output_per_mtok:g} per 1M output tokens."
    )
    return Tool.from_schema(
        label,
        description,
        {
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "The full request for this model."}},
            "required": ["prompt"],
            "additionalProperties": False,
        },
        answer,
        timeout_s=worker.call_timeout_s,
        cost_bound=cost_bound,
    )
