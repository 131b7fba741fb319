"""Model commands: ask one worker, describe a worker from evidence, serve a worker over HTTP."""

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from podium.backends.base import BackendError, ChatBackend
from podium.cli.common import (
    POOL_FIELDS,
    ConfigFileOption,
    PoolOption,
    console,
    errors,
    fail,
    open_pool,
)
from podium.cli.fields import Flags, config_options, load_settings
from podium.cli.output import shown
from podium.core.messages import Message
from podium.core.printable import printable
from podium.errors import ConfigError, PodiumError
from podium.evaluate.describe import DescriptionRequest, describe_worker, record_description
from podium.pool.choice import AskConfig, WorkerChoice
from podium.serve.model_server import ModelServeConfig


@config_options(AskConfig, (*POOL_FIELDS, ("worker", "--model"), "max_tokens", "temperature"))
def ask_command(
    question: Annotated[str, typer.Argument(help="The question.")], config: ConfigFileOption = None, *, flags: Flags
) -> None:
    """One model answers, no tools (the no-tools baseline); prints the answer and its cost."""
    settings = load_settings(AskConfig, config, flags)
    backend = _backend(settings, "--model")
    try:
        generation = asyncio.run(
            backend.generate(
                [Message(role="user", content=question)],
                max_tokens=settings.max_tokens,
                temperature=settings.temperature,
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


def describe_model_command(
    worker: Annotated[str, typer.Argument(help="The worker to describe.")],
    tasks: Annotated[Path, typer.Option("--tasks", help="JSONL of tasks with 'question' and 'answer' fields.")],
    pool: PoolOption = None,
    describer: Annotated[
        str | None, typer.Option("--describer", help="Worker that writes the description (default: the role worker).")
    ] = None,
    n: Annotated[int, typer.Option("-n", min=1, help="How many tasks to sample.")] = 10,
    verifier: Annotated[str, typer.Option("--verifier", help="How answers are checked: qa, math or mc.")] = "qa",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the task sample.")] = 0,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Descriptions file to record it in (default: the pool's descriptions file)."),
    ] = None,
) -> None:
    """Run a worker on sampled tasks and have a describer model write its description from the evidence; with a
    descriptions file (--out, or the pool's), record it there with its provenance for pools to load."""
    built = open_pool(pool)
    request = DescriptionRequest(tasks, describer, n, verifier, seed)

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
    target = out or (Path(built.config.descriptions) if built.config.descriptions else None)
    if target is not None:
        record_description(target, worker, entry)
        errors.print(f"recorded in {shown(target)}", highlight=False)
    console.print(printable(entry.description), markup=False, highlight=False, soft_wrap=True)


@config_options(ModelServeConfig, (*POOL_FIELDS, "worker", "host", "port"))
def serve_model_command(config: ConfigFileOption = None, *, flags: Flags) -> None:
    """Serve a worker (default: the embedded model) as an OpenAI-compatible API (/v1/models, /v1/chat/completions)."""
    from podium.serve.model_server import serve

    settings = load_settings(ModelServeConfig, config, flags)
    backend = _backend(settings, "--worker")
    errors.print(f"serving {shown(backend.model)} on http://{settings.host}:{settings.port}/v1", highlight=False)
    serve(backend, host=settings.host, port=settings.port)


def _backend(settings: WorkerChoice, flag: str) -> ChatBackend:
    """The backend of the worker ``settings`` choose (an unknown one named by ``flag``)."""
    try:
        return settings.backend(open_pool(settings), flag)
    except PodiumError as error:
        raise fail(error) from error
