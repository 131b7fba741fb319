"""Model commands: ask one worker, describe a worker from evidence, serve a worker over HTTP."""

import asyncio
from typing import Annotated

import typer
from rich.text import Text

from podium.backends.base import BackendError
from podium.cli.common import DESCRIBE, ConfigFileOption, PoolOption, console, describing, errors, fail, open_pool
from podium.cli.fields import Flags, config_options
from podium.cli.output import shown
from podium.core.messages import Message
from podium.core.printable import printable
from podium.errors import ConfigError
from podium.evaluate.describe import DescribeConfig, describe_worker, record_description


def ask_command(
    question: Annotated[str, typer.Argument(help="The question.")],
    model: Annotated[str | None, typer.Option("--model", help="Worker to ask; default: the pool's first.")] = None,
    pool: PoolOption = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Completion budget, in tokens.")] = 256,
    temperature: Annotated[float, typer.Option("--temperature", help="0 is greedy.")] = 0.0,
) -> None:
    """One model answers, no tools (the no-tools baseline); prints the answer and its cost."""
    built = open_pool(pool)
    name = model or built.config.workers[0].name
    if name not in built.backends:
        raise fail(ConfigError(f"--model: no worker '{name}' (workers: {', '.join(built.backends)})"))
    try:
        generation = asyncio.run(
            built.backends[name].generate(
                [Message(role="user", content=question)], max_tokens=max_tokens, temperature=temperature
            )
        )
    except BackendError as error:
        raise fail(error, code=1) from error
    console.print(printable(generation.text.strip()), markup=False, highlight=False, soft_wrap=True)
    errors.print(
        f"model    {shown(generation.model)}\ntokens   {generation.input_tokens} in / {generation.output_tokens} out\n"
        f"cost     ${generation.usd:.7f}\nlatency  {generation.latency_s:.2f} s",
        highlight=False,
    )


@config_options(DescribeConfig, DESCRIBE)
def describe_model_command(
    worker: Annotated[str, typer.Argument(help="The worker to describe.")],
    config: ConfigFileOption = None,
    *,
    flags: Flags,
) -> None:
    """Run a worker on sampled tasks and have a describer model write its description from the evidence; with a
    descriptions file (--out, or the pool's), record it there with its provenance for pools to load."""
    flags.give("workers", [worker], "WORKER")
    request, built, target = describing(config, flags)

    def progress(step: str) -> None:
        errors.print(f"{shown(worker)}: {shown(step)}", highlight=False)

    try:
        entry = asyncio.run(describe_worker(built, worker, request, progress))
    except ConfigError as error:
        raise fail(error) from error
    except BackendError as error:
        raise fail(error, code=1) from error
    summary = entry.figures.summary() if entry.figures else ""
    errors.print(Text(printable(f"{worker}: {summary}")))
    for sentence in entry.rejected:
        errors.print(Text(printable(f"left out (contradicts the figures): {sentence}")))
    if target is not None:
        record_description(target, worker, entry)
        errors.print(f"recorded in {shown(target)}", highlight=False)
    console.print(printable(entry.description), markup=False, highlight=False, soft_wrap=True)


def serve_model_command(
    pool: PoolOption = None,
    worker: Annotated[str | None, typer.Option("--worker", help="Worker to serve; default: the first.")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
) -> None:
    """Serve a worker (default: the embedded model) as an OpenAI-compatible API (/v1/models, /v1/chat/completions)."""
    from podium.serve.model_server import serve

    built = open_pool(pool)
    name = worker or built.config.workers[0].name
    if name not in built.backends:
        raise fail(ConfigError(f"--worker: no worker '{name}' (workers: {', '.join(built.backends)})"))
    errors.print(f"serving {shown(built.backends[name].model)} on http://{host}:{port}/v1", highlight=False)
    serve(built.backends[name], host=host, port=port)
