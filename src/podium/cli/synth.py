"""``podium synth domain``: ToolScale synthesis of a tau2-format domain (database, read/write functions, policy,
tasks) that ``podium env`` and ``podium eval --benchmark tau2_<name>`` load like airline and retail.

Resumes when rerun with the same ``--out`` and ``--name``; stops starting steps at ``--max-run-usd``; ends with its
funnel. Exit status: 0 done, 1 the USD cap left steps undone, 2 invalid input.
"""

import asyncio
from pathlib import Path

import typer

from podium.backends.base import BackendError
from podium.cli.common import ConfigFileOption, JsonOption, fail, report_funnel
from podium.cli.fields import Flags, config_options, load_config
from podium.core.printable import printable
from podium.data.synth import SynthConfig, synthesize_domain
from podium.errors import PodiumError

app = typer.Typer(help="Synthesize tool-use environments (ToolScale).", no_args_is_help=True)


@app.callback()
def synth() -> None:
    """Synthesize tool-use environments (ToolScale)."""


@app.command("domain")
@config_options(SynthConfig, ("name", "out", "pool", "worker", "validator", "subjects", "records", "functions",
                              "intents", "evolve", "solver", "pass_k", "test_fraction", "temperature", "max_tokens",
                              "prompts_dir", "concurrency", "max_run_usd", "seed", "quiet"),
                arguments=("domain",))  # fmt: skip
def domain_command(config: ConfigFileOption = None, as_json: JsonOption = False, *, flags: Flags) -> None:
    """domain → subjects → schema → records → validation → functions → intents → tasks → evolution → filters."""
    try:
        settings = load_config(SynthConfig, config, flags)
        funnel = asyncio.run(synthesize_domain(settings, progress=not settings.quiet))
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    report_funnel(funnel, as_json)
    if not as_json:
        typer.echo(printable(f"domain → {Path(settings.out) / settings.name}"))
