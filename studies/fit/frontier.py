"""The estimator of the paper's analysis workflow on learning-curve tables (docs/PAPER.md "Analysis
workflow", paper Section 4): `FrontierFit`.

record-breaking points -> one monotone sigmoid per configuration (value of `by`, e.g. n); n*(C) on a
log-spaced grid of evaluation computes as the set of configurations the seeds cannot tell from the best
(studies.fit.nstar: measured seed-mean records, not the arg-max of the fitted envelope) -> a sigmoid fit of
log2 n* vs log C on the points where n* is determined. The workflow's last step, the extrapolation check, is
studies.fit.extrapolation; the `isocompute fit --json` object of a fit is studies.fit.report and its text
studies.fit.render; the paper's other analyses of result tables (Fig 8-10) are studies.fit.analyses.

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
from studies.fit.sigmoid import PARAM_NAMES, SigmoidFit

__all__ = ["FrontierFit", "usable_fit", "n_star_shape", "params_json", "check_columns"]

RANGE_TOL = 1e-9
"""Relative slack when deciding whether a point lies inside a curve's data range or under a budget."""


def check_columns(table: pd.DataFrame, cols: Sequence[str]) -> None:
    """ValueError naming the columns the fitting functions need and `table` lacks (with the ones it has)."""
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


def params_json(fit: SigmoidFit) -> dict:
    """A sigmoid's parameters {R0, A, C_mid, b} as JSON values (nan -> None)."""
    return {k: jsonable(fit.params_[k]) for k in PARAM_NAMES}


FLAT_R2 = 0.5
"""An n*(C) sigmoid with r2 below this describes no trend: it is reported as 'flat' rather than by its
parameters (a b of 20 on a constant n* means nothing)."""


def n_star_shape(fit: SigmoidFit | None, ch: dict | None) -> str:
    """'sigmoid' when the n* sigmoid describes a trend the data determine: a converged fit with r2 >= FLAT_R2
    and a determined rise or fall of n* (studies.fit.nstar.change); else 'flat'."""
    if fit is None or not fit.ok_ or not ch or not (ch.get("rise") or ch.get("fall")):
        return "flat"
    r2 = fit.r2_
    return "sigmoid" if np.isfinite(r2) and r2 >= FLAT_R2 else "flat"


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
        check_columns(table, [run, x, by, metric])
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
            sig = SigmoidFit(**{"points": "record-breaking points", **kw})
            fit = sig.fit(g[x].to_numpy(dtype=float), g[metric].to_numpy(dtype=float))
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
            inside = (C >= lo * (1 - RANGE_TOL)) & (C <= hi * self.extend * (1 + RANGE_TOL))
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
