"""The paper's analysis workflow on learning-curve tables (docs/PAPER.md "Analysis workflow", paper Section
4).

record-breaking points -> one monotone sigmoid per configuration (value of `by`, e.g. n); n*(C) on a
log-spaced grid of evaluation computes as the set of configurations the seeds cannot tell from the best
(studies.fit.nstar: measured seed-mean records, not the arg-max of the fitted envelope) -> a sigmoid fit of
log2 n* vs log C on the points where n* is determined -> extrapolation check.
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

from studies.files import jsonable
from studies.fit.nstar import (
    LEVEL,
    REPS,
    NStar,
    compute_grid,
    config_value,
    n_star_sets,
    ns_change,
    numeric_keys,
)
from studies.fit.records import record_breaking
from studies.fit.sigmoid import FIT_OK, PARAM_NAMES, SigmoidFit, sigmoid

__all__ = [
    "FrontierFit",
    "fit_report",
    "n_star_table",
    "extrapolation_check",
    "extrapolation_verdict",
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


def _require(table: pd.DataFrame, cols: Sequence[str]) -> None:
    missing = [c for c in cols if c not in table.columns]
    if missing:
        have = ", ".join(map(str, table.columns[:12]))
        raise ValueError(f"table lacks column(s) {', '.join(missing)} (has: {have})")


CONSTANT = "degenerate: constant target"
"""The SigmoidFit status of a curve that never moved: a usable fit (its prediction is that constant)."""
MIN_COMPUTES = 4
"""Fewest distinct evaluation computes a configuration needs for its sigmoid (SigmoidFit's own minimum)."""


def usable_fit(fit: SigmoidFit, computes: int | None = None) -> bool:
    """Whether a per-configuration fit can carry the workflow. Converged, or a constant curve, is usable;
    with `computes` (the distinct evaluation computes of its data), so is any configuration evaluated at
    >= MIN_COMPUTES computes: few record points there mean a flat curve, which its records describe. A
    configuration evaluated at fewer computes, or a failed optimiser, is not."""
    if fit.ok_ or fit.status_ == CONSTANT:
        return True
    return computes is not None and computes >= MIN_COMPUTES and "optimiser" not in fit.status_


def _params_json(fit: SigmoidFit) -> dict:
    return {k: jsonable(fit.params_[k]) for k in PARAM_NAMES}


class FrontierFit:
    """Per-configuration sigmoid fits (paper Section 4, Fig 5-6) and n*(C) as sets (studies.fit.nstar).

    The fitted curves are the paper's workflow: they draw the learning curves and carry a configuration
    beyond its data (`plan`). n* at a compute is not their arg-max, which turns fitting noise between
    curves on one plateau into a rise, but the set of configurations whose measured seed-mean record the
    seeds cannot tell from the best's (`studies.fit.nstar.n_star_sets`); the frontier's value there is the
    best's measured record, with its interval.

    Parameters
    ----------
    metric, by : the reward column and the configuration column (docs/DESIGN.md names, e.g. "val_mean", "n").
    bin_width : record-breaking bin width of the points the sigmoids are fitted to (paper: 0.005).
    grid_points : at most this many computes for the frontier, log-spaced over the data's compute range and
        moved to evaluation points (studies.fit.nstar.compute_grid).
    smooth : window (grid points, centred) of the running average of log2 n*(C); 1 = none. The paper plots a
        running average (Fig 7); the n* sigmoid is fitted to the smoothed values when smooth > 1.
    aggregate : how seeds of a configuration are combined.
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
    extend : a fitted curve is used up to `extend` times the largest compute of its own data (runs of one
        sweep stop at slightly different evaluation points; a fitted plateau may be carried that far), and
        never below its smallest compute (a run with large n cannot exist below one step's compute).
    tie_tol : fitted rewards within this distance of the best count as ties in `envelope_best` (ties go to the
        smallest configuration).
    level, reps : the level of the reward intervals and the resamples of the runs (studies.fit.nstar).

    After `fit(table)`: `records_` (points fitted, with column `_group`), `curves_` {by value: SigmoidFit},
    `fits_usable_` (every per-configuration fit `usable_fit`), `ranges_` {by value: (min, max) compute of that
    configuration's data}, `grid_`, `nstar_` (studies.fit.nstar.NStar on the grid), `frontier_` (DataFrame,
    one row per grid compute with data: x, reward, reward_lo, reward_hi, by, by + "_lo", by + "_hi", set,
    tie, determined[, by + "_smooth"]), `change_` (the determined rise / fall of n*), `n_star_fit_`
    (SigmoidFit of log2 n* vs x on the determined points, or None: by not numeric, or a per-configuration
    fit degenerate), `n_star_shape_` ("sigmoid" or "flat"), `aggregate_`, `warnings_` (list of str).
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
        level: float = LEVEL,
        reps: int = REPS,
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
        self.level = level
        self.reps = reps

    # ---- fitting -----------------------------------------------------------------------------------------
    def fit(self, table: pd.DataFrame) -> FrontierFit:
        if self.aggregate not in ("auto", "mean", "pool"):
            raise ValueError(f"aggregate must be auto, mean or pool, got {self.aggregate!r}")
        if int(self.grid_points) < 2:
            raise ValueError(f"grid_points must be >= 2, got {self.grid_points!r}")
        if int(self.smooth) < 1:
            raise ValueError(f"smooth must be >= 1, got {self.smooth!r}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level!r}")
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
        self._table = table.loc[~table[run].isin(bad)] if len(bad) else table
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
        self.n_computes_ = df.groupby(by, sort=True, observed=True)[x].nunique().to_dict()
        self.fits_usable_ = bool(self.curves_) and all(usable_fit(f, self.n_computes_.get(k))
                                                       for k, f in self.curves_.items())
        self.grid_ = compute_grid(df, x, int(self.grid_points))
        self.nstar_ = self._sets(self.grid_)
        self.change_ = ns_change(self.nstar_)
        self._build_frontier()
        self._fit_n_star()
        return self

    def _choose_aggregate(self, df: pd.DataFrame) -> str:
        if self.aggregate != "auto":
            return self.aggregate
        per_point = df.groupby([self.by, self.x], observed=True)[self.run_col].nunique()
        return "mean" if float(per_point.median()) >= 2 else "pool"

    def _sets(self, C) -> NStar:
        return n_star_sets(self._table, self.metric, self.by, C, level=self.level, reps=self.reps, x=self.x,
                           run_col=self.run_col, shared=self.aggregate_ == "mean", resolution=self.bin_width)

    def curve_matrix(self, C) -> tuple[list, np.ndarray]:
        """(configuration values in ascending order, fitted predictions of shape (configs, len(C))), nan where
        a configuration has no data at that compute: below its smallest compute or above `extend` times its
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
        that mean below the first record."""
        g = self.records_.loc[self.records_["_group"] == key]
        pts = g.groupby(self.x, sort=True)[self.metric].mean()
        if pts.empty:
            return np.full(np.shape(C), np.nan)
        xs, ys = np.log(pts.index.to_numpy(dtype=float)), np.maximum.accumulate(pts.to_numpy(dtype=float))
        return np.interp(np.log(C), xs, ys)

    def _frame(self, ns: NStar) -> pd.DataFrame:
        """The rows of an NStar with data: x, reward, reward_lo, reward_hi, by, by_lo, by_hi, set, tie,
        determined (by_lo / by_hi: the smallest and largest member of the set; None for a by that is not a
        number)."""
        has = np.array([b is not None for b in ns.best], dtype=bool)
        iv = ns.interval
        numeric = numeric_keys(ns.keys)
        sets = [s for s, h in zip(ns.sets, has, strict=True) if h]
        return pd.DataFrame({
            self.x: ns.compute[has], "reward": ns.reward[has], "reward_lo": iv[has, 0],
            "reward_hi": iv[has, 1], self.by: [b for b, h in zip(ns.best, has, strict=True) if h],
            self.by + "_lo": [min(s) if numeric else None for s in sets],
            self.by + "_hi": [max(s) if numeric else None for s in sets],
            "set": sets, "tie": ns.tie[has], "determined": ns.determined[has]})

    def _build_frontier(self) -> None:
        fr = self._frame(self.nstar_)
        missing = len(self.grid_) - len(fr)
        if missing:
            self.warnings_.append(f"{missing} grid point(s) have no configuration with data")
        if self.smooth > 1 and numeric_keys(list(self.curves_)) and not fr.empty:
            l2 = np.log2(fr[self.by].to_numpy(dtype=float))
            sm = pd.Series(l2).rolling(int(self.smooth), center=True, min_periods=1).mean().to_numpy()
            fr[self.by + "_smooth"] = 2.0**sm
        self.frontier_ = fr.reset_index(drop=True)

    def envelope_best(self, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row index, reward) of the best fitted curve per column of curve predictions P (the paper's arg-max
        of the fitted envelope, used beyond the data where nothing is measured): the first within tie_tol of
        the maximum = the smallest configuration on ties; reward -inf where no curve covers the column."""
        filled = np.where(np.isfinite(P), P, -np.inf)
        top = filled.max(axis=0)
        idx = np.argmax(filled >= top - self.tie_tol, axis=0)
        return idx, filled[idx, np.arange(P.shape[1])]

    def envelope_at(self, C) -> pd.DataFrame:
        """The paper's reading at given computes, for the seed bootstrap of the fitted envelope
        (studies.fit.bootstrap): columns x, reward (the fitted envelope) and by (its arg-max, ties to the
        smaller configuration; None where no fitted curve covers C). Not n*: see `n_star_at`."""
        C = np.atleast_1d(np.asarray(C, dtype=float))
        keys, P = self.curve_matrix(C)
        if not keys:
            return pd.DataFrame({self.x: C, "reward": np.nan, self.by: None})
        idx, best = self.envelope_best(P)
        has = np.isfinite(best)
        return pd.DataFrame({self.x: C, "reward": np.where(has, best, np.nan),
                             self.by: [keys[i] if h else None for i, h in zip(idx, has, strict=True)]})

    def n_star_at(self, C) -> pd.DataFrame:
        """n* at given computes, by the rule of `frontier_` (studies.fit.nstar.n_star_sets on the fitted
        table; beyond the data the measured records are held at their last values): the columns of
        `frontier_`, with by None (and reward nan) where no configuration has data at C. `determined` is
        judged over the computes asked for."""
        C = np.atleast_1d(np.asarray(C, dtype=float))
        ns = self._sets(C)
        iv = ns.interval
        numeric = numeric_keys(ns.keys)
        return pd.DataFrame({
            self.x: C, "reward": ns.reward, "reward_lo": iv[:, 0], "reward_hi": iv[:, 1], self.by: ns.best,
            self.by + "_lo": [min(s) if s and numeric else None for s in ns.sets],
            self.by + "_hi": [max(s) if s and numeric else None for s in ns.sets],
            "set": ns.sets, "tie": ns.tie, "determined": ns.determined})

    def _numeric_by(self, keys) -> bool:
        return numeric_keys(keys)

    def _fit_n_star(self) -> None:
        """The sigmoid of log2 n* vs log C on the determined frontier points (studies.fit.nstar; a determined
        set of several members at the middle of its range in log2), bounded by the grid of configurations;
        none when a per-configuration fit is not usable or the configurations are not numbers."""
        self.n_star_fit_ = None
        self.n_star_shape_ = "flat"
        keys = list(self.curves_)
        fr = self.frontier_
        if fr.empty:
            return
        if not numeric_keys(keys):
            self.warnings_.append(f"{self.by} is not a positive number, no sigmoid fit of log2 {self.by}*")
            return
        if not self.fits_usable_:
            return
        det = fr.loc[fr["determined"].to_numpy(dtype=bool)]
        if self.by + "_smooth" in fr.columns:
            y = np.log2(det[self.by + "_smooth"].to_numpy(dtype=float))
        else:  # a determined set of several members (above an earlier set) enters at its middle in log2
            y = (np.log2(det[self.by + "_lo"].to_numpy(dtype=float))
                 + np.log2(det[self.by + "_hi"].to_numpy(dtype=float))) / 2
        l2 = np.log2(np.asarray(keys, dtype=float))
        # n* lives on the grid of configurations, so its sigmoid is bounded by the grid's ends.
        fit = SigmoidFit(y_bounds=(float(l2.min()), float(l2.max())), min_points=4).fit(
            det[self.x].to_numpy(dtype=float), y)
        self.n_star_fit_ = fit
        self.n_star_shape_ = n_star_shape(fit, self.change_)

    # ---- prediction --------------------------------------------------------------------------------------
    def predict(self, C) -> np.ndarray:
        """The fitted envelope: the largest fitted curve at C (nan outside all data ranges)."""
        _, P = self.curve_matrix(C)
        with np.errstate(all="ignore"):
            out = np.where(
                np.all(np.isnan(P), axis=0), np.nan, np.nanmax(np.where(np.isnan(P), -np.inf, P), 0)
            )
        return out

    def predict_n_star(self, C) -> np.ndarray:
        """n*(C) from the sigmoid fit of log2 n* vs log C (continuous; may be used beyond the data)."""
        if self.n_star_fit_ is None:
            raise ValueError("no n* fit (by is not numeric, a per-configuration fit is degenerate, or "
                             "nothing was fitted)")
        return 2.0 ** self.n_star_fit_.predict(C)


PREDICTABLE_STEPS = 1.0
"""An extrapolation is called predictable when both its mean |error| and its |error| at the largest compute
are at most one grid step (a factor 2 in n): a mean within a step can hide a miss of three steps at the
budget the extrapolation is for."""

FLAT_R2 = 0.5
"""An n*(C) sigmoid with r2 below this describes no trend: it is reported as 'flat' rather than by its
parameters (a b of 20 on a constant n* means nothing)."""


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


def n_star_shape(fit: SigmoidFit | None, ch: dict | None) -> str:
    """'sigmoid' when the n* sigmoid describes a trend the data determine: a converged fit with r2 >= FLAT_R2
    and a determined rise or fall of n* (studies.fit.nstar.change); else 'flat'."""
    if fit is None or not fit.ok_ or not ch or not (ch.get("rise") or ch.get("fall")):
        return "flat"
    r2 = fit.r2_
    return "sigmoid" if np.isfinite(r2) and r2 >= FLAT_R2 else "flat"


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
    "warnings" and "settings". One computation (studies.fit.nstar.n_star_sets) gives every frontier row's
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
            "params": _params_json(ff.n_star_fit_),
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
