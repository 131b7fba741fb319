import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from podium.cli import app

runner = CliRunner()


def podium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "podium", *args], capture_output=True, text=True, timeout=120)


def test_call_python_prints_42_with_status_ok():
    completed = podium("tools", "call", "python", "--args", '{"code": "print(6*7)"}')
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "42"
    assert "status   OK" in completed.stderr
    assert "cost     $" in completed.stderr and "latency" in completed.stderr


def test_non_ok_status_exits_non_zero():
    failed = runner.invoke(app, ["tools", "call", "python", "--args", '{"code": "raise SystemExit(3)"}'])
    assert failed.exit_code == 1
    assert "EXEC_ERR" in failed.output and "exit code 3" in failed.output
    malformed = runner.invoke(app, ["tools", "call", "python", "--args", '{"code": '])
    assert malformed.exit_code == 1 and "PARSE_ERR" in malformed.output
    unknown = runner.invoke(app, ["tools", "call", "nope"])
    assert unknown.exit_code == 1 and "unknown tool 'nope'" in unknown.output


def test_json_output_is_the_full_result():
    result = runner.invoke(
        app, ["tools", "call", "symbolic_math", "--json", "--args", '{"operation": "factor", "expression": "x^2-1"}']
    )
    assert result.exit_code == 0, result.output
    parsed = json.loads(result.stdout)
    assert parsed["status"] == "OK" and parsed["value"] == "(x - 1)*(x + 1)"
    assert parsed["usage"]["usd"] > 0


def test_list_shows_names_descriptions_and_schemas():
    result = runner.invoke(app, ["tools", "list", "--json"])
    assert result.exit_code == 0
    specs = {spec["name"]: spec for spec in json.loads(result.stdout)}
    assert {"python", "symbolic_math"} <= set(specs)
    assert specs["python"]["parameters"]["required"] == ["code"]
    assert specs["symbolic_math"]["description"]


def test_broken_price_file_is_reported_with_the_field(tmp_path):
    prices = tmp_path / "p.yaml"
    prices.write_text("tools:\n  python: {per_second_usd: cheap}\n")
    result = runner.invoke(app, ["tools", "call", "python", "--prices", str(prices), "--args", '{"code": "1"}'])
    assert result.exit_code == 2
    assert "tools.python.per_second_usd" in result.output


def test_missing_isolation_refuses_unless_opted_in(tmp_path):
    config = tmp_path / "sandbox.yaml"
    config.write_text("bwrap: /nonexistent/bwrap\n")
    args = ["tools", "call", "python", "--sandbox-config", str(config), "--args", '{"code": "print(1)"}']
    refused = runner.invoke(app, args)
    assert refused.exit_code == 1
    assert "cannot isolate code" in refused.output and "apt-get install bubblewrap" in refused.output
    allowed = runner.invoke(app, [*args, "--allow-unisolated"])
    assert allowed.exit_code == 0 and allowed.stdout.strip() == "1"


@pytest.mark.parametrize("command", [[], ["tools"], ["tools", "list"], ["tools", "call"]])
def test_every_command_has_help(command):
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output


def test_version():
    assert runner.invoke(app, ["--version"]).output.startswith("podium ")


def scripted_pool(tmp_path, replies_a, replies_b):
    path = tmp_path / "pool.yaml"
    path.write_text(
        "workers:\n"
        f"  - {{name: solver, backend: scripted, model: solver-m, replies: {json.dumps(replies_a)},"
        " price: {input_per_mtok: 1, output_per_mtok: 2}}\n"
        f"  - {{name: writer, backend: scripted, model: writer-m, replies: {json.dumps(replies_b)},"
        " price: {input_per_mtok: 0, output_per_mtok: 0}}\n"
        "tools: []\n"
    )
    return path


def test_ask_uses_the_chosen_worker_and_reports_cost(tmp_path):
    pool = scripted_pool(tmp_path, ["Paris."], ["Lyon."])
    result = runner.invoke(app, ["ask", "Capital of France?", "--pool", str(pool)])
    assert result.exit_code == 0 and result.stdout.strip() == "Paris."
    # 3 prompt tokens at $1/M and 1 completion token at $2/M
    assert "solver-m" in result.output and "cost     $0.0000050" in result.output
    other = runner.invoke(app, ["ask", "Capital of France?", "--pool", str(pool), "--model", "writer"])
    assert other.stdout.strip() == "Lyon."
    missing = runner.invoke(app, ["ask", "x", "--pool", str(pool), "--model", "nobody"])
    assert missing.exit_code == 2 and "no worker 'nobody'" in missing.output


def test_describe_model_runs_tasks_and_lets_a_describer_write(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(json.dumps({"question": f"{i}+{i}?", "answer": str(2 * i)}) for i in range(5)))
    pool = scripted_pool(tmp_path, ["The answer is 0.", "Answer: 2", "Answer: 5"], ["Good at small sums."])
    result = runner.invoke(
        app,
        ["describe-model", "solver", "--tasks", str(tasks), "--pool", str(pool), "--describer", "writer", "-n", "3"],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "Good at small sums."
    assert "solver solved" in result.output and "of 3 sampled tasks" in result.output
    tasks.write_text("{not json}\n")
    broken = runner.invoke(app, ["describe-model", "solver", "--tasks", str(tasks), "--pool", str(pool)])
    assert broken.exit_code == 2 and ":1:" in broken.output
