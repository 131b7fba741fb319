"""Hostile inputs at scale (issue 28): alias bombs in every kind of file, text that tries to drive the terminal,
non-finite numbers in every config field, and calls that return too much or nest too deep.

    python benchmarks/bench_hostile.py [--texts 20000] [--numbers 20000] [--calls 400] [--mcp-megabytes 20]

1. YAML alias bombs, widths 2-10 and depths 2-10, in each of the ten kinds of file Podium reads: seconds to load
   or refuse each, against loading the shipped example configs in the same run. Target: every bomb that expands
   beyond the alias limit refused, the slowest in well under a second (at 3e5431e an 839-byte pool took 18 s).
2. Random hostile texts printed as commands print them (Rich markup, JSON Lines). Target: 0 violations.
3. NaN and infinities in random float fields of every config class. Target: 0 accepted.
4. Calls returning up to 3 MB of text, structure or error text, or values nested up to 320 levels: the largest
   stored trajectory line, and memory for three 20 MB results against three small ones. Target: 0 violations,
   lines bounded (at 3e5431e a 20 MB result made a 20 MB line).
5. With --mcp-megabytes N (0 skips it): an MCP server's N MB text and N MB error, a reply too deep for the
   SDK to read, and a 2N MB line that is no reply followed by an ordinary call: status, seconds and the stored
   line. Target (issue 54): the line fails its call alone and the next call is OK at once (at 97064a4 a 40 MB
   line took the SDK's reader about 19 s, and the calls behind it timed out).
"""

import argparse
import asyncio
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

# support/ (at the repository root) holds what this benchmark shares with the tests that run a small version of it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from podium.core.calls import ToolCall
from podium.core.trajectory import to_json_line
from podium.evaluate.system_config import load_system_config
from podium.pool.pool import load_pool_config
from podium.pool.registry import ToolRegistry
from podium.pool.tool import Tool
from support.hostile import (
    LOADERS,
    bomb_file,
    load_outcome,
    non_finite_campaign,
    size_campaign,
    text_campaign,
)

REPO = Path(__file__).resolve().parents[1]


def shipped_configs_seconds() -> float:
    """Seconds to load the shipped example pools and systems, each once (the baseline)."""
    started = time.perf_counter()
    for path in sorted((REPO / "examples").rglob("pool*.yaml")):
        load_pool_config(path)
    for path in sorted((REPO / "examples" / "systems").glob("*.yaml")):
        load_system_config(path)
    return time.perf_counter() - started


def bombs() -> None:
    baseline = shipped_configs_seconds()
    outcomes: list[tuple[float, str, int, int, int, str]] = []
    with tempfile.TemporaryDirectory() as directory:
        for kind in LOADERS:
            for width in (2, 5, 10):
                for depth in (2, 4, 6, 8, 10):
                    path = bomb_file(Path(directory), kind, width, depth)
                    seconds, outcome = load_outcome(kind, path)
                    outcomes.append((seconds, kind, width, depth, path.stat().st_size, outcome))
    refused = [o for o in outcomes if "aliases expand" in o[5]]
    slowest = max(outcomes)
    print(
        f"alias bombs: {len(outcomes)} files ({len(LOADERS)} kinds x widths 2,5,10 x depths 2-10), {len(refused)} "
        f"refused for their aliases; slowest {slowest[0] * 1e3:.1f} ms ({slowest[1]}, {slowest[2]}x{slowest[3]}, "
        f"{slowest[4]} bytes: {slowest[5][:60]}); shipped example configs load in {baseline * 1e3:.0f} ms"
    )
    largest_loaded = max((o for o in outcomes if o[5] == "loaded"), key=lambda o: o[2] ** o[3], default=None)
    if largest_loaded:
        print(f"  largest bomb loaded: {largest_loaded[1]} {largest_loaded[2]}x{largest_loaded[3]} (within the limit)")


def texts(count: int) -> None:
    started = time.perf_counter()
    campaign = text_campaign(seed=28, texts=count)
    seconds = time.perf_counter() - started
    print(
        f"hostile texts: {campaign.texts} printed in markup and as JSON Lines in {seconds:.1f} s, "
        f"{len(campaign.violations)} violations"
    )
    for violation in campaign.violations[:10]:
        print("  VIOLATION:", violation)


def numbers(count: int) -> None:
    accepted = non_finite_campaign(seed=28, tries=count)
    print(f"non-finite numbers: {count} tries over every config class's float fields, {len(accepted)} accepted")
    for problem in accepted[:10]:
        print("  ACCEPTED:", problem)


def sizes(count: int) -> None:
    started = time.perf_counter()
    campaign = size_campaign(seed=28, calls=count)
    print(
        f"oversized and deep results: {campaign.calls} calls in {time.perf_counter() - started:.1f} s, largest "
        f"stored line {campaign.largest_line} characters, {len(campaign.violations)} violations"
    )
    for violation in campaign.violations[:10]:
        print("  VIOLATION:", violation)
    large = _results_memory(20_000_000)
    print(
        f"three 20 MB results and their trajectory lines keep {large / 2**20:.2f} MiB "
        f"(the values themselves: {3 * 20_000_000 / 2**20:.1f} MiB)"
    )


def _results_memory(chars: int) -> int:
    """Bytes still allocated after three calls returning ``chars`` characters each and their stored lines."""
    registry = ToolRegistry([Tool.from_schema("big", "Return text.", {"type": "object"}, lambda: "x" * chars)])
    tracemalloc.start()
    kept = [asyncio.run(registry.call(ToolCall(name="big"))) for _ in range(3)]
    lines = [to_json_line(result) for result in kept]
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept, lines
    return current


def mcp(megabytes: float) -> None:
    from support.mcp_pool import SCRIPT, pool_with

    pool = pool_with({"name": "t", "command": SCRIPT, "cwd": str(REPO), "timeout_s": 300})
    try:
        for label, tool, arguments in (
            (f"{megabytes:g} MB text", "t__big", {"megabytes": megabytes}),
            (f"{megabytes:g} MB error", "t__big", {"megabytes": megabytes, "error": True}),
            ("a reply 200 levels deep", "t__deep", {"levels": 200}),
            ("a value 100 levels deep", "t__deep", {"levels": 100}),
            (f"a {2 * megabytes:g} MB line that is no reply", "t__garble", {"megabytes": 2 * megabytes}),
            ("the call after it", "t__add", {"a": 1, "b": 2}),
        ):
            started = time.perf_counter()
            result = asyncio.run(pool.registry.call(ToolCall(name=tool, arguments=arguments)))
            seconds = time.perf_counter() - started
            print(
                f"MCP {label}: {result.status} in {seconds:.2f} s, stored line {len(to_json_line(result))} "
                f"characters ({(result.reason or '')[:70]!r})"
            )
    finally:
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=20_000)
    parser.add_argument("--numbers", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--mcp-megabytes", type=float, default=20)
    options = parser.parse_args()
    started = time.perf_counter()
    bombs()
    texts(options.texts)
    numbers(options.numbers)
    sizes(options.calls)
    if options.mcp_megabytes > 0:
        mcp(options.mcp_megabytes)
    print(f"wall {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
