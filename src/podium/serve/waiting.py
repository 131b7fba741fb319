"""The episodes that wait for their clients' tool results, kept under the ids of the calls they handed out.

Each waits at most ``wait_s``; at most ``cap`` wait at once (past it, the one waiting longest is cancelled); and
one whose calls a later request of its client mentions in an assistant message's text without answering them is
cancelled at once: a client that writes the calls it ran into the conversation as text, and their results as user
messages (smolagents does), has gone on without ever sending ``tool`` messages for them. Every cancellation is
counted by its reason (``client_tool_timeout``, ``waiting_cap``, ``superseded``).
"""

import asyncio
import re

from podium.serve.operations import Metrics
from podium.serve.requests import EpisodeRequest
from podium.serve.sessions import CALL_ID_PATTERN, ClientCalls, ServedEpisode

CALL_ID = re.compile(CALL_ID_PATTERN)


class WaitingEpisodes:
    """Episodes waiting on client calls, by the calls' ids, the one waiting longest first."""

    def __init__(self, wait_s: float, cap: int, metrics: Metrics) -> None:
        self.wait_s = wait_s
        self.cap = cap
        self.metrics = metrics
        self.by_call: dict[str, ServedEpisode] = {}
        self.expiries: dict[str, asyncio.TimerHandle] = {}

    def get(self, call_id: str) -> ServedEpisode | None:
        return self.by_call.get(call_id)

    def episodes(self) -> list[ServedEpisode]:
        """The waiting episodes, the one waiting longest first."""
        return list({id(session): session for session in self.by_call.values()}.values())

    def park(self, session: ServedEpisode, calls: ClientCalls) -> None:
        """Keep ``session`` waiting for the results of ``calls``; past the cap, cancel the one waiting longest."""
        for call in calls.calls:
            self.by_call[call.id] = session
        timer = asyncio.get_running_loop().call_later(self.wait_s, self.cancel, session, "client_tool_timeout")
        self.expiries[session.request_id] = timer
        waiting = self.episodes()
        for oldest in waiting[: max(0, len(waiting) - self.cap)]:
            self.cancel(oldest, "waiting_cap")
        self.metrics.waiting.set(len(self.episodes()))

    def unpark(self, session: ServedEpisode) -> None:
        """``session`` no longer waits (it resumed or ended)."""
        for call_id in [i for i, waiting in self.by_call.items() if waiting is session]:
            del self.by_call[call_id]
        timer = self.expiries.pop(session.request_id, None)
        if timer is not None:
            timer.cancel()
        self.metrics.waiting.set(len(self.episodes()))

    def cancel(self, session: ServedEpisode, because: str) -> None:
        self.unpark(session)
        session.cancel(because)
        self.metrics.waiting_cancelled.labels(because).inc()

    def drop_superseded(self, body: EpisodeRequest, account: str | None) -> None:
        """Cancel the episodes of ``account`` whose calls an assistant message of ``body`` mentions in its text."""
        mentioned = {
            call_id
            for message in body.messages
            if message.role == "assistant" and not message.tool_calls
            for call_id in CALL_ID.findall(message.text)
        }
        for call_id in mentioned:
            session = self.by_call.get(call_id)
            if session is not None and session.account == account:
                self.cancel(session, "superseded")
