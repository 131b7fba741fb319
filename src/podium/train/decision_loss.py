"""SFT with ``loss_tokens: decisions``: the LM head runs only where a label is.

Decision-token labels are sparse (2 of about 360 tokens per sample in the claim). TRL's fused LM head skips the
unlabelled positions only where it runs Triton kernels; elsewhere (a CPU) it projects every position onto the
vocabulary and masks afterwards, which took 44 % of an SFT step here. transformers' ``logits_to_keep`` (a tensor of
positions) makes the model project only the labelled ones; the loss, token accuracy and entropy are the same
quantities TRL computes, over the same positions. A model that does not compute in float32 (bfloat16 weights or
mixed precision, as on a GPU by default) keeps TRL's loss: its head accumulates in float32, where the model's own
head would round the logits.
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
        """Whether the LM head computes in float32 (float32 weights, no mixed precision)."""
        head = model.get_output_embeddings()
        return head.weight.dtype == torch.float32 and not (self.args.bf16 or self.args.fp16)

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
            for name, values in self.decision_metrics.items():
                if values:
                    logs[name] = sum(values) / len(values)
                values.clear()
            if self.tokens_seen:  # else TRL's own loss ran (see the module's docstring) and logs it
                logs["num_tokens"] = float(self.tokens_seen)
        super().log(logs, start_time)
