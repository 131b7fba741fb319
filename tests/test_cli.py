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
    lines = result.stdout.splitlines()
    specs = {spec["name"]: spec for spec in map(json.loads, lines)}
    assert len(specs) == len(lines) and {"python", "symbolic_math", "smollm2", "code_reasoner"} <= set(specs)
    assert specs["python"]["parameters"]["required"] == ["code"]
    assert specs["symbolic_math"]["description"]
    kinds = specs["python"]["kind"], specs["smollm2"]["kind"], specs["code_reasoner"]["kind"]
    assert kinds == ("tool", "model", "role")


def test_list_prints_one_line_per_tool_and_schemas_only_when_verbose():
    short = runner.invoke(app, ["tools", "list"])
    assert short.exit_code == 0
    lines = short.stdout.splitlines()
    assert len(lines) == len(json_lines(runner.invoke(app, ["tools", "list", "--json"]).stdout))
    python = next(line for line in lines if line.startswith("python "))
    assert python.split()[1:] == ["tool", "$8.3e-06/s"]
    assert '"type"' not in short.stdout
    verbose = runner.invoke(app, ["tools", "list", "--verbose"])
    assert '"required"' in verbose.stdout and "Run a Python 3 program" in verbose.stdout


def test_piped_output_is_never_cut_at_80_columns():
    completed = podium("tools", "list", "--verbose")
    assert completed.returncode == 0, completed.stderr
    description = "Print what you need to see (a final bare expression is printed too, as in a REPL)."
    assert description in completed.stdout  # one cell on one line: no wrapping into a narrow column


def test_help_texts_keep_their_defaults_and_units():
    from podium.cli import COMMANDS, load_command

    seen = 0
    for name in COMMANDS:
        command = load_command(name)
        commands = list(command.commands.values()) if hasattr(command, "commands") else [command]
        for leaf in commands:
            for parameter in leaf.params:
                text = getattr(parameter, "help", None) or ""
                assert "[" not in text, f"{name} {parameter.name}: rich would swallow the bracketed text: {text}"
                seen += 1
    assert seen > 50
    data_dir = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "200"}).output
    assert "(default: $PODIUM_DATA or ../shared/data)" in data_dir
    run_help = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    assert "in seconds" in run_help and "in tokens" in run_help


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


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
    assert "solver: measured: solved 0/3 sampled tasks (qa 0/3)" in result.output
    tasks.write_text("{not json}\n")
    broken = runner.invoke(app, ["describe-model", "solver", "--tasks", str(tasks), "--pool", str(pool)])
    assert broken.exit_code == 2 and ":1:" in broken.output


def orchestrator_pool(tmp_path, replies: list[str], backend: str = "scripted") -> str:
    path = tmp_path / "orchestrator.yaml"
    worker = {"name": "boss", "backend": backend, "model": "boss-m", "replies": replies}
    if backend == "http":
        price = {"input_per_mtok": 0, "output_per_mtok": 0}
        worker = {"name": "boss", "backend": "http", "model": "boss-m", "base_url": unreachable_url(), "price": price}
        worker["max_retries"] = 0
    path.write_text(json.dumps({"workers": [worker], "tools": ["python"]}))
    return str(path)


def unreachable_url() -> str:
    import socket

    with socket.socket() as probe:  # a port nothing listens on once the probe closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_run_shows_every_call_with_its_status_and_reason(tmp_path):
    replies = [
        '<tool_call>{"name": "python", "arguments": {"code": "print(1/0)"}}</tool_call>',
        '<tool_call>{"name": "python", "arguments": {"code": 7}</tool_call>',
        "<answer>7</answer>",
    ]
    result = runner.invoke(app, ["run", "What is 7?", "--pool", orchestrator_pool(tmp_path, replies)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "EXEC_ERR" in out and "ZeroDivisionError: division by zero" in out
    assert "PARSE_ERR" in out and "not valid JSON" in out and "char" in out  # the position of the error
    assert "stop: answer" in out and "answer: 7" in out and "tokens:" in out and "USD:" in out and "wall:" in out
    as_json = runner.invoke(app, ["run", "What is 7?", "--json", "--pool", orchestrator_pool(tmp_path, replies)])
    (record,) = json_lines(as_json.stdout)
    assert record["answer"] == "7" and len(record["turns"]) == 3


def test_an_unreachable_backend_is_one_line_naming_it_and_its_own_exit_code(tmp_path):
    pool = orchestrator_pool(tmp_path, [], backend="http")
    result = runner.invoke(app, ["run", "What is 7?", "--pool", pool, "--max-seconds", "60"])
    assert result.exit_code == 3, result.output
    assert result.stdout == ""  # no empty table
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert "http://127.0.0.1:" in line and "connection failed" in line and "reachable" in line


def test_the_episode_reports_its_steps_and_the_live_line_shows_them():
    import asyncio

    from podium.cli.common import LiveEpisode
    from podium.core.progress import EpisodeEvent, token_progress
    from podium.pool.config import PoolConfig, WorkerConfig
    from podium.pool.pool import build_pool
    from podium.runtime import Executor, RunConfig

    replies = ['<tool_call>{"name": "python", "arguments": {"code": "print(2)"}}</tool_call>', "<answer>2</answer>"]
    worker = WorkerConfig(
        name="boss",
        backend="scripted",
        model="boss-m",
        replies=replies,
        price={"input_per_mtok": 0, "output_per_mtok": 0},
    )
    events: list[EpisodeEvent] = []
    executor = Executor(build_pool(PoolConfig(workers=[worker], tools=["python"])), RunConfig())
    trajectory = asyncio.run(executor.run("1+1?", on_event=events.append))
    assert trajectory.answer == "2"
    steps = [(e.kind, e.turn) for e in events if e.kind in ("generating", "calling", "result", "stopped")]
    assert steps == [("generating", 0), ("calling", 0), ("result", 0), ("generating", 1), ("stopped", 1)]
    assert token_progress.get() is None  # nothing leaks out of the episode
    display = LiveEpisode("serial · boss-m")
    for event in [EpisodeEvent("generating", 0), EpisodeEvent("tokens", 0, tokens=17)]:
        display.update(event)
    line = display.__rich__().plain
    assert "turn 1" in line and "17 tokens generated" in line and line.endswith(" s")


def test_on_a_log_file_the_live_line_is_printed_every_interval():
    import io

    from rich.console import Console

    from podium.cli.common import LiveEpisode
    from podium.core.progress import EpisodeEvent

    log = Console(file=io.StringIO(), force_terminal=False, width=200)
    display = LiveEpisode("serial · boss-m", console=log, every_s=0.0)
    with display:
        display.update(EpisodeEvent("generating", 0))
        display.update(EpisodeEvent("tokens", 0, tokens=5))
    lines = [line for line in log.file.getvalue().splitlines() if line.strip()]
    assert len(lines) == 2 and "orchestrator generating  5 tokens generated" in lines[1]
    quiet = Console(file=io.StringIO(), force_terminal=False, width=200)
    with LiveEpisode("serial · boss-m", console=quiet) as display:  # 10 s between lines: none in a fast episode
        display.update(EpisodeEvent("generating", 0))
    assert quiet.file.getvalue().strip() == ""
