"""Model commands: ask one worker, describe a worker from evidence, serve a worker over HTTP."""

import asyncio
from typing import Annotated

import typer
from rich.text import Text

from podium.backends.base import BackendError, ChatBackend
from podium.cli.common import (
    DESCRIBE,
    POOL_FIELDS,
    ConfigFileOption,
    console,
    describing,
    errors,
    fail,
    load_settings,
    open_pool,
)
from podium.cli.fields import Flags, config_options
from podium.cli.output import shown
from podium.core.messages import Message
from podium.core.printable import printable
from podium.errors import ConfigError, PodiumError
from podium.evaluate.describe import DescribeConfig, describe_worker, record_description
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
