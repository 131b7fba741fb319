"""Serving overhead, measured in the same run against the same scripted orchestrator run directly.

1. Concurrent (issues 27 and 53): N streaming requests at once (default 200) from the official async openai
   client, in a separate process, against ``podium serve``; the baseline is N ``System.solve`` episodes at once in
   process (what the server runs for each request). Reports errors other than 429, the 429s, p50/p99 of each
   request's latency (to ``[DONE]``, retries included) and of the time to its first chunk, against the baseline's
   p50/p99, and the served overhead per request. A request refused with 429 waits its ``retry-after-ms`` and tries
   again; each advice is compared with the actual drain time (from the refusal until the requests admitted before
   it were done, as the load generator saw them), and a retry refused again is counted. Run with a slot for every
   request, then with the defaults (4 slots, 64 queued) for two bursts on one server: the first cold (nothing
   measured: the advice is a second), the next with the drain rate measured.
2. Sequential: one request at a time, against ``System.solve`` and against a whole ``podium run`` process.

    python benchmarks/bench_serve.py [--concurrent 200] [--delay 0.0] [--episodes 20]

The scripted orchestrator calls a scripted worker once and answers (two turns, one call; ``--delay`` seconds per
orchestrator generation stand in for a model), so the figures are the serving machinery's own cost.

Measured on the 2 shared cores this was written on, at a load average of 4 to 6 from other work (so the wall
figures mostly measure contention; the CPU figures hold better), ``--concurrent 200``:

    200 requests at once          p50 ms   p99 ms  errors   429s
    direct System.solve           379.1    397.2       0      0
    served, a slot each          3658.7   5374.5       0      0   first chunk p50   1536.8 ms
      all 200: 5.53 s served vs 0.40 s direct, 25.7 ms of serving per request, 36 requests/s
      CPU per request: server 3.8 ms vs direct episode 1.1 ms (x3.3)
    served, the defaults         9627.1  12282.6       0    132   first chunk p50   9542.2 ms
      all 200: 12.31 s served vs 0.40 s direct, 59.6 ms of serving per request, 16 requests/s
      CPU per request: server 7.0 ms vs direct episode 1.1 ms (x6.1)
      132 x 429: advice 1.00 s; actual drain p50 5.88 s; advice/actual max 0.23; retries refused again: 0
    served, the defaults, again  9544.4  11761.5       0    132   first chunk p50   9475.6 ms
      all 200: 11.82 s served vs 0.40 s direct, 57.1 ms of serving per request, 17 requests/s
      132 x 429: advice 1.20 s; actual drain p50 5.38 s; advice/actual max 0.30; retries refused again: 0
    one at a time, median ms: direct 1.1, served 8.2; a whole `podium run` process 1855.2

0 errors other than 429 in every run; with the defaults 132 of 200 are refused (4 running + 64 queued admitted),
each with an advice well within 2x of the actual drain, and every retry after it is admitted. (The advice is the
server's own drain, measured at the end of the last burst; the load generator, parsing every chunk on the same
two cores, sees the burst drain later.) With uvicorn's 5 s keep-alive, 1 to 4 of the 200 retried requests failed
with a connection error (a retry sent on a connection the server was closing); the servers keep connections 75 s
(:data:`podium.serve.http.KEEP_ALIVE_S`). The server spends about 3 ms of CPU per streamed request beyond the
episode itself (HTTP, validation, about ten chunks); the rest of the wall time is the load generator (the openai
client parsing every chunk) and the other processes on the two cores.
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


MAX_ATTEMPTS = 10
"""Most attempts of one request in the load generator (each 429 waits its Retry-After, then tries again)."""


async def load(url: str, count: int) -> dict[str, object]:
    """``count`` streaming requests at once (run in its own process: ``--load URL``); a request refused with 429
    waits the ``retry-after-ms`` it was given and tries again, and each refusal is kept with its advice."""
    import httpx
    import openai

    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    api = openai.AsyncOpenAI(
        base_url=url, api_key="none", max_retries=0, timeout=600, http_client=httpx.AsyncClient(limits=limits)
    )
    started = time.perf_counter()
    refusals: list[tuple[float, float]] = []
    """(seconds from the start, advised seconds) of every 429."""
    admitted: list[tuple[float, float]] = []
    """(sent, ended) of every attempt that was not refused, seconds from the start."""
    refused_again: list[bool] = []
    """For every 429: whether it refused a retry."""

    async def attempt() -> tuple[float, float] | str:
        sent = time.perf_counter() - started
        stream = await api.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": QUESTION}], stream=True
        )
        first, text = None, ""
        async for chunk in stream:
            first = first or time.perf_counter() - started
            text += "".join(choice.delta.content or "" for choice in chunk.choices)
        admitted.append((sent, time.perf_counter() - started))
        return (time.perf_counter() - started, first or 0.0) if text == "391" else f"answer {text!r}"

    async def one() -> tuple[float, float] | str:
        for attempts in range(MAX_ATTEMPTS):
            try:
                return await attempt()
            except openai.RateLimitError as refused:
                advice = int(refused.response.headers["retry-after-ms"]) / 1000
                refusals.append((time.perf_counter() - started, advice))
                refused_again.append(attempts > 0)
                await asyncio.sleep(advice)
            except Exception as error:  # counted, not raised: the benchmark reports errors
                cause = f" ({error.__cause__!r})" if error.__cause__ else ""
                return f"{type(error).__name__}: {error}{cause}"
        return f"refused {MAX_ATTEMPTS} times"

    outcomes = await asyncio.gather(*(one() for _ in range(count)))
    await api.close()
    done = [outcome for outcome in outcomes if isinstance(outcome, tuple)]
    errors = [outcome for outcome in outcomes if isinstance(outcome, str)]
    return {
        "latency": [d[0] for d in done],
        "first": [d[1] for d in done],
        "errors": errors[:5],
        "error_count": len(errors),
        "refusals": [[at, advice, drained(at, admitted)] for at, advice in refusals],
        "refused_retries": sum(refused_again),
        "wall_s": time.perf_counter() - started,
    }


def drained(at: float, admitted: list[tuple[float, float]]) -> float:
    """How long after a refusal at ``at`` the work admitted before it was done: the actual drain time."""
    return max((ended for sent, ended in admitted if sent <= at), default=at) - at


def served(system: System, count: int, config: ServeConfig, bursts: int) -> list[dict[str, object]]:
    """The load process's figures for each of ``bursts`` bursts on one server (the first cold, the next with
    the drain rate measured), and the server's CPU seconds (this process) while each ran."""
    results = []
    with app_in_thread(create_orchestrator_app([system], config)) as url:
        for _ in range(bursts):
            command = [sys.executable, __file__, "--load", url, "--concurrent", str(count)]
            cpu = time.process_time()
            completed = subprocess.run(command, capture_output=True, text=True, check=True)
            results.append({**json.loads(completed.stdout), "server_cpu_s": time.process_time() - cpu})
    return results


def ms(seconds: float) -> str:
    return f"{1000 * seconds:8.1f}"


def concurrent(count: int, delay: float) -> None:
    system = scripted_system(delay)
    direct(system, 2)  # warm-up: imports, first episode
    direct_cpu = time.process_time()
    baseline = direct(system, count)
    direct_cpu = time.process_time() - direct_cpu
    d50, d99, direct_wall = percentile(baseline, 0.5), percentile(baseline, 0.99), max(baseline)
    print(f"{count} requests at once          p50 ms   p99 ms  errors   429s")
    print(f"direct System.solve        {ms(d50)} {ms(d99)}       0      0")
    defaults = ServeConfig()
    runs = [
        ("served, a slot each        ", ServeConfig(max_concurrent=count, max_queued=0), 1),
        ("served, the defaults       ", defaults, 2),  # a second burst: the drain rate is measured by then
    ]
    for label, config, bursts in runs:
        for burst, result in enumerate(served(system, count, config, bursts)):
            shown = label if not burst else f"{label.rstrip()}, again".ljust(len(label))
            report(shown, result, config, (d50, d99, direct_wall, direct_cpu))


def report(
    label: str, result: dict[str, object], config: ServeConfig, baseline: tuple[float, float, float, float]
) -> None:
    """One burst's figures against the direct baseline (its p50, p99, wall and CPU seconds)."""
    d50, d99, direct_wall, direct_cpu = baseline
    latency, first, refusals = result["latency"], result["first"], result["refusals"]
    assert isinstance(latency, list) and isinstance(first, list) and isinstance(refusals, list)
    if not latency:
        print(f"{label} every request failed: {result['errors']}")
        return
    count = len(latency) + int(result["error_count"])  # type: ignore[call-overload]
    s50, s99 = percentile(latency, 0.5), percentile(latency, 0.99)
    print(
        f"{label}{ms(s50)} {ms(s99)} {result['error_count']:7d} {len(refusals):6d}   "
        f"first chunk p50 {ms(percentile(first, 0.5))} ms"
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
    if refusals:
        report_refusals(refusals, config, int(result["refused_retries"]))  # type: ignore[call-overload]
    if result["errors"]:
        print(f"  errors: {result['errors']}")


def report_refusals(refusals: list[list[float]], config: ServeConfig, refused_retries: int) -> None:
    """How the Retry-After advice of the 429s compares with the time the work ahead actually took to drain."""
    advice = [row[1] for row in refusals]
    ratios = [advised / max(actual, 1e-3) for _, advised, actual in refusals]
    within = sum(advised <= 2 * actual for _, advised, actual in refusals)
    print(
        f"  {len(refusals)} x 429 ({config.max_concurrent} slots, {config.max_queued} queued), each retried after "
        f"its retry-after-ms: advice p50 {percentile(advice, 0.5):.2f} s, max {max(advice):.2f} s; "
        f"actual drain p50 {percentile([row[2] for row in refusals], 0.5):.2f} s; advice/actual p50 "
        f"{percentile(ratios, 0.5):.2f}, max {max(ratios):.2f}; within 2x of the actual drain: "
        f"{within}/{len(refusals)}; retries refused again: {refused_retries}"
    )


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
