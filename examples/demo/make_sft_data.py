"""Writes examples/demo/sft.jsonl: the SFT data of the demo's trained orchestrator.

A scripted teacher plays the orchestrator in Podium's own executor over the demo pool (examples/demo/pool.yaml),
on arithmetic questions a 135M model cannot do in its head, once per policy (serial, parallel, dag): it calls
python (or routes an execute_python subtask), reads the tool's observation and answers from it. The trajectories
carry the exact prompts, observations and grammars of inference. The teacher also plays the worker behind the
code_reasoner role and the parallel policy's summarizer; those conversations become one-turn trajectories.

The demo question ("What is 123456789 * 987654321?") is never among the training questions.

Run: ``.venv/bin/python examples/demo/make_sft_data.py`` (a minute; it runs the python sandbox), then
``podium train sft --config examples/demo/train_sft.yaml``.
"""

import argparse
import asyncio
import json
import random
import re
from pathlib import Path

from podium.backends.base import ChatBackend, Completion, GenerationRequest
from podium.core.budget import StopReason
from podium.core.messages import Message
from podium.core.trajectory import Trajectory, write_trajectories
from podium.pool.pool import Pool, build_pool, load_pool_config
from podium.pool.summarizer import SUMMARIZER_PROMPT
from podium.runtime import Executor, RunConfig

HERE = Path(__file__).parent
MAX_TOKENS = {"serial": 512, "parallel": 1536, "dag": 2048}
"""The turn budgets of `make demo`, so the teacher's actions are checked against the grammars the demo uses."""
DEMO_QUESTION = "What is 123456789 * 987654321?"
FORMS = (
    ("What is {a} * {b}?", "{a} * {b}"),
    ("Compute {a} * {b} + {c}.", "{a} * {b} + {c}"),
    ("What is {a} * {b} - {c}?", "{a} * {b} - {c}"),
    ("Calculate {a} + {b} * {c}.", "{a} + {b} * {c}"),
    ("How much is {a} * {b}?", "{a} * {b}"),
)
_OBSERVATION = re.compile(r'<(?:tool_response|obs)\b[^>]*status="OK"[^>]*>\n(.*?)\n</(?:tool_response|obs)>', re.S)
_OUTPUT = re.compile(r"\[output\]\n(.*)", re.S)


def questions(count: int, seed: int) -> list[tuple[str, str]]:
    """(question, Python expression) pairs with random 4- to 9-digit operands."""
    rng = random.Random(seed)
    pairs = []
    while len(pairs) < count:
        question, expression = rng.choice(FORMS)
        digits = {name: str(rng.randint(1000, 10 ** rng.randint(4, 9))) for name in "abc"}
        pair = (question.format(**digits), expression.format(**digits))
        if pair[0] != DEMO_QUESTION:
            pairs.append(pair)
    return pairs


def last_result(text: str) -> str:
    """The value the last OK observation printed (code_reasoner observations carry code, then the output)."""
    body = _OBSERVATION.findall(text)[-1]
    output = _OUTPUT.search(body)
    return (output.group(1) if output else body).strip()


class Worker(ChatBackend):
    """The teacher as the pool's worker: it writes the program of the code_reasoner role and of execute_python
    subtasks (any request but the summarizer's), and the summarizer's answer; it records each conversation."""

    supports_regex = True

    def __init__(self, expression: str) -> None:
        super().__init__("smollm2")
        self.expression = expression
        self.conversations: list[list[Message]] = []

    async def _complete(self, request: GenerationRequest) -> Completion:
        messages = request.messages
        if messages[0].content == SUMMARIZER_PROMPT:
            # The summary grammar ends at the box's closing brace, as the prompt asks ("end with ... \boxed{}").
            reply = f"The result is \\boxed{{{last_result(messages[-1].content)}}}"
        else:
            reply = json.dumps({"code": f"print({self.expression})"})
        self.conversations.append([*messages, Message(role="assistant", content=reply)])
        return Completion(matching(reply, request), 0, 0, "stop")


class Orchestrator(ChatBackend):
    """The teacher as the orchestrator: the ideal action of each policy for the conversation it is given."""

    supports_regex = True

    def __init__(self, expression: str) -> None:
        super().__init__("teacher")
        self.expression = expression

    async def _complete(self, request: GenerationRequest) -> Completion:
        return Completion(matching(self.orchestrate(request.messages), request), 0, 0, "stop")

    def orchestrate(self, messages: list[Message]) -> str:
        system, first = messages[0].content, len(messages) == 2
        call = f'<tool_call>{{"name": "python", "arguments": {{"code": "print({self.expression})"}}}}</tool_call>'
        if "<plan" in system:
            if first:
                return (
                    f'<plan round="1">\n<subtask id="1">Compute {self.expression}</subtask>\n</plan>\n'
                    f'<route subtask="1" model="smollm2" skill="execute_python">Print {self.expression}.</route>\n'
                )
            value = last_result(messages[-1].content)
            return f"<verify>The code printed {value}.</verify>\n<final_answer>{value}</final_answer>"
        if "<reasoning>" in system:
            if first:
                return f"<reasoning>Use python.</reasoning>\n{call}\n"
            return (
                "<reasoning>It printed it.</reasoning>\n"
                '<tool_call>{"name": "final_answer", "arguments": {}}</tool_call>\n'
            )
        return call if first else f"<answer>{last_result(messages[-1].content)}</answer>"


def matching(reply: str, request: GenerationRequest) -> str:
    """``reply``, checked against the grammar the request decodes under: data the model could not have written
    would teach it nothing."""
    if request.regex is not None and not re.fullmatch(request.regex, reply):
        raise AssertionError(f"the teacher's reply does not match the grammar of its request: {reply!r}")
    return reply


async def episodes(pool_file: Path, per_policy: int, seed: int) -> list[Trajectory]:
    """Teacher episodes for every policy, and the worker conversations they caused."""
    base = build_pool(load_pool_config(pool_file))
    trajectories: list[Trajectory] = []
    for offset, (policy, max_tokens) in enumerate(MAX_TOKENS.items()):
        for question, expression in questions(per_policy, seed + offset):
            worker = Worker(expression)
            pool = Pool(base.config, base.prices, base.sandbox, {"smollm2": worker}, base.labels)
            settings = RunConfig(policy=policy, max_turns=3, max_tokens=max_tokens)
            executor = Executor(pool, settings, orchestrator=Orchestrator(expression))
            trajectory = await executor.run(question)
            failed = [f"{result.status.value}: {result.reason}" for result in trajectory.results if not result.ok]
            if trajectory.answer is None or failed or trajectory.stop_reason is not StopReason.ANSWER:
                raise RuntimeError(
                    f"the teacher's {policy} episode on {question!r} went wrong: stop {trajectory.stop_reason}, "
                    f"answer {trajectory.answer!r}, failed calls {failed}"
                )
            trajectories.append(trajectory)
            for conversation in worker.conversations:
                trajectories.append(Trajectory(question=question, answer="", messages=conversation))
    return trajectories


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=Path, default=HERE / "pool.yaml")
    parser.add_argument("--per-policy", type=int, default=8, help="Questions per policy.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "sft.jsonl")
    args = parser.parse_args()
    trajectories = asyncio.run(episodes(args.pool, args.per_policy, args.seed))
    write_trajectories(args.out, trajectories, append=False)
    print(f"wrote {len(trajectories)} trajectories to {args.out}")


if __name__ == "__main__":
    main()
