"""Served-episode overhead: the same episode run directly (``Executor.run`` in process, what ``podium run`` does
after start-up), through ``podium serve`` with the official openai client, and as a whole ``podium run`` process,
all measured in the same run.

    python benchmarks/bench_serve.py [--episodes 20] [--system SYSTEM.yaml] [--question "What is 17 * 23?"]

The default system is a scripted orchestrator that calls a scripted worker once and answers (two turns, one
call), so the figures are the serving machinery's own cost; ``--system`` measures a real one (e.g.
``examples/systems/embedded-orchestrator.yaml``), where the episode dominates. Reports medians and the
served/direct ratio.
"""

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import openai

from podium.runtime.system import OrchestratorSystem, SystemSpec
from podium.serve.http import app_in_thread
from podium.serve.orchestrator_server import ServeConfig, create_orchestrator_app, load_system_spec

CALL = '<tool_call>{"name": "helper", "arguments": {"prompt": "What is 17 * 23?"}}</tool_call>'
SCRIPTED = {
    "name": "scripted",
    "orchestrator": "orchestrator",
    "deny": ["orchestrator"],
    "pool": {
        "workers": [
            {"name": "orchestrator", "backend": "scripted", "model": "o", "replies": [CALL, "<answer>391</answer>"]},
            {"name": "helper", "backend": "scripted", "model": "h", "replies": ["391"]},
        ],
        "tools": [],
    },
}


def median_ms(samples: list[float]) -> float:
    return 1000 * statistics.median(samples)


def systems(spec: SystemSpec, episodes: int, fresh: bool) -> list[OrchestratorSystem]:
    """One system per episode when ``fresh`` (scripted replies start over, as in a new process), else one shared
    (a loaded model stays loaded, as in a running server)."""
    if fresh:
        return [OrchestratorSystem.build(spec) for _ in range(episodes)]
    shared = OrchestratorSystem.build(spec)
    return [OrchestratorSystem(shared.name, shared.pool, shared.config) for _ in range(episodes)]


def direct(built: list[OrchestratorSystem], question: str) -> list[float]:
    times = []
    for system in built:
        started = time.perf_counter()
        trajectory = asyncio.run(system.executor().run(question))
        times.append(time.perf_counter() - started)
        assert trajectory.answer, trajectory.stop_reason
    return times


def served(built: list[OrchestratorSystem], question: str) -> list[float]:
    """Each episode one request, from one client kept alive, to one server serving every system."""
    named = {f"{system.name}-{index}": system for index, system in enumerate(built)}
    served_systems = [OrchestratorSystem(name, system.pool, system.config) for name, system in named.items()]
    times = []
    with app_in_thread(create_orchestrator_app(served_systems, ServeConfig())) as url:
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        client.models.list()  # the connection is open before the first episode
        for name in named:
            started = time.perf_counter()
            reply = client.chat.completions.create(model=name, messages=[{"role": "user", "content": question}])
            times.append(time.perf_counter() - started)
            assert reply.choices[0].message.content, reply
        client.close()
    return times


def podium_run(spec_path: Path, question: str, episodes: int) -> list[float]:
    """Whole ``podium run`` processes (interpreter start, imports, pool build, the episode, printing)."""
    data = json.loads(spec_path.read_text())
    with tempfile.TemporaryDirectory() as folder:
        pool, config = Path(folder) / "pool.json", Path(folder) / "run.json"
        pool.write_text(json.dumps(data.pop("pool")))
        config.write_text(json.dumps({k: v for k, v in data.items() if k != "name"}))
        command = [str(Path(sys.executable).with_name("podium")), "run", question, "--pool", str(pool)]
        times = []
        for _ in range(episodes):
            started = time.perf_counter()
            subprocess.run([*command, "--config", str(config)], check=True, capture_output=True)
            times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--system", type=Path, help="a system file; default: the scripted two-turn orchestrator")
    parser.add_argument("--question", default="What is 17 * 23?")
    arguments = parser.parse_args()
    spec = load_system_spec(arguments.system) if arguments.system else SystemSpec.model_validate(SCRIPTED)
    fresh = arguments.system is None
    direct(systems(spec, 1, fresh), arguments.question)  # warm-up: imports, model loading
    in_process = direct(systems(spec, arguments.episodes, fresh), arguments.question)
    through_server = served(systems(spec, arguments.episodes, fresh), arguments.question)
    print(f"episode, direct (Executor.run in process): median {median_ms(in_process):9.1f} ms")
    print(f"episode, served (openai client → podium serve): median {median_ms(through_server):9.1f} ms")
    overhead = median_ms(through_server) - median_ms(in_process)
    ratio = statistics.median(through_server) / statistics.median(in_process)
    print(f"serving overhead: {overhead:+.1f} ms per episode, served/direct = {ratio:.2f}")
    if arguments.system is None:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(SCRIPTED, handle)
        runs = podium_run(Path(handle.name), arguments.question, min(arguments.episodes, 5))
        Path(handle.name).unlink()
        print(f"episode, a whole `podium run` process: median {median_ms(runs):9.1f} ms "
              f"(served/podium run = {statistics.median(through_server) / statistics.median(runs):.3f})")  # fmt: skip


if __name__ == "__main__":
    main()
