"""n*(C) as a set: the configurations that the seeds cannot tell from the best one at each compute.

This is the one estimator of n* that `fit` (its table and `--json`), `plot`, `plan`, `predict`, the figures
and the claims report read (through `FrontierFit.frontier_` / `FrontierFit.n_star_at`, or directly).

**Reward of a configuration at compute C**: the record (best so far) of its seed-mean curve up to C. A
checkpoint reached for less compute can be kept, so this is what running that configuration to C buys;
averaging the seeds before taking the record keeps the record of a noisy curve from being one lucky draw.
Between two evaluations the curve is read linearly in log C (runs of different n are evaluated at different
computes; holding the last value would hand C to whichever n was evaluated just below it). Runs that share
no evaluation points (users' logs) are read one by one: the mean of each run's own record (`shared=False`).

**Interval**: the runs (seeds) of each configuration are drawn with replacement `reps` times (the unit of
noise is a run); the resampled rewards' spread around the measured one is widened for few runs
(`small_sample_factor`: the plain bootstrap of 3 seeds is half as wide as a t-interval), and a
configuration's interval is their (1 - level) / 2 and (1 + level) / 2 quantiles, widened to hold its
measured reward.

**Best and set**: the best is the configuration with the highest measured reward (the smaller one on exact
ties); the set holds every configuration whose interval reaches the best's (the two overlap), or whose
reward is within one record bin (`RESOLUTION`) of the best's. Overlap and not "its point inside the best's
interval": a configuration whose plateau has fewer evaluation points has a lower record under the same
noise (a maximum over fewer draws), and the best is itself a maximum over configurations; testing the point
alone drops true ties often enough, with 3 or 4 seeds, to invent rises. When no configuration improved at
all (`no_improvement`), every configuration with data is in the set.

**Determined**: n* is determined at C when at least two configurations have data there and either the set
has one member, or the whole set lies above the set at some earlier compute (n* has risen, even if the data
cannot say to which member). The sigmoid fit of log2 n* vs log C uses only determined points; a rise
(`change`) counts only when the set at every later compute stays above the earlier one, since with tens of
computes and a few seeds some single compute will always look resolved. Elsewhere n* is its set.

The frontier's value at C (the best's reward), the best's interval, the set and the range of n* are
columns of one `NStar`, computed once, so no printed number can contradict another.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

LEVEL = 0.9
"""Default level of the reward intervals (the resampled rewards' 5% and 95% quantiles)."""
REPS = 200
"""Default number of resamples of the runs (numpy only: milliseconds for a sweep of a few hundred runs)."""
NO_GAIN = 0.005
"""A configuration 'improved' when its seed-mean curve rises more than this above its first evaluation: the
record-breaking bin of the paper (Section 4, bin width 0.005), below which the workflow sees no record."""
RESOLUTION = NO_GAIN
"""Measured rewards closer than this to the best's are in the set whatever their intervals: the workflow's
resolution (one record bin). With one run per configuration there is no spread to resample, and reading a
curve between evaluation points alone moves rewards by ~1e-3."""
_TOL = 1e-9  # relative slack when comparing a compute with an evaluation point


# ------------------------------------------------------------------------------------------- improvement
def _clean(table: pd.DataFrame, metric: str, by: str, x: str, cols: Sequence[str]) -> pd.DataFrame:
    missing = [c for c in dict.fromkeys([*cols, by, x, metric]) if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks column(s) {', '.join(missing)}")
    df = table[list(dict.fromkeys([*cols, by, x, metric]))].copy()
    df[x] = pd.to_numeric(df[x], errors="coerce")
    df[metric] = pd.to_numeric(df[metric], errors="coerce")
    ok = np.isfinite(df[x].to_numpy(dtype=float)) & np.isfinite(df[metric].to_numpy(dtype=float))
    return df.loc[ok & df[by].notna().to_numpy()]


def curve_gains(table: pd.DataFrame, metric: str, by: str = "n", x: str = "compute") -> dict[Any, float]:
    """{by value: max of its seed-mean curve - its value at the first evaluation} (compute >= 0)."""
    df = _clean(table, metric, by, x, [])
    df = df.loc[df[x] >= 0]
    out = {}
    for v, g in df.groupby(by, sort=True, observed=True):
        m = g.groupby(x, sort=True)[metric].mean().to_numpy(dtype=float)
        if m.size:
            out[v] = float(m.max() - m[0])
    return out


def no_improvement(table: pd.DataFrame, metric: str, by: str = "n", tol: float = NO_GAIN,
                   x: str = "compute") -> bool:
    """True when no configuration improved on its first evaluation by more than `tol`: the metric never
    moved (e.g. the tabular preset's val_mean, whose validation problems share no parameters with the
    training ones), so every configuration ties."""
    gains = curve_gains(table, metric, by, x)
    return bool(gains) and max(gains.values()) <= tol


# ----------------------------------------------------------------------------------------------- rewards
def compute_grid(table: pd.DataFrame, x: str = "compute", points: int = 40) -> np.ndarray:
    """The computes at which n* is read: `points` log-spaced values over the data's positive range, each
    moved down to the nearest evaluation point at or below it, duplicates dropped. The measured rewards only
    change at evaluation points, so a sweep with 3 of them gets 3 rows, not 40 copies."""
    xs = pd.to_numeric(table[x], errors="coerce").to_numpy(dtype=float)
    xs = np.unique(xs[np.isfinite(xs) & (xs > 0)])
    if xs.size == 0:
        return xs
    if xs.size <= points:
        return xs
    g = np.geomspace(xs[0], xs[-1], int(points))
    idx = np.searchsorted(xs, g * (1 + _TOL), side="right") - 1
    return np.unique(xs[np.clip(idx, 0, xs.size - 1)])


def _record_at(M: np.ndarray, xs: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Record (running maximum) of each row of M (curves on the evaluation points xs, nan = no point) at the
    computes C: (rows, len(C)). Between two evaluation points the curve is read linearly in log C, so a
    configuration evaluated just below C is not favoured over one evaluated just above it (runs of different
    n are evaluated at different computes); beyond the last point the record is held; nan before the
    first. A row's missing points are skipped (the line joins its neighbours)."""
    M = np.asarray(M, dtype=float)
    rows, T = M.shape
    lx, lc = np.log(xs), np.log(C)
    ok = np.isfinite(M)
    # each row's points carried forward / backward over its gaps: previous and next finite point per column
    col = np.arange(T)
    prev = np.maximum.accumulate(np.where(ok, col, -1), axis=1)  # (rows, T) index of last finite <= t
    nxt = np.minimum.accumulate(np.where(ok, col, T)[:, ::-1], axis=1)[:, ::-1]  # first finite >= t
    rec = np.fmax.accumulate(M, axis=1)  # running max (nan before the first point)
    i = np.searchsorted(lx, lc + _TOL, side="right") - 1  # last evaluation column <= C, (len(C),)
    ic = np.clip(i, 0, T - 1)
    p = prev[:, ic]  # (rows, J) last finite point <= C
    q = np.where(i + 1 < T, nxt[:, np.clip(i + 1, 0, T - 1)], T)  # next finite point > C
    r = np.arange(rows)[:, None]
    have = (i[None, :] >= 0) & (p >= 0)
    pc = np.clip(p, 0, T - 1)
    qc = np.clip(q, 0, T - 1)
    y0, y1 = M[r, pc], M[r, qc]
    x0, x1 = lx[pc], lx[qc]
    w = np.where((q < T) & (x1 > x0), (lc[None, :] - x0) / np.where(x1 > x0, x1 - x0, 1.0), 0.0)
    between = np.where(q < T, y0 + np.clip(w, 0.0, 1.0) * (y1 - y0), y0)
    return np.where(have, np.fmax(rec[r, pc], between), np.nan)


def small_sample_factor(runs: int, level: float = LEVEL) -> float:
    """How much wider than the plain bootstrap the resampled rewards are spread around the measured one:
    t_{S-1} / z quantile ratio at `level` times sqrt(S / (S - 1)) for S runs. Resampling S runs gives a mean
    whose spread is sqrt((S - 1) / S) of the true one, and the spread is itself estimated from S draws
    (Student's t, not the normal); with 3 seeds the plain percentile interval is half as wide as it should
    be, which makes ties look resolved. 1 for S >= 50 (the correction is then below 3%); nan-free for S < 2
    (no spread to scale)."""
    from scipy.stats import norm, t

    if runs < 2:
        return 1.0
    q = (1 + level) / 2
    return float(t.ppf(q, runs - 1) / norm.ppf(q) * math.sqrt(runs / (runs - 1)))


def record_samples(table: pd.DataFrame, metric: str, by: str, computes: Sequence[float], reps: int = REPS,
                   seed: int = 0, x: str = "compute", run_col: str = "run_id", shared: bool | None = None,
                   level: float = LEVEL) -> tuple[list, np.ndarray, np.ndarray]:
    """(configurations ascending, measured rewards (J, K), resampled rewards (reps, J, K)) at the J computes.

    The reward of the module docstring: the record of the seed-mean curve up to C (`_record_at`; nan where a
    configuration has no evaluation at or below C: one step costs more); resamples draw each configuration's
    runs with replacement, the same draws at every compute, and their spread around the measured reward is
    widened by `small_sample_factor(runs, level)`. `shared` None: seed means where the runs of a configuration
    share evaluation points (median >= 2 runs per point, or a single run), else the mean of each run's own
    record; True / False force one (FrontierFit's aggregate "mean" / "pool")."""
    C = np.atleast_1d(np.asarray(computes, dtype=float))
    df = _clean(table, metric, by, x, [run_col])
    df = df.loc[df[x] > 0]
    rng = np.random.default_rng(seed)
    reps = int(reps)
    keys, points, samples = [], [], []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for k, g in df.groupby(by, sort=True, observed=True):
            wide = g.pivot_table(index=run_col, columns=x, values=metric, aggfunc="mean")
            if wide.empty:
                continue
            W = wide.to_numpy(dtype=float)  # runs x evaluation points, nan where a run lacks one
            xs = wide.columns.to_numpy(dtype=float)
            R = W.shape[0]
            idx = rng.integers(0, R, size=(reps, R))
            sh = shared if shared is not None else (
                R == 1 or float(np.median(np.isfinite(W).sum(axis=0))) >= 2)
            if sh:  # record of the seed-mean curve
                pt = _record_at(np.nanmean(W, axis=0)[None, :], xs, C)[0]
                ss = _record_at(np.nanmean(W[idx], axis=1), xs, C) if reps else np.empty((0, C.size))
            else:  # mean of each run's own record
                at = _record_at(W, xs, C)  # runs x computes
                pt = np.nanmean(at, axis=0)
                ss = np.nanmean(at[idx], axis=1) if reps else np.empty((0, C.size))
            ss = pt[None, :] + small_sample_factor(R, level) * (ss - pt[None, :])
            keys.append(k)
            points.append(pt)
            samples.append(ss)
    if not keys:
        return [], np.empty((C.size, 0)), np.empty((reps, C.size, 0))
    return keys, np.stack(points, axis=1), np.stack(samples, axis=2)


# ------------------------------------------------------------------------------------------------- sets
def intervals(point: np.ndarray, samples: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) of each measured reward: the resamples' level quantiles along axis 0, widened to hold the
    point; the point itself without resamples. Shapes: point (...), samples (reps, ...)."""
    p = np.asarray(point, dtype=float)
    s = np.asarray(samples, dtype=float)
    if s.shape[0] == 0:
        return p.copy(), p.copy()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        q = np.nanquantile(s, [(1 - level) / 2, (1 + level) / 2], axis=0)
    lo = np.where(np.isfinite(q[0]), np.fmin(q[0], p), p)
    hi = np.where(np.isfinite(q[1]), np.fmax(q[1], p), p)
    return lo, hi


def _members(point: np.ndarray, lo: np.ndarray, hi: np.ndarray, resolution: float = RESOLUTION
             ) -> tuple[int | None, list[int]]:
    """(index of the best, indices in the set) of one row of measured rewards and their intervals."""
    ok = np.isfinite(point)
    if not ok.any():
        return None, []
    b = int(np.argmax(np.where(ok, point, -np.inf)))
    return b, [k for k in range(point.size)
               if ok[k] and (hi[k] >= lo[b] or point[b] - point[k] <= resolution)]


def flat_set(keys: Sequence, point: np.ndarray, samples: np.ndarray, level: float = LEVEL,
             resolution: float = RESOLUTION) -> tuple[list, Any, list[float]]:
    """The set rule of the module docstring at one compute: (the configurations in the set, the best, the
    best's interval [lo, hi]); point (K,), samples (reps, K). `plan` applies it to rewards predicted beyond
    the pilots, `n_star_sets` to measured ones."""
    p = np.asarray(point, dtype=float)
    lo, hi = intervals(p, np.asarray(samples, dtype=float).reshape(-1, p.size), level)
    b, m = _members(p, lo, hi, resolution)
    if b is None:
        return [], None, [math.nan, math.nan]
    return [keys[k] for k in m], keys[b], [float(lo[b]), float(hi[b])]


MIN_REGRET_RUNS = 3
"""Fewest runs (seeds) behind every configuration for an expected regret to be reported. Why: resampling 2
runs gives each configuration 3 distinct means, so the mean regret over resamples measures the resampling,
not the seeds' noise (one read 0.106 from 2 seeds, larger than any difference in the data)."""


def regret(samples: np.ndarray, index: int, runs: int, level: float = LEVEL) -> dict[str, Any]:
    """The expected regret of choosing configuration `index` (`expected_regret`) with its `level` interval
    over the resamples, as {"mean", "interval": [lo, hi], "note"}: mean and interval None (and a note
    saying why) from fewer than MIN_REGRET_RUNS runs behind some configuration (`runs`: the fewest) or
    without resamples. samples (reps, K)."""
    s = np.asarray(samples, dtype=float)
    if runs < MIN_REGRET_RUNS or s.size == 0:
        why = (f"no expected regret from {runs} run(s) per configuration (it needs {MIN_REGRET_RUNS} seeds: "
               "resampling fewer measures the resampling, not the noise)" if s.size else
               "no expected regret without resamples")
        return {"mean": None, "interval": None, "note": why}
    top = np.where(np.isfinite(s), s, -np.inf).max(axis=1)
    mine = s[:, index]
    use = np.isfinite(mine) & np.isfinite(top)
    if not use.any():
        return {"mean": None, "interval": None, "note": "no expected regret: no resample has this one"}
    gap = top[use] - mine[use]
    tail = (1.0 - level) / 2.0
    interval = [float(np.quantile(gap, tail)), float(np.quantile(gap, 1.0 - tail))]
    return {"mean": float(gap.mean()), "interval": interval, "note": None}


def expected_regret(samples: np.ndarray, index: int) -> float:
    """Mean over resamples of (the best configuration's reward - configuration `index`'s reward): the
    decision-theoretic cost of choosing it under the seed noise (0 when it wins every resample); resamples
    where it has no value are skipped. samples (reps, K)."""
    s = np.asarray(samples, dtype=float)
    if s.size == 0:
        return math.nan
    top = np.where(np.isfinite(s), s, -np.inf).max(axis=1)
    mine = s[:, index]
    use = np.isfinite(mine) & np.isfinite(top)
    return float(np.mean(top[use] - mine[use])) if use.any() else math.nan


def config_value(v):
    """A configuration value (n, bp...) for JSON: studies.files.jsonable, and 8.0 -> 8 (grids are
    integers)."""
    from studies.files import jsonable

    v = jsonable(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def numeric_keys(keys: Sequence) -> bool:
    """Whether configurations are positive numbers (an ordered grid: n, bp), so sets can lie above sets."""
    try:
        arr = np.asarray(list(keys), dtype=float)
    except (TypeError, ValueError):
        return False
    return bool(arr.size) and bool(np.all(np.isfinite(arr) & (arr > 0)))


@dataclass(frozen=True)
class NStar:
    """n*(C) as sets at J computes over K configurations (module docstring). Arrays are (J, K) unless said;
    `samples` (reps, J, K)."""

    compute: np.ndarray
    keys: list
    point: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    samples: np.ndarray
    best: list
    sets: list[list]
    determined: np.ndarray
    none_improved: bool
    level: float
    reps: int
    runs: int = 0
    """The fewest runs (seeds) behind a configuration (MIN_REGRET_RUNS)."""

    @property
    def reward(self) -> np.ndarray:
        """(J,) the frontier's value: the best's measured reward (nan where no configuration has data)."""
        return np.array([self.point[j, self.keys.index(b)] if b is not None else np.nan
                         for j, b in enumerate(self.best)])

    @property
    def interval(self) -> np.ndarray:
        """(J, 2) the best's interval."""
        out = np.full((len(self.best), 2), np.nan)
        for j, b in enumerate(self.best):
            if b is not None:
                k = self.keys.index(b)
                out[j] = self.lo[j, k], self.hi[j, k]
        return out

    @property
    def competitors(self) -> np.ndarray:
        """(J,) how many configurations have data at each compute."""
        return np.isfinite(self.point).sum(axis=1)

    @property
    def tie(self) -> np.ndarray:
        """(J,) n* is a set of more than one configuration."""
        return np.array([len(s) > 1 for s in self.sets], dtype=bool)

    def at(self, j: int) -> dict[str, Any]:
        """Row j as plain values: compute, reward, interval, best, set, tie, determined."""
        iv = self.interval[j]
        return {"compute": float(self.compute[j]), "reward": float(self.reward[j]),
                "interval": [float(iv[0]), float(iv[1])], "best": self.best[j], "set": list(self.sets[j]),
                "tie": bool(len(self.sets[j]) > 1), "determined": bool(self.determined[j])}


def _determined(sets: list[list], competitors: np.ndarray, numeric: bool, none_improved: bool) -> np.ndarray:
    out = np.zeros(len(sets), dtype=bool)
    if none_improved:
        return out
    floor = math.inf  # the lowest top of a set at an earlier compute with >= 2 competitors
    for j, s in enumerate(sets):
        if competitors[j] < 2 or not s:
            continue
        out[j] = len(s) == 1 or (numeric and min(s) > floor)
        if numeric:
            floor = min(floor, max(s))
    return out


def n_star_sets(table: pd.DataFrame, metric: str = "val_mean", by: str = "n", computes=None, *,
                level: float = LEVEL, reps: int = REPS, seed: int = 0, x: str = "compute",
                run_col: str = "run_id", shared: bool | None = None, grid_points: int = 40,
                resolution: float = RESOLUTION) -> NStar:
    """n*(C) as sets (module docstring) at `computes` (default `compute_grid(table, x, grid_points)`).
    Raises ValueError when the table lacks a column."""
    C = compute_grid(table, x, grid_points) if computes is None else np.atleast_1d(
        np.asarray(computes, dtype=float))
    keys, point, samples = record_samples(table, metric, by, C, reps=reps, seed=seed, x=x, run_col=run_col,
                                          shared=shared, level=level)
    lo, hi = intervals(point, samples, level)
    none = no_improvement(table, metric, by, x=x)
    best, sets = [], []
    for j in range(C.size):
        b, m = _members(point[j], lo[j], hi[j], resolution)
        if none and b is not None:
            m = [k for k in range(len(keys)) if np.isfinite(point[j, k])]
        best.append(None if b is None else keys[b])
        sets.append([keys[k] for k in m])
    comp = np.isfinite(point).sum(axis=1) if keys else np.zeros(C.size, dtype=int)
    det = _determined(sets, comp, numeric_keys(keys), none)
    return NStar(compute=C, keys=list(keys), point=point, lo=lo, hi=hi, samples=samples, best=best, sets=sets,
                 determined=det, none_improved=none, level=float(level), reps=int(samples.shape[0]),
                 runs=int(table.groupby(by)[run_col].nunique().min()) if len(table) else 0)


# --------------------------------------------------------------------------------------------- change
def change(compute: Sequence[float], sets: Sequence[Sequence], competitors: Sequence[int]) -> dict[str, Any]:
    """The determined rise and fall of n* over the computes: {"rise": {"factor", "from": {"compute", "set"},
    "to": {...}} or None, "fall": likewise}.

    A rise from C_i to C_j needs every member of the set at C_j, and at every larger compute, above every
    member of the set at C_i (all with >= 2 configurations competing): a set that later falls back to the
    earlier members was a passing draw of the noise, not a rise (with 40 computes and a few seeds some
    draw will always look resolved). Its factor, min(set_j) / max(set_i), is the least the data show; the
    largest such factor is reported (the earliest pair on ties). A fall mirrors it. Sets of configurations
    that are not numbers never rise or fall."""
    ok = [j for j, s in enumerate(sets) if competitors[j] >= 2 and s]
    if not ok or not numeric_keys([v for j in ok for v in sets[j]]):
        return {"rise": None, "fall": None}
    lows = [min(float(v) for v in sets[j]) for j in ok]
    highs = [max(float(v) for v in sets[j]) for j in ok]
    # the least bottom (most top) of the sets from each compute on: what a rise (fall) must stay above (below)
    floor_after = np.minimum.accumulate(np.asarray(lows)[::-1])[::-1]
    ceil_after = np.maximum.accumulate(np.asarray(highs)[::-1])[::-1]

    def best_pair(sign: int) -> dict[str, Any] | None:
        top = None
        for jj in range(len(ok)):
            for ii in range(jj):
                a, b = (floor_after[jj], highs[ii]) if sign > 0 else (lows[ii], ceil_after[jj])
                if a > b and (top is None or a / b > top[0] * (1 + 1e-12)):
                    top = (a / b, ok[ii], ok[jj])
        if top is None:
            return None
        f, i, j = top
        return {"factor": float(f), "from": {"compute": float(compute[i]), "set": list(sets[i])},
                "to": {"compute": float(compute[j]), "set": list(sets[j])}}

    return {"rise": best_pair(1), "fall": best_pair(-1)}


def ns_change(ns: NStar) -> dict[str, Any]:
    """`change` of an NStar (none when no configuration improved)."""
    if ns.none_improved:
        return {"rise": None, "fall": None}
    return change(ns.compute, ns.sets, ns.competitors)


def set_text(members: Sequence, grid: Sequence | None = None) -> str:
    """A set of configurations for one table cell: '8', or runs of neighbours on the configuration grid
    joined by '-' and separated by ',' ('2-16', '2,8-32'); without the grid, or for members that are not
    numbers, the members listed ('2,8,16')."""
    vals = list(members)
    if not vals:
        return "-"
    if grid is None or not numeric_keys(vals):
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in vals)
    g = sorted(float(v) for v in grid)
    pos = {v: i for i, v in enumerate(g)}
    xs = sorted(float(v) for v in vals)
    runs: list[list[float]] = []
    for v in xs:
        if runs and v in pos and runs[-1][-1] in pos and pos[v] == pos[runs[-1][-1]] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ",".join(f"{r[0]:g}" if len(r) == 1 else f"{r[0]:g}-{r[-1]:g}" for r in runs)


def change_text(ch: dict[str, Any], by: str = "n", grid: Sequence | None = None, fmt=None) -> str:
    """One line on how n* moves, from `change`: the determined rise (and fall), or 'no determined rise'."""
    fmt = fmt or (lambda c: f"{c:.3g}")
    parts = []
    for key, verb in (("rise", "rises"), ("fall", "falls")):
        r = ch.get(key)
        if r:
            parts.append(f"{by}* {verb} from {{{set_text(r['from']['set'], grid)}}} at C = "
                         f"{fmt(r['from']['compute'])} to {{{set_text(r['to']['set'], grid)}}} at C = "
                         f"{fmt(r['to']['compute'])} (at least {r['factor']:.3g}x"
                         f"{'' if key == 'rise' else ' down'})")
    if not ch.get("rise"):
        parts.insert(0, f"no determined rise of {by}*")
    return "; ".join(parts)
