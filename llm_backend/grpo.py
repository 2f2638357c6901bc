"""GRPO on a causal LM in torch: advantages, token log-probs, the loss (pg / ppo / cispo + KL + entropy, TIS).

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from llm_backend.config import ADV_STD, LOSS_AGG, OBJECTIVES, SCALE_REWARDS, ZERO_PASS1  # noqa: F401
from llm_backend.engines import autocast


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
    """`advantages` for groups of unequal sizes (allocators, issue 13), concatenated in group order.

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


@dataclass
class Batch:
    """Padded tensors of one training batch of S sequences (prompt + completion), right padding.

    input_ids, attention_mask: (S, L); comp_mask: (S, L-1) marks the positions whose *next* token is a
    completion token (what the loss sums over); engine_logp: (S, L-1), engine log-probs there (0 elsewhere);
    adv: (S,) advantages. sizes: group sizes in order when they may differ (allocators); None = groups of
    the config's n.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    comp_mask: torch.Tensor
    engine_logp: torch.Tensor
    adv: torch.Tensor
    sizes: tuple[int, ...] | None = None


def make_batch(prompt_ids, token_ids, engine_logps, adv, pad_id: int, device="cpu", sizes=None) -> Batch:
    """Pack lists of prompt ids, completion ids, engine log-probs and advantages into a Batch (`sizes`: the
    group sizes when they may differ)."""
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
        None if sizes is None else tuple(int(k) for k in sizes),
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


def _norm(batch: Batch, rows: slice, loss_agg: str) -> float:
    """Divisor of one update's loss: its completion tokens (token_mean) or sequences (seq_mean)."""
    if loss_agg == "token_mean":
        return max(float(batch.comp_mask[rows].sum()), 1.0)
    return float(batch.input_ids[rows].shape[0])


def old_logprobs(model, batch: Batch, cfg) -> torch.Tensor:
    """Trainer log-probs (S, L-1) of the batch before any update (the rollout-time policy), no gradient."""
    out = torch.zeros_like(batch.engine_logp)
    dtype = getattr(cfg, "train_dtype", "float32")
    S = batch.input_ids.shape[0]
    with torch.no_grad():
        for a in range(0, S, cfg.microbatch):
            sl = slice(a, a + cfg.microbatch)
            ids, att = batch.input_ids[sl], batch.attention_mask[sl]
            L = int(att.sum(1).max())
            with autocast(str(ids.device), dtype):
                lp, _ = token_logprobs(model, ids[:, :L], att[:, :L], cfg.temperature)
            out[sl, : L - 1] = lp.float()
    return out


def grpo_backward(
    model, batch: Batch, cfg, ref_model=None, rows: slice | None = None, old_logp=None
) -> dict:
    """Accumulate the gradient of the GRPO loss of sequences `rows` (default all) over microbatches.

    The loss of the update equals the sum of the microbatch losses because each is divided by the whole
    update's token (or sequence) count, so the gradient does not depend on `cfg.microbatch`.
    Returns the update's summed stats.
    """
    S_all = batch.input_ids.shape[0]
    rows = rows or slice(0, S_all)
    lo, hi = rows.start or 0, min(rows.stop if rows.stop is not None else S_all, S_all)
    loss_agg = cfg.loss_agg
    norm = _norm(batch, slice(lo, hi), loss_agg)
    want_ent = True  # entropy is a logged metric even when entropy_coef == 0
    agg = {"loss": 0.0, "tokens": float(batch.comp_mask[lo:hi].sum()), **{k: 0.0 for k in STAT_KEYS}}
    dtype = getattr(cfg, "train_dtype", "float32")
    for a in range(lo, hi, cfg.microbatch):
        sl = slice(a, min(a + cfg.microbatch, hi))
        ids, att = batch.input_ids[sl], batch.attention_mask[sl]
        L = int(att.sum(1).max())  # trim right padding of this chunk
        ids, att = ids[:, :L], att[:, :L]
        mask = batch.comp_mask[sl, : L - 1]
        ref = None
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
            loss_agg=loss_agg,
            norm=norm,
            objective=getattr(cfg, "objective", "pg"),
            clip_eps=getattr(cfg, "clip_eps", 0.2),
            old_logp=None if old_logp is None else old_logp[sl, : L - 1],
        )
        loss.backward()
        agg["loss"] += float(loss.detach())
        for key in STAT_KEYS:
            agg[key] += st[key]
    return agg


def packed_old_logprobs(model, pb, cfg) -> torch.Tensor:
    """old_logprobs for a PackedBatch: completion-aligned (S, T) rollout-time log-probs, no gradient."""
    from llm_backend.packed import micro_logprobs

    out = torch.zeros_like(pb.engine_logp)
    T = pb.engine_logp.shape[1]
    with torch.no_grad():
        for mb in pb.plan():
            lp, _ = micro_logprobs(model, mb, T, cfg.temperature)
            out[mb.seqs] = lp.float()
    return out


def packed_backward(model, pb, cfg, ref_model=None, rows: slice | None = None, old_logp=None) -> dict:
    """grpo_backward on a PackedBatch (llm_backend/packed.py): the same loss and gradient, computed with
    each group's prompt once, completion-only logits and no padding inside rows."""
    from llm_backend.packed import micro_logprobs

    S_all = pb.num_sequences
    rows = rows or slice(0, S_all)
    lo, hi = rows.start or 0, min(rows.stop if rows.stop is not None else S_all, S_all)
    mask_all = pb.comp_mask
    T = mask_all.shape[1]
    norm = max(float(mask_all[lo:hi].sum()), 1.0) if cfg.loss_agg == "token_mean" else float(hi - lo)
    agg = {"loss": 0.0, "tokens": float(mask_all[lo:hi].sum()), **{k: 0.0 for k in STAT_KEYS}}
    for mb in pb.plan(lo, hi):
        ref = None
        if ref_model is not None:
            with torch.no_grad():
                ref, _ = micro_logprobs(ref_model, mb, T, cfg.temperature)
        logp, ent = micro_logprobs(
            model, mb, T, cfg.temperature, with_entropy=True, entropy_grad=bool(cfg.entropy_coef)
        )
        loss, st = grpo_loss(
            logp,
            pb.engine_logp[mb.seqs],
            pb.adv[mb.seqs],
            mask_all[mb.seqs],
            ref_logp=ref,
            entropy=ent,
            kl_coef=cfg.kl_coef,
            entropy_coef=cfg.entropy_coef,
            tis_cap=cfg.tis_cap,
            loss_agg=cfg.loss_agg,
            norm=norm,
            objective=getattr(cfg, "objective", "pg"),
            clip_eps=getattr(cfg, "clip_eps", 0.2),
            old_logp=None if old_logp is None else old_logp[mb.seqs],
        )
        loss.backward()
        agg["loss"] += float(loss.detach())
        for key in STAT_KEYS:
            agg[key] += st[key]
    return agg


def update_slices(bp: int, n: int, minibatches: int, sizes=None) -> list[slice]:
    """Sequence rows of each minibatch: contiguous groups [mb*bp//M, (mb+1)*bp//M) as the simulator.

    `sizes`: group sizes in order when they may differ (then bp = len(sizes), n unused)."""
    bounds = [mb * bp // minibatches for mb in range(minibatches + 1)]
    if sizes is None:
        return [slice(a * n, b * n) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    return [slice(int(off[a]), int(off[b])) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


class MasterWeights:
    """bf16 compute copy of a float32 master model (mixed precision without autocast, issue 11 item 1).

    Forward and backward run on `compute` (bf16 weights: AMX matmuls, no per-call weight casts); its bf16
    gradients are copied into the float32 master's .grad, the optimiser (float32 AdamW state) steps the
    master, and `refresh` rounds the master back into the compute copy.
    """

    def __init__(self, master, dtype=torch.bfloat16):
        import copy

        self.master = master
        self.compute = copy.deepcopy(master).to(dtype)
        self.compute.train(master.training)

    def grads_to_master(self) -> None:
        for pm, pc in zip(self.master.parameters(), self.compute.parameters(), strict=True):
            pm.grad = None if pc.grad is None else pc.grad.float()
            pc.grad = None

    @torch.no_grad()
    def refresh(self) -> None:
        for pm, pc in zip(self.master.parameters(), self.compute.parameters(), strict=True):
            pc.copy_(pm)


def train_step(model, opt, batch: Batch, cfg, ref_model=None, mixed: MasterWeights | None = None) -> dict:
    """One GRPO step on a batch: 1 update (pg) or ppo_epochs x minibatches updates (ppo / cispo).

    Each update zeroes the gradient, accumulates its minibatch's loss gradient, clips the global norm to
    cfg.max_grad_norm and steps the optimiser. Returns the stats summed over updates plus `grad_norm`
    (mean pre-clip norm), `updates` and `finite` (False: a non-finite loss or norm; the step stopped
    before the optimiser touched the parameters with it). With `mixed`, forward/backward run on its bf16
    compute copy and the optimiser (built over `model` = mixed.master) steps the float32 master.
    """
    objective = getattr(cfg, "objective", "pg")
    epochs = getattr(cfg, "ppo_epochs", 1) if objective != "pg" else 1
    n_mb = getattr(cfg, "minibatches", 1) if objective != "pg" else 1
    packed = not isinstance(batch, Batch)
    S = batch.num_sequences if packed else batch.input_ids.shape[0]
    sizes = getattr(batch, "sizes", None)
    if sizes is None:
        slices = update_slices(S // cfg.n, cfg.n, n_mb)
    else:  # groups of an allocator (sizes may differ; fewer groups than minibatches: one per group)
        slices = update_slices(len(sizes), 0, min(n_mb, len(sizes)), sizes)
    backward = packed_backward if packed else grpo_backward
    # one update: the rollout-time policy is the current one (old = sg(logp), no extra forward)
    fwd = mixed.compute if mixed is not None else model
    old = None
    if epochs * n_mb > 1:
        old = packed_old_logprobs(fwd, batch, cfg) if packed else old_logprobs(fwd, batch, cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    total = {"loss": 0.0, "tokens": 0.0, **{k: 0.0 for k in STAT_KEYS}}
    norms = []
    for _ in range(epochs):
        for rows in slices:
            opt.zero_grad(set_to_none=True)
            agg = backward(fwd, batch, cfg, ref_model, rows=rows, old_logp=old)
            if mixed is not None:
                mixed.grads_to_master()
            cap = cfg.max_grad_norm if cfg.max_grad_norm else float("inf")
            gn = float(torch.nn.utils.clip_grad_norm_(params, cap))
            for k, v in agg.items():
                total[k] += v
            if not (math.isfinite(gn) and math.isfinite(agg["loss"])):
                return {**total, "grad_norm": gn, "updates": len(norms), "finite": False}
            norms.append(gn)
            opt.step()
            if mixed is not None:
                mixed.refresh()
    return {**total, "grad_norm": float(np.mean(norms)), "updates": len(norms), "finite": True}
