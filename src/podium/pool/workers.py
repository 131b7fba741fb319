"""Workers: building each model's backend, and exposing a model as a tool."""

from podium.backends.base import BackendError, ChatBackend
from podium.backends.http import HttpBackend, HttpBackendConfig
from podium.backends.local import LocalBackend, LocalBackendConfig
from podium.backends.scripted import ScriptedBackend
from podium.core.messages import Message
from podium.pool.config import WorkerConfig
from podium.pool.pricing import ModelPrice, PriceCatalog
from podium.pool.tool import CostBound, Tool, ToolOutput, estimate_tokens


def worker_price(worker: WorkerConfig, prices: PriceCatalog) -> ModelPrice:
    """The worker's own price if given, else the catalog's (an unknown model is an error, never free)."""
    return worker.price if worker.price is not None else prices.model_price(worker.model, worker.provider)


def build_backend(worker: WorkerConfig, prices: PriceCatalog) -> ChatBackend:
    """The backend a worker's config describes."""
    price = worker_price(worker, prices)
    if worker.backend == "http":
        assert worker.base_url is not None  # checked by WorkerConfig
        config = HttpBackendConfig(
            model=worker.model,
            base_url=worker.base_url,
            api_key_env=worker.api_key_env,
            timeout_s=worker.timeout_s,
            max_retries=worker.max_retries,
            max_concurrent=worker.max_concurrent,
            structured_outputs=worker.structured_outputs,
        )
        return HttpBackend(config, price=price)
    if worker.backend == "local":
        return LocalBackend(LocalBackendConfig(model=worker.model, path=worker.path), price=price)
    return ScriptedBackend(worker.replies, model=worker.model, repeat_last=True, price=price)


async def ask(backend: ChatBackend, messages: list[Message], *, max_tokens: int, **options: object) -> ToolOutput:
    """One generation as a tool output (failures become EXEC_ERR / TIMEOUT with the backend's reason)."""
    try:
        generation = await backend.generate(messages, max_tokens=max_tokens, **options)  # type: ignore[arg-type]
    except BackendError as error:
        return ToolOutput(None, error.status, str(error), worker=backend.model)
    return ToolOutput(
        generation.text,
        input_tokens=generation.input_tokens,
        output_tokens=generation.output_tokens,
        usd=generation.usd,
        worker=generation.model,
    )


def model_tool(label: str, worker: WorkerConfig, backend: ChatBackend, price: ModelPrice) -> Tool:
    """A worker as a tool named ``label``: it answers the prompt it is given."""

    async def answer(prompt: str) -> ToolOutput:
        return await ask(backend, [Message(role="user", content=prompt)], max_tokens=worker.max_tokens)

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
        timeout_s=worker.timeout_s * (worker.max_retries + 1),
        cost_bound=cost_bound,
    )


def generation_bound(price: ModelPrice, prompt: str, max_tokens: int) -> CostBound:
    """The most one generation can cost: the estimated prompt plus a full completion budget."""
    prompt_tokens = estimate_tokens(prompt)
    return CostBound(usd=price.cost(prompt_tokens, max_tokens), tokens=prompt_tokens + max_tokens)
