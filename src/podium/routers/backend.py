"""A fitted router as the orchestrator of the ``escalate`` policy: each turn it says the word the policy offers —
the worker that answers, then ``accept`` or the next worker — so a router runs through the same executor as a
trained orchestrator (budgets, traces, evaluation, serving) and is compared with it on equal terms.

A question router names the worker its decision picks (:func:`podium.routers.decide.choose`) and accepts its reply;
a cascade names its first worker, then escalates to the next while the reply's probability of being wrong is above
its threshold. A worker whose call failed is passed over for the next choice. Its words carry their probabilities
where it has them (a cascade's ``accept`` against escalating), as a model's do, so ``podium routing compare`` reads a
router system's run like an orchestrator's.
"""

import asyncio
from collections.abc import Callable, Sequence

import numpy as np

from podium.backends.base import BackendError, ChatBackend, Completion, GenerationRequest
from podium.core.answers import ANSWER_INSTRUCTIONS
from podium.core.messages import Message
from podium.policies.escalate import ACCEPT, observed_reply
from podium.routers.decide import ranked
from podium.routers.models import CascadeRouter, FittedRouter, QuestionRouter


class RouterBackend(ChatBackend):
    """Plays the escalate policy with a fitted router (free: it costs no tokens)."""

    supports_choices = True
    writes_text = False

    def __init__(
        self,
        router: FittedRouter,
        *,
        cost_weight: float = 0.0,
        threshold: float | Sequence[float] = 0.5,
        embed: Callable[[str], np.ndarray] | None = None,
    ) -> None:
        super().__init__(f"router:{router.kind}")
        self.router = router
        self.cost_weight = cost_weight
        """A question router's worth of one USD in accuracy (0: the worker most likely right)."""
        self.thresholds = [threshold] * (len(router.workers) - 1) if isinstance(threshold, int | float) else threshold
        """A cascade's escalation threshold per level: escalate where P(reply wrong) is above it."""
        if len(self.thresholds) != len(router.workers) - 1:
            raise ValueError(f"threshold: give one, or one per worker but the last ({len(router.workers) - 1})")
        self.embed = embed
        """A question's embedding (one row); default: MiniLM's, as the router was fitted on."""

    async def _complete(self, request: GenerationRequest) -> Completion:
        if not request.choices:
            raise BackendError(f"{self.model}: a router only says the words of the escalate policy")
        messages = request.messages
        asked = self._asked(messages)
        offered = [word for word in request.choices if word != ACCEPT]
        unknown = sorted(set(offered) - set(self.router.workers))
        if unknown:
            raise BackendError(
                f"{self.model}: the pool offers {unknown}, workers it was not fitted on ({self.router.workers}); "
                "a router needs the pool it was fitted on, without blind labels"
            )
        last = asked[-1] if asked else None
        reply = None if last is None else observed_reply(messages[-1].content, last)
        if last is not None and reply is not None:
            return (
                self._escalation(last, reply, offered) if isinstance(self.router, CascadeRouter) else self._say(ACCEPT)
            )
        # the first turn, or the last call failed: the router's next choice answers, where there is one
        preferred = await self._preference(_task(messages, len(asked)))
        return self._say(next((worker for worker in preferred if worker in offered), ACCEPT))

    def _asked(self, messages: Sequence[Message]) -> list[str]:
        """The workers this episode asked, in order: its trailing (worker, observation) turns."""
        asked: list[str] = []
        index = len(messages) - 1
        while (
            index >= 2
            and messages[index - 1].role == "assistant"
            and messages[index - 1].content in self.router.workers
        ):
            asked.insert(0, messages[index - 1].content)
            index -= 2
        return asked

    async def _preference(self, question: str) -> list[str]:
        """The workers in the order the router would ask them for ``question``: a question router's ranking, a
        cascade's order."""
        if isinstance(self.router, QuestionRouter):
            quality = self.router.quality(await self._embedding(question))[0]
            return [self.router.workers[i] for i in ranked(quality, self.router.costs, self.cost_weight)]
        return list(self.router.workers)

    def _next(self, last: str, offered: list[str]) -> str | None:
        """The worker after ``last`` in the cascade's order that the pool still offers."""
        after = self.router.workers[self.router.workers.index(last) + 1 :]
        return next((worker for worker in after if worker in offered), None)

    def _escalation(self, last: str, reply: str, offered: list[str]) -> Completion:
        """A cascade's decision after ``last``'s reply."""
        assert isinstance(self.router, CascadeRouter)
        level = self.router.workers.index(last)
        following = self._next(last, offered)
        if following is None or level >= len(self.thresholds):
            return self._say(ACCEPT)
        wrong = float(self.router.wrong(level, [reply])[0])
        word = following if wrong > self.thresholds[level] else ACCEPT
        return self._say(word, {ACCEPT: 1.0 - wrong, following: wrong})

    async def _embedding(self, question: str) -> np.ndarray:
        if self.embed is None:
            from podium.retrieval.embedding import Embedder  # the search extra; question routers need it

            self.embed = (await asyncio.to_thread(Embedder)).encode_one
        return await asyncio.to_thread(self.embed, question)

    def _say(self, word: str, probabilities: dict[str, float] | None = None) -> Completion:
        return Completion(word, 0, 0, "stop", choice_probs=probabilities)


def _task(messages: Sequence[Message], asked: int) -> str:
    """The question of the episode: the user message before its turns, without the answer format an item's
    verifier appended (routers are fitted on the questions as recorded)."""
    text = messages[len(messages) - 1 - 2 * asked].content
    for instruction in ANSWER_INSTRUCTIONS.values():
        text = text.removesuffix(f"\n\n{instruction}")
    return text
