"""What the figures need on top of `studies.fit`: fit reports as the figures use them (memoised, without the
extrapolation check), the frontier as a table, and table wrangling for plotting (seed means, final values,
metric@k labels).

Figures never fit anything themselves: record-breaking points, sigmoid fits, frontiers and pass@1 statistics
come from `studies.fit` (records, sigmoid, frontier, report, analyses, distribution), which figures import
directly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from studies.fit import report as _report
from studies.fit.analyses import final_reward
from studies.fit.sigmoid import SigmoidFit, sigmoid

_REPORTS: dict[tuple, dict] = {}
_REPORTS_MAX = 256


def fit_report(
    table: pd.DataFrame, metric: str = "val_mean", by: str = "n", x: str = "compute", smooth: int = 1
) -> dict:
    """`studies.fit.report.fit_report` (the `isocompute fit --json` object) without the extrapolation check
    (figures do not show it); `x="tokens"` fits against generated tokens (paper Fig 24).

    Memoised on the content of the columns it reads, because a figure and its gallery summary fit the same
    subsets (the fit is deterministic, so a cached report equals a fresh one)."""
    cols = [c for c in dict.fromkeys(["run_id", x, by, metric]) if c in table.columns]
    digest = int(pd.util.hash_pandas_object(table[cols], index=False).sum()) if len(table) else 0
    key = (metric, by, x, smooth, len(table), digest)
    if key not in _REPORTS:
        if len(_REPORTS) >= _REPORTS_MAX:
            _REPORTS.pop(next(iter(_REPORTS)))
        _REPORTS[key] = _report.fit_report(table, metric=metric, by=by, x=x, smooth=smooth, extrapolate=False)
    return _REPORTS[key]


def has_params(params: dict | None) -> bool:
    """Whether a fitted sigmoid's parameters are all present and finite (reports use None for nan)."""
    return bool(params) and all(
        params.get(k) is not None and np.isfinite(params[k]) for k in ("R0", "A", "C_mid", "b")
    )


def curve(params: dict, compute) -> np.ndarray:
    """A fitted reward curve R(C) (ScaleRL sigmoid of studies.fit.sigmoid) on the given compute values."""
    return sigmoid(np.asarray(compute, dtype=float), params["R0"], params["A"], params["C_mid"], params["b"])


def nstar_curve(params: dict, compute) -> np.ndarray:
    """n*(C) from the fitted sigmoid of log2 n* against C (docs/PAPER.md workflow step 4)."""
    return 2.0 ** curve(params, compute)


def undetermined(fr: pd.DataFrame) -> pd.Series:
    """Frontier points where n* is not determined (the report's "determined" flags, studies.fit.nstar: a tie
    set, or the only n with data); every point when a frame lacks the flags."""
    if "determined" not in fr.columns:
        return pd.Series(True, index=fr.index, dtype=bool)
    return ~fr["determined"].astype(bool)


def nstar_fit(report: dict, by: str = "n") -> SigmoidFit | None:
    """The report's own sigmoid of log2 n* against C (studies.fit.frontier fits it on the determined frontier
    points) as a SigmoidFit to draw; None without one."""
    nsf = report.get("n_star_fit") or {}
    if not has_params(nsf.get("params")):
        return None
    f = SigmoidFit()
    f.params_ = dict(nsf["params"])
    f.ok_ = nsf.get("status") == "ok"
    f.status_ = nsf.get("status")
    f.r2_ = float("nan") if nsf.get("r2") is None else float(nsf["r2"])
    f.at_bounds_ = []
    f.n_points_ = int(nsf.get("points") or 0)
    return f


def nstar_trend(report: dict) -> bool:
    """Whether the report's n* sigmoid describes a trend the data determine (its shape is "sigmoid")."""
    return (report.get("n_star_fit") or {}).get("shape") == "sigmoid"


def frontier_frame(report: dict, by: str = "n") -> pd.DataFrame:
    """The report's frontier as a table (compute, reward, <by>, and where the report has them the n* set's
    columns: reward_lo, reward_hi, <by>_lo, <by>_hi, tie, determined, set), sorted by compute."""
    rows = report.get("frontier") or []
    extra = [c for c in (by + "_smooth", by + "_lo", by + "_hi", "tie", "determined", "set")
             if rows and c in rows[0]]
    fr = pd.DataFrame(rows, columns=["compute", "reward", by, *extra])
    if rows and "reward_interval" in rows[0]:
        fr["reward_lo"] = [r["reward_interval"][0] for r in rows]
        fr["reward_hi"] = [r["reward_interval"][1] for r in rows]
    return fr.sort_values("compute").reset_index(drop=True)


def seed_mean(
    table: pd.DataFrame, metric: str, by: list[str] | tuple[str, ...] = ("n",), x: str = "compute"
) -> pd.DataFrame:
    """Mean and standard error over seeds of `metric` at each evaluation point, per configuration `by`.

    Runs of one configuration share their evaluation grid (same budget and batch), so grouping on x is exact.
    """
    by = list(by)
    g = table.groupby(by + [x], sort=True, observed=True)[metric]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["se"] = out["std"].fillna(0.0) / np.sqrt(out["count"].clip(lower=1))
    return out.rename(columns={"mean": metric}).drop(columns="std")


def final_values(table: pd.DataFrame, metric: str, by: list[str] | tuple[str, ...] = ("n",)) -> pd.DataFrame:
    """Per configuration: the metric at the largest compute every run reaches
    (studies.fit.analyses.final_reward, iso-compute), as columns by + [metric, se, count] (mean and standard
    error over seeds)."""
    fr = final_reward(table, metric, keys=tuple(by))
    fr["se"] = fr["sd"].fillna(0.0) / np.sqrt(fr["n_runs"].clip(lower=1))
    return fr.rename(columns={"reward": metric, "n_runs": "count"}).drop(columns="sd")


def k_of(table: pd.DataFrame) -> int | None:
    """The k of best@k / worst@k in this table (one value expected), or None when absent."""
    if "k" not in table.columns or table["k"].isna().all():
        return None
    return int(table["k"].dropna().iloc[0])
