"""Every shipped config runs: `podium check` passes on every YAML under examples/ and experiments/ (files that an
earlier step writes, such as a checkpoint, may be missing), and each system under examples/systems/ answers one
offline GSM8K item, so a change that breaks a shipped file fails here rather than in a user's hands.

The systems run with the smallest budgets that still reach an answer (one turn, then the summarizer), their
shipped token budgets kept (those are what the grammar check is about); the two embedded models (bare, and with
the demo's adapter) are loaded once for the module, and the HTTP orchestrator's servers are one model server on
127.0.0.1 started here."""

import asyncio
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from typer.testing import CliRunner

from podium.backends.local import LocalBackend, LocalBackendConfig
from podium.cli import app
from podium.datasets.loaders import get_benchmark, shared_data_dir
from podium.evaluate.runner import load_run, run_eval
from podium.evaluate.system_config import build_system, load_system_config, system_config_from_dict
from podium.serve.model_server import serving_in_thread

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(path.relative_to(ROOT) for pattern in ("examples/**/*.yaml", "experiments/**/*.yaml")
                 for path in ROOT.glob(pattern))  # fmt: skip
SYSTEMS = sorted(path.name for path in (ROOT / "examples" / "systems").glob("*.yaml"))


@pytest.fixture(autouse=True)
def at_the_repository_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # shipped files name paths from the repository root


def test_every_shipped_yaml_passes_podium_check():
    assert len(SHIPPED) > 20
    result = CliRunner().invoke(app, ["check", "--pending-ok", *map(str, SHIPPED)])
    assert result.exit_code == 0, result.output
    assert result.stdout.count(": ok (") == len(SHIPPED)


@pytest.fixture(scope="module")
def shared_models() -> Iterator[None]:
    """Local backends with the same weights load them once for the module."""
    loaded: dict[tuple[str | None, str | None], tuple] = {}
    original = LocalBackend._load

    def load_once(self: LocalBackend) -> tuple:
        key = (self.config.path, self.config.adapter)
        if key not in loaded:
            loaded[key] = original(self)
        return loaded[key]

    LocalBackend._load = load_once  # type: ignore[method-assign]
    yield
    LocalBackend._load = original  # type: ignore[method-assign]


def smallest(data: dict, serve: Callable[[str], str]) -> dict:
    """The system with one turn then the summarizer's answer (model-only: a short reply); each HTTP worker's
    model served on 127.0.0.1 by ``serve`` (model name → base URL). The test's server does not constrain output
    to a grammar as vLLM does, so an HTTP orchestrator runs unconstrained there, on short replies."""
    if data["kind"] == "single_model":
        return {**data, "max_tokens": 48}
    pool = data.get("pool")
    served = isinstance(pool, dict) and any(worker["backend"] == "http" for worker in pool["workers"])
    if served:
        workers = [
            {**w, "base_url": serve(w["model"]), "max_tokens": 48} if w["backend"] == "http" else w
            for w in pool["workers"]
        ]
        data = {**data, "pool": {**pool, "workers": workers}, "constrained": "never", "max_tokens": 64}
    return {**data, "max_turns": 1, "summarize_on_stop": True}


@pytest.mark.slow
@pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")
@pytest.mark.parametrize("name", SYSTEMS)
def test_each_shipped_system_answers_an_offline_item(name, shared_models, tmp_path):
    shipped = load_system_config(ROOT / "examples" / "systems" / name).model_dump(mode="json", exclude_unset=True)
    with ExitStack() as servers:

        def serve(model: str) -> str:  # the embedded model under the served model's name
            return servers.enter_context(serving_in_thread(LocalBackend(LocalBackendConfig(model=model))))

        system = build_system(system_config_from_dict(smallest(shipped, serve)))
        summary = asyncio.run(run_eval(get_benchmark("gsm8k"), system, out=tmp_path, limit=1, progress=False))
    (record,) = load_run(tmp_path)[1]
    assert summary.errors == 0 and record.error is None, record.error
    assert record.answer, f"{name} gave no answer: stop {record.trajectory.stop_reason}"
