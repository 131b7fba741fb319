"""The README's "Bring your own pool" section runs as written, on a pool of three workers served by a local
OpenAI-compatible test server (tests/workers_server.py: three models of different skill per subject and different
prices) over MMLU-Pro questions: record, compare, collect, a few SFT steps, evaluate, threshold, compare again,
evaluate a router system, serve one request. The figures it prints are checked against values computed by hand from
the recording. The orchestrator is a tiny randomly initialised stand-in for SmolLM2 (tests/tiny_model.py)."""

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest
import yaml

from podium.datasets.loaders import shared_data_dir
from tests.workers_server import workers_server

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("peft")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.skipif(not shared_data_dir().is_dir(), reason="no shared data"),
]

ADDED = {
    "podium routing record": ["--limit", "60", "--quiet"],
    "podium train sft": ["--max-steps", "2"],
    "podium eval": ["--limit", "6", "--quiet"],
    "podium data collect": ["--quiet"],
}
"""What the test adds to a command of the section to keep it small (a later option wins)."""


def section_commands() -> list[str]:
    """The commands of the README section's bash block, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Bring your own pool", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the section has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def run(workdir: Path, command: str) -> subprocess.CompletedProcess[str]:
    """One command of the section, with the test's additions, in ``workdir``; checked to succeed."""
    words = shlex.split(command)
    added = next((extra for prefix, extra in ADDED.items() if command.startswith(prefix)), [])
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PODIUM_DATA": str(shared_data_dir())}
    done = subprocess.run([sys.executable, "-m", "podium", *words[1:], *added], cwd=workdir, env=environment,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
    return done


def last_json(done: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def by_hand(recording: Path, split: str, limit: int | None = None) -> dict[str, dict[str, float]]:
    """Each worker alone and the oracle on a split, computed from the recording's files directly."""
    tasks = [json.loads(line) for line in (recording / "tasks.jsonl").read_text().splitlines()]
    ids = [task["id"] for task in tasks if task["split"] == split][:limit]
    outcomes = {}
    for line in (recording / "outcomes.jsonl").read_text().splitlines():
        row = json.loads(line)
        outcomes[row["task_id"], row["worker"]] = row
    workers = ["small", "medium", "large"]
    figures = {f"always_{w}": {"accuracy": sum(outcomes[i, w]["correct"] for i in ids) / len(ids),
                               "usd": sum(outcomes[i, w]["usd"] for i in ids) / len(ids)} for w in workers}  # fmt: skip
    right, usd = 0, 0.0
    for i in ids:
        ranked = sorted(workers, key=lambda w: outcomes[i, w]["usd"])
        chosen = next((w for w in ranked if outcomes[i, w]["correct"]), ranked[0])
        right, usd = right + outcomes[i, chosen]["correct"], usd + outcomes[i, chosen]["usd"]
    figures["oracle"] = {"accuracy": right / len(ids), "usd": usd / len(ids)}
    return figures


def point_at(checkpoint: Path, config: Path, key: str) -> None:
    """Set ``path`` of the mapping ``key`` in the YAML ``config`` to ``checkpoint``, as a user points a recipe at
    their own checkpoint."""
    data = yaml.safe_load(config.read_text())
    assert "path" not in data[key]
    data[key]["path"] = str(checkpoint)
    config.write_text(yaml.safe_dump(data, sort_keys=False))


def test_the_readme_own_pool_section_runs_as_written(tmp_path, tiny_model) -> None:
    commands = section_commands()
    shutil.copytree(ROOT / "examples" / "own-pool", tmp_path / "examples" / "own-pool")
    # The orchestrator trained, evaluated and served is the tiny stand-in for SmolLM2 (tests/tiny_model.py): what
    # is checked here is the plumbing and figures computed from the records, not what the model decides.
    point_at(tiny_model, tmp_path / "examples" / "own-pool" / "sft.yaml", "model")
    point_at(tiny_model, tmp_path / "examples" / "own-pool" / "system.yaml", "orchestrator")
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    pool = tmp_path / "examples" / "own-pool" / "pool.yaml"
    with workers_server() as url:
        pool.write_text(pool.read_text().replace("http://127.0.0.1:8100/v1", url))
        results = [run(tmp_path, command) for command in commands[:-1]]
        serve = commands[-1]
        assert serve.startswith("podium serve") and serve.endswith("--port 8000")
        port = free_port()
        environment = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PODIUM_DATA": str(shared_data_dir())}
        server = subprocess.Popen([sys.executable, "-m", "podium", *shlex.split(serve)[1:-1], str(port)],
                                  cwd=tmp_path, env=environment, stderr=subprocess.PIPE, text=True)  # fmt: skip
        try:
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
            deadline = time.monotonic() + 120
            while True:
                try:
                    models = [model.id for model in client.models.list().data]
                    break
                except openai.APIConnectionError:
                    assert server.poll() is None and time.monotonic() < deadline, server.stderr.read()[-2000:]
                    time.sleep(0.5)
            assert models == ["cascade-router", "orchestrator_sft"]
            question = json.loads((tmp_path / "runs/own-pool/test.jsonl").read_text().splitlines()[0])["question"]
            reply = client.chat.completions.create(
                model="cascade-router", messages=[{"role": "user", "content": question}]
            )
            assert re.search(r"Answer: [A-J]", reply.choices[0].message.content or "")
        finally:
            server.terminate()
            server.wait(timeout=30)
    recording = tmp_path / "runs" / "own-pool" / "recording"
    first = last_json(results[1])  # the first comparison: routers only, on the test split
    hand = by_hand(recording, "test")
    assert first["n_test"] == len([1 for line in (tmp_path / "runs/own-pool/test.jsonl").read_text().splitlines()])
    for system, figures in hand.items():
        assert first["accuracy"][system] == pytest.approx(figures["accuracy"], abs=1e-4), system
        assert first["usd_per_question"][system] == pytest.approx(figures["usd"], abs=1e-6), system
    assert {"knn", "logreg", "mf", "cascade", "random", "oracle"} <= set(first["cost_apgr"])
    assert "cascade_checks" not in first["cost_apgr"]  # multiple choice has no verify tool
    assert first["apgr"]["knn"] is None and first["references"]["best"] == "large"
    cheapest = min(("small", "medium", "large"), key=lambda w: hand[f"always_{w}"]["usd"])
    assert first["cost_apgr"][f"always_{cheapest}"] == pytest.approx(0.5)
    final = last_json(results[10])  # with the orchestrator, on the 6 test tasks it was evaluated on
    assert final["n_test"] == 6 and "orchestrator_sft" in final["accuracy"]
    run_records = [
        json.loads(line) for line in (tmp_path / "runs/own-pool/eval-sft/results.jsonl").read_text().splitlines()
    ]
    assert final["accuracy"]["orchestrator_sft"] == pytest.approx(
        sum(r["verdict"]["correct"] for r in run_records) / 6, abs=1e-4
    )
    spent = sum(r["usage"]["usd"] for r in run_records) / 6
    assert final["usd_per_question"]["orchestrator_sft"] == pytest.approx(spent, abs=1e-6)
    for system, figures in by_hand(recording, "test", 6).items():
        assert final["accuracy"][system] == pytest.approx(figures["accuracy"], abs=1e-4), system
    threshold = last_json(results[9])
    assert set(threshold["escalate_above"]) <= {"medium", "large"}  # one threshold per worker it may escalate to
    priced = (tmp_path / "runs/own-pool/system-priced.yaml").read_text()
    assert "escalate_above:" in priced
