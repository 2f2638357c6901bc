"""The evaluation schedule of a run: at which steps (or rollouts spent) the learning curve gets a row.

Log-spaced, so a curve is resolved at small compute without paying for an evaluation at every step: either
relative to the run's length (`eval_steps`) or on an absolute grid of compute (`grid_points`); pure
Python that reproduces `np.unique(np.round(np.geomspace(1, m, n_evals)))` bit for bit (tests/test_contract.py
checks it), so neither engine needs the other's numpy spelling."""

from __future__ import annotations

import math


def eval_steps(m: int, n_evals: int) -> list[int]:
    """0 followed by the unique rounded points of a geometric sequence of n_evals steps from 1 to m, always
    including 1 and m ([0, m] when n_evals < 2; [0] when m = 0)."""
    if m == 0:
        return [0]
    if n_evals < 2:
        return [0, m]
    step = math.log10(m) / (n_evals - 1)
    inner = {round(10.0 ** (i * step)) for i in range(1, n_evals - 1)}
    return [0, *sorted(inner | {1, m})]


def grid_points(start: int, per_octave: int, budget: int) -> list[int]:
    """The absolute evaluation grid below `budget`, in rollouts spent: round(start * 2^(i / per_octave)) for
    i = 0, 1, ... while below `budget` (the run's end is evaluated anyway). Why absolute: every budget gets
    the same points, so runs of different budgets are read at the same compute, and a run extended to a
    larger budget keeps the points it has."""
    if start < 1 or per_octave < 1:
        raise ValueError(f"need start >= 1 and per_octave >= 1, got {start}, {per_octave}")
    out, i = [], 0
    while (c := round(start * 2.0 ** (i / per_octave))) < budget:
        out.append(c)
        i += 1
    return out
