"""``podium synth domain``: ToolScale synthesis of a tau2-format domain (database, read/write functions, policy,
tasks) that ``podium env`` and ``podium eval --benchmark tau2_<name>`` load like airline and retail.

Resumes when rerun with the same ``--out`` and ``--name``; stops starting steps at ``--max-usd``; ends with its
funnel. Exit status: 0 done, 1 the USD cap left steps undone, 2 invalid input.
"""

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from podium.backends.base import BackendError
from podium.cli.common import JsonOption, fail, field_option, report_funnel, stage_config
from podium.config import read_structured_file
from podium.core.printable import printable
from podium.data.synth import SynthConfig, synthesize_domain
from podium.errors import PodiumError

app = typer.Typer(help="Synthesize tool-use environments (ToolScale).", no_args_is_help=True)


@app.callback()
def synth() -> None:
    """Synthesize tool-use environments (ToolScale)."""


@app.command("domain")
def domain_command(
    domain: Annotated[str | None, typer.Argument(help="The domain in words, e.g. 'a public library'.")] = None,
    name: Annotated[str | None, field_option(SynthConfig, "name", "--name")] = None,
    out: Annotated[str | None, typer.Option("--out", help="Data directory; the domain goes to OUT/NAME.")] = None,
    pool: Annotated[str | None, field_option(SynthConfig, "pool", "--pool")] = None,
    worker: Annotated[str | None, field_option(SynthConfig, "worker", "--worker")] = None,
    validator: Annotated[str | None, field_option(SynthConfig, "validator", "--validator")] = None,
    subjects: Annotated[int | None, field_option(SynthConfig, "subjects", "--subjects", min=1)] = None,
    records: Annotated[int | None, field_option(SynthConfig, "records", "--records", min=1)] = None,
    functions: Annotated[int | None, field_option(SynthConfig, "functions", "--functions", min=1)] = None,
    intents: Annotated[int | None, field_option(SynthConfig, "intents", "--intents", min=1)] = None,
    evolve: Annotated[bool | None, field_option(SynthConfig, "evolve", "--evolve/--no-evolve")] = None,
    solver: Annotated[
        Path | None,
        typer.Option(
            "--solver",
            help="Solver file of the pass@k filter (pool + run config) (default: the embedded offline pool).",
        ),
    ] = None,
    pass_k: Annotated[int | None, field_option(SynthConfig, "pass_k", "--pass-k", min=0)] = None,
    test_fraction: Annotated[float | None, field_option(SynthConfig, "test_fraction", "--test-fraction")] = None,
    temperature: Annotated[float | None, field_option(SynthConfig, "temperature", "--temperature", min=0)] = None,
    max_tokens: Annotated[int | None, field_option(SynthConfig, "max_tokens", "--max-tokens", min=1)] = None,
    prompts_dir: Annotated[str | None, field_option(SynthConfig, "prompts_dir", "--prompts-dir")] = None,
    concurrency: Annotated[int | None, field_option(SynthConfig, "concurrency", "--concurrency", min=1)] = None,
    max_usd: Annotated[float | None, field_option(SynthConfig, "max_usd", "--max-usd", min=0)] = None,
    seed: Annotated[int | None, field_option(SynthConfig, "seed", "--seed")] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="Synthesis config (YAML/JSON); flags override.")
    ] = None,
    as_json: JsonOption = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """domain → subjects → schema → records → validation → functions → intents → tasks → evolution → filters."""
    try:
        flags = {
            "domain": domain, "name": name, "out": out, "pool": pool, "worker": worker, "validator": validator,
            "subjects": subjects, "records": records, "functions": functions, "intents": intents, "evolve": evolve,
            "solver": read_structured_file(solver) if solver else None, "pass_k": pass_k,
            "test_fraction": test_fraction, "temperature": temperature, "max_tokens": max_tokens,
            "prompts_dir": prompts_dir, "concurrency": concurrency, "max_usd": max_usd, "seed": seed,
        }  # fmt: skip
        settings = stage_config(SynthConfig, config, flags)
        funnel = asyncio.run(synthesize_domain(settings, progress=not quiet))
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    report_funnel(funnel, as_json)
    if not as_json:
        typer.echo(printable(f"domain → {Path(settings.out) / settings.name}"))
