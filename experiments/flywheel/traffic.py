"""Traffic for the flywheel (experiments/flywheel/README.md): a tasks file's questions sent to `podium serve`
through the official OpenAI client, as an application would send them, each with its task kind and gold answer in
the extra `podium` object, so that the server grades every episode as it ends.

    python experiments/flywheel/traffic.py --url http://127.0.0.1:8052/v1 --model orchestrator_sft \
        --tasks runs/flywheel/train.jsonl --key-env FLYWHEEL_APP_KEY

It waits for the server to answer (it may still be starting), sends the questions a few at a time, shows progress
on stderr, and prints one JSON line: the questions sent, answered and graded correct, the USD the answers cost, and
the versions that answered. Exit status: 0 every question was answered, 1 some request failed (each is named).
"""

import argparse
import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import openai

STARTUP_S = 300.0
"""How long to wait for the server to answer its first request."""


def tasks_of(path: str, limit: int | None) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        tasks = [json.loads(line) for line in handle if line.strip()]
    return tasks[:limit] if limit else tasks


def ready(client: openai.OpenAI, model: str) -> None:
    """Wait until the server lists ``model``."""
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            client.models.retrieve(model)
            return
        except openai.APIConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def ask(client: openai.OpenAI, model: str, task: dict) -> dict:
    """One question with its gold; what the response said of it."""
    options = {"podium": {"verifier": task["verifier"], "gold": task["gold"]}}
    messages = [{"role": "user", "content": task["question"]}]
    reply = client.chat.completions.create(model=model, messages=messages, extra_body=options)
    served = reply.model_extra["podium"]
    return {"id": reply.id, "correct": served["grade"]["correct"], "usd": served["usd"], "version": served["version"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="The server's base URL (…/v1).")
    parser.add_argument("--model", required=True, help="The served model id.")
    parser.add_argument("--tasks", required=True, help="Tasks JSONL (question, gold, verifier).")
    parser.add_argument("--key-env", help="Environment variable holding the API key to send.")
    parser.add_argument("--limit", type=int, help="Only the first N questions.")
    parser.add_argument("--concurrency", type=int, default=2, help="Requests in flight at once.")
    options = parser.parse_args()
    key = os.environ[options.key_env] if options.key_env else "none"
    client = openai.OpenAI(base_url=options.url, api_key=key, max_retries=5, timeout=600)
    tasks = tasks_of(options.tasks, options.limit)
    ready(client, options.model)
    answers, failures = [], []
    with ThreadPoolExecutor(options.concurrency) as pool:
        futures = [(task, pool.submit(ask, client, options.model, task)) for task in tasks]
        for number, (task, future) in enumerate(futures, 1):
            try:
                answers.append(future.result())
            except openai.APIError as error:
                failures.append(task.get("id"))
                print(f"{task.get('id')}: {error}", file=sys.stderr)
            if number % 25 == 0 or number == len(tasks):
                right = sum(answer["correct"] for answer in answers)
                print(f"{options.tasks}: {number}/{len(tasks)} sent, {right} graded correct", file=sys.stderr)
    summary = {
        "tasks": options.tasks,
        "sent": len(tasks),
        "answered": len(answers),
        "correct": sum(answer["correct"] for answer in answers),
        "usd": sum(answer["usd"] for answer in answers),
        "versions": dict(Counter(answer["version"] for answer in answers)),
        "failed": failures,
    }
    print(json.dumps(summary))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
