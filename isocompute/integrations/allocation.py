"""What `IsoComputeGRPOTrainer` (isocompute/integrations/trl_grpo.py) allocates, as plain data: an n schedule
(`NSchedule`), the learning-rate rule that follows the batch (`LRRule`), and the one-line error every
setting it refuses raises (`AllocationError`). Pure Python, no TRL: the schedule and its label are tested,
printed by `isocompute plan --emit trl` and read back without importing torch.

An n schedule gives the group size n of each step by phases: n_k from the k-th boundary on, the boundaries
counted in optimiser steps done, in shares of the rollout budget spent, or in rollouts spent (the n*(C) that
`isocompute plan` reads off its pilots is a schedule in rollouts). When n changes, either the prompts per
step stay fixed (the batch bp * n changes with n) or the rollouts per step do (bp = rollouts / n)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from isocompute.contract.config import ConfigError
from isocompute.contract.lr import effective_lr
from isocompute.contract.options import LR_RULES

UNITS = ("steps", "fraction", "compute")
"""What a schedule's boundaries count: optimiser steps done, the share of the rollout budget spent, or
rollouts spent (`compute`, docs/DESIGN.md vocabulary)."""
FIXED = ("prompts", "rollouts")
"""What stays fixed when n changes: the prompts per step bp, or the rollouts per step bp * n."""
TRAINER_LR_RULES = ("constant", "sqrt")
"""The lr rules the trainer applies (isocompute.contract.lr.effective_lr): the lr as configured, or
lr * sqrt(B / B_ref) with B = bp * n the step's batch (docs/PAPER.md "Healthy recipe")."""


class AllocationError(ConfigError):
    """A schedule, allocator or TRL setting the trainer cannot serve; the message is one line."""


@dataclass(frozen=True)
class NSchedule:
    """n by phases: `phases` ((start, n), ...) with starts ascending from 0 in `unit` (UNITS); `fixed` (FIXED)
    says what stays when n changes. n of a step is that of the last phase whose start is <= the step's
    position when it draws: steps done before it, or the budget share / rollouts spent before it."""

    phases: tuple[tuple[float, int], ...]
    unit: str = "steps"
    fixed: str = "prompts"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise AllocationError(f"unknown schedule unit {self.unit!r}; choose one of {', '.join(UNITS)}")
        if self.fixed not in FIXED:
            raise AllocationError(f"unknown fixed {self.fixed!r}; choose one of {', '.join(FIXED)}")
        phases = tuple((float(s), int(n)) for s, n in self.phases)
        object.__setattr__(self, "phases", phases)
        if not phases or phases[0][0] != 0.0:
            raise AllocationError(f"an n schedule starts at 0, got phases {list(self.phases)}")
        starts = [s for s, _ in phases]
        if any(b <= a for a, b in zip(starts, starts[1:], strict=False)):
            raise AllocationError(f"the schedule's starts must increase, got {starts}")
        if any(n < 2 for _, n in phases):
            raise AllocationError(f"every phase needs n >= 2 (a group of one has no advantage), got "
                                  f"{[n for _, n in phases]}")
        if self.unit == "fraction" and starts[-1] >= 1.0:
            raise AllocationError(f"budget shares must be below 1, got {starts}")
        if self.unit == "steps" and any(s != int(s) for s in starts):
            raise AllocationError(f"step boundaries must be whole steps, got {starts}")

    @classmethod
    def at_steps(cls, phases: Mapping[int, int], fixed: str = "prompts") -> NSchedule:
        """{steps done: n}, e.g. {0: 4, 100: 16}: n = 16 for every step that starts after 100 steps."""
        return cls(tuple(sorted(phases.items())), "steps", fixed)

    @classmethod
    def at_fractions(cls, phases: Mapping[float, int], fixed: str = "prompts") -> NSchedule:
        """{share of the budget spent: n}, e.g. {0: 4, 0.5: 16} (the trainer needs `budget`)."""
        return cls(tuple(sorted(phases.items())), "fraction", fixed)

    @classmethod
    def from_plan(cls, plan: Mapping, fixed: str = "prompts") -> NSchedule:
        """The schedule of an `isocompute plan --json` object (its "schedule": phases in rollouts spent, read
        off the pilots' n*(C)); a plan without one gives its recommended n throughout."""
        sched = plan.get("schedule")
        if not sched:
            return cls(((0.0, int(plan["recommended"]["n"])),), "steps", fixed)
        return cls(tuple((float(s), int(n)) for s, n in sched["phases"]), sched.get("unit", "compute"), fixed)

    @property
    def n0(self) -> int:
        """n of the first phase (the run's base n)."""
        return self.phases[0][1]

    def n_at(self, steps_done: int, spent: int, budget: int | None) -> int:
        """n of the step that starts after `steps_done` steps and `spent` rollouts of `budget`."""
        if self.unit == "steps":
            x = float(steps_done)
        elif self.unit == "compute":
            x = float(spent)
        else:
            if not budget:
                raise AllocationError("a schedule in shares of the budget needs the trainer's budget")
            x = spent / budget
        n = self.phases[0][1]
        for start, nk in self.phases:
            if x >= start:
                n = nk
        return n

    def bp_for(self, n: int, bp0: int) -> int:
        """Prompts per step at group size n, from the first phase's bp0: bp0 when prompts are fixed, else
        bp0 * n0 / n (the rollouts per step of the first phase)."""
        if self.fixed == "prompts":
            return bp0
        return bp0 * self.n0 // n

    def check(self, bp0: int, steps_per_generation: int = 1) -> None:
        """AllocationError unless every phase's rollouts per step split into whole groups and into
        `steps_per_generation` equal micro-batches (TRL's split of a generation batch)."""
        for _, n in self.phases:
            if self.fixed == "rollouts" and (bp0 * self.n0) % n:
                raise AllocationError(f"fixed rollouts per step {bp0 * self.n0} (bp {bp0} x n {self.n0}) do "
                                      f"not split into groups of n = {n}")
            rows = self.bp_for(n, bp0) * n
            if rows % steps_per_generation:
                raise AllocationError(f"a step of {rows} rollouts (n = {n}) does not split into "
                                      f"steps_per_generation = {steps_per_generation} equal micro-batches")

    @property
    def label(self) -> str:
        """The run's `allocator` column (the curve label of `fit --by allocator`), e.g.
        `n-schedule:4@step0,16@step3`, `n-schedule:4@0%,16@50%`, `n-schedule:2@C0,4@C4096`."""
        return segments_label([(s, n) for s, n in self.phases], self.unit)


def segments_label(phases: list[tuple[float, int]], unit: str = "steps") -> str:
    """`fixed-n{n}` for one phase (the label of a plain fixed-n run), else `n-schedule:` and each phase as
    n@start in `unit` (a run resumed at another n is a schedule in steps: what it is)."""
    if len(phases) == 1:
        return f"fixed-n{int(phases[0][1])}"

    def at(s: float) -> str:
        if unit == "steps":
            return f"step{int(s)}"
        if unit == "fraction":
            return f"{100 * s:g}%"
        return f"C{s:g}"

    return "n-schedule:" + ",".join(f"{int(n)}@{at(s)}" for s, n in phases)


@dataclass(frozen=True)
class LRRule:
    """How the trainer's lr follows the step's batch B = bp * n: `constant` (TRL's lr as its scheduler
    gives it) or `sqrt` (that lr times sqrt(B / ref_batch)); ref_batch None = the first step's batch."""

    rule: str = "constant"
    ref_batch: int | None = None

    def __post_init__(self) -> None:
        if self.rule not in TRAINER_LR_RULES:
            extra = " (linear is the simulator's only)" if self.rule in LR_RULES else ""
            raise AllocationError(f"unknown lr rule {self.rule!r}; choose one of "
                                  f"{', '.join(TRAINER_LR_RULES)}{extra}")
        if self.ref_batch is not None and self.ref_batch < 1:
            raise AllocationError(f"the lr rule's reference batch must be >= 1, got {self.ref_batch}")

    def factor(self, batch: int, ref_batch: int) -> float:
        """The multiplier of the scheduler's lr at batch B (effective_lr of a unit lr: one definition)."""
        return effective_lr(1.0, self.rule, batch, self.ref_batch or ref_batch)

