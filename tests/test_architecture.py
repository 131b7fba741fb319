"""The shape of the code (docs/architecture.md): layers import only downward, command modules do not import each
other, and no file or function grows past the size a reader can hold."""

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "podium"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def test_import_contracts_hold() -> None:
    importlinter = pytest.importorskip("importlinter.cli")
    config = str(SOURCE.parents[1] / "pyproject.toml")
    assert importlinter.lint_imports(config_filename=config, no_cache=True) == importlinter.EXIT_STATUS_SUCCESS


def test_files_and_functions_stay_small() -> None:
    oversized = []
    for path in sorted(SOURCE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(SOURCE.parent)
        if len(text.splitlines()) >= MAX_FILE_LINES:
            oversized.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length >= MAX_FUNCTION_LINES:
                    oversized.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    assert not oversized, "\n".join(oversized)
