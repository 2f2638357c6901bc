"""The evaluation schedule of a run: at which steps the learning curve gets a row.

Log-spaced, so a curve is resolved at small compute without paying for an evaluation at every step; pure
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
