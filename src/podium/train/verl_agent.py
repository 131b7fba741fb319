"""Podium's agent loop for verl: imported by verl's rollout workers (it needs verl), named in the agent-loop file
that :func:`podium.train.verl.agent_loop_file` writes. Untested here: verl is not a dependency of Podium."""

from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput

from podium.backends.base import BackendError, ChatBackend, Completion, GenerationRequest
from podium.datasets.items import BenchmarkItem
from podium.train.config import GRPOConfig
from podium.train.rollouts import ExecutorRollouts
from podium.train.samples import ChatFormat, chat_dicts
from podium.train.scoring import RewardScorer, task_preference
from podium.train.verl import agent_output, sample_reward


class VerlServerBackend(ChatBackend):
    """A chat backend over verl's server manager: token-in/token-out generation with the weights verl trains.
    One instance per rollout, so every turn of an episode goes to the same server (prefix caching)."""

    def __init__(self, server_manager: Any, tokenizer: Any, sampling_params: dict[str, Any], model: str) -> None:
        super().__init__(model)
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.sampling_params = sampling_params
        self.request_id = uuid4().hex

    async def _complete(self, request: GenerationRequest) -> Completion:
        if request.json_schema is not None:
            raise BackendError("verl rollouts are not grammar-constrained")
        chat = chat_dicts(request.messages)
        prompt = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
        output = await self.server_manager.generate(
            request_id=self.request_id,
            prompt_ids=prompt,
            sampling_params={**self.sampling_params, "max_tokens": request.max_tokens},
        )
        tokens = list(getattr(output, "token_ids", output))  # newer verl returns a TokenOutput, older a list
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        for marker in request.stop:
            text = text.split(marker, 1)[0]
        return Completion(text, len(prompt), len(tokens))


class PodiumAgentLoop(AgentLoopBase):
    """Runs Podium's executor on the sample's task and returns the scored trajectory as verl's output."""

    @classmethod
    def init_class(cls, config: Any, tokenizer: Any, processor: Any, **kwargs: Any) -> None:
        if cls._class_initialized:
            return
        super().init_class(config, tokenizer, processor)
        settings = GRPOConfig.from_file(kwargs["podium_config"])
        cls.settings = settings
        cls.chat = ChatFormat(tokenizer)
        cls.scorer = RewardScorer(settings.reward, [])
        cls.rollouts = ExecutorRollouts.from_config(settings.rollout)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        info = kwargs["extra_info"]
        item = BenchmarkItem.model_validate_json(info["task"])
        backend = VerlServerBackend(self.server_manager, self.tokenizer, sampling_params, self.settings.model.name)
        # The instance seed comes from the task, so the n rollouts verl draws for it share tools, prices and labels.
        seed = self.settings.seed * 1_000_003 + int(info["index"])
        trajectory = await self.rollouts(item, seed, task_preference(item), orchestrator=backend)
        reward = await sample_reward(self.scorer, item, trajectory)
        length = self.config.actor_rollout_ref.rollout.response_length
        return AgentLoopOutput(
            **agent_output(trajectory, self.chat, length),
            reward_score=reward,
            metrics={},
            extra_fields={"podium_usd": trajectory.usage.usd, "podium_answered": trajectory.answer is not None},
        )
