"""The one reader of users' YAML and JSON files: bounded (size, YAML aliases), errors with the file and line and the
user's own field names, and finite numbers only, in files, CLI flags and JSON output."""

import json
import math

import pytest
from typer.testing import CliRunner

from podium.cli import app
from podium.cli.output import print_json_line
from podium.config import MAX_ALIAS_NODES, read_structured_file
from podium.core.budget import Budget
from podium.costs.prices import PriceCatalog
from podium.errors import ConfigError
from podium.evaluate.system_config import load_system_config
from podium.runtime.config import RunConfig
from podium.sandbox import SandboxConfig
from support.hostile import LOADERS, bomb_file, non_finite_campaign

runner = CliRunner()


@pytest.mark.parametrize("kind", LOADERS)
def test_an_alias_bomb_is_refused_before_it_expands_in_every_kind_of_file(tmp_path, kind):
    path = bomb_file(tmp_path, kind, width=10, depth=8)  # 10^8 nodes written out
    assert path.stat().st_size < 1000
    with pytest.raises(ConfigError, match=rf"{path.name}:\d+: YAML aliases expand this document by more than"):
        LOADERS[kind][0](path)


def test_aliases_that_repeat_a_little_still_load(tmp_path):
    path = tmp_path / "pool.yaml"
    path.write_text(
        "defaults: &scripted {backend: scripted, model: m, replies: [x]}\n"
        "workers:\n  - {<<: *scripted, name: a}\n  - {<<: *scripted, name: b}\n"
        "sizes: &sizes [" + ", ".join(["1"] * 50) + "]\nagain: [*sizes, *sizes]\n"
    )
    data = read_structured_file(path)
    assert [w["name"] for w in data["workers"]] == ["a", "b"] and data["workers"][1]["replies"] == ["x"]
    assert len(data["again"][1]) == 50
    path.write_text("sizes: &sizes [" + ", ".join(["1"] * 50) + "]\nagain: [" + ", ".join(["*sizes"] * 30) + "]\n")
    assert MAX_ALIAS_NODES < 30 * 51
    with pytest.raises(ConfigError, match="aliases expand"):
        read_structured_file(path)


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("a: 1\nloop: &loop\n  again: [*loop]\n")
    with pytest.raises(ConfigError, match=r"loop\.yaml:\d+: a YAML alias refers to a node that contains it"):
        read_structured_file(path)


def test_a_file_too_large_is_refused_with_its_size(tmp_path, monkeypatch):
    monkeypatch.setattr("podium.config.MAX_FILE_BYTES", 100)
    path = tmp_path / "big.yaml"
    path.write_text("x: " + "y" * 200 + "\n")
    with pytest.raises(ConfigError, match=r"big\.yaml holds 204 bytes; files Podium reads hold at most 100"):
        read_structured_file(path)


def test_parse_errors_name_the_file_and_line(tmp_path):
    broken_yaml = tmp_path / "pool.yaml"
    broken_yaml.write_text("workers:\n  - name: w\n    model: [m\n")
    with pytest.raises(ConfigError, match=r"pool\.yaml:4:1: cannot parse: did not find expected ','") as error:
        read_structured_file(broken_yaml)
    assert "unicode string" not in str(error.value)
    broken_json = tmp_path / "pool.json"
    broken_json.write_text('{"workers": [\n  {"name": "w",,}]}')
    with pytest.raises(ConfigError, match=r"pool\.json:2:16: cannot parse: Expecting property name"):
        read_structured_file(broken_json)


def test_validation_errors_name_the_line_and_the_users_own_field_names(tmp_path):
    path = tmp_path / "system.yaml"
    path.write_text(
        "kind: orchestrator\npolicy: serial\npool:\n  workers:\n    - name: w\n      backend: scripted\n"
        "      model: m\n      replies: [x]\n    - name: v\n      backend: scripted\n  roles: [no_such_role]\n"
    )
    with pytest.raises(ConfigError) as error:
        load_system_config(path)
    message = str(error.value)
    assert f"{path}:9: pool.workers.1.model: Field required" in message  # a missing field: its parent's line
    assert f"{path}:11: pool.roles.0: Input should be" in message
    assert "function-after" not in message and "PoolConfig" not in message and "valid string" not in message
    assert "Value error, " not in message


def test_json_files_get_lines_too(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text('{"models": {\n  "m": {"input_per_mtok": -1, "output_per_mtok": 1}}}\n')
    with pytest.raises(ConfigError, match=rf"{path.name}:2: models\.m\.input_per_mtok: Input should be"):
        PriceCatalog.from_file(path)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("run.yaml", "max_episode_usd: .inf\n"),
        ("run.yaml", "max_seconds: .nan\n"),
        ("run.json", '{"max_episode_usd": Infinity}'),
        ("run.json", '{"max_seconds": NaN}'),
        ("run.json", '{"max_episode_usd": 1e309}'),
    ],
)
def test_non_finite_numbers_are_refused_in_config_files(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"(max_episode_usd|max_seconds): Input should be a finite number"):
        RunConfig.from_file(path)


def test_non_finite_prices_and_limits_are_refused_everywhere(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("models:\n  m: {input_per_mtok: .inf, output_per_mtok: 1}\ntools:\n  t: {per_call_usd: .nan}\n")
    with pytest.raises(ConfigError, match=r"models\.m\.input_per_mtok: Input should be a finite number") as error:
        PriceCatalog.from_file(prices)
    assert "tools.t.per_call_usd: Input should be" in str(error.value)
    with pytest.raises(ConfigError, match="wall_time_s: Input should be a finite number"):
        SandboxConfig.from_dict({"wall_time_s": math.inf})
    with pytest.raises(ValueError, match="finite number"):
        Budget(max_usd=math.inf)


@pytest.mark.parametrize(
    "command",
    [
        ["run", "q", "--max-episode-usd", "inf"],
        ["run", "q", "--max-seconds", "nan"],
        ["data", "collect", "--tasks", "t.jsonl", "--out", "o", "--max-run-usd", "-inf"],
        ["grade", "--responses", "r.jsonl", "--kind", "f1", "--f1-threshold", "nan"],
    ],
)
def test_cli_flags_refuse_non_finite_numbers(command):
    result = runner.invoke(app, command)
    assert result.exit_code == 2
    assert "is not a finite number" in result.output or "Input should be" in result.output


def test_no_config_field_takes_a_non_finite_number():
    assert non_finite_campaign(seed=25, tries=400) == []


def test_json_lines_hold_only_json_numbers(capsys):
    print_json_line({"usd": math.inf, "rate": math.nan, "nested": [{"x": -math.inf}], "ok": 1.5})
    line = capsys.readouterr().out
    assert json.loads(line) == {"usd": None, "rate": None, "nested": [{"x": None}], "ok": 1.5}
    assert "Infinity" not in line and "NaN" not in line
