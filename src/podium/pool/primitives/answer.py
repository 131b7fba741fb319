"""``direct_answer`` and ``reason``: the worker answers from what it knows, at once or by reasoning step by step."""

from podium.core.answers import extract_answer
from podium.core.calls import Status
from podium.pool.primitives.job import Job
from podium.pool.tool import ToolOutput


async def direct_answer(job: Job) -> ToolOutput:
    """The answer alone, with the answer template (no reasoning asked for, so it is short and cheap)."""
    reply = await job.generate("direct_answer")
    if reply.status is not Status.OK:
        return job.failed(reply.status, reply.reason or "the worker failed")
    answer = str(reply.value).strip()
    if not answer:
        return job.failed(Status.EXEC_ERR, "the worker returned an empty answer")
    return job.done({"answer": answer}, answer)


async def reason(job: Job) -> ToolOutput:
    """Step-by-step reasoning ending in ``\\boxed{}``; the value holds the reasoning and the extracted answer
    (None when the reasoning reached none)."""
    reply = await job.generate("reason")
    if reply.status is not Status.OK:
        return job.failed(reply.status, reply.reason or "the worker failed")
    text = str(reply.value).strip()
    return job.done({"reasoning": text, "answer": extract_answer(text)}, text)
