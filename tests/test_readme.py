"""Every command of the README and the documentation runs as written, so neither can rot.

The commands are read from the ``console`` and ``bash`` blocks of the README, the documentation site and the
research notes (:mod:`tests.doc_blocks`; blocks marked as not run here are left to the tests their markers name).
Each must be listed in :data:`DOC_COMMANDS` (a command missing there fails the first test), which says what the test
adds to keep it small and offline (fewer turns, steps or items; a free port), and each runs in a fresh directory
where ``examples/`` is the repository's, so whatever it writes stays in that directory.
"""

import asyncio
import glob
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.doc_blocks import ROOT, blocks, commands, every_block

SERVE_GUIDE = ROOT / "docs" / "guides" / "serve.md"
RUN = 'podium run "What is 17 * 23?" --pool examples/demo/pool-trained.yaml --config examples/demo/serial.yaml'
SFT = "podium train sft --config examples/data/train_sft.yaml --max-steps 2"
TINY_MODEL = "tiny-stand-in"
"""The model name of the tiny stand-in for SmolLM2 in the pool the tau2 commands run with."""

DOC_COMMANDS: dict[str, list[str]] = {
    RUN: ["--max-turns", "1", "--trace", "out.jsonl"],
    'podium ask "What is the capital of France?"': ["--max-tokens", "16"],
    "podium tools list --pool examples/pool.yaml": [],
    'podium tools call python --args \'{"code": "print(6*7)"}\'': [],
    "podium serve-model --port 8000": [],
    "podium describe-model smollm2 --tasks examples/tasks.jsonl --pool examples/pool.yaml -n 2": [],
    "podium index build examples/corpus.jsonl --out my-index": [],
    'podium index search my-index "parallel tool calls" -k 2': [],
    "podium env list": [],
    "podium env replay retail --task 46": [],
    "podium env run airline --task 7 --max-turns 1 --allow python": [
        "--user-turns",
        "1",
        "--user-tokens",
        "16",
        "--trace",
        "airline.jsonl",
    ],
    SFT: ["--max-steps", "1", "--trajectories", "short.jsonl"],
    "podium train grpo --config examples/data/train_grpo.yaml": [],
    "podium eval --benchmark gsm8k --system examples/systems/embedded-single-model.yaml --limit 2 --out runs/gsm8k": [
        "--limit",
        "1",
    ],
    "podium report runs/gsm8k --out report/": [],
    "podium grade --responses examples/data/responses_math500.jsonl --benchmark math500": [],
    "podium experiment check experiments/*.yaml": [],
    "podium check examples/systems/*.yaml": [],
    "podium serve --port 8000": [],
    "podium eval --benchmark tau2_retail --system examples/systems/embedded-tau2.yaml --limit 1 --out "
    "runs/retail --tau2-results runs/retail.json": [],
    "podium env score runs/retail.json": [],
    "podium check examples/pool.yaml": [],
    "podium mcp serve --pool examples/pool.yaml": [],
    "podium eval --tasks examples/data/quiz.jsonl --system examples/systems/embedded-single-model.yaml --limit 2 "
    "--out runs/quiz": ["--limit", "1"],
}
"""Documented command → arguments the test appends (a later option wins over the documented one)."""
SCRIPTS = {
    "examples/data_collect_sft.sh runs/data-collect-sft": "tests/test_examples.py",
    "python examples/train_cpu_demo.py --quick --out runs/train-demo": "tests/test_examples.py",
}
"""Documented runs of shipped scripts → the test that runs them (with the same arguments)."""
TARGETS = {"make flywheel": "tests/test_flywheel.py"}
"""Documented Makefile targets → the test that runs them (with smaller limits)."""


def doc_commands() -> list[str]:
    """The commands of every document's console and bash blocks that are run here, in order."""
    return [command for block in every_block() if block.language in {"console", "bash"} and block.not_run is None
            for command in commands(block)]  # fmt: skip


def test_every_documented_command_is_tested_and_every_file_it_names_exists():
    documented = doc_commands()
    assert sorted(set(documented)) == sorted({*DOC_COMMANDS, *SCRIPTS, *TARGETS}), (
        "the documents and DOC_COMMANDS differ"
    )
    for script, test in SCRIPTS.items():
        path = next(word for word in script.split() if word.endswith((".py", ".sh")))
        assert path in (ROOT / test).read_text(encoding="utf-8")
    for target, test in TARGETS.items():  # the test calls make with the target's name
        text = (ROOT / test).read_text(encoding="utf-8")
        assert "make(" in text and f'"{target.removeprefix("make ")}"' in text
    named = {word for command in documented for word in shlex.split(command) if word.startswith("examples/")}
    missing = sorted(path for path in named if not glob.glob(path, root_dir=ROOT))  # a wildcard must match something
    assert not missing, f"the documents name files the repository lacks: {missing}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A directory where ``examples`` is the repository's; the commands' outputs land here."""
    directory = tmp_path_factory.mktemp("readme")
    for shipped in ("examples", "experiments"):
        (directory / shipped).symlink_to(ROOT / shipped)
    return directory


@pytest.fixture(scope="module")
def tiny_pool(workdir, tiny_model) -> Path:
    """The embedded offline pool with the tiny stand-in for SmolLM2 (tests/tiny_model.py) as its model: for the
    tau2 commands, whose checks are the conversation's path to the official reward, not what the model says. It
    shares SmolLM2's tokenizer, so prompts and grammars take the same tokens."""
    from podium.pool.pool import embedded_pool_config

    pool = embedded_pool_config()
    [embedded] = pool.workers
    backend = embedded.backend.model_copy(update={"model": TINY_MODEL, "path": str(tiny_model)})
    worker = embedded.model_copy(update={"backend": backend})
    path = workdir / "tiny-pool.yaml"
    data = pool.model_copy(update={"workers": [worker]}).model_dump(mode="json", exclude_defaults=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def podium(
    workdir: Path, command: str, timeout: float = 600, added: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """Run a documented ``command`` with what DOC_COMMANDS appends to it, then ``added``."""
    words = shlex.split(command)[1:] + DOC_COMMANDS[command] + list(added)
    # As a shell would: a word with a wildcard becomes the matching paths.
    arguments = [path for word in words for path in (sorted(glob.glob(word, root_dir=workdir)) or [word])]
    return subprocess.run(
        [sys.executable, "-m", "podium", *arguments],
        cwd=workdir, capture_output=True, text=True, timeout=timeout, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


FAST = [
    "podium tools list --pool examples/pool.yaml",
    'podium tools call python --args \'{"code": "print(6*7)"}\'',
    "podium env list",
    "podium env replay retail --task 46",
    "podium experiment check experiments/*.yaml",
    "podium check examples/systems/*.yaml",
    "podium check examples/pool.yaml",
]


@pytest.mark.parametrize("command", FAST)
def test_quick_commands(workdir, command):
    completed = podium(workdir, command)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip()


def test_tools_call_prints_what_the_documents_show(workdir):
    command = 'podium tools call python --args \'{"code": "print(6*7)"}\''
    completed = podium(workdir, command)
    assert completed.stdout == "42\n" and "status   OK" in completed.stderr
    shown = [block.text for block in every_block() if f"$ {command}\n42\nstatus   OK\n" in block.text]
    assert len(shown) == 2  # the quickstart's tour and the pool guide


def test_mcp_serve_starts_on_stdio_and_ends_with_its_input(workdir):
    words = shlex.split("podium mcp serve --pool examples/pool.yaml")[1:]
    completed = subprocess.run([sys.executable, "-m", "podium", *words], cwd=workdir, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=120)  # fmt: skip
    assert completed.returncode == 0, completed.stderr


def test_index_build_then_search(workdir):
    built = podium(workdir, "podium index build examples/corpus.jsonl --out my-index")
    assert built.returncode == 0, built.stderr
    found = podium(workdir, 'podium index search my-index "parallel tool calls" -k 2')
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[0].startswith("1. ParaManager")


def test_grade_prints_what_the_readme_shows(workdir):
    completed = podium(workdir, "podium grade --responses examples/data/responses_math500.jsonl --benchmark math500")
    assert completed.returncode == 1, completed.stderr  # one row of the example is not gradable, on purpose
    summary = "7 rows: 4 correct, 2 wrong, 1 not graded; accuracy 0.667 over graded rows"
    graders = ROOT / "docs" / "concepts" / "graders.md"
    assert summary in completed.stdout and summary in graders.read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        RUN,
        'podium ask "What is the capital of France?"',
        "podium eval --tasks examples/data/quiz.jsonl --system examples/systems/embedded-single-model.yaml "
        "--limit 2 --out runs/quiz",
        "podium describe-model smollm2 --tasks examples/tasks.jsonl --pool examples/pool.yaml -n 2",
    ],
)
def test_model_commands(workdir, command):
    completed = podium(workdir, command)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip()


@pytest.mark.slow
def test_env_run_plays_an_airline_task_on_the_embedded_pool(workdir, tiny_pool):
    pytest.importorskip("tau2", reason="the tau2 extra is not installed")
    from podium.core.budget import StopReason
    from podium.core.trajectory import read_trajectories
    from podium.envs import load_domain
    from podium.envs.evaluation import grade_trajectory
    from podium.graders.environment import EnvironmentVerifier

    command = "podium env run airline --task 7 --max-turns 1 --allow python"
    completed = podium(workdir, command, added=("--pool", str(tiny_pool)))
    assert completed.returncode == 0, completed.stderr
    assert "tau2_reward" in completed.stdout
    # The episode as traced: constrained orchestrator turns, the simulated user, and one verdict from both graders.
    [trajectory] = read_trajectories(workdir / "airline.jsonl")
    assert len(trajectory.turns) == 1 and trajectory.metadata["constrained"]
    assert trajectory.metadata["user_model"] == TINY_MODEL and trajectory.metadata["user_turns"] >= 1
    assert trajectory.stop_reason in {StopReason.MAX_TURNS, StopReason.ENV_DONE, StopReason.MAX_PARSE_ERRORS}
    assert trajectory.metadata["env_db_hash"]
    airline = load_domain("airline")
    task = airline.task("7")
    grade = grade_trajectory(airline, task, trajectory)
    verdict = asyncio.run(EnvironmentVerifier(airline).verify(trajectory, task))
    assert verdict.error is None and verdict.correct == (grade.reward == 1.0)


SFT_BATCH = 8
"""Sequences in one optimiser step of the SFT example (batch_size 2 × gradient_accumulation_steps 4)."""


@pytest.mark.slow
def test_training_examples_run_in_order_and_name_the_missing_checkpoint(workdir, tiny_model):
    grpo = "podium train grpo --config examples/data/train_grpo.yaml"
    early = podium(workdir, grpo)
    assert early.returncode == 2
    (line,) = early.stderr.strip().splitlines()
    assert "no checkpoint at checkpoints/sft" in line and "podium train sft" in line
    # The example's one step trains on its shortest trajectories (about 100 tokens each, against 600 on average).
    config = yaml.safe_load((ROOT / "examples" / "data" / "train_sft.yaml").read_text(encoding="utf-8"))
    assert config["batch_size"] * config["gradient_accumulation_steps"] == SFT_BATCH
    [trajectories] = config["trajectories"]
    lines = (ROOT / trajectories).read_text(encoding="utf-8").splitlines()
    (workdir / "short.jsonl").write_text("".join(f"{line}\n" for line in sorted(lines, key=len)[:SFT_BATCH]))
    # Trained from the tiny stand-in for SmolLM2 (tests/tiny_model.py): the step and the checkpoint it writes are
    # checked, not what the model learns.
    sft = podium(workdir, SFT, added=("--model", str(tiny_model)))
    assert sft.returncode == 0, sft.stderr
    assert (workdir / "checkpoints" / "sft" / "config.json").exists()


@pytest.mark.slow
def test_eval_then_report(workdir):
    evaluated = podium(
        workdir,
        "podium eval --benchmark gsm8k --system examples/systems/embedded-single-model.yaml --limit 2 --out runs/gsm8k",
    )
    assert evaluated.returncode == 0, evaluated.stderr
    reported = podium(workdir, "podium report runs/gsm8k --out report/")
    assert reported.returncode == 0, reported.stderr
    assert (workdir / "report" / "index.html").exists()


@pytest.mark.slow
def test_tau2_eval_then_score(workdir, tiny_pool):
    command = (
        "podium eval --benchmark tau2_retail --system examples/systems/embedded-tau2.yaml --limit 1 --out "
        "runs/retail --tau2-results runs/retail.json"
    )
    # the documented system over the embedded pool with the tiny stand-in as its model
    system = yaml.safe_load((ROOT / "examples" / "systems" / "embedded-tau2.yaml").read_text(encoding="utf-8"))
    assert "pool" not in system
    (workdir / "tiny-tau2.yaml").write_text(yaml.safe_dump({**system, "pool": str(tiny_pool)}), encoding="utf-8")
    evaluated = podium(workdir, command, added=("--system", "tiny-tau2.yaml"))
    assert evaluated.returncode == 0, evaluated.stderr
    scored = podium(workdir, "podium env score runs/retail.json")
    assert scored.returncode == 0, scored.stderr
    assert "1/1 simulations scored: mean tau2 reward" in scored.stdout


@pytest.mark.slow
def test_serve_model_answers_on_its_port(workdir):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    arguments = [*shlex.split("podium serve-model --port 8000")[1:-1], str(port)]
    server = subprocess.Popen(
        [sys.executable, "-m", "podium", *arguments], cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        models = None
        deadline = time.monotonic() + 180
        while models is None and time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as reply:
                    models = json.load(reply)
            except OSError:
                time.sleep(0.5)
        assert models is not None, "the server did not answer"
        assert models["data"][0]["id"]
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_guide_client(workdir: Path, serve: list[str], client: str, timeout: float) -> subprocess.CompletedProcess:
    """Start ``podium serve`` with the arguments ``serve`` on a free port, run the guide's ``client`` code against
    it once it listens (bounded: 180 s), and stop the server."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "podium", *serve, "--port", str(port)],
        cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    script = workdir / f"client-{port}.py"
    script.write_text(client.replace("127.0.0.1:8000", f"127.0.0.1:{port}"), encoding="utf-8")
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and server.poll() is None:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        return subprocess.run(
            [sys.executable, str(script)], cwd=workdir, capture_output=True, text=True, timeout=timeout
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


def serve_guide_clients() -> list[str]:
    """The serve guide's client programs: a request, a stream, a client tool."""
    return [block.text for block in blocks(SERVE_GUIDE) if block.language == "python"]


@pytest.mark.slow
def test_serve_answers_the_guides_client(workdir):
    client = serve_guide_clients()[0]
    serve = shlex.split("podium serve --port 8000")[1:-2]
    # One orchestrator turn instead of the guide's two, as the model commands above run with fewer turns.
    assert '"max_turns": 2' in client
    code = client.replace('"max_turns": 2', '"max_turns": 1')
    completed = run_guide_client(workdir, serve, code, timeout=600)
    assert completed.returncode == 0, completed.stderr
    assert "CompletionUsage" in completed.stdout


SCRIPTED_SERVING = {
    "streaming": (
        ['<tool_call>{"name": "helper", "arguments": {"prompt": "17 * 23"}}</tool_call>', "<answer>391</answer>"],
        ["[turn 1]", "[call helper (helper-model)] OK", "391", " tokens, $"],
    ),
    "client tool": (
        ['<tool_call>{"name": "lookup_price", "arguments": {"product": "widget"}}</tool_call>',
         "<answer>3 widgets cost $13.5</answer>"],
        ["3 widgets cost $13.5 stop"],
    ),
}  # fmt: skip
"""The serve guide's streaming and client-tool examples, each against a scripted orchestrator (its replies) that does
what the example shows, and what each must print."""


@pytest.mark.parametrize("example", sorted(SCRIPTED_SERVING))
def test_the_guides_streaming_and_client_tool_examples_run(workdir, tmp_path, example):
    clients = serve_guide_clients()
    scripts = {"streaming": clients[1], "client tool": clients[2]}
    assert "stream=True" in scripts["streaming"] and "tool_calls" in scripts["client tool"]
    replies, printed = SCRIPTED_SERVING[example]
    workers = [
        {"name": "orchestrator", "backend": "scripted", "model": "orchestrator-model", "replies": replies},
        {"name": "helper", "backend": "scripted", "model": "helper-model", "replies": ["391"]},
    ]
    system = {"name": "scripted", "orchestrator": "orchestrator", "deny": ["orchestrator"],
              "pool": {"workers": workers, "tools": []}}  # fmt: skip
    (tmp_path / "system.json").write_text(json.dumps(system))
    trace = tmp_path / "trace.jsonl"
    serve = ["serve", "--system", str(tmp_path / "system.json"), "--trace", str(trace)]
    completed = run_guide_client(workdir, serve, scripts[example], timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert all(text in completed.stdout for text in printed), completed.stdout
    [trajectory] = [json.loads(line) for line in trace.read_text().splitlines()]
    observations = [result["observation"] for turn in trajectory["turns"] for result in turn["results"]]
    assert observations == (["4.5"] if example == "client tool" else ["391"])  # the client's answer reached it
