"""An OpenAI-compatible test server standing in for three paid models of different skill per subject, answering
multiple-choice questions (MMLU-Pro): what a user's pool looks like to Podium, without a network.

Each model's skill depends on the question's subject (quantitative, verbal, other: read from its words), so a router
that reads the question can learn who to ask; a wrong reply usually hedges, so a cascade that reads the reply can
learn when to escalate. Whether a model is right on a question is a fixed function of (model, question): a seeded
hash, so every run sees the same outcomes. A model named ``broken`` answers 500 to every request.

Run alone: ``python tests/workers_server.py --port 8100`` (the pool of ``examples/own-pool/pool.yaml``).
"""

import argparse
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mc" / "mmlu_pro_300.jsonl"
SKILL = {
    "mc-small": {"quantitative": 0.2, "verbal": 0.75, "other": 0.45},
    "mc-medium": {"quantitative": 0.8, "verbal": 0.4, "other": 0.55},
    "mc-large": {"quantitative": 0.85, "verbal": 0.85, "other": 0.85},
}
"""Model → probability of a right answer per subject."""
LETTERS = "ABCDEFGHIJ"


def subject(question: str) -> str:
    """quantitative (three or more digits), verbal (law or life sciences) or other."""
    text = question.lower().split("options are")[0]
    verbal = r"\b(law|court|defendant|plaintiff|statute|legal|contract|constitution|jury|tort|crime|cell|protein|" \
             r"disease|patient|gene|species|blood|enzyme|organism|dna|muscle|infection|drug)"  # fmt: skip
    if re.search(verbal, text):
        return "verbal"
    return "quantitative" if len(re.findall(r"\d", text)) >= 3 else "other"


def draw(*parts: str) -> float:
    """A number in [0, 1) fixed by ``parts``."""
    return int(hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:12], 16) / 16**12


def reply(model: str, question: str, gold: str) -> str:
    """The model's answer: right with its skill at the question's subject; a wrong one hedges 70 % of the time, a
    right one 10 %."""
    right = draw(model, question, "right") < SKILL[model][subject(question)]
    letter = gold if right else LETTERS[(LETTERS.index(gold) + 1 + int(draw(model, question, "wrong") * 9)) % 10]
    hedge = draw(model, question, "hedge") < (0.1 if right else 0.7)
    if hedge:
        return f"I am not sure about this one; it is probably {letter}, but I might be wrong.\nAnswer: {letter}"
    return f"Checking each option against the question, only {letter} holds.\nAnswer: {letter}"


def create_app(data: Path = DATA) -> FastAPI:
    """The server: ``/v1/models`` and ``/v1/chat/completions`` for the models of :data:`SKILL`."""
    golds = {}
    for line in data.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        golds[" ".join(row["question"].split())] = row["answer"]
    app = FastAPI()
    app.state.requests = 0

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model"} for name in SKILL]}

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> JSONResponse:
        body = await request.json()
        app.state.requests += 1
        model = body.get("model")
        text = " ".join(" ".join(str(m.get("content", "")) for m in body.get("messages", [])).split())
        question = next((q for q in golds if q in text), None)
        if model not in SKILL or question is None:
            status = 500 if model == "broken" else 400
            return JSONResponse({"error": {"message": f"cannot answer as {model}", "type": "invalid_request"}}, status)
        content = reply(model, question, golds[question])
        prompt_tokens, completion_tokens = len(text.split()), len(content.split())
        return JSONResponse({
            "id": f"cmpl-{app.state.requests}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        })  # fmt: skip

    return app


@contextmanager
def workers_server(port: int = 0) -> Iterator[str]:
    """The server on 127.0.0.1 in a thread (``port`` 0: a free one); yields its ``/v1`` base URL."""
    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the workers server did not start")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{bound}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8100)
    arguments = parser.parse_args()
    uvicorn.run(create_app(), host="127.0.0.1", port=arguments.port, log_level="warning")
