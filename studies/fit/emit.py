"""What a plan means for a trainer (`isocompute plan`, studies.fit.plan): the learning rate under a rule from
the pilots' own lr, the n schedule along the pilots' n*(C), and the fields of TRL's GRPOConfig or verl's
overrides (`--emit trl|verl`) that run the plan and pass the frameworks' checks.

- lr (`pilots_lr`): the lr the pilot runs at the recommended n trained with (the largest their `lr` column
  logs: the peak of a warm-up / decay schedule), at their batch B_p = bp_p x n; under `constant` the plan
  keeps it, under `sqrt` it is lr_p x sqrt(B / B_p) (isocompute.contract.lr.effective_lr, the project's
  recipe: docs/PAPER.md "Healthy recipe"), B the plan's batch.
- schedule (`schedule_from_frontier`): where the pilots' determined n*(C) rises below the budget (the
  smallest n of each set, never falling: studies.fit.nstar's rule), phases in rollouts spent that end at
  the recommended n; `isocompute.integrations.allocation.NSchedule.from_plan` reads it for
  IsoComputeGRPOTrainer. None when n* does not rise to the recommendation inside the budget.
- TRL 1.16 (`trl_fields`): one process, one generation batch per optimiser step (trl/trainer/grpo_config.py
  `__post_init__`: generation_batch_size = per_device_train_batch_size x processes x steps_per_generation,
  divisible by num_generations): num_generations n, per_device_train_batch_size = generation_batch_size =
  bp x n completions, gradient_accumulation_steps 1, max_steps m, learning_rate.
- verl (`verl_overrides`, checked by `verl_violations`, the arithmetic of verl's
  trainer/ppo/ray_trainer.py `_validate_config` and workers/fsdp_workers.py's normalisation):
  data.train_batch_size = bp prompts, actor_rollout_ref.rollout.n = n, ppo_mini_batch_size = bp (one
  update per step, on-policy as the pilots' GRPO step), trainer.total_training_steps = m; with G GPUs:
  bp x n divisible by G, train_batch_size >= ppo_mini_batch_size, the normalised mini-batch
  ppo_mini_batch_size x n / G > 0 and divisible by ppo_micro_batch_size_per_gpu. verl fixes rollout.n for a
  run: a schedule is printed as comments (one resumed job per phase).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from isocompute.contract.lr import effective_lr
from studies.config import StudiesError

EMITS = ("trl", "verl")
"""The trainers `plan --emit` writes fields for."""
PLAN_LR_RULES = ("constant", "sqrt")
"""`plan --lr-rule` values: how the plan's lr follows its batch from the pilots' (IsoComputeGRPOTrainer's
lr rules)."""
MICRO_CAP = 8
"""verl's ppo_micro_batch_size_per_gpu is the largest power of two <= this dividing the normalised
mini-batch (a memory setting: lower it on a small GPU, keeping the division)."""


def pilots_lr(pilots: pd.DataFrame, n: int, bp: int, rule: str, lr: float | None = None) -> dict[str, Any]:
    """The plan's lr at batch bp x n under `rule` from the pilots' own lr at n (module docstring); `lr`
    overrides the pilots' (for pilots that log none). {"rule", "lr", "batch", "pilot_lr", "pilot_batch",
    "note"}; lr None (with a note) when neither gives one."""
    if rule not in PLAN_LR_RULES:
        raise StudiesError(f"unknown --lr-rule {rule!r}; choose one of {', '.join(PLAN_LR_RULES)}")
    at = pilots.loc[pilots["n"].astype(float) == float(n)]
    bps = sorted(int(v) for v in at["bp"].dropna().unique()) or [bp]
    bp_p = bp if bp in bps else bps[-1]
    out: dict[str, Any] = {"rule": rule, "lr": None, "batch": int(bp * n), "pilot_lr": None,
                           "pilot_batch": int(bp_p * n), "note": None}
    if lr is None:
        rows = at.loc[at["bp"].astype(float) == float(bp_p)]
        logged = pd.to_numeric(rows["lr"] if "lr" in rows.columns else pd.Series([], dtype=float),
                               errors="coerce")
        logged = logged[np.isfinite(logged) & (logged > 0)]
        if logged.empty:
            out["note"] = f"the pilots at n = {n} log no lr; give --lr (their lr at batch {bp_p * n})"
            return out
        lr = float(logged.max())
    elif not (math.isfinite(lr) and lr > 0):
        raise StudiesError(f"--lr must be a positive number, got {lr}")
    out["pilot_lr"] = float(lr)
    out["lr"] = float(effective_lr(float(lr), rule, bp * n, bp_p * n))
    return out


def schedule_from_frontier(ff, n_rec: int, budget: float) -> dict[str, Any] | None:
    """Phases (rollouts spent, n) along the pilots' determined n*(C) up to the budget, the smallest n of each
    set, never falling, ending at the recommended n; beyond the pilots' data the n* sigmoid (when `fit`
    found one) snapped to the pilots' n. None when n* does not rise to n_rec below the budget."""
    fr = ff.frontier_
    if fr.empty:
        return None
    grid = np.asarray(sorted(float(k) for k in ff.curves_), dtype=float)
    det = fr.loc[fr["determined"].to_numpy(dtype=bool) & (fr[ff.x].to_numpy(dtype=float) <= budget)]
    path = [(float(c), float(min(s))) for c, s in zip(det[ff.x], det["set"], strict=True) if s]
    cmax = float(fr[ff.x].max())
    if budget > cmax and ff.n_star_shape_ == "sigmoid":
        for c in np.geomspace(cmax, budget, 9)[1:]:
            v = float(ff.predict_n_star(np.array([c]))[0])
            path.append((float(c), float(grid[int(np.argmin(np.abs(np.log2(grid) - math.log2(v))))])))
    phases: list[list[float]] = []
    for c, v in sorted(path):
        v = min(v, float(n_rec))
        if not phases:
            phases.append([0.0, v])
        elif v > phases[-1][1]:
            phases.append([c, v])
    if len(phases) < 2 or phases[-1][1] != n_rec:
        return None
    return {"unit": "compute", "phases": [[float(c), int(v)] for c, v in phases],
            "source": "the pilots' determined n*(C), smallest n of each set, never falling"}


def schedule_n(schedule: dict | None, spent: float, n: int) -> int:
    """n of a plan's schedule after `spent` rollouts (n when the plan has none)."""
    if not schedule:
        return n
    out = n
    for start, nk in schedule["phases"]:
        if spent >= start:
            out = int(nk)
    return out


def schedule_steps(schedule: dict | None, bp: int, n: int, budget: float) -> int:
    """Optimiser steps the budget pays for at bp prompts a step and the schedule's n (m = budget // (bp n)
    without one): a step runs while its bp x n rollouts fit in what is left."""
    if not schedule:
        return int(budget // (bp * n))
    spent, steps = 0, 0
    while True:
        cost = bp * schedule_n(schedule, spent, n)
        if spent + cost > budget:
            return steps
        spent += cost
        steps += 1


def trl_fields(plan: dict[str, Any]) -> dict[str, Any]:
    """GRPOConfig keyword arguments (TRL 1.16) that run `plan` on one process (module docstring)."""
    r = plan["recommended"]
    sched = plan.get("schedule")
    n = schedule_n(sched, 0, r["n"])
    batch = r["bp"] * n
    out: dict[str, Any] = {"num_generations": n, "per_device_train_batch_size": batch,
                           "gradient_accumulation_steps": 1, "generation_batch_size": batch,
                           "max_steps": schedule_steps(sched, r["bp"], r["n"], plan["budget"])}
    lr = (plan.get("lr") or {}).get("lr")
    if lr is not None:
        out["learning_rate"] = float(effective_lr(lr, plan["lr"]["rule"], batch, plan["lr"]["batch"]))
    return out


def verl_overrides(plan: dict[str, Any], gpus: int = 1) -> dict[str, Any]:
    """verl's Hydra overrides that run the plan's recommended n, bp, m on `gpus` GPUs of one node; a
    StudiesError (one line) when its checks cannot pass (`verl_violations`)."""
    if gpus < 1:
        raise StudiesError(f"--gpus must be >= 1, got {gpus}")
    r = plan["recommended"]
    n, bp = int(r["n"]), int(r["bp"])
    if (bp * n) % gpus:
        raise StudiesError(f"verl needs data.train_batch_size x rollout.n = {bp} x {n} = {bp * n} divisible "
                           f"by the {gpus} GPUs (ray_trainer.py _validate_config); pick --gpus dividing it")
    normalised = bp * n // gpus
    micro = math.gcd(normalised, MICRO_CAP)
    out: dict[str, Any] = {"data.train_batch_size": bp, "actor_rollout_ref.rollout.n": n,
                           "actor_rollout_ref.actor.ppo_mini_batch_size": bp,
                           "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": micro,
                           "trainer.n_gpus_per_node": gpus, "trainer.nnodes": 1,
                           "trainer.total_training_steps": int(r["m"])}
    lr = (plan.get("lr") or {}).get("lr")
    if lr is not None:
        out["actor_rollout_ref.actor.optim.lr"] = float(lr)
    bad = verl_violations(out)
    if bad:
        raise StudiesError(f"the verl overrides fail verl's check: {bad[0]}")
    return out


def verl_violations(o: dict[str, Any]) -> list[str]:
    """verl's batch checks on overrides, as arithmetic (no Ray, FSDP, no sequence parallelism): the ones
    that fail, each a line; [] when all pass."""
    gpus = int(o["trainer.n_gpus_per_node"]) * int(o.get("trainer.nnodes", 1))
    tbs, n = int(o["data.train_batch_size"]), int(o["actor_rollout_ref.rollout.n"])
    mini = int(o["actor_rollout_ref.actor.ppo_mini_batch_size"])
    micro = o.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    out = []
    if (tbs * n) % gpus:
        out.append(f"real_train_batch_size {tbs * n} must be divisible by minimal possible batch size {gpus}")
    if tbs < mini:
        out.append(f"train_batch_size {tbs} must be >= ppo_mini_batch_size {mini}")
    normalised = mini * n // gpus
    if normalised <= 0:
        out.append(f"ppo_mini_batch_size {mini} should be larger than 0 after normalization")
    if micro is None:
        out.append("set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    elif normalised % int(micro) or normalised // int(micro) <= 0:
        out.append(f"normalized ppo_mini_batch_size {normalised} should be divisible by "
                   f"ppo_micro_batch_size_per_gpu {micro}")
    return out


def _trainer_comment(plan: dict[str, Any], fields: dict[str, Any]) -> list[str]:
    lines = []
    sched, lr = plan.get("schedule"), plan.get("lr") or {}
    if sched:
        shown = ", ".join(f"n = {n} from C = {c:g}" for c, n in sched["phases"])
        ref = fields["generation_batch_size"]
        lines.append(f"n schedule ({shown}): IsoComputeGRPOTrainer(..., "
                     f"allocation=NSchedule.from_plan(plan), budget={plan['budget']:g}, "
                     f"lr_rule={lr.get('rule', 'constant')!r}, lr_ref_batch={ref})")
    if lr.get("lr") is None:
        lines.append(lr.get("note") or "no learning rate: the pilots log none")
    else:
        lines.append(f"learning_rate: the pilots' {lr['pilot_lr']:.4g} at batch {lr['pilot_batch']} under "
                     f"the {lr['rule']} rule")
    return lines


def render(plan: dict[str, Any], emit: str, gpus: int = 1) -> tuple[str, dict[str, Any]]:
    """(the text `plan --emit` prints: a YAML GRPOConfig file for trl, Hydra overrides one per line for
    verl, with '#' comments; the fields as a dict)."""
    if emit == "trl":
        fields = trl_fields(plan)
        head = [f"# GRPOConfig (trl 1.16) for budget C = {plan['budget']:g}: "
                f"n = {fields['num_generations']}, bp = {plan['recommended']['bp']}, one process"]
        head += [f"# {line}" for line in _trainer_comment(plan, fields)]
        body = [f"{k}: {v!r}" if isinstance(v, str) else f"{k}: {v}" for k, v in fields.items()]
        return "\n".join(head + body), fields
    if emit == "verl":
        fields = verl_overrides(plan, gpus)
        head = [f"# verl overrides for budget C = {plan['budget']:g} (checks of ray_trainer.py "
                "_validate_config pass)"]
        sched = plan.get("schedule")
        if sched:
            head.append("# verl fixes rollout.n for a run; the plan's n schedule as one resumed job per "
                        "phase: " + ", ".join(f"n = {n} from C = {c:g}" for c, n in sched["phases"]))
        lr = plan.get("lr") or {}
        if lr.get("lr") is None:
            head.append(f"# {lr.get('note') or 'no learning rate: the pilots log none'}")
        return "\n".join(head + [f"{k}={v}" for k, v in fields.items()]), fields
    raise StudiesError(f"unknown --emit {emit!r}; choose one of {', '.join(EMITS)}")
