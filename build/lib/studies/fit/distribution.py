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
    """One row per snapshot (run_id, compute, split) of tidy pass@1 data (docs/DESIGN.md: pass@1 snapshots).

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
    p_all = pd.to_numeric(pass1["pass1"], errors="coerce").to_numpy(dtype=float)
    df = pass1.loc[np.isfinite(p_all), keys]
    p = p_all[np.isfinite(p_all)]
    # one integer id per snapshot from per-column codes (much faster than grouping on strings), then a single
    # float sort on gid * 2 + pass1 (pass1 in [0, 1]) puts each snapshot's values in order
    codes, levels = zip(*(pd.factorize(df[k], sort=True) for k in keys), strict=True)
    combined = np.zeros(len(df), dtype=np.int64)
    for c, lev in zip(codes, levels, strict=True):
        combined = combined * len(lev) + c
    ucomb, gid = np.unique(combined, return_inverse=True)
    order = np.argsort(gid * 2.0 + np.clip(p, 0.0, 1.0), kind="stable")
    gid, p = gid[order], p[order]
    G = ucomb.size
    uniq = {}
    rest = ucomb
    for k, lev in zip(keys[::-1], levels[::-1], strict=True):
        uniq[k] = np.asarray(lev)[rest % len(lev)]
        rest = rest // len(lev)
    N = np.bincount(gid, minlength=G).astype(float)
    start = np.concatenate([[0], np.cumsum(N)[:-1]])
    rank = np.arange(p.size) - start[gid]  # 0-based position of x_(i) in its snapshot
    a, b = rank / N[gid], (rank + 1.0) / N[gid]

    def H(v):  # antiderivative of |v|
        return 0.5 * v * np.abs(v)

    def gmean(v):
        return np.bincount(gid, weights=v, minlength=G) / N

    out = pd.DataFrame({k: uniq[k] for k in keys})
    out["n_problems"] = N.astype(int)
    out["mean"] = gmean(p)
    out["zero_frac"] = gmean((p <= zero_tol).astype(float))
    out["one_frac"] = gmean((p >= one_thresh).astype(float))
    out["spread"] = np.sqrt(np.maximum(gmean(p * p) - out["mean"].to_numpy() ** 2, 0.0))
    out["w1_uniform"] = np.bincount(gid, weights=H(b - p) - H(a - p), minlength=G)
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
