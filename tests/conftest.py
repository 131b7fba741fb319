from pathlib import Path

import pytest

from podium.sandbox import Sandbox, SandboxConfig


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked slow first (in their order), so that pytest-xdist hands them out while every worker is busy
    rather than leaving one long test to run alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def sandbox() -> Sandbox:
    """A sandbox with short limits so the adversarial tests finish quickly."""
    return Sandbox(SandboxConfig(cpu_time_s=2, wall_time_s=6, memory_mb=512, max_processes=32))


@pytest.fixture(scope="session")
def embedder():
    """The default sentence-embedding model (all-MiniLM-L6-v2 from its wheel), loaded once."""
    from podium.retrieval.embedding import Embedder

    return Embedder()


@pytest.fixture(scope="session")
def hotpot_index(embedder):
    """The HotpotQA demo index in Podium's cache, as `make setup` builds it; built here (about 30 s on 2 cores)
    when it is missing or out of date with the HotpotQA file or the default index config."""
    from podium.retrieval.hotpot import build_hotpot_index
    from podium.retrieval.index import PassageIndex
    from podium.retrieval.paths import default_index_dir

    build_hotpot_index(embedder=embedder)
    return PassageIndex.load(default_index_dir(), embedder=embedder)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A randomly initialised stand-in for SmolLM2-135M (tests/tiny_model.py), written once per test worker, for the
    recipe tests that check plumbing rather than the model's answers."""
    from tests.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("tiny-model"))
