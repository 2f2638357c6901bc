"""The GRPO update on a training batch of either layout (llm_backend/batch.py): old log-probs, the backward
pass over microbatches, and the optimiser steps (one for pg, ppo_epochs x minibatches for ppo / cispo).

`Trainer` holds what one run trains: the policy, its AdamW optimiser, the frozen reference of the KL term
(kl_coef > 0) and, for bf16 training in the packed layout, the float32 master weights behind a bf16 compute
copy (`MasterWeights`).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch.optim.adam import adam

from llm_backend.batch import TrainBatch
from llm_backend.loss import STAT_KEYS, grpo_loss
from llm_backend.model import load_model


def old_logprobs(model, batch: TrainBatch, cfg) -> torch.Tensor:
    """Trainer log-probs (S, T) of the batch before any update (the rollout-time policy), no gradient.

    The forwards run under inference_mode (no autograd bookkeeping); the chunks are made before it, since a
    batch keeps them and the updates' forwards, which autograd records, use them again."""
    out = torch.zeros_like(batch.engine_logp)
    chunks = batch.chunks(0, batch.num_sequences)
    with torch.inference_mode():
        for chunk in chunks:
            lp, _ = chunk.logprobs(model, cfg.temperature, compiled=cfg.tiny_trainer == "compiled")
            out[chunk.rows, chunk.cols] = lp.float()
    return out


def backward(model, batch: TrainBatch, cfg, ref_model=None, rows: slice | None = None, old_logp=None) -> dict:
    """Accumulate the gradient of the GRPO loss (loss.grpo_loss) of sequences `rows` (default all) over the
    batch's chunks.

    The loss of the update equals the sum of the chunk losses because each is divided by the whole update's
    token (or sequence) count, so the gradient does not depend on how the batch is chunked. old_logp: (S, T)
    rollout-time log-probs (None: the first update, old = sg(logp)). Returns the update's summed stats.
    """
    S = batch.num_sequences
    rows = rows or slice(0, S)
    lo, hi = rows.start or 0, min(rows.stop if rows.stop is not None else S, S)
    mask = batch.comp_mask
    tokens = float(mask[lo:hi].sum())
    norm = max(tokens, 1.0) if cfg.loss_agg == "token_mean" else float(hi - lo)
    agg = {"loss": 0.0, "tokens": tokens, **{k: 0.0 for k in STAT_KEYS}}
    compiled = cfg.tiny_trainer == "compiled"
    for chunk in batch.chunks(lo, hi):
        cell = (chunk.rows, chunk.cols)
        ref = None
        if ref_model is not None:  # the policy's precision, so rounding alone puts no floor under the KL
            with torch.inference_mode():  # no autograd bookkeeping; grpo_loss saves nothing of `ref`
                ref, _ = chunk.logprobs(ref_model, cfg.temperature, compiled=compiled)
        # entropy is a logged metric even when entropy_coef == 0
        logp, ent = chunk.logprobs(model, cfg.temperature, with_entropy=True,
                                   entropy_grad=bool(cfg.entropy_coef), compiled=compiled)
        loss, st = grpo_loss(
            logp, batch.engine_logp[cell], batch.adv[chunk.rows], mask[cell], ref_logp=ref, entropy=ent,
            kl_coef=cfg.kl_coef, entropy_coef=cfg.entropy_coef, tis_cap=cfg.tis_cap, loss_agg=cfg.loss_agg,
            norm=norm, objective=cfg.objective, clip_eps=cfg.clip_eps,
            old_logp=None if old_logp is None else old_logp[cell],
        )
        loss.backward()
        agg["loss"] += float(loss.detach())
        for key in STAT_KEYS:
            agg[key] += st[key]
    return agg


def update_slices(sizes, minibatches: int) -> list[slice]:
    """Sequence rows of each minibatch: contiguous groups [mb*G//M, (mb+1)*G//M) of the G groups of `sizes`,
    as the simulator splits its bp problems."""
    G = len(sizes)
    bounds = [mb * G // minibatches for mb in range(minibatches + 1)]
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    return [slice(int(off[a]), int(off[b])) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


class MasterWeights:
    """bf16 compute copy of a float32 master model (mixed precision without autocast).

    Forward and backward run on `compute` (bf16 weights: AMX matmuls, no per-call weight casts); its bf16
    gradients are copied into the float32 master's .grad, the optimiser (float32 AdamW state) steps the
    master, and `refresh` rounds the master back into the compute copy.
    """

    def __init__(self, master, dtype=torch.bfloat16):
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


def train_step(model, opt, batch: TrainBatch, cfg, ref_model=None, mixed: MasterWeights | None = None
               ) -> dict:
    """One GRPO step on a batch: 1 update (pg) or ppo_epochs x minibatches updates (ppo / cispo).

    Each update zeroes the gradient, accumulates its minibatch's loss gradient, clips the global norm to
    cfg.max_grad_norm and steps the optimiser. Returns the stats summed over updates plus `grad_norm`
    (mean pre-clip norm), `updates` and `finite` (False: a non-finite loss or norm; the step stopped
    before the optimiser touched the parameters with it). With `mixed`, forward/backward run on its bf16
    compute copy and the optimiser (built over `model` = mixed.master) steps the float32 master.
    """
    epochs, n_mb = (1, 1) if cfg.objective == "pg" else (cfg.ppo_epochs, cfg.minibatches)
    sizes = batch.sizes or (cfg.n,) * (batch.num_sequences // cfg.n)
    slices = update_slices(sizes, min(n_mb, len(sizes)))  # fewer groups than minibatches: one per group
    fwd = mixed.compute if mixed is not None else model
    # one update: the rollout-time policy is the current one (old = sg(logp), no extra forward)
    old = old_logprobs(fwd, batch, cfg) if epochs * n_mb > 1 else None
    params = [p for p in model.parameters() if p.requires_grad]
    cap = cfg.max_grad_norm if cfg.max_grad_norm else float("inf")
    total = {"loss": 0.0, "tokens": 0.0, **{k: 0.0 for k in STAT_KEYS}}
    norms = []
    for _ in range(epochs):
        for rows in slices:
            opt.zero_grad(set_to_none=False)  # in place: a flat optimiser's gradient views stay its buffer
            agg = backward(fwd, batch, cfg, ref_model, rows=rows, old_logp=old)
            if mixed is not None:
                mixed.grads_to_master()
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


NO_UPDATE = {"loss": math.nan, "tokens": 0.0, "grad_norm": math.nan, "updates": 0, "finite": True,
             **{k: math.nan for k in STAT_KEYS}}
"""The stats of a step without an update (every group discarded by dynamic sampling; its rollouts count)."""


class FlatAdamW:
    """AdamW over one flat float32 parameter, stepped by torch's own AdamW function (the functional
    `torch.optim.adam.adam(..., decoupled_weight_decay=True)` on its single-tensor path, what
    `torch.optim.AdamW` runs on CPU tensors), with `torch.optim.AdamW`'s param_groups, zero_grad, state_dict
    and load_state_dict (a checkpoint of either loads into the other).

    Why not torch.optim.AdamW itself: its constructor, zero_grad and state_dict are wrapped to disable
    torch.compile, and the first such call imports torch._dynamo, ~1 s of a tiny-LM run's ~30 s
    (benchmarks/tiny_lm.py). The maths and the floats are torch.optim.AdamW's
    (tests/llm_backend/test_tiny_speed.py; tests/llm_backend/test_llm_refactor_bits.py compares whole runs).
    torch's fused kernel (fused=True) would save ~0.13 ms a step more but rounds otherwise.
    """

    def __init__(self, param: torch.nn.Parameter, lr: float, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        self.param = param
        self.param_groups = [{"params": [param], "lr": lr, "betas": tuple(betas), "eps": eps,
                              "weight_decay": weight_decay, "amsgrad": False, "maximize": False,
                              "foreach": None, "capturable": False, "differentiable": False, "fused": None,
                              "decoupled_weight_decay": True}]
        self.state: dict = {}

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Zero the flat gradient in place (its per-parameter views stay the parameters' .grad)."""
        if self.param.grad is not None:
            self.param.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        g, p = self.param_groups[0], self.param
        st = self.state.get(p)
        if st is None:
            st = self.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                                  "exp_avg_sq": torch.zeros_like(p)}
        b1, b2 = g["betas"]
        adam([p], [p.grad], [st["exp_avg"]], [st["exp_avg_sq"]], [], [st["step"]], foreach=False, fused=False,
             decoupled_weight_decay=True, amsgrad=False, beta1=b1, beta2=b2, lr=g["lr"],
             weight_decay=g["weight_decay"], eps=g["eps"], maximize=False)

    def state_dict(self) -> dict:
        """torch.optim.Optimizer.state_dict's layout: parameters by index."""
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [0]} for g in self.param_groups]
        state = {0: dict(self.state[self.param])} if self.param in self.state else {}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, sd: dict) -> None:
        (group,) = sd["param_groups"]
        kept = ("lr", "betas", "eps", "weight_decay")
        self.param_groups[0].update({k: group[k] for k in kept if k in group})
        saved = sd["state"].get(0) or sd["state"].get("0")
        if saved is None:
            self.state = {}
            return
        p = self.param
        step = saved["step"]
        self.state = {p: {"step": torch.as_tensor(step, dtype=torch.float32).clone().cpu(),
                          "exp_avg": saved["exp_avg"].to(p.device, p.dtype).clone(),
                          "exp_avg_sq": saved["exp_avg_sq"].to(p.device, p.dtype).clone()}}


def flat_adamw(model, cfg) -> FlatAdamW:
    """AdamW (FlatAdamW) over one flat float32 tensor that holds all of `model`'s trainable parameters (each
    becomes a view into it, and its .grad a view into one flat gradient).

    Why: a small model's optimiser step is ~8 elementwise ops per parameter tensor (~40 tensors in a tiny LM);
    one tensor instead cut the step from 1.6 to 0.35 ms, with the same bits (every op is elementwise, so the
    grouping does not change a value; tests/llm_backend/test_tiny_speed.py). clip_grad_norm_ over the model's
    parameters reads the same per-tensor gradients as before, and zero_grad zeroes the flat gradient in place.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    grad = torch.zeros_like(flat)
    off = 0
    for p in params:
        k = p.numel()
        p.data = flat[off:off + k].view_as(p)
        p.grad = grad[off:off + k].view_as(p)
        off += k
    whole = torch.nn.Parameter(flat)
    whole.grad = grad
    return FlatAdamW(whole, lr=cfg.effective_lr(), betas=(cfg.beta1, cfg.beta2), eps=cfg.adam_eps,
                     weight_decay=cfg.weight_decay)


class Trainer:
    """The policy of one run (float32 master weights), its AdamW optimiser, the frozen reference policy of
    the KL term (kl_coef > 0) and, for bf16 packed training, the bf16 compute copy (MasterWeights); padded
    bf16 training autocasts instead (batch.PaddedChunk)."""

    def __init__(self, cfg, path):
        self.cfg = cfg
        self.model = load_model(path, cfg.device, cfg.family)
        self.model.train()
        bf16 = cfg.train_layout == "packed" and cfg.train_dtype == "bfloat16"
        self.mixed = MasterWeights(self.model) if bf16 else None
        if self.mixed is None:  # the bf16 path assigns the master's gradients: no flat buffer there
            self.opt = flat_adamw(self.model, cfg)
        else:
            self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.effective_lr(),
                                         betas=(cfg.beta1, cfg.beta2), eps=cfg.adam_eps,
                                         weight_decay=cfg.weight_decay)
        self.ref = None
        if cfg.kl_coef > 0:
            self.ref = load_model(path, cfg.device, cfg.family).eval().requires_grad_(False)
            if bf16:
                self.ref = self.ref.to(torch.bfloat16)  # the policy's precision: no rounding floor

    def loaded(self) -> None:
        """After the master weights changed outside an update (a checkpoint load): round them into the
        compute copy."""
        if self.mixed is not None:
            self.mixed.refresh()

    def step(self, batch: TrainBatch | None, step: int) -> dict:
        """train_step on the batch at GRPO step `step`'s lr (cfg.step_lr: the warm-up), or NO_UPDATE
        without a batch."""
        if batch is None:
            return dict(NO_UPDATE)
        for group in self.opt.param_groups:
            group["lr"] = self.cfg.step_lr(step)
        return train_step(self.model, self.opt, batch, self.cfg, self.ref, self.mixed)

    def sync(self, engine) -> float:
        """Copy the updated policy into the rollout engine; seconds. A bf16 vLLM engine takes the bf16
        compute copy as it is (no cast)."""
        cfg = self.cfg
        bf16_copy = self.mixed is not None and cfg.engine == "vllm" and cfg.engine_dtype == "bfloat16"
        return engine.sync_weights(self.mixed.compute if bf16_copy else self.model)
