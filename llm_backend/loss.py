"""The GRPO loss as tensor maths: advantages, objective weights, KL (k3), TIS and the per-token loss.

Per completion token t of sequence i, with r_it = exp(logp_it - old_it) the ratio to the rollout-time policy
(old = sg(logp) for the first update of a batch, so r = 1 there and grad r = grad logp):
    pg:    L_it = - w_it * A_i * exp(logp_it - sg(logp_it))      (one update per batch)
    ppo:   L_it = - w_it * min(r_it A_i, clip(r_it, 1 - clip_eps, 1 + clip_eps) A_i)
    cispo: L_it = - w_it * sg(min(r_it, 1 + clip_eps)) * A_i * logp_it
plus  kl_coef * r_it * k3_it - entropy_coef * H_it.
A_i is the group-normalised advantage (`advantages`, docs/DESIGN.md "Semantics shared by both backends"),
w_it = min(exp(old_it - logp_engine_it), tis_cap) the truncated importance weight against the engine/trainer
mismatch (Yao et al. 2025, "TIS"; no gradient), k3 = exp(ref - logp) - (ref - logp) - 1 Schulman's estimator,
H the full-vocabulary entropy of the sampling distribution at t.

KL: k3 alone has E_pi[grad k3] = grad KL(ref || pi) (the forward KL). Weighting it by the ratio r (TRL's
`use_bias_correction_kl`) gives E_pi[grad (r k3)] = E_pi[(logp - ref) grad logp] = grad KL(pi || ref), the
reverse KL that `kl_coef` means on both backends (tests/llm_backend/test_grpo.py checks it by enumeration).
Per token this is the gradient of KL(pi(.|prefix) || ref(.|prefix)) at the sampled prefix (as TRL and verl).

Objectives share names and meaning with sandbox.config.OBJECTIVES: the gradient of every policy term is
w * objective_weights(r, A) * A * grad logp, the simulator's per-answer weight (sandbox/grpo.py step 3).

Pure tensor maths on completion-aligned (S, T) tensors: the log-probs come from a training batch
(llm_backend/batch.py), the microbatching and the update from llm_backend/trainer.py.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from llm_backend.config import ADV_STD, OBJECTIVES, SCALE_REWARDS


def advantages(
    rewards: np.ndarray, scale_rewards: str = "group", adv_std: str = "sample", adv_eps: float = 1e-4
) -> np.ndarray:
    """Group-normalised advantages (bp, n) of rewards shaped (bp, n): (r - group mean) / (std + adv_eps).

    scale_rewards (names as sandbox.config.SCALE_REWARDS): `group` divides by each group's std, `batch` by
    the std of all bp * n rewards, `none` keeps the mean-baseline difference. adv_std: `sample` (n - 1
    denominator, TRL's `nanstd` and verl's `torch.std`; the default) or `population` (n). A group whose
    rewards all agree gets exactly 0 whatever the scale.
    """
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"rewards must be (bp, n), got shape {r.shape}")
    if adv_std not in ADV_STD:
        raise ValueError(f"unknown adv_std {adv_std!r}; choose one of {', '.join(ADV_STD)}")
    if scale_rewards not in SCALE_REWARDS:
        raise ValueError(f"unknown scale_rewards {scale_rewards!r}; choose one of {', '.join(SCALE_REWARDS)}")
    agree = (r == r[:, :1]).all(axis=1, keepdims=True)
    centred = np.where(agree, 0.0, r - r.mean(axis=1, keepdims=True))
    ddof = 1 if adv_std == "sample" else 0
    if scale_rewards == "none":
        return centred
    if scale_rewards == "group":
        std = r.std(axis=1, keepdims=True, ddof=ddof) if r.shape[1] > ddof else np.zeros((r.shape[0], 1))
    else:
        std = np.full((r.shape[0], 1), r.std(ddof=ddof) if r.size > ddof else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):  # adv_eps = 0 and std = 0 only where agree
        return np.where(agree, 0.0, centred / (std + adv_eps))


def group_advantages(
    groups, scale_rewards: str = "group", adv_std: str = "sample", adv_eps: float = 1e-4
) -> np.ndarray:
    """`advantages` for groups of unequal sizes (allocators), concatenated in group order.

    Each group is normalised by its own mean and (group) std with its own size in the sample-std
    denominator; `batch` divides by the std of all rewards of the batch. Groups of one size give
    advantages(np.stack(groups)).reshape(-1).
    """
    rs = [np.asarray(g, dtype=np.float64).reshape(1, -1) for g in groups]
    if scale_rewards != "batch":
        return np.concatenate([advantages(r, scale_rewards, adv_std, adv_eps).reshape(-1) for r in rs])
    if adv_std not in ADV_STD:
        raise ValueError(f"unknown adv_std {adv_std!r}; choose one of {', '.join(ADV_STD)}")
    allr = np.concatenate([r.reshape(-1) for r in rs])
    ddof = 1 if adv_std == "sample" else 0
    std = allr.std(ddof=ddof) if allr.size > ddof else 0.0
    out = []
    for r in rs:
        centred = advantages(r, "none", adv_std, adv_eps)
        agree = bool((r == r[:, :1]).all())
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(np.zeros(r.size) if agree else (centred / (std + adv_eps)).reshape(-1))
    return np.concatenate(out)


def objective_weights(ratio: torch.Tensor, adv: torch.Tensor, objective: str = "pg", clip_eps: float = 0.2):
    """Coefficient c with grad(policy term) = -c * A * grad logp per token (TIS weight aside).

    pg: 1; ppo: r where PPO's clipped min is not active, 0 where it is (A > 0, r >= 1 + eps or A < 0,
    r <= 1 - eps); cispo: min(r, 1 + eps). The simulator's w_k (sandbox/grpo.py `logit_gradient`).
    """
    if objective == "pg":
        return torch.ones_like(ratio)
    if objective == "ppo":
        clipped = ((adv > 0) & (ratio >= 1 + clip_eps)) | ((adv < 0) & (ratio <= 1 - clip_eps))
        return torch.where(clipped, torch.zeros_like(ratio), ratio)
    if objective == "cispo":
        return ratio.clamp(max=1 + clip_eps)
    raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")


def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per token: exp(r - l) - (r - l) - 1 >= 0."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, old_logp: torch.Tensor | None = None):
    """Ratio-corrected k3, exp(logp - old) * k3 (TRL `use_bias_correction_kl`); old = sg(logp) on-policy.

    Its value estimates KL(pi || ref) under samples of the old policy and its expected gradient is the
    gradient of KL(pi || ref) (module docstring).
    """
    old = logp.detach() if old_logp is None else old_logp
    return torch.exp(logp - old) * k3(logp, ref_logp)


def tis_weights(logp: torch.Tensor, engine_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated IS weight min(pi_train / pi_engine, cap) per token (no gradient); ones when cap == 0.

    `logp` is the trainer's rollout-time log-prob (the old policy of ppo / cispo, the current one for pg).
    """
    if cap <= 0:
        return torch.ones_like(logp)
    return torch.exp(logp.detach() - engine_logp).clamp(max=cap)


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
    objective: str = "pg",
    clip_eps: float = 0.2,
    old_logp=None,
):
    """The GRPO loss of the module docstring, summed over masked tokens and divided by `norm`.

    logp, engine_logp, mask, ref_logp, entropy, old_logp: (S, T); adv: (S,). old_logp: the rollout-time
    trainer log-probs (None = sg(logp), the first update of a batch). With loss_agg="token_mean" (TRL dapo,
    verl token-mean), `norm` defaults to the number of completion tokens (pass the whole update's count
    when accumulating microbatches); "seq_mean" (TRL grpo, verl seq-mean-token-mean) averages per sequence
    first, then divides by `norm` (default S). Returns (loss, stats), stats masked sums for logging.
    """
    old = logp.detach() if old_logp is None else old_logp
    w = tis_weights(old, engine_logp, tis_cap)
    a = adv[:, None]
    ratio = torch.exp(logp - old)
    if objective == "pg":  # one update per batch: always the on-policy score function (weight 1)
        per_tok = -w * a * torch.exp(logp - logp.detach())
    elif objective == "ppo":
        per_tok = -w * torch.minimum(ratio * a, ratio.clamp(1 - clip_eps, 1 + clip_eps) * a)
    elif objective == "cispo":
        per_tok = -w * ratio.detach().clamp(max=1 + clip_eps) * a * logp
    else:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    kl = kl_estimate(logp, ref_logp, old) if ref_logp is not None else None
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
    with torch.no_grad():
        r = ratio.detach()
        if objective == "ppo":
            clipped = ((a > 0) & (r >= 1 + clip_eps)) | ((a < 0) & (r <= 1 - clip_eps))
        elif objective == "cispo":
            clipped = r > 1 + clip_eps
        else:
            clipped = torch.zeros_like(r, dtype=torch.bool)
        stats = {
            "kl_sum": float((kl.detach() * mask).sum()) if kl is not None else math.nan,
            "entropy_sum": float((entropy.detach() * mask).sum()) if entropy is not None else math.nan,
            "tis_sum": float((w * mask).sum()),
            "tis_clipped": float(((torch.exp(old.detach() - engine_logp) > tis_cap) * mask).sum())
            if tis_cap
            else 0.0,
            "mismatch_abs_sum": float(((old.detach() - engine_logp).abs() * mask).sum()),
            "clip_sum": float((clipped * mask).sum()),
            "approx_kl_sum": float((((r - 1) - (logp.detach() - old.detach())) * mask).sum()),
        }
    return loss, stats


STAT_KEYS = (
    "kl_sum", "entropy_sum", "tis_sum", "tis_clipped", "mismatch_abs_sum", "clip_sum", "approx_kl_sum"
)
"""The masked sums grpo_loss returns for logging; the trainer adds them over microbatches and updates."""
