"""Budget -> steps: how many optimiser steps a compute cap in rollouts pays for (docs/PAPER.md "The question":
compute C = bp * n * m rollouts).

One definition for the engines' configs, studies' RunConfig and the `--budget` help text, so the text cannot
say one rule while the code runs another."""

from __future__ import annotations

STEPS_RULE = "m = budget // (bp * (n + n_est))"
"""The rule `steps` computes, as the help texts quote it (n_est: the rollouts of a decoupled baseline, 0 where
a config has none; they count toward compute)."""


def rollouts_per_step(bp: int, n: int, n_est: int = 0) -> int:
    """Rollouts one step costs: bp * n, plus bp * n_est for a decoupled baseline."""
    return bp * (n + n_est)


def steps(budget: int, bp: int, n: int, n_est: int = 0) -> int:
    """m, the number of steps `budget` rollouts pay for (STEPS_RULE)."""
    return budget // rollouts_per_step(bp, n, n_est)


class RunShape:
    """batch, rollouts_per_step and steps of a config dataclass with fields n, bp, budget and, where it has a
    decoupled baseline, n_est (SimConfig, LLMConfig, studies.RunConfig mix this in)."""

    @property
    def batch(self) -> int:
        """B = bp * n rollouts per step that train."""
        return self.bp * self.n

    @property
    def rollouts_per_step(self) -> int:
        """Rollouts one step costs (`rollouts_per_step`)."""
        return rollouts_per_step(self.bp, self.n, getattr(self, "n_est", 0))

    @property
    def steps(self) -> int:
        """m, the number of steps the budget pays for (STEPS_RULE)."""
        return self.budget // self.rollouts_per_step
