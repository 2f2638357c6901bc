"""Record-breaking points of learning curves (docs/PAPER.md "Analysis workflow" step 1, paper Section 4, Fig
5).

A point is record-breaking when its metric, bucketed into bins of `bin_width`, lands in a higher bin than
every earlier (lower-compute) point of the same run. Later points that do not break a record are dominated by
an earlier checkpoint of the same run (equal or better reward for less compute), so they cannot lie on the
compute-optimal frontier; dropping them also keeps long, correlated plateaus from dominating the fit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Floating point: 0.3 / 0.005 = 59.999...; values this close to a bin edge count as on the edge.
_EDGE_EPS = 1e-9


def record_breaking(
    table: pd.DataFrame,
    metric: str = "val_mean",
    bin_width: float = 0.005,
    run_col: str = "run_id",
    x: str = "compute",
) -> pd.DataFrame:
    """Rows of `table` that are record-breaking within their run, sorted by (run, x).

    Vectorised (sort + groupby cummax), so 10^5 rows take milliseconds. Rows with a non-finite metric or x are
    never records and do not count as "earlier points" (a NaN evaluation carries no information). The first
    finite point of a run is always a record; a flat or decreasing run keeps only that point. Ties in x within
    a run keep their input order.
    """
    if bin_width <= 0 or not np.isfinite(bin_width):
        raise ValueError(f"bin_width must be a positive number, got {bin_width!r}")
    missing = [c for c in (run_col, x, metric) if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks column(s) {', '.join(missing)}")
    vals = pd.to_numeric(table[metric], errors="coerce").to_numpy(dtype=float)
    xs = pd.to_numeric(table[x], errors="coerce").to_numpy(dtype=float)
    finite = np.isfinite(vals) & np.isfinite(xs)
    df = table.loc[finite]
    if df.empty:
        return df.copy()
    df = df.sort_values([run_col, x], kind="mergesort")
    bins = np.floor(pd.to_numeric(df[metric]).to_numpy(dtype=float) / bin_width + _EDGE_EPS)
    bins = pd.Series(bins, index=df.index)
    runs = df[run_col]
    prev_best = bins.groupby(runs, sort=False).cummax().groupby(runs, sort=False).shift(1)
    keep = prev_best.isna().to_numpy() | (bins.to_numpy() > prev_best.to_numpy())
    return df.loc[keep].copy()
