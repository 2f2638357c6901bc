"""Learning-curve tables drawn from known sigmoids (`synthetic_table`): the fixture of the fitting tests,
where the true n*(C) is known, and of benchmarks/fit_speed.py. Import it as `from synthetic_curves import
synthetic_table` (pytest puts tests/ on sys.path)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from studies.fit.sigmoid import sigmoid


def synthetic_table(
    specs: dict,
    seeds: int = 4,
    points: int = 60,
    c_max: float = 1e8,
    bp: int = 32,
    noise: float = 0.005,
    metric: str = "val_mean",
    rng: np.random.Generator | None = None,
) -> pd.DataFrame:
    """Learning curves drawn from known sigmoids, for tests and benchmarks.

    specs: {n: (R0, A, C_mid, b)}. Each (n, seed) run is evaluated at `points` log-spaced computes from one
    step (bp * n rollouts) to c_max, with Gaussian noise of sd `noise`. Columns: run_id, compute, n, bp, seed,
    metric.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    parts = []
    for n, (R0, A, C_mid, b) in specs.items():
        C = np.geomspace(bp * n, c_max, points)
        clean = sigmoid(C, R0, A, C_mid, b)
        for s in range(seeds):
            parts.append(
                pd.DataFrame(
                    {
                        "run_id": f"n{n}-s{s}",
                        "compute": C,
                        "n": n,
                        "bp": bp,
                        "seed": s,
                        metric: clean + rng.normal(0.0, noise, C.size),
                    }
                )
            )
    return pd.concat(parts, ignore_index=True)
