"""Backends: the embedded model's load time (cold conversion from GGUF, then cached) and decoding speed; the
HTTP backend's overhead per trivial request against Podium's model server vs a raw httpx request, same run.

    python benchmarks/bench_backends.py [--requests 200] [--skip-model]
"""

import argparse
import asyncio
import os
import statistics
import tempfile
import time

import httpx

from podium.backends.http import HttpBackend, HttpBackendConfig
from podium.backends.scripted import ScriptedBackend
from podium.core import Message
from podium.serve.model_server import serving_in_thread

PROMPT = [Message(role="user", content="ping")]


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def bench_embedded_model() -> None:
    from podium.backends.local import LocalBackend

    with tempfile.TemporaryDirectory() as cache:
        os.environ["PODIUM_CACHE"] = cache
        for label in ("cold (GGUF conversion)", "cached"):
            started = time.perf_counter()
            backend = LocalBackend()
            backend.load()
            print(f"embedded model load, {label:<24}{time.perf_counter() - started:8.2f} s")
        for tokens in (32, 128):
            generation = asyncio.run(
                backend.generate([Message(role="user", content="Tell me a story about a robot.")], max_tokens=tokens)
            )
            speed = generation.output_tokens / generation.latency_s
            seconds = generation.latency_s
            print(
                f"decode {generation.output_tokens:>3} tokens (greedy, 1 thread) {seconds:8.2f} s  {speed:6.1f} tok/s"
            )


async def time_requests(requests: int, base_url: str) -> tuple[list[float], list[float]]:
    podium_backend = HttpBackend(HttpBackendConfig(model="bench", base_url=base_url))
    body = {"model": "bench", "messages": [{"role": "user", "content": "ping"}], "max_tokens": 512, "temperature": 0.0}
    raw, podium = [], []
    async with httpx.AsyncClient(base_url=base_url) as client:
        for _ in range(10):  # warm both connection pools
            await client.post("/chat/completions", json=body)
            await podium_backend.generate(PROMPT)
        for _ in range(requests):
            started = time.perf_counter()
            response = await client.post("/chat/completions", json=body)
            response.json()
            raw.append(time.perf_counter() - started)
            started = time.perf_counter()
            await podium_backend.generate(PROMPT)
            podium.append(time.perf_counter() - started)
    return raw, podium


def bench_http(requests: int) -> None:
    with serving_in_thread(ScriptedBackend(["pong"], model="bench", repeat_last=True)) as base_url:
        raw, podium = asyncio.run(time_requests(requests, base_url))
    print(f"{requests} trivial requests to the model server      p50 ms   p95 ms   mean ms")
    for label, samples in (("raw httpx", raw), ("podium HttpBackend", podium)):
        print(
            f"{label:<44}{percentile(samples, 0.5) * 1e3:7.2f} {percentile(samples, 0.95) * 1e3:8.2f}"
            f" {statistics.fmean(samples) * 1e3:9.2f}"
        )
    overhead = (statistics.fmean(podium) - statistics.fmean(raw)) * 1e6
    ratio = statistics.fmean(podium) / statistics.fmean(raw)
    print(f"HttpBackend overhead: {overhead:.0f} µs per request ({ratio:.2f}x raw)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--skip-model", action="store_true", help="only the HTTP comparison")
    options = parser.parse_args()
    bench_http(options.requests)
    if not options.skip_model:
        bench_embedded_model()


if __name__ == "__main__":
    main()
