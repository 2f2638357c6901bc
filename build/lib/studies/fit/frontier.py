"""The paper's analysis workflow on learning-curve tables (docs/PAPER.md "Analysis workflow", paper Section
4).

record-breaking points -> one monotone sigmoid per configuration (value of `by`, e.g. n) -> upper envelope
(frontier) on a log-spaced compute grid -> n*(C) and a sigmoid fit of log2 n* vs log C -> extrapolation check.
Plus the other analyses of the paper: best@k vs worst@k optimal n (Fig 8), n*(M) and B_p*(M) at fixed batch
(Fig 9), sensitivity of reward to n vs B_p (Fig 10). Pass@1 distribution statistics (Fig 11/27) live in
`studies.fit.distribution`.

Tables use the docs/DESIGN.md column names and may come from the simulator, the LLM backend or users' own
verl/TRL logs: only `run_id`, the compute column, the `by` column and the metric are required.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from studies.fit.records import record_breaking
from studies.fit.sigmoid import FIT_OK, PARAM_NAMES, SigmoidFit, sigmoid
from studies.store import jsonable

__all__ = [
    "FrontierFit",
    "fit_report",
    "n_star_table",
    "extrapolation_check",
    "final_reward",
    "run_rewards",
    "optimal_by_metric",
    "sensitivity",
    "sensitivity_summary",
    "fixed_batch_optimum",
    "record_breaking",
    "SigmoidFit",
]

_RANGE_TOL = 1e-9  # relative slack when deciding whether a grid point lies inside a curve's data range


EARLY_GAIN = 0.1
"""Frontier points that have gained less than this share of the frontier's total reward gain are
'undetermined': before any curve has improved, all n tie and the arg-max n is arbitrary (often the largest n
of the first steps)."""


def undetermined(rewards: Sequence[float]) -> np.ndarray:
    """Mask of frontier points (in compute order) where n* is not determined yet (see EARLY_GAIN)."""
    r = np.asarray(rewards, dtype=float)
    if r.size == 0:
        return np.zeros(0, dtype=bool)
    r0, r1 = r[0], np.nanmax(r)
    return r < r0 + EARLY_GAIN * (r1 - r0)


def _require(table: pd.DataFrame, cols: Sequence[str]) -> None:
    missing = [c for c in cols if c not in table.columns]
    if missing:
        have = ", ".join(map(str, table.columns[:12]))
        raise ValueError(f"table lacks column(s) {', '.join(missing)} (has: {have})")


def config_value(v):
    """A configuration value (n, bp...) for JSON: studies.store.jsonable, and 8.0 -> 8 (grids are
    integers)."""
    v = jsonable(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _params_json(fit: SigmoidFit) -> dict:
    return {k: jsonable(fit.params_[k]) for k in PARAM_NAMES}


class FrontierFit:
    """Per-configuration sigmoid fits, their upper envelope and n*(C) (paper Section 4, Fig 5-7).

    Parameters
    ----------
    metric, by : the reward column and the configuration column (docs/DESIGN.md names, e.g. "val_mean", "n").
    bin_width : record-breaking bin width (paper: 0.005).
    grid_points : number of log-spaced compute points for the frontier, over the data's compute range.
    smooth : window (grid points, centred) of the running average of log2 n*(C); 1 = none. The paper plots a
        running average (Fig 7); the n* sigmoid is fitted to the smoothed values when smooth > 1.
    aggregate : how seeds of a configuration are combined before fitting.
        "mean": average the metric over runs at each compute value, then take the record-breaking points of
        that seed-mean curve. Averaging first matters because the running record of a noisy curve is biased
        upwards (a record is by definition a lucky draw); averaging S seeds shrinks that bias by sqrt(S).
        "pool": record-breaking points of every run, pooled (the paper's per-run subsampling; works when runs
        do not share evaluation points, as in users' own logs). With "mean", a seed that stopped early
        (diverged) simply drops out of the average beyond its last point.
        "auto" (default): "mean" when runs of a configuration share evaluation points (median >= 2 runs per
        (configuration, compute) value), else "pool".
    x : the compute column ("compute", or "tokens" for token compute, or "m" for Fig 9's steps).
    sigmoid : keyword arguments for the per-configuration `SigmoidFit`.
    extend : a curve competes up to `extend` times the largest compute of its own data (runs of one sweep
        stop at slightly different evaluation points; a fitted plateau may be carried that far), and never
        below its smallest compute (a run with large n cannot exist below one step's compute).
    tie_tol : rewards within this distance of the best count as ties; ties go to the smallest configuration.

    After `fit(table)`: `records_` (points fitted, with column `_group`), `curves_` {by value: SigmoidFit},
    `ranges_` {by value: (min, max) compute of that configuration's data}, `grid_`, `frontier_` (DataFrame:
    x, reward, by[, by + "_smooth"]), `n_star_fit_` (SigmoidFit of log2 n* vs x, or None), `aggregate_`,
    `warnings_` (list of str).
    """

    def __init__(
        self,
        metric: str = "val_mean",
        by: str = "n",
        bin_width: float = 0.005,
        grid_points: int = 40,
        smooth: int = 1,
        aggregate: str = "auto",
        x: str = "compute",
        run_col: str = "run_id",
        sigmoid: dict | None = None,
        tie_tol: float = 1e-6,
        extend: float = 2.0,
    ):
        self.metric = metric
        self.by = by
        self.bin_width = bin_width
        self.grid_points = grid_points
        self.smooth = smooth
        self.aggregate = aggregate
        self.x = x
        self.run_col = run_col
        self.sigmoid = sigmoid
        self.tie_tol = tie_tol
        self.extend = extend

    # ---- fitting -----------------------------------------------------------------------------------------
    def fit(self, table: pd.DataFrame) -> FrontierFit:
        if self.aggregate not in ("auto", "mean", "pool"):
            raise ValueError(f"aggregate must be auto, mean or pool, got {self.aggregate!r}")
        if int(self.grid_points) < 2:
            raise ValueError(f"grid_points must be >= 2, got {self.grid_points!r}")
        if int(self.smooth) < 1:
            raise ValueError(f"smooth must be >= 1, got {self.smooth!r}")
        by, x, metric, run = self.by, self.x, self.metric, self.run_col
        _require(table, [run, x, by, metric])
        self.warnings_: list[str] = []
        df = table[[run, x, by, metric]].copy()
        df[x] = pd.to_numeric(df[x], errors="coerce")
        df[metric] = pd.to_numeric(df[metric], errors="coerce")
        df = df.loc[df[by].notna() & np.isfinite(df[x].to_numpy(dtype=float)) & (df[x] > 0)]
        bad = df.loc[~np.isfinite(df[metric].to_numpy(dtype=float)), run].unique()
        if len(bad):
            names = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
            self.warnings_.append(
                f"{len(bad)} run(s) have non-finite {metric} values (diverged?), left out: {names}"
            )
            df = df.loc[np.isfinite(df[metric].to_numpy(dtype=float))]
        if df.empty:
            raise ValueError(f"no rows with {x} > 0 and a finite {metric} to fit")
        self.aggregate_ = self._choose_aggregate(df)
        if self.aggregate_ == "mean":
            cur = df.groupby([by, x], sort=True, observed=True)[metric].mean().reset_index()
            cur["_group"] = cur[by]
            recs = record_breaking(cur, metric, self.bin_width, run_col="_group", x=x)
        else:
            recs = record_breaking(df, metric, self.bin_width, run_col=run, x=x)
            recs["_group"] = recs[by]
        self.records_ = recs
        self.n_runs_ = df.groupby(by, sort=True, observed=True)[run].nunique().to_dict()
        rng = df.groupby(by, sort=True, observed=True)[x].agg(["min", "max"])
        self.ranges_ = {k: (float(r["min"]), float(r["max"])) for k, r in rng.iterrows()}
        self.curves_: dict = {}
        kw = dict(self.sigmoid or {})
        vals = df[metric].to_numpy(dtype=float)
        vals = vals[np.isfinite(vals)]
        if "limits" not in kw and vals.size and vals.min() >= 0.0 and vals.max() <= 1.0:
            kw["limits"] = (0.0, 1.0)  # a rate (pass@1, best@k, worst@k): the fitted asymptote stays <= 1
        for v, g in recs.groupby(by, sort=True, observed=True):
            fit = SigmoidFit(**kw).fit(g[x].to_numpy(dtype=float), g[metric].to_numpy(dtype=float))
            self.curves_[v] = fit
            if not fit.ok_:
                self.warnings_.append(f"{by}={config_value(v)}: {fit.status_}")
            elif set(fit.at_bounds_) - {"R0"}:
                # R0 (the C -> 0 level) on its bound is common and harmless: curves often rise from their
                # first evaluation on. A, C_mid or b on a bound means the data do not pin the curve down.
                names = ", ".join(p for p in fit.at_bounds_ if p != "R0")
                also = " (R0 too, which is harmless)" if "R0" in fit.at_bounds_ else ""
                self.warnings_.append(f"{by}={config_value(v)}: parameter(s) {names} at a bound{also}")
        lo, hi = float(df[x].min()), float(df[x].max())
        self.grid_ = np.geomspace(lo, hi, int(self.grid_points)) if hi > lo else np.array([lo])
        self._build_frontier()
        self._fit_n_star()
        return self

    def _choose_aggregate(self, df: pd.DataFrame) -> str:
        if self.aggregate != "auto":
            return self.aggregate
        per_point = df.groupby([self.by, self.x], observed=True)[self.run_col].nunique()
        return "mean" if float(per_point.median()) >= 2 else "pool"

    def curve_matrix(self, C) -> tuple[list, np.ndarray]:
        """(configuration values in ascending order, predictions of shape (configs, len(C))), nan where a
        configuration has no data at that compute: below its smallest compute or above `extend` times its
        largest)."""
        C = np.atleast_1d(np.asarray(C, dtype=float))
        keys = list(self.curves_)
        P = np.full((len(keys), C.size), np.nan)
        for i, k in enumerate(keys):
            lo, hi = self.ranges_[k]
            inside = (C >= lo * (1 - _RANGE_TOL)) & (C <= hi * self.extend * (1 + _RANGE_TOL))
            fit = self.curves_[k]
            P[i, inside] = fit.predict(C[inside]) if fit.ok_ else self.record_curve(k, C[inside])
        return keys, P

    def record_curve(self, key, C) -> np.ndarray:
        """Fallback for a configuration whose sigmoid is degenerate (too few points...): its record-breaking
        points joined linearly in log C. The degenerate fit is a constant at their mean, which would claim
        that mean below the first record and put a phantom winner on the frontier there."""
        g = self.records_.loc[self.records_["_group"] == key]
        pts = g.groupby(self.x, sort=True)[self.metric].mean()
        if pts.empty:
            return np.full(np.shape(C), np.nan)
        xs, ys = np.log(pts.index.to_numpy(dtype=float)), np.maximum.accumulate(pts.to_numpy(dtype=float))
        return np.interp(np.log(C), xs, ys)

    def _build_frontier(self) -> None:
        keys, P = self.curve_matrix(self.grid_)
        by, x = self.by, self.x
        if not keys:
            self.frontier_ = pd.DataFrame({x: [], "reward": [], by: []})
            return
        idx, best = self._best(P)
        has = np.isfinite(best)
        if not has.all():
            self.warnings_.append(f"{int((~has).sum())} grid point(s) have no fitted curve in range")
        fr = pd.DataFrame({x: self.grid_[has], "reward": best[has], by: [keys[i] for i in idx[has]]})
        if self.smooth > 1 and self._numeric_by(keys):
            l2 = np.log2(fr[by].to_numpy(dtype=float))
            sm = pd.Series(l2).rolling(int(self.smooth), center=True, min_periods=1).mean().to_numpy()
            fr[by + "_smooth"] = 2.0**sm
        self.frontier_ = fr.reset_index(drop=True)

    def _best(self, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row index, reward) of the best configuration per column of curve predictions P: the first within
        tie_tol of the maximum = the smallest configuration on ties (fits of identical curves differ by
        optimiser noise, ~1e-8); reward -inf where no curve covers the column."""
        filled = np.where(np.isfinite(P), P, -np.inf)
        top = filled.max(axis=0)
        idx = np.argmax(filled >= top - self.tie_tol, axis=0)
        return idx, filled[idx, np.arange(P.shape[1])]

    def n_star_at(self, C) -> pd.DataFrame:
        """The frontier at given computes (the rule of `frontier_`, off its grid): columns x, reward, by
        (None where no fitted curve covers C)."""
        C = np.atleast_1d(np.asarray(C, dtype=float))
        keys, P = self.curve_matrix(C)
        if not keys:
            return pd.DataFrame({self.x: C, "reward": np.nan, self.by: None})
        idx, best = self._best(P)
        has = np.isfinite(best)
        return pd.DataFrame({self.x: C, "reward": np.where(has, best, np.nan),
                             self.by: [keys[i] if h else None for i, h in zip(idx, has, strict=True)]})

    def _numeric_by(self, keys) -> bool:
        try:
            arr = np.asarray(keys, dtype=float)
        except (TypeError, ValueError):
            return False
        return bool(arr.size) and bool(np.all(np.isfinite(arr) & (arr > 0)))

    def _fit_n_star(self) -> None:
        self.n_star_fit_ = None
        keys = list(self.curves_)
        fr = self.frontier_
        if fr.empty:
            return
        if not self._numeric_by(keys):
            self.warnings_.append(f"{self.by} is not a positive number, no sigmoid fit of log2 {self.by}*")
            return
        col = self.by + "_smooth" if self.by + "_smooth" in fr.columns else self.by
        y = np.log2(fr[col].to_numpy(dtype=float))
        l2 = np.log2(np.asarray(keys, dtype=float))
        # n* lives on the grid of configurations, so its sigmoid is bounded by the grid's ends.
        fit = SigmoidFit(y_bounds=(float(l2.min()), float(l2.max())), min_points=4).fit(fr[self.x], y)
        if not fit.ok_:
            self.warnings_.append(f"{self.by}* fit: {fit.status_}")
        self.n_star_fit_ = fit

    # ---- prediction --------------------------------------------------------------------------------------
    def predict(self, C) -> np.ndarray:
        """Frontier reward: the upper envelope of the fitted curves at C (nan outside all data ranges)."""
        _, P = self.curve_matrix(C)
        with np.errstate(all="ignore"):
            out = np.where(
                np.all(np.isnan(P), axis=0), np.nan, np.nanmax(np.where(np.isnan(P), -np.inf, P), 0)
            )
        return out

    def predict_n_star(self, C) -> np.ndarray:
        """n*(C) from the sigmoid fit of log2 n* vs log C (continuous; may be used beyond the data)."""
        if self.n_star_fit_ is None:
            raise ValueError("no n* fit (by is not numeric or nothing was fitted)")
        return 2.0 ** self.n_star_fit_.predict(C)


PREDICTABLE_STEPS = 1.0
"""An extrapolation is called predictable when both its mean |error| and its |error| at the largest compute
are at most one grid step (a factor 2 in n): a mean within a step can hide a miss of three steps at the
budget the extrapolation is for (issue 25)."""

FLAT_R2 = 0.5
"""An n*(C) sigmoid with r2 below this, or fitted to an n* that never moves, describes no trend: it is
reported as 'flat' rather than by its parameters (a b of 20 on a constant n* means nothing)."""


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
    """Fit on compute <= frac * C_max only, predict n*(C) up to C_max with the n* sigmoid, compare with the
    frontier of all the data (docs/PAPER.md step 4: "predictable" = fitted on small budgets, it extrapolates).

    Errors are in steps of the configuration grid (log2 spacing of the `by` values, 1 step = a factor of 2
    for powers of two): `error_steps` = (log2 predicted - log2 actual) / step, continuous, and `index_error`
    = difference of grid indices after snapping the prediction to the nearest configuration; `reward_loss` =
    frontier reward minus the (full-data) fitted reward of the snapped prediction: what following the
    extrapolated n* would cost.
    """
    x = kwargs.get("x", "compute")
    if full is None:
        full = FrontierFit(metric=metric, by=by, **kwargs).fit(table)
    cmax = float(pd.to_numeric(table[x], errors="coerce").max())
    cut = frac * cmax
    out: dict = {"fit_max_compute": cut, "frac": frac, "points": []}
    low_table = table.loc[pd.to_numeric(table[x], errors="coerce") <= cut]
    try:
        low = FrontierFit(metric=metric, by=by, **kwargs).fit(low_table)
    except ValueError as e:
        out["status"] = f"no fit below the cut: {e}"
        return out
    if low.n_star_fit_ is None or full.n_star_fit_ is None:
        out["status"] = f"no {by}* fit"
        return out
    target = full.frontier_.loc[full.frontier_[x] > cut]
    if target.empty:
        out["status"] = "no frontier points above the cut"
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
    # what the miss costs: frontier reward minus the full-data curve of the snapped prediction at that C
    _, P = full.curve_matrix(C)
    loss = target["reward"].to_numpy(dtype=float) - P[snap, np.arange(C.size)]
    out["status"] = FIT_OK if low.n_star_fit_.ok_ else f"low-budget {by}* fit {low.n_star_fit_.status_}"
    out["n_star_fit_low"] = {"params": _params_json(low.n_star_fit_), "r2": jsonable(low.n_star_fit_.r2_)}
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


def n_star_shape(fit: SigmoidFit | None, n_stars) -> str:
    """'flat' when the n* sigmoid describes no trend (n* constant over the frontier, r2 < FLAT_R2 or
    undefined, or a degenerate fit), else 'sigmoid'."""
    vals = {v for v in n_stars if v is not None}
    if fit is None or not fit.ok_ or len(vals) <= 1:
        return "flat"
    r2 = fit.r2_
    return "flat" if not (np.isfinite(r2) and r2 >= FLAT_R2) else "sigmoid"


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
    boot: int = 0,
) -> dict:
    """The `isocompute fit --json` object of docs/DESIGN.md, JSON-serialisable (nan -> None).

    boot > 0 (and a `seed` column with >= 2 seeds): each frontier point also carries the 95% seed-bootstrap
    interval of n* (<by>_lo, <by>_hi, studies.fit.bootstrap) and "undetermined" (interval over most of the
    grid); "n_star_interval" says how it was made. "n_star_fit" carries "shape": "flat" or "sigmoid"
    (n_star_shape).

    {"metric", "by", "curves": [{<by>: v, "params": {R0, A, C_mid, b}, "r2": x, ...}],
     "frontier": [{"compute": C, "reward": R, <by>: v}, ...], "n_star_fit": {"params": {...}, "r2": x}}
    plus "extrapolation" (see `extrapolation_check`), "warnings" and "settings". Needs only run_id, compute,
    the `by` column and the metric; rows with compute <= 0 are left out before the record-breaking step
    (the initial checkpoint has no log C; R0 is the fitted C -> 0 level instead). With x = "tokens" the
    frontier's "compute" entries are token counts ("settings" names the column). Raises ValueError
    (one line) when columns are missing or nothing can be fitted.
    """
    ff = FrontierFit(
        metric=metric,
        by=by,
        bin_width=bin_width,
        grid_points=grid_points,
        smooth=smooth,
        aggregate=aggregate,
        x=x,
    ).fit(table)
    curves = []
    for v, fit in ff.curves_.items():
        lo, hi = ff.ranges_[v]
        curves.append(
            {
                by: config_value(v),
                "params": _params_json(fit),
                "r2": jsonable(fit.r2_),
                "status": fit.status_,
                "at_bounds": list(fit.at_bounds_),
                "n_points": int(fit.n_points_),
                "n_runs": int(ff.n_runs_.get(v, 0)),
                "compute_range": [jsonable(lo), jsonable(hi)],
            }
        )
    frontier = []
    for row in ff.frontier_.itertuples(index=False):
        d = row._asdict()
        item = {"compute": jsonable(d[x]), "reward": jsonable(d["reward"]), by: config_value(d[by])}
        if by + "_smooth" in d:
            item[by + "_smooth"] = jsonable(d[by + "_smooth"])
        frontier.append(item)
    if ff.n_star_fit_ is not None:
        nsf = {
            "params": _params_json(ff.n_star_fit_),
            "r2": jsonable(ff.n_star_fit_.r2_),
            "status": ff.n_star_fit_.status_,
            "target": f"log2 {by}",
            "shape": n_star_shape(ff.n_star_fit_, ff.frontier_[by].tolist()),
        }
    else:
        nsf = {"params": None, "r2": None, "status": "not fitted", "target": f"log2 {by}", "shape": "flat"}
    numeric = ff._numeric_by(list(ff.curves_))  # an interval of n* needs an ordered grid (not --by allocator)
    seeds = "seed" in table.columns and table["seed"].nunique() > 1
    if boot and numeric and seeds and ff.aggregate_ == "mean":
        from studies.fit.bootstrap import LEVEL, bootstrap_n_star

        iv = bootstrap_n_star(ff, table, [f["compute"] for f in frontier], reps=boot, seed_col="seed")
        for f, lo, hi, und in zip(frontier, iv["lo"], iv["hi"], iv["undetermined"], strict=True):
            f.update({f"{by}_lo": config_value(lo), f"{by}_hi": config_value(hi), "undetermined": bool(und)})
        nsi = {"method": "seed bootstrap: seeds resampled with replacement, frontier refitted",
               "reps": int(iv["reps"]), "seeds": int(iv["seeds"]), "level": LEVEL}
    else:
        why = ("not asked (boot = 0)" if not boot else f"{by} is not a positive number" if not numeric
               else "needs a seed column with >= 2 seeds and seed-mean aggregation")
        nsi = {"method": None, "reason": why}
    report = {
        "metric": metric,
        "by": by,
        "curves": curves,
        "frontier": frontier,
        "n_star_fit": nsf,
        "n_star_interval": nsi,
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
    report["warnings"] = list(ff.warnings_)
    report["settings"] = {
        "bin_width": bin_width,
        "grid_points": int(grid_points),
        "smooth": int(smooth),
        "aggregate": ff.aggregate_,
        "compute": x,
    }
    return report


def n_star_table(report: dict) -> pd.DataFrame:
    """The frontier of a `fit_report` as a small table for printing: compute, reward, <by>, and the n*
    sigmoid's value <by>_fit = 2 ** (fitted log2 n*)."""
    by = report["by"]
    fr = pd.DataFrame(report["frontier"], columns=["compute", "reward", by])
    p = (report.get("n_star_fit") or {}).get("params")
    if p and all(p.get(k) is not None for k in PARAM_NAMES) and not fr.empty:
        fr[by + "_fit"] = 2.0 ** sigmoid(
            fr["compute"].to_numpy(dtype=float), p["R0"], p["A"], p["C_mid"], p["b"]
        )
    return fr


# ---- other analyses of the paper ------------------------------------------------------------------------


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
    _require(table, [run_col, x, metric, *keys])
    df = table[[run_col, x, metric, *keys]].copy()
    df[x] = pd.to_numeric(df[x], errors="coerce")
    df[metric] = pd.to_numeric(df[metric], errors="coerce")
    df = df.loc[np.isfinite(df[metric].to_numpy(dtype=float)) & np.isfinite(df[x].to_numpy(dtype=float))]
    if df.empty:
        raise ValueError(f"no finite {metric} values")
    if budget is None:
        budget = float(df.groupby(run_col)[x].max().min())
    df = df.loc[df[x] <= budget * (1 + _RANGE_TOL)].sort_values([run_col, x], kind="mergesort")
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
    Columns: batch, m, reward, n_star, bp_star (= batch / n_star). `batch` and `m` are derived as bp * n and
    compute / batch when absent. The n* sigmoid in M per batch is in `.attrs["n_star_fit"]`.
    """
    _require(table, ["run_id", "n", metric])
    df = table.copy()
    if "batch" not in df.columns:
        _require(df, ["bp"])
        df["batch"] = df["bp"] * df["n"]
    if "m" not in df.columns:
        _require(df, ["compute"])
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
            fits[config_value(B)] = {"params": _params_json(ff.n_star_fit_),
                                     "r2": jsonable(ff.n_star_fit_.r2_)}
    if not parts:
        raise ValueError("no batch value with at least two values of n")
    out = pd.concat(parts, ignore_index=True)[["batch", "m", "reward", "n_star", "bp_star"]]
    out.attrs["n_star_fit"] = fits
    return out


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
    """Learning curves drawn from known sigmoids, for tests, benchmarks and teaching the workflow.

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
