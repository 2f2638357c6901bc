"""The paper's other analyses of result tables, beside the frontier: each configuration's reward at a common
budget (`final_reward`, `run_rewards`), the optimal n per metric (Fig 8), n*(M) and B_p*(M) at fixed batch
(Fig 9) and the sensitivity of reward to n vs B_p (Fig 10). Pass@1 distribution statistics (Fig 11/27) live
in studies.fit.distribution."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from studies.files import jsonable
from studies.fit.frontier import RANGE_TOL, FrontierFit, check_columns, params_json
from studies.fit.nstar import config_value


def final_reward(
    table: pd.DataFrame,
    metric: str = "val_mean",
    keys: Sequence[str] = ("bp", "n"),
    budget: float | None = None,
    tail: int = 1,
    stat: str = "final",
    x: str = "compute",
    run_col: str = "run_id",
) -> pd.DataFrame:
    """Reward of each configuration at a common budget, averaged over its runs (seeds).

    Per run, only points with x <= budget count (default budget: the largest compute every run reaches, so
    configurations are compared at iso-compute). stat "final": mean of the last `tail` points (tail > 1
    smooths evaluation noise); "best": the run's maximum (the plateau). Returns keys + reward, sd (across
    runs), n_runs.
    """
    keys = list(keys)
    runs = run_rewards(table, metric, keys, budget, tail, stat, x, run_col)
    out = runs.groupby(keys, sort=True, observed=True)["reward"].agg(reward="mean", sd="std", n_runs="size")
    out = out.reset_index()
    out.attrs["budget"] = runs.attrs["budget"]
    return out


def run_rewards(
    table: pd.DataFrame,
    metric: str = "val_mean",
    keys: Sequence[str] = ("bp", "n"),
    budget: float | None = None,
    tail: int = 1,
    stat: str = "final",
    x: str = "compute",
    run_col: str = "run_id",
) -> pd.DataFrame:
    """Reward of each run at a budget (see `final_reward`, which averages these over runs): columns
    run_col, keys, reward; one row per run. Put "seed" in keys to pair configurations seed by seed."""
    if stat not in ("final", "best"):
        raise ValueError(f"stat must be final or best, got {stat!r}")
    if int(tail) < 1:
        raise ValueError(f"tail must be >= 1, got {tail!r}")
    keys = list(keys)
    check_columns(table, [run_col, x, metric, *keys])
    df = table[[run_col, x, metric, *keys]].copy()
    df[x] = pd.to_numeric(df[x], errors="coerce")
    df[metric] = pd.to_numeric(df[metric], errors="coerce")
    df = df.loc[np.isfinite(df[metric].to_numpy(dtype=float)) & np.isfinite(df[x].to_numpy(dtype=float))]
    if df.empty:
        raise ValueError(f"no finite {metric} values")
    if budget is None:
        budget = float(df.groupby(run_col)[x].max().min())
    df = df.loc[df[x] <= budget * (1 + RANGE_TOL)].sort_values([run_col, x], kind="mergesort")
    g = df.groupby(run_col, sort=False)
    if stat == "final":
        per_run = df.loc[g.cumcount(ascending=False) < int(tail)].groupby(run_col, sort=False)
        vals = per_run[metric].mean()
    else:
        vals = g[metric].max()
    runs = g[keys].first().assign(reward=vals).reset_index()
    runs.attrs["budget"] = budget
    return runs


def optimal_by_metric(
    table: pd.DataFrame,
    metrics: Sequence[str] = ("val_best_k", "val_worst_k"),
    by: str = "n",
    per: str = "bp",
    budget: float | None = None,
    tail: int = 1,
    stat: str = "final",
) -> pd.DataFrame:
    """Optimal `by` (n) per value of `per` (B_p) for each metric at the largest common compute (paper Fig 8:
    on Easy the best n for worst@4 exceeds that for best@4, on Hard the reverse). Missing metric columns are
    skipped; ties go to the smaller n. Columns: per, metric, by + "_star", reward."""
    present = [m for m in metrics if m in table.columns]
    if not present:
        raise ValueError(f"table has none of the metric columns {', '.join(metrics)}")
    rows = []
    for m in present:
        fr = final_reward(table, m, keys=(per, by), budget=budget, tail=tail, stat=stat)
        fr = fr.sort_values([per, by], kind="mergesort")
        best = fr.loc[fr.groupby(per, sort=True)["reward"].idxmax()]
        for r in best.itertuples(index=False):
            d = r._asdict()
            rows.append({per: d[per], "metric": m, by + "_star": d[by], "reward": d["reward"]})
    return pd.DataFrame(rows, columns=[per, "metric", by + "_star", "reward"])


def sensitivity(
    table: pd.DataFrame,
    metric: str = "val_mean",
    factors: Sequence[str] = ("n", "bp"),
    budget: float | None = None,
    tail: int = 1,
    stat: str = "final",
) -> pd.DataFrame:
    """Range (max - min) of the final (stat "final") or plateau (stat "best") reward when one factor varies
    and the other is held fixed (paper Fig 10: Easy, 9.2% over n vs 1.9% over B_p). One row per (varied
    factor, fixed value) with at least two levels: varied, fixed, fixed_value, levels, min, max, range,
    argmax (the level with the highest reward)."""
    a, b = factors
    fr = final_reward(table, metric, keys=(a, b), budget=budget, tail=tail, stat=stat)
    rows = []
    for varied, fixed in ((a, b), (b, a)):
        for fv, g in fr.groupby(fixed, sort=True):
            if g[varied].nunique() < 2:
                continue
            g = g.sort_values(varied)
            rows.append(
                {
                    "varied": varied,
                    "fixed": fixed,
                    "fixed_value": fv,
                    "levels": int(g[varied].nunique()),
                    "min": float(g["reward"].min()),
                    "max": float(g["reward"].max()),
                    "range": float(g["reward"].max() - g["reward"].min()),
                    "argmax": g[varied].to_numpy()[int(np.argmax(g["reward"].to_numpy()))],
                }
            )
    out = pd.DataFrame(
        rows, columns=["varied", "fixed", "fixed_value", "levels", "min", "max", "range", "argmax"]
    )
    out.attrs["budget"] = fr.attrs.get("budget")
    return out


def sensitivity_summary(sens: pd.DataFrame) -> dict:
    """Mean reward range per varied factor, e.g. {"n": 0.092, "bp": 0.019} for the paper's Easy set."""
    return {str(k): float(v) for k, v in sens.groupby("varied")["range"].mean().items()}


def fixed_batch_optimum(
    table: pd.DataFrame,
    metric: str = "val_mean",
    grid_points: int = 40,
    bin_width: float = 0.005,
    aggregate: str = "auto",
) -> pd.DataFrame:
    """n*(M) and B_p*(M) at fixed total batch B = B_p * n (paper Fig 9, 18, 19).

    At fixed B, compute = B * M, so comparing splits at equal steps M is an iso-compute comparison: per batch
    value, fit one sigmoid of reward vs M per n (the workflow above with x = M) and take the envelope.
    Columns: batch, m, reward, n_star, bp_star (= batch / n_star), determined (n* is one n the seeds tell from
    the rest: studies.fit.nstar; a tie is not a point of a trend). `batch` and `m` are derived as bp * n and
    compute / batch when absent. The n* sigmoid in M per batch is in `.attrs["n_star_fit"]`.
    """
    check_columns(table, ["run_id", "n", metric])
    df = table.copy()
    if "batch" not in df.columns:
        check_columns(df, ["bp"])
        df["batch"] = df["bp"] * df["n"]
    if "m" not in df.columns:
        check_columns(df, ["compute"])
        df["m"] = df["compute"] / df["batch"]
    parts, fits = [], {}
    for B, g in df.groupby("batch", sort=True):
        if g["n"].nunique() < 2:
            continue
        ff = FrontierFit(
            metric=metric, by="n", bin_width=bin_width, grid_points=grid_points, aggregate=aggregate, x="m"
        ).fit(g)
        fr = ff.frontier_.rename(columns={"n": "n_star"})
        fr.insert(0, "batch", B)
        fr["bp_star"] = B / fr["n_star"].astype(float)
        parts.append(fr)
        if ff.n_star_fit_ is not None:
            fits[config_value(B)] = {"params": params_json(ff.n_star_fit_),
                                     "r2": jsonable(ff.n_star_fit_.r2_)}
    if not parts:
        raise ValueError("no batch value with at least two values of n")
    out = pd.concat(parts, ignore_index=True)[["batch", "m", "reward", "n_star", "bp_star", "determined"]]
    out.attrs["n_star_fit"] = fits
    return out
