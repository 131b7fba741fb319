"""Command options generated from config fields: each option typed, documented and defaulted by its field, the
flags merged over a config file in one place, and a bad value named by the flag or by the file's line."""

import inspect
from pathlib import Path
from typing import Any, Literal

import pytest
import typer.main
import yaml
from pydantic import Field, PositiveInt
from typer import Typer
from typer.testing import CliRunner

from podium.cli import app as podium_app
from podium.cli.fields import Flags, config_options, load_config
from podium.config import Config
from podium.errors import ConfigError
from podium.pool.config import PoolConfig
from podium.solve.config import SystemConfig

runner = CliRunner()


class Inner(Config):
    """A nested section."""

    depth: PositiveInt = 2
    """How deep, in levels."""


class Sample(Config):
    """A config with one field of each kind an option is made from."""

    out: str
    """Where it goes."""
    count: PositiveInt | Literal["all"] = 8
    """How many, or all."""
    mode: Literal["fast", "slow"] = "fast"
    """The pace."""
    tags: list[str] = Field(default_factory=list)
    """Labels, repeatable."""
    strict: bool = True
    """Whether to refuse."""
    pool: str | PoolConfig | None = None
    """A pool file."""
    teacher: SystemConfig = Field(default_factory=SystemConfig)
    """The teacher."""
    inner: Inner = Field(default_factory=Inner)
    """The nested section."""


def cli(seen: list[Sample]) -> Typer:
    app = Typer()

    @app.command()
    @config_options(Sample, ("out", "count", "mode", "tags", "strict", "pool", "teacher", ("inner.depth", "--depth")))
    def main(config: Path | None = None, *, flags: Flags) -> None:
        seen.append(load_config(Sample, config, flags))

    @app.command()
    def other() -> None:
        """A second command, so that Typer keeps command names."""

    return app


def test_each_field_becomes_an_option_with_its_type_help_and_default() -> None:
    help_text = runner.invoke(cli([]), ["main", "--help"], env={"COLUMNS": "200"}).output
    for expected in ("--out", "Where it goes. (required)", "--count", "How many, or all.", "[default: (8)]",
                     "fast|slow", "--tags", "--strict", "--no-strict", "--teacher", "Given as a YAML/JSON file.",
                     "--depth", "How deep, in levels."):  # fmt: skip
        assert expected in help_text, expected


def test_flags_are_written_over_the_file_and_nested_fields_reach_their_section(tmp_path) -> None:
    teacher = tmp_path / "teacher.yaml"
    teacher.write_text(yaml.safe_dump({"name": "t", "policy": "parallel"}))
    config = tmp_path / "sample.yaml"
    config.write_text(yaml.safe_dump({"out": "from-file", "count": 3, "tags": ["a"], "inner": {"depth": 5}}))
    seen: list[Sample] = []
    command = ["main", "--config", str(config), "--count", "all", "--tags", "x", "--tags", "y", "--no-strict",
               "--teacher", str(teacher), "--depth", "7", "--mode", "slow"]  # fmt: skip
    result = runner.invoke(cli(seen), command)
    assert result.exit_code == 0, result.output
    [sample] = seen
    assert (sample.out, sample.count, sample.tags, sample.strict, sample.mode) == ("from-file", "all", ["x", "y"],
                                                                                   False, "slow")  # fmt: skip
    assert (sample.teacher.name, sample.teacher.policy.name, sample.inner.depth) == ("t", "parallel", 7)
    runner.invoke(cli(seen), ["main", "--config", str(config)])
    assert (seen[-1].count, seen[-1].tags, seen[-1].strict, seen[-1].inner.depth) == (3, ["a"], True, 5)


def test_a_bad_value_is_named_by_its_flag_or_by_the_line_of_the_file(tmp_path) -> None:
    config = tmp_path / "sample.yaml"
    config.write_text("out: here\ncount: 0\n")
    with pytest.raises(ConfigError, match=r"sample\.yaml:2: count"):
        load_config(Sample, config, Flags())
    flags = Flags()
    flags.give("count", "0", "--count")
    flags.give("inner.depth", 0, "--depth")
    with pytest.raises(ConfigError) as raised:
        load_config(Sample, None, flags)
    lines = str(raised.value).splitlines()
    assert lines[0] == "invalid options:" and "  out: Field required" in lines
    assert any(line.startswith("  --count: count: ") for line in lines)
    assert "  --depth: inner.depth: Input should be greater than 0" in lines
    config.write_text("- not a mapping\n")
    with pytest.raises(ConfigError, match="must hold a mapping of config fields"):
        load_config(Sample, config, Flags())


def test_a_flag_not_given_leaves_the_field_to_the_file() -> None:
    flags = Flags()
    flags.give("count", None, "--count")
    assert flags == {} and flags.names == {}


class Named(Config):
    """A config with a positional field, a mapping and a choice."""

    inputs: list[str] = Field(min_length=1)
    """The files read."""
    runs: dict[str, str] = Field(default_factory=dict)
    """Name → run directory."""
    mode: Literal["fast", "slow"] = "fast"
    """The pace."""


def named_cli(seen: list[Named]) -> Typer:
    app = Typer()

    @app.command()
    @config_options(Named, (("runs", "--run"), "mode"), arguments=("inputs",))
    def main(config: Path | None = None, *, flags: Flags) -> None:
        try:
            seen.append(load_config(Named, config, flags))
        except ConfigError as error:
            raise typer.Exit(f"error: {error}") from error  # type: ignore[arg-type]

    @app.command()
    def other() -> None:
        """A second command, so that Typer keeps command names."""

    return app


def test_a_positional_field_a_mapping_and_a_choice_are_read_by_the_config(tmp_path) -> None:
    seen: list[Named] = []
    app = named_cli(seen)
    help_text = runner.invoke(app, ["main", "--help"], env={"COLUMNS": "200"}).output
    assert "INPUTS" in help_text and "The files read." in help_text and "KEY=VALUE" in help_text
    done = runner.invoke(app, ["main", "a.jsonl", "b.jsonl", "--run", "x=runs/x", "--run", "y=runs/y"])
    assert done.exit_code == 0, done.output
    assert (seen[-1].inputs, seen[-1].runs) == (["a.jsonl", "b.jsonl"], {"x": "runs/x", "y": "runs/y"})
    config = tmp_path / "named.yaml"
    config.write_text("inputs: [from-file.jsonl]\n")
    assert runner.invoke(app, ["main", "--config", str(config)]).exit_code == 0 and seen[-1].inputs == [
        "from-file.jsonl"
    ]
    for args, message in ((["a", "--run", "x"], "--run: 'x' is not KEY=VALUE"),
                          (["a", "--run", "x=1", "--run", "x=2"], "--run: x is given twice"),
                          (["a", "--mode", "quick"], "--mode: mode: Input should be 'fast' or 'slow'"),
                          ([], "inputs: Field required")):  # fmt: skip
        failed = runner.invoke(app, ["main", *args])
        assert failed.exit_code != 0 and message in failed.output, (args, failed.output)


def every_command() -> dict[str, Any]:
    """Every command of ``podium``, by its words (``data collect``)."""
    found: dict[str, Any] = {}

    def walk(group: Any, words: tuple[str, ...]) -> None:
        context = type(group).context_class(group)
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            assert command is not None, name
            if hasattr(command, "commands"):  # a group (Typer's, whose click is its own)
                walk(command, (*words, name))
            else:
                found[" ".join((*words, name))] = command

    walk(typer.main.get_command(podium_app), ())
    return found


TYPER_OWN = {"install_completion", "show_completion"}
"""Options Typer adds to a command of its own."""


def option_flags(command: Any) -> tuple[dict[str, str], set[str]]:
    """A command's hand-written options (flag → parameter name) and the flags generated from config fields: a
    generated option is one the command's own function does not declare (:func:`config_options` adds it)."""
    declared = set(inspect.signature(inspect.unwrap(command.callback)).parameters)  # type: ignore[arg-type]
    written, generated = {}, set()
    for parameter in command.params:
        if parameter.param_type_name == "option":
            if parameter.name in declared:
                written |= dict.fromkeys(parameter.opts, parameter.name)
            elif parameter.name not in TYPER_OWN:
                generated |= set(parameter.opts)
    return written, generated


def test_no_command_writes_by_hand_an_option_that_a_config_field_defines():
    commands = {name: option_flags(command) for name, command in every_command().items()}
    field_flags = set().union(*(generated for _, generated in commands.values()))
    assert {"--out", "--limit", "--data-dir", "--prices"} <= field_flags
    duplicates = {name: set(written) & field_flags for name, (written, _) in commands.items()}
    duplicates = {name: flags for name, flags in duplicates.items() if flags}
    assert duplicates == {}, "hand-written options whose flag a config field defines"


OUTPUT_MODES = {"--config", "--json", "--verbose", "-v"}
"""What a command may write by hand: its config file, and how it prints (no setting of what it does)."""


READS_FILES_INTO_A_FIELD = {"data preferences": {"--latencies-from"}}
"""Hand-written options that are not settings but inputs read into one (``podium eval`` runs whose latencies fill
the preference stage's ``latencies`` field)."""


@pytest.mark.parametrize("name", sorted(every_command()))
def test_every_option_of_every_command_is_a_config_field(name):
    written, _ = option_flags(every_command()[name])
    assert set(written) - OUTPUT_MODES == READS_FILES_INTO_A_FIELD.get(name, set())


def test_a_served_port_out_of_range_is_named_by_its_flag_or_by_its_file_line(tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("worker: nobody\nport: 70000\n")
    from_file = runner.invoke(podium_app, ["serve-model", "--config", str(config)])
    assert from_file.exit_code == 2 and "serve.yaml:2: port" in " ".join(from_file.output.split())
    from_flag = runner.invoke(podium_app, ["serve-model", "--port", "-1"])
    assert from_flag.exit_code == 2 and "--port: port" in " ".join(from_flag.output.split())
    unknown = runner.invoke(podium_app, ["ask", "2+2?", "--model", "nobody"])
    assert unknown.exit_code == 2 and "--model: no worker 'nobody'" in " ".join(unknown.output.split())


def test_a_policy_flag_names_the_policy():
    """``--policy parallel`` is the policy by name (its field holds a config; :class:`~podium.config.Flag`)."""
    result = runner.invoke(podium_app, ["run", "2+2?", "--system", "system.yaml", "--policy", "parallel"])
    assert result.exit_code == 2 and "give it without --policy" in " ".join(result.output.split())
