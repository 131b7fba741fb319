"""``loss_tokens: decisions``: the LM head runs only where a decision is, in SFT and in GRPO.

Decision tokens are sparse (2 of about 360 tokens per sample in the claim). TRL's fused LM head skips the other
positions only where it runs Triton kernels; elsewhere (a CPU) it projects every position onto the vocabulary and
masks afterwards, which took 44 % of an SFT step and 39 % of a GRPO step here. transformers' ``logits_to_keep`` (a
tensor of positions) makes the model project only the decision positions; the losses are the ones TRL computes, over
the same positions, through the trainers' public ``compute_loss``:

- SFT: the negative log-likelihood of the labelled tokens, with TRL's token accuracy and entropy;
- GRPO: TRL's policy loss (its clipped surrogate for ``dapo``, ``bnpo`` and ``grpo``, at the token or sequence level,
  with its k3 KL to the reference) on the log-probabilities of the tokens its loss mask keeps (for Podium's rollouts
  with ``loss_tokens: decisions``, the decision tokens), at TRL's sampling temperature, with its entropy and
  clipping metrics. Every term of that loss is a masked sum, so computing it over the kept positions only changes
  nothing but the time. The parts of TRL's loss Podium does not configure (an entropy bonus or mask, the off-policy
  mask, vLLM's importance correction, an MoE model's auxiliary loss) keep TRL's own loss.

A model that does not compute in float32 (bfloat16 weights or mixed precision, as on a GPU by default) keeps TRL's
loss too: its head accumulates in float32, where the model's own head would round the logits.
"""

from typing import Any

from podium.extras import require_extra

trl = require_extra("train", "trl")
torch = require_extra("train", "torch")


class DecisionLossSFTTrainer(trl.SFTTrainer):
    """TRL's SFTTrainer whose loss projects only the labelled positions (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.decision_metrics: dict[str, list[float]] = {"entropy": [], "mean_token_accuracy": []}
        self.tokens_seen = 0

    def compute_loss(
        self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        """The mean negative log-likelihood of the labelled tokens (over ``num_items_in_batch`` when the trainer
        counts them across accumulated micro-batches, as TRL's own loss does)."""
        if return_outputs or self.aux_loss_enabled or self.accelerator.num_processes > 1 or not self._float32(model):
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        targets = inputs["labels"][:, 1:]
        labelled = targets != -100
        positions = labelled.any(dim=0).nonzero().flatten()
        model_inputs = {key: value for key, value in inputs.items() if key != "labels"}
        logits = model(**model_inputs, use_cache=False, logits_to_keep=positions).logits.float()
        log_probs = logits.log_softmax(dim=-1)
        chosen = targets[:, positions]
        mask = labelled[:, positions]
        token_log_probs = log_probs.gather(-1, chosen.clamp(min=0).unsqueeze(-1)).squeeze(-1) * mask
        count = mask.sum() if num_items_in_batch is None else num_items_in_batch
        loss = -token_log_probs.sum() / torch.as_tensor(count).clamp(min=1)
        if model.training:
            attention = inputs.get("attention_mask")
            self.tokens_seen += int(attention.sum()) if attention is not None else inputs["input_ids"].numel()
            self._record_metrics(log_probs.detach(), chosen, mask)
        return loss

    def _float32(self, model: Any) -> bool:
        return float32_head(model, self.args)

    def _record_metrics(self, log_probs: Any, chosen: Any, mask: Any) -> None:
        """TRL's per-micro-batch entropy and token accuracy over the labelled tokens, averaged at each log."""
        valid = int(mask.sum())
        if valid == 0:
            return
        entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
        top1 = log_probs.argmax(dim=-1) == chosen
        self.decision_metrics["entropy"].append(float((entropy * mask).sum()) / valid)
        self.decision_metrics["mean_token_accuracy"].append(float((top1 & mask).sum()) / valid)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Add the averaged decision metrics and the tokens trained on so far to a training log, as TRL's own loss
        reports them (evaluation logs pass through)."""
        if "loss" in logs:
            add_averages(logs, self.decision_metrics)
            if self.tokens_seen:  # else TRL's own loss ran (see the module's docstring) and logs it
                logs["num_tokens"] = float(self.tokens_seen)
        super().log(logs, start_time)


def float32_head(model: Any, args: Any) -> bool:
    """Whether the LM head computes in float32 (float32 weights, no mixed precision)."""
    head = model.get_output_embeddings()
    return head.weight.dtype == torch.float32 and not (args.bf16 or args.fp16)


def add_averages(logs: dict[str, float], metrics: dict[str, list[float]]) -> None:
    """Each metric's mean since the last log into ``logs``, and start afresh."""
    for name, values in metrics.items():
        if values:
            logs[name] = sum(values) / len(values)
        values.clear()


MULTIMODAL = ("pixel_values", "image_grid_thw", "pixel_attention_mask", "image_sizes", "token_type_ids")
"""Inputs of a vision-language batch (TRL's own loss handles them)."""


def grpo_decision_loss_applies(trainer: Any, model: Any, inputs: dict[str, Any]) -> bool:
    """Whether :func:`grpo_decision_loss` is TRL's loss for this trainer and batch (see the module's docstring)."""
    return (
        float32_head(model, trainer.args)
        and trainer.accelerator.num_processes == 1
        and trainer.loss_type in ("dapo", "bnpo", "grpo")
        and trainer.top_entropy_quantile == 1.0
        and trainer.off_policy_mask_threshold is None
        and trainer.entropy_coef == 0.0
        and not trainer.use_adaptive_entropy
        and not (trainer.use_vllm and trainer.vllm_importance_sampling_correction)
        and not trainer.aux_loss_enabled
        and not any(inputs.get(key) is not None for key in MULTIMODAL)
    )


def grpo_decision_loss(trainer: Any, model: Any, inputs: dict[str, Any], metrics: dict[str, list[float]]) -> Any:
    """TRL's GRPO loss on ``inputs`` (a mini-batch of its generation batch) with the LM head run at the positions
    its loss mask keeps only; its entropy, clipping and KL metrics are appended to ``metrics``."""
    prompt_ids, completion_ids = inputs["prompt_ids"], inputs["completion_ids"]
    mask = inputs["completion_mask"] * inputs["tool_mask"] if "tool_mask" in inputs else inputs["completion_mask"]
    columns = mask.any(dim=0).nonzero().flatten()  # completion positions some row's loss keeps
    mask = mask[:, columns].float()
    # the logits at position p score the token at p + 1: completion token j is scored at prompt length + j − 1
    positions = prompt_ids.size(1) + columns - 1
    logits = model(
        input_ids=torch.cat([prompt_ids, completion_ids], dim=1),
        attention_mask=torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1),
        use_cache=False,
        logits_to_keep=positions,
    ).logits.float()
    log_probs = (logits / trainer.temperature).log_softmax(dim=-1)
    logps = log_probs.gather(-1, completion_ids[:, columns].unsqueeze(-1)).squeeze(-1)
    advantages = inputs["advantages"]
    advantages = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages[:, columns]
    old = inputs.get("old_per_token_logps")
    old = logps.detach() if old is None else old[:, columns]
    log_ratio = logps - old
    if trainer.importance_sampling_level == "sequence":
        log_ratio = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1 - trainer.epsilon_low, 1 + trainer.epsilon_high)
    bounded = ratio if trainer.args.delta is None else torch.clamp(ratio, max=trainer.args.delta)
    per_token = -torch.min(bounded * advantages, clipped * advantages)
    kl = None
    if trainer.beta != 0.0:
        reference = inputs["ref_per_token_logps"][:, columns]
        kl = torch.exp(reference - logps) - (reference - logps) - 1
        if trainer.args.use_bias_correction_kl:
            kl = kl * ratio
        per_token = per_token + trainer.beta * kl
    training = trainer.model.training  # TRL's mode: evaluation neither splits nor accumulates the batch
    accumulation = trainer.current_gradient_accumulation_steps if training else 1.0
    if trainer.loss_type == "grpo":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / accumulation
    elif trainer.loss_type == "bnpo":
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0) / accumulation
    else:  # dapo: normalised by the generation batch's loss tokens, rescaled to one accumulation window
        normalizer = inputs["num_items_in_batch"].clamp(min=1.0)
        if training:
            normalizer = normalizer * trainer.current_gradient_accumulation_steps / trainer.args.steps_per_generation
        loss = (per_token * mask).sum() / normalizer
    record_grpo_metrics(metrics, log_probs.detach(), mask, ratio.detach(), advantages, trainer, kl)
    return loss


def record_grpo_metrics(metrics: dict[str, list[float]], log_probs: Any, mask: Any, ratio: Any, advantages: Any,
                        trainer: Any, kl: Any) -> None:  # fmt: skip
    """TRL's GRPO metrics of one mini-batch: the entropy, the clipped shares of the ratio and the KL, as masked means
    over the kept tokens (at the sequence level, over the rows)."""

    def masked_mean(values: Any) -> float:
        if values.shape[1] == 1:
            return float(values.sum() / max(values.shape[0], 1))
        return float((values * mask).sum() / mask.sum().clamp(min=1.0))

    def row_means(values: Any) -> Any:
        return values.squeeze(1) if values.shape[1] == 1 else (values * mask).sum(-1) / mask.sum(-1)

    entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
    metrics.setdefault("entropy", []).append(masked_mean(entropy))
    if kl is not None:
        metrics.setdefault("kl", []).append(masked_mean(kl.detach()))
    low = ((ratio < 1 - trainer.epsilon_low) & (advantages < 0)).float()
    high = ((ratio > 1 + trainer.epsilon_high) & (advantages > 0)).float()
    for name, values in (("low_mean", low), ("high_mean", high), ("region_mean", torch.maximum(low, high))):
        metrics.setdefault(f"clip_ratio/{name}", []).append(masked_mean(values))
    metrics.setdefault("clip_ratio/low_min", []).append(nan_extreme(row_means(low), largest=False))
    metrics.setdefault("clip_ratio/high_max", []).append(nan_extreme(row_means(high), largest=True))


def nan_extreme(values: Any, largest: bool) -> float:
    """The largest or smallest value that is not NaN (NaN where there is none)."""
    kept = values[~values.isnan()]
    if not len(kept):
        return float("nan")
    return float(kept.max() if largest else kept.min())
