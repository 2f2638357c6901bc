"""The learning-rate rule of both engines: how the base lr, given at a reference batch, scales with the
batch B = bp * n (docs/PAPER.md: sqrt(B / B_ref) for the LLM recipe)."""

from __future__ import annotations


def effective_lr(lr: float, lr_rule: str, batch: int, lr_ref_batch: int) -> float:
    """lr after `lr_rule` (options.LR_RULES): constant (lr), linear (lr * B / B_ref) or sqrt
    (lr * sqrt(B / B_ref)); the float operations in this order, so every engine gets the same bits."""
    ratio = batch / lr_ref_batch
    if lr_rule == "linear":
        return lr * ratio
    if lr_rule == "sqrt":
        return lr * ratio**0.5
    return lr
