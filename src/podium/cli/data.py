"""``podium data``: the stages that make training data (collect, filter-rl, curriculum, classify-failures,
preferences). Each writes JSONL into ``--out``, resumes when rerun with the same ``--out``, stops starting work at
``--max-run-usd``, shows progress on stderr and ends with its funnel (a table, or JSON Lines with ``--json``).

Every option is generated from the field of the stage's config behind it (:mod:`podium.cli.fields`); ``--config
FILE`` (YAML/JSON) gives any field, and flags that are given override the file. A teacher or solver option takes
a system file (YAML/JSON). Exit status: 0 done, 1 the USD cap left work undone (rerun with a higher
cap to finish), 2 invalid input.
"""

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from podium.backends.base import BackendError
from podium.cli.common import ConfigFileOption, JsonOption, fail, report_funnel
from podium.cli.fields import Flags, config_options, load_config
from podium.data import (
    ClassifyConfig,
    CollectConfig,
    CurriculumConfig,
    DifficultyConfig,
    PreferenceConfig,
    classify_failures,
    collect,
    curriculum,
    filter_rl,
    propose_preferences,
)
from podium.data.latencies import measured_latencies
from podium.errors import PodiumError
from podium.solve.records import Funnel

app = typer.Typer(help="Make training data: teacher trajectories, RL sets, curricula, failure classes, preferences.")

ITEMS = ("benchmark", "tasks", "limit", "exclude", "data_dir")
"""The fields of a stage's item source."""
RUN = ("concurrency", "max_run_usd", "seed", "quiet")
"""How a stage runs."""
SERVED = (
    ("served.versions", "--served-version"), ("served.keys", "--served-key"), ("served.roles", "--served-role"),
    ("served.since", "--since"), ("served.until", "--until"), ("served.outcome", "--outcome"),
    ("served.holdout_keys", "--holdout-key"), ("served.holdout_percent", "--holdout-percent"),
)  # fmt: skip
"""Which served episodes ``collect --from-served`` selects and holds back."""


def _run(kind: Any, path: Path | None, flags: Flags, stage: Any, as_json: bool) -> None:
    """Load the stage's config (the ``--config`` file, the flags over it) and run it; any bad input exits 2."""
    try:
        settings = load_config(kind, path, flags)
        funnel: Funnel = asyncio.run(stage(settings, progress=not settings.quiet))
    except (PodiumError, BackendError) as error:
        raise fail(error) from error
    report_funnel(funnel, as_json)


@app.command("collect")
@config_options(CollectConfig, ("out", "teacher", *ITEMS, "from_eval", "from_served", *SERVED, "samples",
                                "temperature", "per_question", "max_tool_share", "keep_wrong", "prefer_recovered",
                                "constraints", *RUN))  # fmt: skip
def collect_command(config: ConfigFileOption = None, as_json: JsonOption = False, *, flags: Flags) -> None:
    """Teacher trajectories for SFT (ParaManager): n attempts per question, graded, filtered, balanced."""
    _run(CollectConfig, config, flags, collect, as_json)


@app.command("filter-rl")
@config_options(DifficultyConfig, ("out", "solver", *ITEMS, "samples", "temperature", "min_rate", "max_rate",
                                   "preferences", "pool", "worker", *RUN))  # fmt: skip
def filter_rl_command(config: ConfigFileOption = None, as_json: JsonOption = False, *, flags: Flags) -> None:
    """The RL set (ParaManager): keep questions a worker solves sometimes, never always or never."""
    _run(DifficultyConfig, config, flags, filter_rl, as_json)


@app.command("curriculum")
@config_options(CurriculumConfig, ("out", "cold_start", "teacher", "fallback", *ITEMS, "attempts",
                                   "probe_temperature", "sft_temperatures", "rl_temperatures", "constraints",
                                   "preferences", *RUN))  # fmt: skip
def curriculum_command(config: ConfigFileOption = None, as_json: JsonOption = False, *, flags: Flags) -> None:
    """Uno's verifier-gated curriculum: π0 and π* at pass@k split the tasks into SFT and RL data."""
    _run(CurriculumConfig, config, flags, curriculum, as_json)


@app.command("classify-failures")
@config_options(ClassifyConfig, ("out", "pool", "worker", "max_words", "min_count", "attempts", "max_tokens",
                                 "concurrency", "max_run_usd", "quiet"), arguments=("inputs",))  # fmt: skip
def classify_failures_command(config: ConfigFileOption = None, as_json: JsonOption = False, *, flags: Flags) -> None:
    """Uno's failure classifier: a root cause, evidence and a constraint for each failed trajectory."""
    _run(ClassifyConfig, config, flags, classify_failures, as_json)


@app.command("preferences")
@config_options(PreferenceConfig, ("out", "pool", "llm_pool", "proposer", "validator", "pairs", "per_request",
                                   "eval_fraction", *RUN))  # fmt: skip
def preferences_command(
    latencies_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--latencies-from",
            help="`podium eval` runs whose mean latency per tool is shown to the proposer (repeatable).",
        ),
    ] = None,
    config: ConfigFileOption = None,
    as_json: JsonOption = False,
    *,
    flags: Flags,
) -> None:
    """ToolOrchestra's preference pairs: proposed from the pool, checked by rules and a second LLM, split."""
    try:
        flags.give("latencies", measured_latencies(latencies_from) if latencies_from else None, "--latencies-from")
    except PodiumError as error:
        raise fail(error) from error
    _run(PreferenceConfig, config, flags, propose_preferences, as_json)
