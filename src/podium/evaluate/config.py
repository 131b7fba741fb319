"""What ``podium eval`` runs (the system file, the items, where results go and how the run goes) and what
``podium report`` shows. Every field is a flag and a key of an ``--config`` file (:mod:`podium.cli.fields`)."""

from pydantic import Field, NonNegativeFloat, PositiveInt

from podium.config import Config
from podium.core.preference import Preference
from podium.datasets.selection import ItemSelection
from podium.evaluate.gate import GateConfig


class EvalConfig(ItemSelection):
    """An evaluation run: a system on a benchmark or tasks file; results go to ``out`` as each sample finishes."""

    system: str
    """System config file (YAML/JSON): its kind (single_model, majority_vote, self_refine, static_router,
    tools_model, orchestrator, router) and settings."""
    out: str
    """Run directory; rerunning with the same one resumes."""
    samples: PositiveInt = 1
    """Samples per item (k, for pass@2/mean@k)."""
    concurrency: PositiveInt = 4
    """Samples solved at once."""
    max_run_usd: NonNegativeFloat | None = None
    """Stop starting samples once the run has spent this many USD."""
    hub: bool = False
    """Load the benchmark from the Hugging Face hub (needs datasets)."""
    sandbox_config: str | None = None
    """Sandbox limits for code verifiers (SandboxConfig file)."""
    quiet: bool = False
    """No progress bar."""
    ray: str | None = None
    """Solve samples on Ray workers: ``local`` (start Ray here), ``auto`` (join this machine's cluster) or an
    address (HOST:6379, ray://HOST:10001); resume, lock and ``max_run_usd`` stay here (needs the ray extra)."""
    tau2_results: str | None = None
    """Also write the run's tau2 conversations here, as ``tau2 run`` saves them."""
    preferences: str | None = None
    """Preference pairs (JSONL from ``podium data preferences``, or a YAML/JSON list of instruction and weights):
    item i gets pair i mod n, its instruction appended to the task and its vector kept for rewards."""
    prices: str | None = None
    """Price sheet merged over the system pool's prices (evaluate under unseen prices)."""
    gate: GateConfig = GateConfig()
    """With ``against``, how the run is compared with a baseline run on the same items, and when it wins."""


class ReportConfig(Config):
    """A static HTML report (plots, tables, trajectory viewer) of evaluation runs or data stages."""

    runs: list[str] = Field(min_length=1)
    """Run directories of ``podium eval``, or ``podium data`` stage directories / funnels."""
    out: str
    """Directory for index.html, plots and trajectory pages."""
    baseline: str | None = None
    """System name whose runs are M0 for the preference-aware score."""
    preference: Preference | None = None
    """The preference the score weighs by (instruction, weights)."""
    max_items: PositiveInt = 300
    """Attempts shown per trajectory page."""
