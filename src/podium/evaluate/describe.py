"""Model descriptions written from evidence (ToolOrchestra §3.1): run the model on sample tasks, then let a
describer model read the instructions, outputs and success flags and write what the model is good at."""

from dataclasses import dataclass

from podium.backends.base import BackendError, ChatBackend
from podium.core.answers import extract_answer
from podium.core.messages import Message
from podium.graders.verdict import Verifier

DESCRIBER_PROMPT = (
    "You write short, factual descriptions of language models for an orchestrator that decides which model "
    "to call. You are shown tasks a model was given, its outputs and whether each output was correct. In at "
    "most 80 words, describe the model's strengths, weaknesses and the kinds of task it should or should not "
    "be given. Do not mention the model's name."
)
MAX_OUTPUT_CHARS = 1500


@dataclass(frozen=True)
class DescribedTask:
    """One task and how the model did on it."""

    question: str
    output: str
    correct: bool


async def run_tasks(
    model: ChatBackend, tasks: list[tuple[str, str]], verifier: Verifier, *, max_tokens: int = 512
) -> list[DescribedTask]:
    """Run ``model`` on (question, gold) pairs and judge each answer; a failed call counts as incorrect."""
    runs = []
    for question, gold in tasks:
        try:
            generation = await model.generate([Message(role="user", content=question)], max_tokens=max_tokens)
            output = generation.text
        except BackendError as error:
            runs.append(DescribedTask(question, f"[call failed: {error}]", False))
            continue
        verdict = await verifier.verify(extract_answer(output) or "", gold)
        runs.append(DescribedTask(question, output, verdict.correct))
    return runs


async def write_description(describer: ChatBackend, runs: list[DescribedTask], *, max_tokens: int = 256) -> str:
    """The describer's description of the model behind ``runs``."""
    evidence = "\n".join(
        f"<task>\n<instruction>{run.question}</instruction>\n<output>{run.output[:MAX_OUTPUT_CHARS]}</output>\n"
        f"<success>{'yes' if run.correct else 'no'}</success>\n</task>"
        for run in runs
    )
    solved = sum(run.correct for run in runs)
    user = f"The model solved {solved} of {len(runs)} tasks.\n{evidence}\nWrite the description."
    generation = await describer.generate(
        [Message(role="system", content=DESCRIBER_PROMPT), Message(role="user", content=user)], max_tokens=max_tokens
    )
    return generation.text.strip()
