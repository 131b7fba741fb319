"""RL task rows: the format ``podium train grpo --tasks`` reads (``id``, ``question``, ``gold``, ``verifier``,
``metadata``), the stage's provenance and numbers kept under ``metadata``, and optionally a preference pair for
ToolOrchestra's reward (``metadata.preference``, which the trainer gives the episode)."""

import hashlib
from typing import Any

from podium.core.preference import Preference
from podium.data.sources import SourcedItem
from podium.datasets.items import BenchmarkItem
from podium.solve.records import FilterDecision, Provenance


def pick_preference(preferences: list[Preference], seed: int, item_id: str) -> Preference | None:
    """A preference for the item, drawn by a hash of the seed and the item (stable across runs)."""
    if not preferences:
        return None
    digest = hashlib.sha256(f"{seed}:{item_id}".encode()).digest()
    return preferences[int.from_bytes(digest[:8], "big") % len(preferences)]


def rl_task(
    entry: SourcedItem,
    provenance: Provenance,
    details: dict[str, Any],
    decisions: list[FilterDecision],
    preference: Preference | None = None,
) -> BenchmarkItem:
    """The item as an RL task row, with ``details`` (pass rates, split), its provenance and the filter decisions
    in the metadata."""
    metadata = {
        **entry.item.metadata,
        **details,
        "provenance": provenance.model_dump(mode="json"),
        "decisions": [decision.model_dump() for decision in decisions],
    }
    if preference is not None:
        metadata["preference"] = preference.model_dump()
    return entry.item.model_copy(update={"metadata": metadata})
