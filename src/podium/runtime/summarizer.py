"""ParaManager's frozen summarizer: ``final_answer`` hands the episode's history to a model that writes the
answer."""

from podium.backends.base import ChatBackend
from podium.core.messages import Message
from podium.costs.bounds import generation_bound
from podium.policies.parallel import FINAL_ANSWER
from podium.pool.context import current_episode
from podium.pool.tool import Tool, ToolOutput
from podium.pool.workers import ask

SUMMARIZER_PROMPT = (
    "You write the final answer to a user's question from the work of a team of agents and tools. Read the "
    "history, weigh the evidence (prefer results that were verified or agreed on; ignore failed calls), and "
    "answer the question. Be brief, and end with the final answer in \\boxed{}."
)


def _request() -> str:
    episode = current_episode.get()
    question, history = (episode.question, episode.history) if episode else ("", "")
    return (
        f"<user_query>\n{question}\n</user_query>\n<conversation_history>\n{history}\n</conversation_history>\n"
        "The manager has ended the episode: write the final answer now."
    )


def summarizer_tool(backend: ChatBackend, max_tokens: int, timeout_s: float) -> Tool:
    """The ``final_answer`` tool, backed by ``backend``."""

    async def run() -> ToolOutput:
        messages = [Message(role="system", content=SUMMARIZER_PROMPT), Message(role="user", content=_request())]
        return await ask(backend, messages, max_tokens=max_tokens)

    return Tool.from_schema(
        FINAL_ANSWER.name,
        FINAL_ANSWER.description,
        FINAL_ANSWER.parameters,
        run,
        timeout_s=timeout_s,
        cost_bound=lambda _arguments: generation_bound(backend.price, SUMMARIZER_PROMPT + _request(), max_tokens),
    )
