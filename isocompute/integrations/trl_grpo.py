"""`IsoComputeGRPOTrainer`: TRL's GRPOTrainer (trl 1.16) with the group size n decided per step (an n
schedule, `NSchedule`) or per prompt (the llm backend's allocators of the rule book: knapsack, dynamo,
dynamic-sampling with its refill cap, skip-zero-var, pilot-commit, schedule:double), on TRL's own
generation, reward functions, loss (`loss_type`) and optimiser. Needs TRL (the trl extra).

Where TRL fixes n (trl/trainer/grpo_trainer.py): the RepeatSampler built once by `_get_train_sampler`, the
generation batch checks of GRPOConfig, and `rewards.view(-1, num_generations)` inside
`_generate_and_score_completions`. This subclass overrides four small pieces and copies none of TRL's:
- `_get_train_sampler`: the dataloader only paces TRL's loop (its rows are not read); the prompts of a step
  come from the allocator's stream (`llm_backend.allocators.ProblemStream`: a seeded permutation of the
  train set per epoch, read further by refills), so a step may take any number of prompts.
- `_generate_and_score_completions` (train mode; evaluation is TRL's): the allocator plans the step's draws
  (problems and n_i); each draw is TRL's own method on the prompts repeated n_i times, with
  `num_generations` set to n where the draw's groups are equal; groups are scored per draw, the history and
  the allocator's keep rule see their rewards, and the kept rows of all draws become the step's batch. Where
  a step's groups are unequal or come from several draws the advantages are the project's group advantages
  (`llm_backend.loss.group_advantages`: per group, sample std + 1e-4, TRL's epsilon; `scale_rewards` as
  TRL's), else TRL's own.
- `_calculate_rewards`: kept as TRL's, its combined rewards remembered for the above.
- `training_step` / `_get_learning_rate`: the lr rule (`LRRule`) scales the scheduler's lr by the step's
  batch, and the lr a step used is the one logged.
Counted and logged per step (`studies.readers.trl.LOGGED`): n and bp of the step, rollouts generated
(compute, every drawn rollout: refills and pilots count) and trained, so `isocompute fit` reads the run at
its true compute. The state the steps carry (rollouts spent, the stream, the per-prompt history) is saved in
each checkpoint (`STATE_FILE`) and read back on resume.

Settings it cannot serve are refused before anything is built or written, each with one line
(`AllocationError`): more than one process, an iterable train set, unequal groups where vLLM's server mode
or a `rollout_func` generates one n per request, refills with steps_per_generation > 1, and
`multi_objective_aggregation="normalize_then_sum"` where groups are unequal.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import sys
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch.utils.data import Sampler
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from isocompute.contract.allocspec import AllocatorError, label
from isocompute.contract.options import SCALE_REWARDS
from isocompute.integrations.allocation import AllocationError, LRRule, NSchedule
from isocompute.integrations.trl import IsoComputeCallback
from llm_backend import allocators
from llm_backend.loss import group_advantages
from studies.readers.trl import LOGGED

STATE_FILE = "isocompute_trainer.json"
"""The trainer's own state in a checkpoint folder, beside TRL's (as TRL's entropy_ctrl_state.json)."""
TRL_EPS = 1e-4
"""TRL's advantage epsilon: (r - mean) / (std + 1e-4) (grpo_trainer.py), the project's adv_eps default."""
UNEQUAL = ("knapsack", "dynamo")
"""Allocators whose draws give prompts unequal n_i."""
REFILL = ("dynamic-sampling", "pilot-commit")
"""Allocators whose steps draw more than once."""
READS_REWARDS = ("knapsack", "dynamo", "dynamic-sampling", "skip-zero-var", "pilot-commit")
"""Allocators whose rules read a group's correct count: they need rewards of 0 or 1."""
LEFT_PADDED = ("prompt_ids", "prompt_mask")
"""Keys of TRL's batch padded on the left (the prompt); the other per-row tensors are completion-aligned."""


@dataclass
class _Spend:
    """What the steps carry and a checkpoint saves: rollouts generated and trained so far, the stream's
    position, the per-prompt history, and whether the budget has room for another step."""

    spent: int
    trained: int
    stream: allocators.ProblemStream
    history: allocators.History
    exhausted: bool = False
    lr_factor: float = 1.0
    lr_used: float | None = None

    def to_json(self) -> dict:
        return {"spent": self.spent, "trained": self.trained, "stream_pos": self.stream.pos,
                "history": self.history.state()}


class _Pacer(Sampler):
    """`length` placeholder indices: TRL's loop draws a dataloader batch per micro-step, whose rows this
    trainer does not read (its prompts come from the allocator's stream)."""

    def __init__(self, length: int):
        self.length = int(length)

    def __iter__(self):
        return iter([0] * self.length)

    def __len__(self) -> int:
        return self.length


class _Phase(allocators.Allocator):
    """One draw of bp prompts x n per step, n and bp as the schedule gives them (StepContext.n / .bp)."""

    name = "n-schedule"

    def group_size(self, ctx):
        return ctx.n


class _BudgetStop(TrainerCallback):
    """Ends training after the step past which the rollout budget has no room for another."""

    def __init__(self, trainer: IsoComputeGRPOTrainer):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        if self.trainer._iso.exhausted:
            control.should_training_stop = True


class IsoComputeGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with per-step or per-prompt n (module docstring); every other argument is GRPOTrainer's.

    allocation: an `NSchedule`, or an allocator spec of the llm backend (`fixed`, `knapsack[:...]`,
    `dynamo[:...]`, `dynamic-sampling[:rounds=4]`, `skip-zero-var[:...]`, `pilot-commit[:...]`,
    `schedule:double@F1,...`; docs/ALLOCATORS.md) at base n = args.num_generations.
    budget: the rollout cap; training ends after the last step it pays for (None: TRL's max_steps alone;
    needed by schedules in shares of the budget and by schedule:double).
    lr_rule: `constant` or `sqrt` (lr x sqrt(B / B_ref), B the rollouts the step trains on); lr_ref_batch:
    B_ref (default: bp x n of the first phase, TRL's generation batch).
    The run's prompts per step bp are TRL's: generation_batch_size / num_generations. An IsoComputeCallback
    is added when none is given, so the run's table (<output_dir>/isocompute.parquet) and label are recorded.
    """

    def __init__(self, *args, allocation: NSchedule | str = "fixed", budget: int | None = None,
                 lr_rule: str = "constant", lr_ref_batch: int | None = None, **kwargs):
        bound = inspect.signature(GRPOTrainer.__init__).bind(None, *args, **kwargs).arguments
        targs = bound.get("args")
        if targs is None:
            raise AllocationError("IsoComputeGRPOTrainer needs a GRPOConfig: pass args=GRPOConfig(...)")
        self._lr_rule = LRRule(lr_rule, lr_ref_batch)
        self._schedule, self._spec = self._check(allocation, budget, targs, bound)
        self._budget = budget
        self._spec_text = None if self._schedule else str(allocation)
        super().__init__(*args, **kwargs)
        if not any(isinstance(cb, IsoComputeCallback) for cb in self.callback_handler.callbacks):
            self.add_callback(IsoComputeCallback())
        n0 = self._schedule.n0 if self._schedule else int(targs.num_generations)
        self._bp0 = int(targs.generation_batch_size) // int(targs.num_generations)
        self._n0 = n0
        self._alloc = _Phase(allocators.parse("fixed", n0), n0, self._bp0) if self._schedule else \
            allocators.make(str(allocation), n0, self._bp0)
        d = len(self.train_dataset)
        seed = int(targs.data_seed if targs.data_seed is not None else targs.seed)
        self._iso = _Spend(0, 0, allocators.ProblemStream(seed, d), allocators.History.empty(d))
        self._seed = seed
        self._captured: torch.Tensor | None = None
        for cb in self.callback_handler.callbacks:
            if isinstance(cb, IsoComputeCallback):
                cb.allocator = self.label
        self.add_callback(_BudgetStop(self))

    # ------------------------------------------------------------------------------------- configuration
    @staticmethod
    def _check(allocation, budget, targs, bound) -> tuple[NSchedule | None, object]:
        """(schedule, allocator spec): exactly one is set; AllocationError (one line) for what TRL's
        settings cannot serve."""
        n = int(targs.num_generations)
        bp0 = int(targs.generation_batch_size) // n
        spg = int(targs.steps_per_generation)
        if budget is not None and int(budget) < 1:
            raise AllocationError(f"budget must be a positive number of rollouts, got {budget}")
        if int(getattr(targs, "world_size", 1)) > 1:
            raise AllocationError(f"IsoComputeGRPOTrainer runs on one process (TRL's cross-process grouping "
                                  f"assumes one n for every prompt); got world_size {targs.world_size}")
        train = bound.get("train_dataset")
        if train is None or not hasattr(train, "__len__") or not hasattr(train, "__getitem__"):
            raise AllocationError("IsoComputeGRPOTrainer needs a map-style train_dataset (the allocator "
                                  "draws prompts by index); an iterable or missing one cannot serve")
        scale = getattr(targs, "scale_rewards", "group")
        if scale not in SCALE_REWARDS:
            raise AllocationError(f"scale_rewards {scale!r}: choose one of {', '.join(SCALE_REWARDS)}")
        if isinstance(allocation, NSchedule):
            schedule, spec, kind = allocation, None, "n-schedule"
            if schedule.n0 != n:
                raise AllocationError(f"GRPOConfig.num_generations {n} is not the schedule's first n "
                                      f"{schedule.n0}; set num_generations={schedule.n0}")
            schedule.check(bp0, spg)
            if schedule.unit == "fraction" and budget is None:
                raise AllocationError("a schedule in shares of the budget needs budget= (rollouts)")
        else:
            try:
                spec = allocators.parse(str(allocation), n)
            except AllocatorError as e:
                raise AllocationError(str(e)) from None
            schedule, kind = None, spec.kind
            if kind == "schedule:double" and budget is None:
                raise AllocationError("schedule:double doubles n at shares of the budget: it needs budget=")
        uniform = kind not in UNEQUAL
        vllm_server = bool(getattr(targs, "use_vllm", False)) and getattr(targs, "vllm_mode", "") == "server"
        if not uniform and vllm_server:
            raise AllocationError(f"allocator {kind} gives prompts unequal n, but TRL's vLLM server mode "
                                  "generates one n per request (vllm_generation.py: all_prompts[::n]); use "
                                  "vllm_mode='colocate' or TRL's transformers generation")
        if not uniform and bound.get("rollout_func") is not None:
            raise AllocationError(f"allocator {kind} gives prompts unequal n, which a rollout_func given one "
                                  "num_generations cannot serve; use an n schedule or a uniform allocator")
        if (not uniform or kind in REFILL) and targs.multi_objective_aggregation != "sum_then_normalize":
            raise AllocationError(f"allocator {kind} normalises groups per draw, which "
                                  f"multi_objective_aggregation={targs.multi_objective_aggregation!r} cannot "
                                  "serve; use 'sum_then_normalize'")
        if kind in REFILL and spg > 1:
            raise AllocationError(f"allocator {kind} trains on as many groups as its refills kept, which "
                                  f"steps_per_generation={spg} cannot split evenly; set "
                                  "gradient_accumulation_steps=1 (and steps_per_generation=1)")
        first = bp0 * (schedule.n0 if schedule else n)
        if budget is not None and int(budget) < first:
            raise AllocationError(f"budget {budget} is less than one step of {first} rollouts")
        return schedule, spec

    @property
    def label(self) -> str:
        """The run's `allocator` column: the schedule's label, or the allocator's as the llm backend writes it
        (`fixed-n{n}`, else the spec)."""
        if self._schedule is not None:
            return self._schedule.label
        return label(self._spec_text, self._n0)

    def _get_train_sampler(self, dataset=None) -> Sampler:
        return _Pacer(len(super()._get_train_sampler(dataset)))

    # ------------------------------------------------------------------------------------- one step
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        out = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._captured = out
        return out

    def _combined_rewards(self) -> np.ndarray:
        """The rewards TRL normalises (sum_then_normalize): reward functions weighted and summed, NaN where
        every function returned None."""
        rpf = self._captured
        r = (rpf * self.reward_weights.to(rpf.device).unsqueeze(0)).nansum(dim=1)
        r[torch.isnan(rpf).all(dim=1)] = torch.nan
        return r.detach().cpu().double().numpy()

    def _context(self, steps_done: int) -> allocators.StepContext:
        s = self._iso
        if self._schedule is not None:
            n = self._schedule.n_at(steps_done, s.spent, self._budget)
            bp = self._schedule.bp_for(n, self._bp0)
        else:
            n, bp = self._n0, self._bp0
        return allocators.StepContext(steps_done + 1, s.spent, self._budget or sys.maxsize, n, bp, s.stream,
                                      s.history, np.random.default_rng([self._seed, steps_done + 1]))

    def _draw(self, draw: allocators.Draw) -> tuple[dict, np.ndarray]:
        """TRL's generation and scoring of one draw: each prompt repeated n_i times, `num_generations` set to
        n where the draw's n_i are equal (TRL's grouping is then exact), else to 1 (its advantages are
        replaced). Returns TRL's batch and the rows' combined rewards."""
        rows = [dict(self.train_dataset[int(i)]) for i in draw.problems]
        inputs = [dict(r) for r, k in zip(rows, draw.ns, strict=True) for _ in range(k)]
        base = self.num_generations
        self.num_generations = draw.ns[0] if len(set(draw.ns)) == 1 else 1
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            self.num_generations = base
        return out, self._combined_rewards()

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:  # evaluation: TRL's own (num_generations_eval)
            return super()._generate_and_score_completions(inputs)
        return self._allocated_step()

    def _allocated_step(self) -> dict:
        """The step's draws as the allocator plans them (llm_backend/loop.py `draw_step`, with TRL generating
        and scoring), the kept groups' rows as one batch, and the step's counts logged."""
        s, alloc, metrics = self._iso, self._alloc, self._metrics["train"]
        done = self.state.global_step
        ctx = self._context(done)
        zero_logged = len(metrics["frac_reward_zero_std"])
        logged_adv = 0
        parts: list[dict] = []
        groups: list[list[tuple[int, int]]] = []  # kept groups: their rows as (part, row)
        group_rewards: list[np.ndarray] = []
        drawn_rewards: list[np.ndarray] = []
        drawn_rows: list[tuple[int, int]] = []  # every drawn row, in draw order (the completions log's)
        kept_at: list[int] = []  # per kept group: its index in drawn_rewards
        last_kept: list[int] = []  # indices into groups of the previous draw's kept groups
        while (draw := alloc.propose(ctx)) is not None:
            out, r = self._draw(draw)
            p = len(parts)
            parts.append(out)
            logged_adv += len(r)
            drawn_rows += [(p, j) for j in range(len(r))]
            slices, off = [], 0
            for k in draw.ns:
                slices.append(range(off, off + k))
                off += k
            if off != len(r):
                raise RuntimeError(f"TRL returned {len(r)} completions for a draw of {off}")
            rs = [r[list(sl)] for sl in slices]
            if self._spec is not None and self._spec.kind in READS_REWARDS:
                _check_binary(rs, self._spec.kind)
            for g, rg in zip(draw.problems, rs, strict=True):
                s.history.record(g, np.nan_to_num(rg), alloc.ema)
            if draw.extends:  # Pilot-Commit's commit: the rollouts join the groups the pilot kept
                for gi, sl, rg in zip(last_kept, slices, rs, strict=True):
                    groups[gi] += [(p, j) for j in sl]
                    group_rewards[gi] = np.concatenate([group_rewards[gi], rg])
                    drawn_rewards[kept_at[gi]] = group_rewards[gi]
            else:
                keep = alloc.keep(ctx, draw, rs)
                last_kept = []
                for sl, rg, k in zip(slices, rs, keep, strict=True):
                    if k:
                        last_kept.append(len(groups))
                        kept_at.append(len(drawn_rewards))
                        groups.append([(p, j) for j in sl])
                        group_rewards.append(rg)
                    drawn_rewards.append(rg)
                ctx.kept += int(sum(keep))
            ctx.drawn += draw.rollouts
            ctx.rounds += 1
            ctx.draws.append(draw)
        if ctx.rounds == 0:
            raise AllocationError(f"the budget {self._budget} has no room for step {done + 1} "
                                  f"({s.spent} rollouts spent)")
        if not groups:
            raise AllocationError(f"step {done + 1}: the allocator kept no group of the {len(drawn_rewards)} "
                                  f"it drew ({ctx.rounds} draws); raise its rounds or the budget")
        rows = [row for g in groups for row in g]
        identity = len(parts) == 1 and rows == drawn_rows
        batch = parts[0] if identity else self._join(parts, rows)
        uniform = len(parts) == 1 and len({len(g) for g in groups}) == 1
        if not (identity and uniform):
            adv = _advantages(group_rewards, self.scale_rewards)
            batch["advantages"] = torch.as_tensor(adv, dtype=torch.float32, device=self.accelerator.device)
            self._relog_advantages(adv, rows, drawn_rows, logged_adv)
        del metrics["frac_reward_zero_std"][zero_logged:]
        metrics["frac_reward_zero_std"].append(
            float(np.mean([not allocators.has_signal(np.nan_to_num(rg)) for rg in drawn_rewards])))
        trained = len(rows)
        if trained % self.args.steps_per_generation:
            raise AllocationError(f"step {done + 1} trains on {trained} rollouts, which steps_per_generation="
                                  f"{self.args.steps_per_generation} cannot split evenly")
        s.spent += ctx.drawn
        s.trained += trained
        s.lr_factor = self._lr_rule.factor(trained, self._bp0 * self._n0)
        sizes = [len(g) for g in groups]
        for key, value in ((LOGGED["n"], ctx.n), (LOGGED["bp"], ctx.bp), (LOGGED["compute"], s.spent),
                           (LOGGED["rollouts_trained"], s.trained), ("isocompute/groups_drawn",
                                                                     len(drawn_rewards)),
                           ("isocompute/groups_trained", len(groups)), ("isocompute/n_min", min(sizes)),
                           ("isocompute/n_max", max(sizes)), ("isocompute/lr_factor", s.lr_factor)):
            metrics[key] = [float(value)]
        nxt = self._context(done + 1)
        probe = replace(nxt, stream=copy.copy(s.stream), rng=np.random.default_rng(0))
        s.exhausted = self._budget is not None and alloc.propose(probe) is None
        return batch

    def _join(self, parts: list[dict], rows: list[tuple[int, int]]) -> dict:
        """One TRL batch of the given (part, row) rows of several draws' batches: per-row tensors selected
        and padded to a common width (prompts on the left, completions on the right, as TRL pads them);
        num_items_in_batch recounted over the rows' loss tokens."""
        pad_id = self._tokenizer.pad_token_id
        out: dict = {}
        for key, first in parts[0].items():
            if key in ("advantages", "num_items_in_batch"):
                continue
            if not isinstance(first, torch.Tensor) or first.ndim == 0 or any(key not in q for q in parts):
                raise AllocationError(f"a step of several draws cannot join TRL's batch field {key!r} "
                                      "(images and multimodal fields are not supported with refills)")
            picked = []
            for p, q in enumerate(parts):
                idx = [j for pp, j in rows if pp == p]
                if idx:
                    picked.append(q[key][torch.tensor(idx, device=q[key].device)])
            width = max(t.shape[1] for t in picked) if first.ndim > 1 else None
            value = pad_id if key in ("prompt_ids", "completion_ids") else 1 if key == "tool_mask" else 0
            if width is not None:
                left = key in LEFT_PADDED
                picked = [torch.nn.functional.pad(t, (width - t.shape[1], 0) if left else
                                                  (0, width - t.shape[1]), value=value) for t in picked]
            out[key] = torch.cat(picked)
        mask = out["completion_mask"] * out["tool_mask"] if "tool_mask" in out else out["completion_mask"]
        out["num_items_in_batch"] = mask.sum()
        return out

    def _relog_advantages(self, adv: np.ndarray, rows, drawn_rows, logged: int) -> None:
        """TRL's completions log holds the advantages it computed per draw: replace this step's with the
        trained rows' (0 for rows not trained)."""
        of = dict(zip(rows, adv.tolist(), strict=True))
        log = self._logs["advantages"]
        for _ in range(min(logged, len(log))):
            log.pop()
        log.extend(of.get(row, 0.0) for row in drawn_rows)

    # ------------------------------------------------------------------------------------- lr and logs
    def training_step(self, model, inputs, num_items_in_batch):
        out = super().training_step(model, inputs, num_items_in_batch)
        factor = self._iso.lr_factor
        for group, lr in zip(self.optimizer.param_groups, self.lr_scheduler.get_last_lr(), strict=True):
            group["lr"] = lr * factor
        self._iso.lr_used = self.optimizer.param_groups[0]["lr"]
        return out

    def _get_learning_rate(self) -> float:
        """The lr the last step used (the scheduler's times the lr rule's factor); TRL's before any step."""
        used = self._iso.lr_used
        return super()._get_learning_rate() if used is None else used

    # ------------------------------------------------------------------------------------- checkpoints
    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = os.path.join(self._get_output_dir(trial=trial),
                                  f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
            with open(os.path.join(folder, STATE_FILE), "w") as f:
                json.dump(self._iso.to_json(), f)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        path = None if checkpoint is None else os.path.join(checkpoint, STATE_FILE)
        if path is None or not os.path.exists(path):
            return
        with open(path) as f:
            saved = json.load(f)
        s = self._iso
        s.spent, s.trained = int(saved["spent"]), int(saved["trained"])
        s.stream = allocators.ProblemStream(s.stream.seed, s.stream.d, int(saved["stream_pos"]))
        s.history = allocators.History.from_state(saved["history"])


def _advantages(group_rewards: list[np.ndarray], scale_rewards: str) -> np.ndarray:
    """`group_advantages` (llm_backend.loss) of the trained groups in row order, TRL's epsilon and sample
    std; a row whose reward functions all returned None (NaN) gets 0 and is left out of its group's mean
    and std, as TRL leaves it."""
    finite = [np.isfinite(g) for g in group_rewards]
    kept = [g[f] for g, f in zip(group_rewards, finite, strict=True)]
    adv = np.zeros(sum(g.size for g in group_rewards))
    if any(k.size for k in kept):
        vals = group_advantages([k for k in kept if k.size], scale_rewards=scale_rewards, adv_std="sample",
                                adv_eps=TRL_EPS)
        mask = np.concatenate(finite)
        adv[mask] = vals
    return adv


def _check_binary(rewards: list[np.ndarray], kind: str) -> None:
    """AllocationError unless every reward is 0, 1 or NaN: the rule book counts correct rollouts."""
    allr = np.concatenate(rewards)
    bad = allr[np.isfinite(allr) & (allr != 0.0) & (allr != 1.0)]
    if bad.size:
        raise AllocationError(f"allocator {kind} counts correct rollouts: it needs rewards of 0 or 1, got "
                              f"{bad[0]:g}")


