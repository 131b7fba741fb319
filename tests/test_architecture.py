"""The shape of the code (docs/architecture.md): layers import only downward, command modules do not import each
other, no file or function grows past the size a reader can hold, and neither the benchmarks nor what they share
with the tests (support/) import the test package."""

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


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports by name (relative imports left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return names | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


def test_benchmarks_and_support_do_not_import_the_tests() -> None:
    root = SOURCE.parents[1]
    files = sorted([*(root / "benchmarks").glob("*.py"), *(root / "support").glob("*.py")])
    assert len(files) > 10
    leaning = [
        f"{path.relative_to(root)}: {name}"
        for path in files
        for name in sorted(imported_modules(path))
        if name == "tests" or name.startswith("tests.")
    ]
    assert not leaning, "\n".join(leaning)
