"""Which items a command works on: a Podium benchmark or a tasks file, the first N of them, and where benchmark
data lives. One definition for every command that reads items (``podium eval``, the data stages), so each of
these settings is one field, one flag and one line of help."""

from pydantic import PositiveInt, model_validator

from podium.config import Config


class ItemSelection(Config):
    """The items of a run: a benchmark or a tasks file, the first ``limit`` of them."""

    benchmark: str | None = None
    """A Podium benchmark name (gsm8k, math500, tau2_retail, …) read from the shared data directory."""
    tasks: str | None = None
    """Or a tasks file: JSONL of ``question``, ``gold``, ``verifier`` (math, qa, multiple_choice, code), optional
    ``id`` and ``metadata`` (the format ``podium train grpo`` reads and ``podium data filter-rl`` writes)."""
    limit: PositiveInt | None = None
    """Only the first N items."""
    data_dir: str | None = None
    """Benchmark data directory (default: $PODIUM_DATA or ../shared/data)."""

    @model_validator(mode="after")
    def _one_source(self) -> "ItemSelection":
        if self.benchmark is not None and self.tasks is not None:
            raise ValueError("give a benchmark or a tasks file, not both")
        return self
