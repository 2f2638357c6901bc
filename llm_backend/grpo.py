"""GRPO on a causal LM in torch: advantages, token log-probs, the loss (PG + k3 KL + entropy, with TIS).

Objective per completion token t of sequence i (one update per batch, so the PPO ratio is 1 at the
update and its gradient is grad log pi):
    L_it = - w_it * A_i * exp(logp_it - sg(logp_it)) + kl_coef * k3_it - entropy_coef * H_it
with A_i the group-normalised advantage (PAPER.md "GRPO"), w_it = min(exp(sg(logp_it) - logp_engine_it), C)
the truncated importance weight against the engine/trainer mismatch (Yao et al. 2025, "TIS"),
k3 = exp(r - logp) - (r - logp) - 1 with r the reference log-prob (Schulman's k3 estimator of KL(pi||ref)),
and H the full-vocabulary entropy of the policy's sampling distribution at t.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from llm_backend.engines import autocast

EPS = 1e-6


def advantages(rewards: np.ndarray, scale_rewards: str = "group") -> np.ndarray:
    """Group-normalised advantages of rewards shaped (bp, n); zero for a group whose n rewards all agree.

    Same names as sandbox.config.SCALE_REWARDS: `group` divides by each group's population std, `batch` by the
    population std of the whole batch, `none` keeps the mean-baseline difference.
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"rewards must be (bp, n), got shape {r.shape}")
    centred = r - r.mean(axis=1, keepdims=True)
    if scale_rewards == "group":
        std = r.std(axis=1, keepdims=True)
        return np.where(std > 0, centred / np.maximum(std, EPS), 0.0)
    if scale_rewards == "batch":
        std = r.std()
        return centred / std if std > 0 else np.zeros_like(centred)
    if scale_rewards == "none":
        return centred
    raise ValueError(f"unknown scale_rewards {scale_rewards!r}")


def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per token: exp(r - l) - (r - l) - 1 >= 0."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def tis_weights(logp: torch.Tensor, engine_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated IS weight min(pi_train / pi_engine, cap) per token (no gradient); ones when cap == 0."""
    if cap <= 0:
        return torch.ones_like(logp)
    return torch.exp(logp.detach() - engine_logp).clamp(max=cap)


@dataclass
class Batch:
    """Padded tensors of one training batch of S sequences (prompt + completion), right padding.

    input_ids, attention_mask: (S, L); comp_mask: (S, L-1) marks the positions whose *next* token is a
    completion token (what the loss sums over); engine_logp: (S, L-1), engine log-probs there (0 elsewhere);
    adv: (S,) advantages.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    comp_mask: torch.Tensor
    engine_logp: torch.Tensor
    adv: torch.Tensor


def make_batch(prompt_ids, token_ids, engine_logps, adv, pad_id: int, device="cpu") -> Batch:
    """Pack lists of prompt ids, completion ids, engine log-probs and advantages into a Batch."""
    seqs = [list(p) + list(t) for p, t in zip(prompt_ids, token_ids, strict=True)]
    L = max(len(s) for s in seqs)
    S = len(seqs)
    ids = torch.full((S, L), pad_id, dtype=torch.long)
    att = torch.zeros((S, L), dtype=torch.long)
    cmask = torch.zeros((S, L - 1), dtype=torch.float32)
    elp = torch.zeros((S, L - 1), dtype=torch.float32)
    for i, (p, t, lp) in enumerate(zip(prompt_ids, token_ids, engine_logps, strict=True)):
        s = seqs[i]
        ids[i, : len(s)] = torch.tensor(s)
        att[i, : len(s)] = 1
        a, b = len(p) - 1, len(p) - 1 + len(t)  # logits at position j predict token j + 1
        cmask[i, a:b] = 1
        if len(t):
            elp[i, a:b] = torch.tensor(lp[: len(t)], dtype=torch.float32)
    return Batch(
        ids.to(device),
        att.to(device),
        cmask.to(device),
        elp.to(device),
        torch.as_tensor(np.asarray(adv), dtype=torch.float32).to(device),
    )


def token_logprobs(
    model,
    input_ids,
    attention_mask,
    temperature: float = 1.0,
    with_entropy: bool = False,
    entropy_grad: bool = True,
):
    """Log-probs (S, L-1) of each next token under logits / temperature; optionally the entropy (S, L-1)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # log-softmax over 49k logits needs float32
    logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)  # (S, L-1, V)
    logp = logp_all.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return logp, None
    if entropy_grad:
        return logp, -(logp_all.exp() * logp_all).sum(-1)
    with torch.no_grad():  # logged only: two fewer (S, L, V) tensors kept for backward
        return logp, -(logp_all.exp() * logp_all).sum(-1)


def grpo_loss(
    logp,
    engine_logp,
    adv,
    mask,
    ref_logp=None,
    entropy=None,
    kl_coef=0.0,
    entropy_coef=0.0,
    tis_cap=2.0,
    loss_agg="token_mean",
    norm: float | None = None,
):
    """The GRPO loss of the module docstring, summed over masked tokens and divided by `norm`.

    logp, engine_logp, mask, ref_logp, entropy: (S, T); adv: (S,). With loss_agg="token_mean", `norm`
    defaults to the number of completion tokens (pass the whole batch's count when accumulating
    microbatches); "seq_mean" averages per sequence first, then divides by `norm` (default S).
    Returns (loss, stats) with stats the masked sums of k3, entropy and TIS weights (for logging).
    """
    w = tis_weights(logp, engine_logp, tis_cap)
    per_tok = -w * adv[:, None] * torch.exp(logp - logp.detach())
    kl = k3(logp, ref_logp) if ref_logp is not None else None
    if kl is not None and kl_coef:
        per_tok = per_tok + kl_coef * kl
    if entropy is not None and entropy_coef:
        per_tok = per_tok - entropy_coef * entropy
    if loss_agg == "token_mean":
        total = (per_tok * mask).sum()
        loss = total / (norm if norm is not None else mask.sum().clamp(min=1))
    elif loss_agg == "seq_mean":
        per_seq = (per_tok * mask).sum(1) / mask.sum(1).clamp(min=1)
        loss = per_seq.sum() / (norm if norm is not None else per_seq.shape[0])
    else:
        raise ValueError(f"unknown loss_agg {loss_agg!r}")
    stats = {
        "kl_sum": float((kl.detach() * mask).sum()) if kl is not None else math.nan,
        "entropy_sum": float((entropy.detach() * mask).sum()) if entropy is not None else math.nan,
        "tis_sum": float((w * mask).sum()),
        "tis_clipped": float(((torch.exp(logp.detach() - engine_logp) > tis_cap) * mask).sum())
        if tis_cap
        else 0.0,
        "mismatch_abs_sum": float(((logp.detach() - engine_logp).abs() * mask).sum()),
    }
    return loss, stats


def grpo_backward(model, batch: Batch, cfg, ref_model=None) -> dict:
    """Accumulate the gradient of the GRPO loss over microbatches; returns the batch's summed stats.

    The loss of the whole batch equals the sum of the microbatch losses because each is divided by the
    whole batch's token (or sequence) count, so the update does not depend on `cfg.microbatch`.
    """
    S = batch.input_ids.shape[0]
    n_tok = float(batch.comp_mask.sum())
    norm = max(n_tok, 1.0) if cfg.loss_agg == "token_mean" else float(S)
    want_ent = True  # entropy is a logged metric even when entropy_coef == 0
    agg = {
        "loss": 0.0,
        "kl_sum": 0.0,
        "entropy_sum": 0.0,
        "tis_sum": 0.0,
        "tis_clipped": 0.0,
        "mismatch_abs_sum": 0.0,
        "tokens": n_tok,
    }
    for a in range(0, S, cfg.microbatch):
        sl = slice(a, a + cfg.microbatch)
        ids, att = batch.input_ids[sl], batch.attention_mask[sl]
        L = int(att.sum(1).max())  # trim right padding of this chunk
        ids, att = ids[:, :L], att[:, :L]
        mask = batch.comp_mask[sl, : L - 1]
        ref = None
        dtype = getattr(cfg, "train_dtype", "float32")
        if ref_model is not None:
            # same precision as the policy, so rounding alone puts no floor under the KL
            with torch.no_grad(), autocast(str(ids.device), dtype):
                ref, _ = token_logprobs(ref_model, ids, att, cfg.temperature)
        with autocast(str(ids.device), dtype):
            logp, ent = token_logprobs(
                model, ids, att, cfg.temperature, with_entropy=want_ent, entropy_grad=bool(cfg.entropy_coef)
            )
        loss, st = grpo_loss(
            logp,
            batch.engine_logp[sl, : L - 1],
            batch.adv[sl],
            mask,
            ref_logp=ref,
            entropy=ent,
            kl_coef=cfg.kl_coef,
            entropy_coef=cfg.entropy_coef,
            tis_cap=cfg.tis_cap,
            loss_agg=cfg.loss_agg,
            norm=norm,
        )
        loss.backward()
        agg["loss"] += float(loss.detach())
        for key in ("kl_sum", "entropy_sum", "tis_sum", "tis_clipped", "mismatch_abs_sum"):
            agg[key] += st[key]
    return agg
