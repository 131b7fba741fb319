"""The documentation: the site builds with ``mkdocs build --strict`` (no broken link, no missing page, no warning), its
Reference lists every command, option and config field from the code, every field has help, every code block of
the README, the site and the research notes is run or checked (commands in ``tests/test_readme.py``, programs and
config files here) or says why not, and the README stays short."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from podium.cli.reference import command_page, commands, config_models, config_page, undocumented_fields
from tests.doc_blocks import CODE, NOT_CODE, ROOT, Block, every_block

README_LINES = 300
MOST_NOT_RUN = 12
"""Code blocks that no test runs as written (each says why); more means the documents drifted from the tests."""


def test_the_site_builds_strict_and_its_reference_lists_every_command_option_and_field(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-5000:]
    for page in nav_pages():
        assert (tmp_path / page.removesuffix(".md").removesuffix("index") / "index.html").is_file(), page
    assert (tmp_path / "research" / "results" / "routing.svg").is_file()  # the claim notes' chart, beside its page
    cli_page_lists_every_command_and_option((tmp_path / "reference" / "cli" / "index.html").read_text("utf-8"))
    config_page_lists_every_field((tmp_path / "reference" / "config" / "index.html").read_text("utf-8"))


def nav_pages() -> list[str]:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").replace("!!python/name:", ""))["nav"]

    def pages(entries: list) -> list[str]:
        found = []
        for entry in entries:
            for value in entry.values():
                found += pages(value) if isinstance(value, list) else [value]
        return found

    return pages(nav)


def cli_page_lists_every_command_and_option(page: str) -> None:
    walked = list(commands())
    assert len(walked) > 40
    for name, command in walked:
        assert f"<code>{name}</code>" in page, name
        for parameter in command.params:
            if parameter.param_type_name == "option" and not parameter.hidden and parameter.name != "help":
                assert parameter.opts[0] in page, f"{name} {parameter.opts[0]}"


def config_page_lists_every_field(page: str) -> None:
    models = config_models()
    names = {model.__name__ for model in models}
    assert {"SystemConfig", "PoolConfig", "WorkerConfig", "RunConfig", "SFTConfig", "GRPOConfig", "SandboxConfig",
            "ServeConfig", "CollectConfig", "ExperimentConfig", "PriceCatalog"} <= names  # fmt: skip
    for model in models:
        assert f">{model.__name__}<" in page, model.__name__
        for name, field in model.model_fields.items():
            assert f"<code>{field.alias or name}</code>" in page, f"{model.__name__}.{name}"


def test_every_config_field_and_every_option_has_help():
    assert undocumented_fields(config_models()) == []
    helpless = [f"{name} {parameter.name}" for name, command in commands() for parameter in command.params
                if not parameter.hidden and not (getattr(parameter, "help", None) or "").strip()]  # fmt: skip
    assert helpless == [], "options without help"


def test_a_field_without_help_is_found():
    from pydantic import Field

    from podium.config import Config

    class Helpless(Config):
        documented: int = 1
        """Has help."""
        bare: int = Field(2)

    assert undocumented_fields([Helpless]) == ["Helpless.bare"]


def test_the_generated_pages_are_markdown_of_the_code():
    cli, config = command_page(), config_page()
    assert "### `podium eval`" in cli and "#### `podium train sft`" in cli
    assert "{ #podium-solve-config-systemconfig }" in config


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_LINES


def test_every_code_block_is_run_or_says_why_not():
    blocks = every_block()
    unknown = [f"{block.where} ({block.language})" for block in blocks if block.language not in CODE | NOT_CODE]
    assert unknown == [], "blocks in a language no test runs"
    not_run = [block for block in blocks if block.language in CODE and block.not_run is not None]
    assert len(not_run) <= MOST_NOT_RUN, [block.where for block in not_run]
    for block in not_run:
        named = [word.strip(".,;:()") for word in block.not_run.split() if word.startswith("tests/")]
        assert all((ROOT / path).is_file() for path in named), f"{block.where} names a missing test: {named}"


SCRIPTED_ORCHESTRATOR = {
    "kind": "orchestrator",
    "name": "scripted",
    "orchestrator": "orchestrator",
    "deny": ["orchestrator"],
    "pool": {
        "workers": [{"name": "orchestrator", "backend": "scripted", "model": "orchestrator-model", "replies": [
            '<tool_call>{"name": "convert", "arguments": {"amount": 100}}</tool_call>',
            "<answer>100 EUR is 110.00000000000001 USD</answer>",
        ]}],
        "tools": [],
    },
}  # fmt: skip
"""Stands in for the embedded orchestrator in the guides' programs: it calls the guide's own tool, then answers."""
SYSTEM_FILES = {"examples/systems/embedded-orchestrator.yaml": SCRIPTED_ORCHESTRATOR}
PROGRAMS = [block for block in every_block() if block.language == "python" and block.not_run is None]
CONFIGS = [block for block in every_block() if block.language == "yaml" and block.not_run is None]


@pytest.mark.parametrize("block", PROGRAMS, ids=[block.where for block in PROGRAMS])
def test_every_program_runs(block: Block, tmp_path):
    code = block.text
    for shipped, stand_in in SYSTEM_FILES.items():
        if shipped in code:  # a system whose model would take minutes runs as a scripted one doing the same
            (tmp_path / "system.yaml").write_text(yaml.safe_dump(stand_in))
            code = code.replace(shipped, str(tmp_path / "system.yaml"))
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "program.py").write_text(code, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "program.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip(), "the program printed nothing"
    if block.printed is not None:
        assert completed.stdout == block.printed


@pytest.mark.parametrize("block", CONFIGS, ids=[block.where for block in CONFIGS])
def test_every_config_file_passes_podium_check(block: Block, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(block.text, encoding="utf-8")
    commands_here = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])  # an MCP server's
    completed = subprocess.run(  # from the repository root, where the files a config names are
        [sys.executable, "-m", "podium", "check", "--pending-ok", str(path)], cwd=ROOT, capture_output=True,
        text=True, timeout=120, env={**os.environ, "PATH": commands_here},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert ": ok (" in completed.stdout
