"""Statistics of the per-problem pass@1 distribution over training (paper Fig 11 and Fig 27, Section 5).

The paper diagnoses interference from how the pass@1 histogram evolves: small n polarises it (mass at 0 and 1,
problems "sacrificed"), large n improves more uniformly and leaves fewer problems at 0. These numbers
summarise
one snapshot each, so curves over compute can be compared at matched compute.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

PASS1_COLUMNS = ("run_id", "compute", "split", "problem", "pass1")


def pass1_stats(
    pass1: pd.DataFrame,
    zero_tol: float = 1e-9,
    one_thresh: float = 0.99,
) -> pd.DataFrame:
    """One row per snapshot (run_id, compute, split) of tidy pass@1 data (DESIGN.md: pass@1 snapshots).

    Columns: `n_problems`, `mean`, `zero_frac` (pass1 <= zero_tol: never solved), `one_frac`
    (pass1 >= one_thresh: solved essentially always), `polar_frac` = zero_frac + one_frac (polarisation),
    `spread` (population std of pass1), `w1_uniform`: the Wasserstein-1 distance between the empirical
    distribution and U(0, 1). W1 is chosen over a histogram KL because it needs no binning, is finite for
    point masses (all problems at 0 gives 0.5, exactly uniform quantiles give 1 / (4 N), half at 0 and half at
    1 gives 0.25) and reads in pass@1 units. Computed exactly: W1 = sum_i int_{(i-1)/N}^{i/N} |x_(i) - u| du.
    Rows with a NaN pass1 are dropped; a `split` column is optional.
    """
    keys = [c for c in ("run_id", "compute", "split") if c in pass1.columns]
    missing = [c for c in ("run_id", "compute", "pass1") if c not in pass1.columns]
    if missing:
        raise ValueError(f"pass@1 table lacks column(s) {', '.join(missing)}")
    df = pass1.loc[
        np.isfinite(pd.to_numeric(pass1["pass1"], errors="coerce").to_numpy(dtype=float)), keys + ["pass1"]
    ]
    df = df.sort_values(keys + ["pass1"], kind="mergesort")
    p = df["pass1"].to_numpy(dtype=float)
    g = df.groupby(keys, sort=False, observed=True)
    N = g["pass1"].transform("size").to_numpy(dtype=float)
    rank = g.cumcount().to_numpy(dtype=float)  # 0-based position of x_(i) in its snapshot
    a, b = rank / N, (rank + 1.0) / N

    def H(v):  # antiderivative of |v|
        return 0.5 * v * np.abs(v)

    w1_part = H(b - p) - H(a - p)
    work = pd.DataFrame(
        {
            **{k: df[k].to_numpy() for k in keys},
            "pass1": p,
            "p2": p * p,
            "is_zero": p <= zero_tol,
            "is_one": p >= one_thresh,
            "w1": w1_part,
        }
    )
    out = work.groupby(keys, sort=True, observed=True).agg(
        n_problems=("pass1", "size"),
        mean=("pass1", "mean"),
        zero_frac=("is_zero", "mean"),
        one_frac=("is_one", "mean"),
        mean_sq=("p2", "mean"),
        w1_uniform=("w1", "sum"),
    )
    out = out.reset_index()
    out["spread"] = np.sqrt(np.maximum(out.pop("mean_sq") - out["mean"] ** 2, 0.0))
    out["polar_frac"] = out["zero_frac"] + out["one_frac"]
    return out


def at_matched_compute(stats: pd.DataFrame, compute: float, run_col: str = "run_id") -> pd.DataFrame:
    """Per run (and split), the snapshot whose compute is nearest to `compute` in log space (Fig 11 compares
    n = 8 and n = 128 at matched compute)."""
    if compute <= 0:
        raise ValueError(f"compute must be positive, got {compute!r}")
    df = stats.loc[stats["compute"] > 0].copy()
    df["_dist"] = np.abs(np.log(df["compute"].to_numpy(dtype=float)) - np.log(compute))
    keys = [run_col] + (["split"] if "split" in df.columns else [])
    idx = df.groupby(keys, sort=True, observed=True)["_dist"].idxmin()
    return df.loc[idx.to_numpy()].drop(columns="_dist").reset_index(drop=True)
