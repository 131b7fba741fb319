"""A request's messages as an episode's context.

* ``system`` and ``developer`` messages are the user's instructions and preferences: they join the
  orchestrator's system prompt.
* The last ``user`` message is the task; the user and assistant turns before it are the conversation's history,
  shown to the orchestrator before the task (as far as its ``max_history_tokens`` allows).
* What follows the task — assistant messages with ``tool_calls`` and the ``tool`` messages answering them — is
  the work on the task so far. When the trailing ``tool`` messages answer the calls of an episode the server keeps
  waiting (:mod:`podium.serve.sessions`), that episode resumes with them; otherwise a new episode starts with
  that work written after the task, so the messages alone carry the whole state.
"""

from dataclasses import dataclass, field

from podium.core.messages import Message
from podium.serve.http import invalid_request
from podium.serve.requests import ConversationMessage


@dataclass(frozen=True)
class Conversation:
    """What an episode takes from a request's messages."""

    task: str
    """The last user message."""
    instructions: str | None
    """The system and developer messages, joined."""
    history: list[Message]
    """The turns before the task."""
    work: list[ConversationMessage]
    """The assistant tool calls and tool results after the task."""
    results: dict[str, str] = field(default_factory=dict)
    """The trailing tool messages (after the last assistant message): tool call id → content."""

    def task_with_work(self) -> str:
        """The task, followed by the calls already made for it and their results (a new episode's question)."""
        if not self.work:
            return self.task
        lines = [self.task, "", "Calls already made for this task, with their results:"]
        names = {call.id: call.function.name for m in self.work for call in m.tool_calls or []}
        for message in self.work:
            if message.role == "assistant":
                lines.extend(describe_calls(message))
            else:
                name = message.name or names.get(str(message.tool_call_id), message.tool_call_id)
                lines.append(f"[result of {name}] {message.text}")
        return "\n".join(lines)


def describe_calls(message: ConversationMessage) -> list[str]:
    """An assistant message's text and tool calls, as lines the orchestrator reads."""
    lines = [message.text] if message.text.strip() else []
    for call in message.tool_calls or []:
        lines.append(f"[called {call.function.name} with {call.function.arguments} (id {call.id})]")
    return lines


def history_message(message: ConversationMessage) -> Message:
    """An earlier turn as the orchestrator sees it (tool calls written out, tool results as ``tool`` messages)."""
    if message.role == "assistant":
        return Message(role="assistant", content="\n".join(describe_calls(message)))
    if message.role == "tool":
        return Message(role="tool", content=message.text, name=message.name, tool_call_id=message.tool_call_id)
    return Message(role="user", content=message.text)


def read_conversation(messages: list[ConversationMessage]) -> Conversation:
    """The task, instructions, history and work of a request; malformed conversations are 400s naming the
    message."""
    for index, message in enumerate(messages):
        if message.role == "tool" and not message.tool_call_id:
            raise invalid_request("a tool message needs the tool_call_id it answers", f"messages.{index}.tool_call_id")
    last = len(messages) - 1
    if messages[last].role not in ("user", "tool"):
        raise invalid_request(
            f"the conversation ends with a {messages[last].role} message; it must end with the user's message or "
            "with tool results",
            f"messages.{last}.role",
        )
    users = [index for index, message in enumerate(messages) if message.role == "user"]
    if not users or not messages[users[-1]].text.strip():
        raise invalid_request("the last user message is the task, and this request has none", "messages")
    task_index = users[-1]
    instructions = "\n\n".join(m.text for m in messages if m.role in ("system", "developer") and m.text.strip())
    before = [m for m in messages[:task_index] if m.role not in ("system", "developer")]
    work = [m for m in messages[task_index + 1 :] if m.role not in ("system", "developer")]
    trailing: dict[str, str] = {}
    for message in reversed(work):
        if message.role != "tool":
            break
        trailing[str(message.tool_call_id)] = message.text
    return Conversation(
        task=messages[task_index].text,
        instructions=instructions or None,
        history=[history_message(message) for message in before],
        work=work,
        results=trailing,
    )
