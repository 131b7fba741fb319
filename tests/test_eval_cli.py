"""``podium eval`` and ``podium report`` through Typer (the commands the lead registers on the main app)."""

import pytest
from typer.testing import CliRunner

from podium.datasets.loaders import shared_data_dir

from .eval_runner import app

pytestmark = pytest.mark.skipif(not shared_data_dir().is_dir(), reason="shared benchmark data not present")
SCRIPTED = """\
kind: single_model
name: always-18
backend:
  kind: scripted
  replies: ["The eggs make \\\\boxed{18} dollars."]
  price: {input_per_mtok: 100.0, output_per_mtok: 100.0}
"""


def test_eval_then_report_from_the_command_line(tmp_path):
    system = tmp_path / "system.yaml"
    system.write_text(SCRIPTED)
    runner = CliRunner()
    common = ["eval", "--benchmark", "gsm8k", "--system", str(system), "--out", str(tmp_path / "run"), "--quiet"]
    first = runner.invoke(app, [*common, "--limit", "3", "--samples", "2"])
    assert first.exit_code == 0, first.output
    assert "gsm8k · always-18: 2/6 correct" in first.output and "6/6 done (0 from earlier)" in first.output

    capped = runner.invoke(app, [*common, "--limit", "10", "--samples", "2", "--max-run-usd", "0.01"])
    assert capped.exit_code == 1, capped.output
    assert "stopped at the USD cap" in capped.output

    mismatch = runner.invoke(app, [*common, "--limit", "3", "--samples", "1"])
    assert mismatch.exit_code == 2 and "samples: was 2, now 1" in mismatch.output

    report = runner.invoke(app, ["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    assert (tmp_path / "report" / "index.html").is_file()
    assert (tmp_path / "report" / "plots" / "cost_gsm8k.svg").read_text().startswith("<?xml")


def test_invalid_inputs_exit_2_with_the_reason(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: single_model\nbackend: {kind: scripted}\n")
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "--benchmark", "gsm8k", "--system", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "bad.yaml:2: backend.replies: Field required" in result.output
    result = runner.invoke(app, ["eval", "--benchmark", "nope", "--system", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "unknown benchmark 'nope'" in result.output
    result = runner.invoke(app, ["report", str(tmp_path), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "not a run directory" in result.output


def test_an_eval_config_file_gives_any_option_and_flags_override_it(tmp_path):
    system = tmp_path / "system.yaml"
    system.write_text(SCRIPTED)
    config = tmp_path / "eval.yaml"
    config.write_text(f"system: {system}\nbenchmark: gsm8k\nout: {tmp_path / 'run'}\nlimit: 3\nquiet: true\n")
    runner = CliRunner()
    overridden = runner.invoke(app, ["eval", "--config", str(config), "--limit", "2"])
    assert overridden.exit_code == 0, overridden.output
    assert "2/2 done (0 from earlier)" in overridden.output
    resumed = runner.invoke(app, ["eval", "--config", str(config)])
    assert resumed.exit_code == 0 and "3/3 done (2 from earlier)" in resumed.output, resumed.output
    config.write_text(f"system: {system}\nbenchmark: gsm8k\nout: {tmp_path / 'run'}\nlimit: 0\n")
    refused = runner.invoke(app, ["eval", "--config", str(config)])
    assert refused.exit_code == 2 and "eval.yaml:4: limit" in refused.output, refused.output
    missing = runner.invoke(app, ["eval", "--benchmark", "gsm8k", "--out", str(tmp_path / "o")])
    assert missing.exit_code == 2 and "system" in missing.output and "required" in missing.output, missing.output
