"""Serving overhead, measured in the same run against the same scripted orchestrator run directly.

1. Concurrent (issue 27): N streaming requests at once (default 200) from the official async openai client, in a
   separate process, against ``podium serve``; the baseline is N ``System.solve`` episodes at once in process
   (what the server runs for each request). Reports errors, p50/p99 of each request's latency (to ``[DONE]``)
   and of the time to its first chunk, against the baseline's p50/p99, and the served overhead per request.
   Run twice: with a slot for every request, and with the default 4 slots and the rest queued.
2. Sequential: one request at a time, against ``System.solve`` and against a whole ``podium run`` process.

    python benchmarks/bench_serve.py [--concurrent 200] [--delay 0.0] [--episodes 20]

The scripted orchestrator calls a scripted worker once and answers (two turns, one call; ``--delay`` seconds per
orchestrator generation stand in for a model), so the figures are the serving machinery's own cost.

Measured on the 2 shared cores this was written on, with a load average of 8 to 10 from other work (so the wall
figures mostly measure contention; the CPU figures hold better), ``--concurrent 200``, when the baseline called
``Executor.run`` itself (``System.solve`` now stands between them and only picks what to send):

    200 requests at once          p50 ms   p99 ms  errors
    direct Executor.run            599.4    646.6       0
    served, a slot each           7007.8  10076.7       0   first chunk p50   2999.0 ms
      all 200: 10.09 s served vs 0.65 s direct, 20 requests/s
      CPU per request: server 4.8 ms vs direct episode 1.5 ms (x3.3; the load generator's own CPU not counted)
    served, 4 slots + queue       6454.7   9276.2       0   first chunk p50   5598.3 ms
      all 200: 9.36 s served vs 0.65 s direct, 21 requests/s
      CPU per request: server 4.8 ms vs direct episode 1.5 ms (x3.3)
    one at a time, median ms: direct 1.1, served 14.7; a whole `podium run` process 3237.9

0 errors in both runs. The server spends 3.3 ms of CPU per streamed request beyond the episode itself (HTTP,
validation, about ten chunks); the rest of the wall time is the load generator (the openai client parsing every
chunk) and the other processes on the two cores.
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

from podium.backends.base import Completion, GenerationRequest
from podium.backends.scripted import ScriptedBackend
from podium.core.messages import Message
from podium.pool.config import PoolConfig, WorkerConfig
from podium.pool.pool import build_pool
from podium.runtime.config import RunConfig
from podium.serve.http import app_in_thread
from podium.serve.orchestrator_server import ServeConfig, create_orchestrator_app
from podium.solve.system import System

QUESTION = "What is 17 * 23?"
CALL = '<tool_call>{"name": "helper", "arguments": {"prompt": "What is 17 * 23?"}}</tool_call>'


def script(messages: list[Message]) -> str:
    """Call the helper first; answer once its observation is in."""
    return "<answer>391</answer>" if "<tool_response" in messages[-1].content else CALL


class Orchestrator(ScriptedBackend):
    """The scripted orchestrator, ``delay`` seconds a generation (without blocking the loop)."""

    def __init__(self, delay: float) -> None:
        super().__init__([script], model="orchestrator", repeat_last=True)
        self.delay = delay

    async def _complete(self, request: GenerationRequest) -> Completion:
        if self.delay:
            await asyncio.sleep(self.delay)
        return await super()._complete(request)


def scripted_system(delay: float) -> System:
    workers = [
        WorkerConfig(name="orchestrator", backend="scripted", model="orchestrator", replies=["unused"]),
        WorkerConfig(name="helper", backend="scripted", model="helper", replies=["391"]),
    ]
    pool = build_pool(PoolConfig(workers=workers, tools=[], roles=[]))
    pool.backends["orchestrator"] = Orchestrator(delay)
    return System("scripted", pool, RunConfig(orchestrator="orchestrator", deny=["orchestrator"]))


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def direct(system: System, count: int) -> list[float]:
    """``count`` episodes at once in process: each one's seconds from the common start to its end."""

    async def run_all() -> list[float]:
        started = time.perf_counter()

        async def one() -> float:
            trajectory = await system.solve(QUESTION)
            assert trajectory.answer == "391", trajectory.stop_reason
            return time.perf_counter() - started

        return list(await asyncio.gather(*(one() for _ in range(count))))

    return asyncio.run(run_all())


async def load(url: str, count: int) -> dict[str, object]:
    """``count`` streaming requests at once (run in its own process: ``--load URL``)."""
    import httpx
    import openai

    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    api = openai.AsyncOpenAI(
        base_url=url, api_key="none", max_retries=0, timeout=600, http_client=httpx.AsyncClient(limits=limits)
    )
    started = time.perf_counter()

    async def one() -> tuple[float, float, float] | str:
        try:
            stream = await api.chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": QUESTION}], stream=True
            )
            first, text, episode_s = None, "", 0.0
            async for chunk in stream:
                first = first or time.perf_counter() - started
                text += "".join(choice.delta.content or "" for choice in chunk.choices)
                summary = (chunk.model_extra or {}).get("podium") or {}
                episode_s = summary.get("wall_s", episode_s)
            if text != "391":
                return f"answer {text!r}"
            return time.perf_counter() - started, first or 0.0, episode_s
        except Exception as error:  # counted, not raised: the benchmark reports errors
            return f"{type(error).__name__}: {error}"

    outcomes = await asyncio.gather(*(one() for _ in range(count)))
    await api.close()
    done = [outcome for outcome in outcomes if isinstance(outcome, tuple)]
    errors = [outcome for outcome in outcomes if isinstance(outcome, str)]
    return {
        "latency": [d[0] for d in done],
        "first": [d[1] for d in done],
        "episode": [d[2] for d in done],
        "errors": errors[:5],
        "error_count": len(errors),
        "wall_s": time.perf_counter() - started,
    }


def served(system: System, count: int, config: ServeConfig) -> dict[str, object]:
    """The load process's figures, and the server's CPU seconds (this process) while it ran."""
    with app_in_thread(create_orchestrator_app([system], config)) as url:
        command = [sys.executable, __file__, "--load", url, "--concurrent", str(count)]
        cpu = time.process_time()
        completed = subprocess.run(command, capture_output=True, text=True, check=True)
        cpu = time.process_time() - cpu
    return {**json.loads(completed.stdout), "server_cpu_s": cpu}


def ms(seconds: float) -> str:
    return f"{1000 * seconds:8.1f}"


def concurrent(count: int, delay: float) -> None:
    system = scripted_system(delay)
    direct(system, 2)  # warm-up: imports, first episode
    direct_cpu = time.process_time()
    baseline = direct(system, count)
    direct_cpu = time.process_time() - direct_cpu
    d50, d99, direct_wall = percentile(baseline, 0.5), percentile(baseline, 0.99), max(baseline)
    print(f"{count} requests at once          p50 ms   p99 ms  errors")
    print(f"direct System.solve        {ms(d50)} {ms(d99)}       0")
    for label, config in (
        ("served, a slot each        ", ServeConfig(max_concurrent=count, max_queued=0)),
        ("served, 4 slots + queue    ", ServeConfig(max_concurrent=4, max_queued=count)),
    ):
        result = served(system, count, config)
        latency, first = result["latency"], result["first"]
        assert isinstance(latency, list) and isinstance(first, list)
        if not latency:
            print(f"{label} every request failed: {result['errors']}")
            continue
        s50, s99 = percentile(latency, 0.5), percentile(latency, 0.99)
        print(
            f"{label}{ms(s50)} {ms(s99)} {result['error_count']:7d}   first chunk p50 {ms(percentile(first, 0.5))} ms"
        )
        wall = float(result["wall_s"])  # type: ignore[arg-type]
        print(
            f"  overhead per request: p50 {1000 * (s50 - d50):+.1f} ms, p99 {1000 * (s99 - d99):+.1f} ms "
            f"(served/direct p50 {s50 / d50:.2f}); all {count}: {wall:.2f} s served vs {direct_wall:.2f} s direct, "
            f"{1000 * (wall - direct_wall) / count:.1f} ms of serving per request, {count / wall:.0f} requests/s"
        )
        cpu = float(result["server_cpu_s"])  # type: ignore[arg-type]
        print(
            f"  CPU per request: server {1000 * cpu / count:.1f} ms vs direct episode {1000 * direct_cpu / count:.1f} "
            f"ms (x{cpu / direct_cpu:.1f}; the load generator's own CPU not counted)"
        )
        if result["errors"]:
            print(f"  errors: {result['errors']}")


def sequential(episodes: int) -> None:
    """One at a time: direct, served (one client kept alive), and a whole `podium run` process."""
    import openai

    system = scripted_system(0.0)
    direct(system, 1)
    in_process = []
    for _ in range(episodes):
        started = time.perf_counter()
        direct(system, 1)
        in_process.append(time.perf_counter() - started)
    through_server = []
    with app_in_thread(create_orchestrator_app([system], ServeConfig())) as url:
        api = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        api.models.list()  # the connection is open before the first episode
        for _ in range(episodes):
            started = time.perf_counter()
            reply = api.chat.completions.create(model="scripted", messages=[{"role": "user", "content": QUESTION}])
            through_server.append(time.perf_counter() - started)
            assert reply.choices[0].message.content == "391", reply
        api.close()
    runs = podium_runs(min(episodes, 5))
    d50, s50, r50 = (statistics.median(samples) for samples in (in_process, through_server, runs))
    print(f"one at a time, median ms: direct {ms(d50)}, served {ms(s50)} (served/direct {s50 / d50:.2f}), ")
    print(f"  a whole `podium run` process {ms(r50)} (served/podium run {s50 / r50:.3f})")


def podium_runs(count: int) -> list[float]:
    """Whole ``podium run`` processes on the same scripted system (interpreter, imports, pool, episode)."""
    workers = [
        {"name": "orchestrator", "backend": "scripted", "model": "o", "replies": [CALL, "<answer>391</answer>"]},
        {"name": "helper", "backend": "scripted", "model": "h", "replies": ["391"]},
    ]
    with tempfile.TemporaryDirectory() as folder:
        pool, config = Path(folder) / "pool.json", Path(folder) / "run.json"
        pool.write_text(json.dumps({"workers": workers, "tools": [], "roles": []}))
        config.write_text(json.dumps({"orchestrator": "orchestrator", "deny": ["orchestrator"]}))
        command = [str(Path(sys.executable).with_name("podium")), "run", QUESTION, "--pool", str(pool)]
        times = []
        for _ in range(count):
            started = time.perf_counter()
            subprocess.run([*command, "--config", str(config)], check=True, capture_output=True)
            times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrent", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per orchestrator generation")
    parser.add_argument("--episodes", type=int, default=20, help="sequential episodes")
    parser.add_argument("--load", help=argparse.SUPPRESS)  # the load generator's own process
    arguments = parser.parse_args()
    if arguments.load:
        print(json.dumps(asyncio.run(load(arguments.load, arguments.concurrent))))
        return
    concurrent(arguments.concurrent, arguments.delay)
    sequential(arguments.episodes)


if __name__ == "__main__":
    main()
