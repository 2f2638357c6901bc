"""The `isocompute fit --json` object of docs/DESIGN.md (`fit_report`): one FrontierFit of a table as
JSON values (per-configuration fits, the frontier with n* as a set, the n* sigmoid, the extrapolation check,
the certainty at the largest compute, and with `lag` the speed-or-ceiling readout of studies.fit.lag), and
its frontier as a small table (`n_star_table`). Its text is studies.fit.render."""

from __future__ import annotations

import numpy as np
import pandas as pd

from studies.files import jsonable
from studies.fit.extrapolation import extrapolation_check
from studies.fit.frontier import FrontierFit, params_json, usable_fit
from studies.fit.nstar import LEVEL, REPS, config_value, numeric_keys
from studies.fit.sigmoid import PARAM_NAMES, sigmoid

ESTIMATOR = ("n* at C: every configuration whose measured seed-mean record reward at C (best so far over "
             "evaluations at compute <= C) has a {level:.0%} interval (runs resampled, {reps} times) "
             "reaching the best configuration's, or lies within {resolution:g} of it; determined where that "
             "set has one member or lies wholly above an earlier one")
"""How `fit_report` states its estimator (studies.fit.nstar)."""


def fit_report(
    table: pd.DataFrame,
    metric: str = "val_mean",
    by: str = "n",
    bin_width: float = 0.005,
    grid_points: int = 40,
    smooth: int = 1,
    aggregate: str = "auto",
    extrapolate: bool = True,
    x: str = "compute",
    model: str | None = None,
    level: float = LEVEL,
    reps: int = REPS,
    lag: bool = False,
) -> dict:
    """The `isocompute fit --json` object of docs/DESIGN.md, JSON-serialisable (nan -> None).

    {"metric", "by", "fits": {"usable", "degenerate": {<by>: status}},
     "curves": [{<by>: v, "params": {R0, A, C_mid, b}, "r2": x, ...}],
     "frontier": [{"compute": C, "reward": R, "reward_interval": [lo, hi], <by>: best, "set": [...],
                   <by>_lo, <by>_hi, "tie": bool, "determined": bool}, ...],
     "n_star": {"estimator", "level", "reps", "none_improved", "determined", "change": {"rise", "fall"}},
     "n_star_fit": {"params", "r2", "status", "shape": "flat" | "sigmoid", "points"}}
    plus "extrapolation" (`extrapolation_check`), "certainty" (studies.fit.certainty.assess at the largest
    compute: the last frontier row, its regret and notes; `model` is the runs' preset, for its metric hint),
    "warnings" and "settings"; with `lag`, "lag" (studies.fit.lag.lag_report: each n's compute lag behind
    the smallest n, its trend over reward levels, the same against lr x steps, and val at matched train
    reward; off by default: 200 resamples per pair cost about a second, which `isocompute fit` spends and
    the figures need not). One computation (studies.fit.nstar.n_star_sets) gives every frontier row's
    reward, interval, best and set, so they cannot disagree. With a degenerate per-configuration fit,
    "n_star_fit" and "extrapolation" say "not fitted" / "not checked" and carry no verdict.

    Needs only run_id, compute, the `by` column and the metric; rows with compute <= 0 are left out of the
    fits (the initial checkpoint has no log C; R0 is the fitted C -> 0 level instead). With x = "tokens" the
    frontier's "compute" entries are token counts ("settings" names the column). Raises ValueError (one line)
    when columns are missing or nothing can be fitted.
    """
    from studies.fit.certainty import assess

    ff = FrontierFit(metric=metric, by=by, bin_width=bin_width, grid_points=grid_points, smooth=smooth,
                     aggregate=aggregate, x=x, level=level, reps=reps).fit(table)
    curves = []
    for v, fit in ff.curves_.items():
        lo, hi = ff.ranges_[v]
        curves.append(
            {
                by: config_value(v),
                "params": params_json(fit),
                "r2": jsonable(fit.r2_),
                "status": fit.status_,
                "at_bounds": list(fit.at_bounds_),
                "n_points": int(fit.n_points_),
                "n_runs": int(ff.n_runs_.get(v, 0)),
                "compute_range": [jsonable(lo), jsonable(hi)],
            }
        )
    frontier = []
    for row in ff.frontier_.to_dict("records"):
        item = {"compute": jsonable(row[x]), "reward": jsonable(row["reward"]),
                "reward_interval": [jsonable(row["reward_lo"]), jsonable(row["reward_hi"])],
                by: config_value(row[by]), "set": [config_value(v) for v in row["set"]],
                f"{by}_lo": config_value(row[by + "_lo"]), f"{by}_hi": config_value(row[by + "_hi"]),
                "tie": bool(row["tie"]), "determined": bool(row["determined"])}
        if by + "_smooth" in row:
            item[by + "_smooth"] = jsonable(row[by + "_smooth"])
        frontier.append(item)
    degenerate = {str(config_value(v)): f"{f.status_}; {ff.n_computes_.get(v, 0)} evaluated computes"
                  for v, f in ff.curves_.items() if not usable_fit(f, ff.n_computes_.get(v))}
    if ff.n_star_fit_ is not None:
        nsf = {
            "params": params_json(ff.n_star_fit_),
            "r2": jsonable(ff.n_star_fit_.r2_),
            "status": ff.n_star_fit_.status_,
            "target": f"log2 {by}",
            "shape": ff.n_star_shape_,
            "points": int(ff.frontier_["determined"].sum()),
        }
    else:
        why = ("not fitted: a per-" + by + " sigmoid fit is degenerate" if degenerate else
               f"not fitted: {by} is not a positive number" if not numeric_keys(list(ff.curves_)) else
               "not fitted")
        nsf = {"params": None, "r2": None, "status": why, "target": f"log2 {by}", "shape": "flat",
               "points": int(ff.frontier_["determined"].sum()) if not ff.frontier_.empty else 0}
    ns = ff.nstar_
    report = {
        "metric": metric,
        "by": by,
        "fits": {"usable": bool(ff.fits_usable_), "degenerate": degenerate},
        "curves": curves,
        "frontier": frontier,
        "n_star": {"estimator": ESTIMATOR.format(level=ns.level, reps=ns.reps, resolution=bin_width),
                   "level": ns.level,
                   "reps": ns.reps, "none_improved": ns.none_improved,
                   "determined": int(ff.frontier_["determined"].sum()) if not ff.frontier_.empty else 0,
                   "change": jsonable({k: _change_json(v) for k, v in ff.change_.items()})},
        "n_star_fit": nsf,
    }
    if extrapolate:
        report["extrapolation"] = extrapolation_check(
            table,
            metric,
            by,
            full=ff,
            bin_width=bin_width,
            grid_points=grid_points,
            smooth=smooth,
            aggregate=aggregate,
            x=x,
        )
    if not ff.frontier_.empty:
        j = int(np.flatnonzero([b is not None for b in ns.best])[-1])
        report["certainty"] = jsonable(assess(ns, j, metric=metric, by=by, model=model))
    if lag:
        from studies.fit.lag import lag_report

        report["lag"] = lag_report(table, metric=metric, by=by, x=x, level=level, reps=reps)
    report["warnings"] = list(ff.warnings_)
    report["settings"] = {
        "bin_width": bin_width,
        "grid_points": int(grid_points),
        "smooth": int(smooth),
        "aggregate": ff.aggregate_,
        "compute": x,
    }
    return report


def _change_json(c: dict | None) -> dict | None:
    if not c:
        return None
    return {"factor": c["factor"], "from": {"compute": c["from"]["compute"],
                                            "set": [config_value(v) for v in c["from"]["set"]]},
            "to": {"compute": c["to"]["compute"], "set": [config_value(v) for v in c["to"]["set"]]}}


def n_star_table(report: dict) -> pd.DataFrame:
    """The frontier of a `fit_report` as a small table for printing: compute, reward, <by> (the best), set,
    determined, and the n* sigmoid's value <by>_fit = 2 ** (fitted log2 n*) when its shape is a trend."""
    by = report["by"]
    fr = pd.DataFrame(report["frontier"], columns=["compute", "reward", by, "set", "determined"])
    nsf = report.get("n_star_fit") or {}
    p = nsf.get("params")
    if (nsf.get("shape") == "sigmoid" and p and all(p.get(k) is not None for k in PARAM_NAMES)
            and not fr.empty):
        fr[by + "_fit"] = 2.0 ** sigmoid(
            fr["compute"].to_numpy(dtype=float), p["R0"], p["A"], p["C_mid"], p["b"]
        )
    return fr
