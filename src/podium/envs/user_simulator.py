"""A simulated user: any chat model plays the customer of a tau2 task from its user scenario.

The model sees the scenario as its system prompt and the agent's messages as the other side of the chat. The
conversation ends when the user says the stop token (``###STOP###``) or after ``max_turns`` user messages.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from podium.backends.base import ChatBackend
from podium.core.calls import CallUsage
from podium.core.messages import Message

STOP_TOKEN = "###STOP###"
DEFAULT_GREETING = "Hi! How can I help you today?"

GUIDELINES = """You are playing a customer contacting a customer-service agent. Follow the scenario below.
- Write only what the customer says, one message at a time, in a natural and brief way.
- Reveal information only when the agent needs it; never invent facts the scenario does not give you.
- Do not give away all your instructions at once, and do not act as the agent.
- When your goal is met, or it cannot be met and there is nothing left to ask, reply with {stop} alone.
"""


def scenario_prompt(scenario: Any, stop_token: str = STOP_TOKEN) -> str:
    """The simulator's system prompt: guidelines, then the persona and each instruction field of a tau2
    ``UserScenario``."""
    parts = [GUIDELINES.format(stop=stop_token)]
    if scenario.persona:
        parts.append(f"## Persona\n{scenario.persona}")
    instructions = scenario.instructions
    if hasattr(instructions, "model_dump"):
        instructions = instructions.model_dump()
    if isinstance(instructions, str):
        parts.append(f"## Scenario\n{instructions}")
    else:
        for key, value in instructions.items():
            if value and key != "domain":
                parts.append(f"## {key.replace('_', ' ').capitalize()}\n{value}")
    return "\n\n".join(parts)


@dataclass(frozen=True)
class UserTurn:
    """One message of the simulated user."""

    text: str
    """What the user says (the stop token removed)."""
    done: bool
    """Whether the conversation is over (stop token said, or the turn limit reached)."""


class UserSimulator:
    """Plays one task's user; keeps the conversation from the user's side."""

    def __init__(
        self,
        backend: ChatBackend,
        scenario: Any,
        *,
        stop_token: str = STOP_TOKEN,
        max_turns: int = 30,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.backend = backend
        self.stop_token = stop_token
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.temperature = temperature
        # From the simulator's side the agent is the "user" of the chat and the customer is the "assistant".
        self.history: list[Message] = [Message(role="system", content=scenario_prompt(scenario, stop_token))]
        self.turns = 0
        self.done = False
        self.stopped = False
        """Whether the user said the stop token (rather than running out of turns)."""
        self.usage = CallUsage()
        """What the user's generations cost so far (kept apart from the agent's spend, as tau2 does)."""

    async def respond(self, agent_message: str) -> UserTurn:
        """The user's reply to the agent's message. Raises BackendError if the model fails."""
        if self.done:
            raise RuntimeError("the conversation has ended")
        self.history.append(Message(role="user", content=agent_message))
        generation = await self.backend.generate(self.history, max_tokens=self.max_tokens, temperature=self.temperature)
        self.turns += 1
        self.usage = self.usage + CallUsage(
            input_tokens=generation.input_tokens,
            output_tokens=generation.output_tokens,
            usd=generation.usd,
            latency_s=generation.latency_s,
        )
        self.stopped = self.stop_token in generation.text
        text = generation.text.replace(self.stop_token, "").strip()
        self.history.append(Message(role="assistant", content=generation.text))
        self.done = self.stopped or self.turns >= self.max_turns
        return UserTurn(text=text, done=self.done)


AgentReply = Callable[[list[Message]], Awaitable[str]]
"""The agent under test: given the conversation from its side, its next message to the user."""


async def converse(agent: AgentReply, user: UserSimulator, greeting: str = DEFAULT_GREETING) -> list[Message]:
    """Alternate agent and user until the user is done; returns the conversation from the agent's side."""
    conversation = [Message(role="assistant", content=greeting)]
    while True:
        turn = await user.respond(conversation[-1].content)
        conversation.append(Message(role="user", content=turn.text))
        if turn.done:
            return conversation
        conversation.append(Message(role="assistant", content=await agent(conversation)))
