"""The last step of the analysis workflow (docs/PAPER.md step 4): is n*(C) predictable? Fit on the small
budgets only, extrapolate the n* sigmoid and score it against the n* of all the data (`extrapolation_check`),
and the one wording of the result (`extrapolation_verdict`, which `fit` and `plan` print)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from studies.files import jsonable
from studies.fit.frontier import FrontierFit, params_json, usable_fit
from studies.fit.nstar import config_value
from studies.fit.sigmoid import FIT_OK

PREDICTABLE_STEPS = 1.0
"""An extrapolation is called predictable when both its mean |error| and its |error| at the largest compute
are at most one grid step (a factor 2 in n): a mean within a step can hide a miss of three steps at the
budget the extrapolation is for."""


def _grid_step(values) -> float:
    """Spacing of the configuration grid in log2 units (1.0 for powers of two)."""
    l2 = np.unique(np.log2(np.asarray(values, dtype=float)))
    return float(np.median(np.diff(l2))) if l2.size > 1 else 1.0


def extrapolation_check(
    table: pd.DataFrame,
    metric: str = "val_mean",
    by: str = "n",
    frac: float = 0.1,
    full: FrontierFit | None = None,
    **kwargs,
) -> dict:
    """Fit on compute <= frac * C_max only, predict n*(C) above the cut with the n* sigmoid, compare with the
    n* of all the data (docs/PAPER.md step 4: "predictable" = fitted on small budgets, it extrapolates).

    Only determined points count, on both sides (studies.fit.nstar): the low-budget sigmoid is fitted to the
    low data's determined points, and it is scored where the full data determine n*. Errors are in steps of
    the configuration grid (log2 spacing of the `by` values, 1 step = a factor of 2 for powers of two):
    `error_steps` = (log2 predicted - log2 actual) / step, continuous, and `index_error` = difference of grid
    indices after snapping the prediction to the nearest configuration; `reward_loss` = the measured reward
    of n* minus that of the snapped prediction at that compute: what following the extrapolated n* would
    cost. "predictable" is set only when there is something to score (`extrapolation_verdict` words it).
    """
    x = kwargs.get("x", "compute")
    if full is None:
        full = FrontierFit(metric=metric, by=by, **kwargs).fit(table)
    cmax = float(pd.to_numeric(table[x], errors="coerce").max())
    cut = frac * cmax
    out: dict = {"fit_max_compute": cut, "frac": frac, "points": []}
    if not full.fits_usable_:
        out["status"] = f"not checked: a per-{by} sigmoid fit is degenerate"
        return out
    low_table = table.loc[pd.to_numeric(table[x], errors="coerce") <= cut]
    try:
        low = FrontierFit(metric=metric, by=by, **kwargs).fit(low_table)
    except ValueError as e:
        out["status"] = f"no fit below the cut: {e}"
        return out
    if low.n_star_fit_ is None:
        out["status"] = f"no {by}* fit below the cut" + ("" if low.fits_usable_ else
                                                         f" (a per-{by} fit is degenerate there)")
        return out
    k = int(low.frontier_["determined"].sum())
    if k < low.n_star_fit_.min_points:
        out["status"] = (f"{by}* is determined at {k} compute(s) below the cut; its fit needs "
                         f"{low.n_star_fit_.min_points}")
        return out
    if not usable_fit(low.n_star_fit_):
        out["status"] = f"low-budget {by}* fit {low.n_star_fit_.status_}"
        return out
    fr = full.frontier_
    target = fr.loc[(fr[x] > cut) & fr["determined"].to_numpy(dtype=bool)]
    if target.empty:
        out["status"] = f"no determined {by}* above the cut"
        return out
    keys = np.asarray(sorted(full.curves_), dtype=float)
    l2keys = np.log2(keys)
    step = _grid_step(keys)
    C = target[x].to_numpy(dtype=float)
    pred = low.n_star_fit_.predict(C)
    actual = np.log2(target[by].to_numpy(dtype=float))
    err = (pred - actual) / step
    snap = np.abs(pred[:, None] - l2keys[None, :]).argmin(1)
    act_idx = np.abs(actual[:, None] - l2keys[None, :]).argmin(1)
    idx_err = snap - act_idx
    ns = full.nstar_
    rows = [int(np.argmin(np.abs(ns.compute - c))) for c in C]
    kpos = [ns.keys.index(k) for k in keys]
    loss = target["reward"].to_numpy(dtype=float) - np.array(
        [ns.point[j, kpos[s]] for j, s in zip(rows, snap, strict=True)])
    out["status"] = FIT_OK if low.n_star_fit_.ok_ else f"low-budget {by}* fit {low.n_star_fit_.status_}"
    out["n_star_fit_low"] = {"params": params_json(low.n_star_fit_), "r2": jsonable(low.n_star_fit_.r2_)}
    out["points"] = [
        {
            "compute": jsonable(c),
            f"{by}_pred": jsonable(2.0**p),
            by: config_value(a),
            "error_steps": jsonable(e),
            "index_error": int(i),
            "reward_loss": jsonable(lo),
        }
        for c, p, a, e, i, lo in zip(C, pred, target[by].to_numpy(), err, idx_err, loss, strict=True)
    ]
    out["mean_abs_error_steps"] = jsonable(np.mean(np.abs(err)))
    out["max_abs_error_steps"] = jsonable(np.max(np.abs(err)))
    out["final_error_steps"] = jsonable(err[-1])
    out["mean_abs_index_error"] = jsonable(np.mean(np.abs(idx_err)))
    out["max_reward_loss"] = jsonable(np.nanmax(loss)) if np.isfinite(loss).any() else None
    # the quality of the extrapolation, apart from whether the low-budget fit converged (`status`)
    out["predictable_mean"] = bool(np.mean(np.abs(err)) <= PREDICTABLE_STEPS)
    out["predictable_largest"] = bool(abs(err[-1]) <= PREDICTABLE_STEPS)
    out["predictable"] = out["predictable_mean"] and out["predictable_largest"]
    return out


def extrapolation_verdict(check: dict, fmt=None) -> str:
    """One line on an `extrapolation_check`: its errors and whether n* was predictable from the low budgets,
    or why nothing was scored. The one wording of predictability (`fit` and `plan` print it)."""
    fmt = fmt or (lambda c: f"{c:.3g}")
    cut = fmt(float(check.get("fit_max_compute") or 0))
    if check.get("mean_abs_error_steps") is None:
        return f"extrapolation from C <= {cut}: {check.get('status')}"
    fin, mean = check.get("final_error_steps"), check["mean_abs_error_steps"]
    if check.get("predictable"):
        verdict = "predictable: both within one grid step"
    else:
        off = [w for w, ok in (("at the largest C", check.get("predictable_largest")),
                               ("on average", check.get("predictable_mean"))) if not ok]
        verdict = f"not predictable: more than one grid step off {' and '.join(off)}"
    return (f"extrapolation from C <= {cut}: error at the largest determined C {fin:.3g} grid steps, mean "
            f"|err| {mean:.3g} grid steps over {len(check.get('points') or [])} determined point(s): "
            f"{verdict}"
            + ("" if check.get("status") == FIT_OK else f" ({check.get('status')})"))
