"""Speed or ceiling: does n change how fast a run learns, or how high it rises? (`lag_report`)

For every pair (smallest n, other n) of a table with seeds, three readouts of the seed-mean record curves,
each with a seed-bootstrap interval:

**Compute lag.** A configuration's curve is the record (best so far) of its seed-mean curve, the reward
studies.fit.nstar reads at each compute (a running maximum of the mean over runs at each evaluation point,
joined linearly in log C). The compute at which a curve first reaches a reward level r is
studies.fit.target.crossing on that curve (exact under the same reading: interpolated in log C between the
evaluation points around the crossing). The lag at r is log2 C_other(r) - log2 C_ref(r), in octaves of
compute: > 0 when the other n needs more compute for the same reward. It is read at `LEVELS` levels evenly
spaced over the rewards both curves reach (from the higher of their first records to the lower of their top
records) and never beyond them: where the ranges do not overlap the pair says so, nothing is extrapolated.
The lowest `SKIP` of that range is left out: there the curves are in their start, whose record is the
maximum of a flat, noisy stretch and whose lr warm-up is counted in steps (10 steps cost n = 64 sixteen times
the compute they cost n = 4 at the same bp), so the lag there says how a run starts, not where it goes.
The lag is the mean over the levels, each weighted by the inverse of its resampled variance (where a curve
is nearly flat the compute at which it passes a level is mostly noise; a resample whose curve misses a level
leaves it out); its **trend** is the change of the lag across the range (the weighted least-squares slope
of lag against level, times the range's width, in octaves). A lag that stays within `CONSTANT` octaves
across the range is a shift of the same curve along log C ("n changes speed, not ceiling", over the rewards
both reach); one that grows toward the top means the other n falls further behind as the reward rises (its
curve flattens lower: a lower ceiling, if it lasts); one that shrinks means it catches up (it may rise
higher, past the rewards both reach). An interval that straddles the band leaves the trend undetermined.

**Lag against cumulative lr x steps.** Where the table has an `lr` column, the same lag with the horizontal
axis sum over steps of the learning rate instead of compute (`with_lr_steps`): if the lr rule (sqrt in the
batch gives n = 64 four times n = 4's lr and sixteen times fewer steps at bp 16) explains the lag, the
curves coincide on this axis.

**Ceiling contrast.** At matched train reward (levels over the train record range both reach, as above),
the val reward of the other n minus the reference's: each curve's seed-mean val (not its record: a curve
read at a compute) at the compute where its train record first reaches the level, linear in log C; the
contrast is its mean over the levels, weighted as the lag's. Within +-`SAME_VAL`: the two n generalise
alike, so what n changes is where along the same path a run is, not where the path leads.

**Intervals.** Runs are resampled by seed with replacement, `reps` times (studies.fit.bootstrap
.seed_weights); paired (the same draw for both n) when the two configurations have the same seeds (runs of
one seed share problems and initial policy), else drawn apart. Levels stay those of the measured curves. As
in studies.fit.nstar, the resamples' spread around the measured value is widened for few seeds
(`small_sample_factor`), and an interval is the resamples' (1 -+ level) / 2 quantiles, widened to hold the
measured value (`intervals`). With one run per configuration there is nothing to resample: no interval.

tests/studies/test_fit_lag.py checks a known lag, a known ceiling difference, both, and disjoint ranges on
synthetic tables.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from studies.files import jsonable
from studies.fit.bootstrap import seed_weights
from studies.fit.nstar import (
    LEVEL,
    REPS,
    RESOLUTION,
    config_value,
    intervals,
    numeric_keys,
    small_sample_factor,
)
from studies.fit.target import crossing

LEVELS = 20
"""Reward levels at which the lag is read, evenly spaced over the range both curves reach."""
SKIP = 0.2
"""Share of the common reward range left out at its bottom, the runs' start (module docstring)."""
SAME_SPEED = 0.1
"""Two n learn at the same speed when the lag's interval lies within +-this many octaves (7% of compute)."""
CONSTANT = 0.5
"""The lag is constant when its change across the common range lies within +-this many octaves (a factor of
sqrt(2) in compute from the bottom of the range to its top)."""
SAME_VAL = 0.01
"""Val rewards at matched train reward are the same when their difference lies within +-this (two record
bins of the paper's Section 4)."""
VAR_FLOOR = 1e-4
"""Least resampled variance of one level's readout that its weight assumes (a standard deviation of 0.01:
octaves of lag, or reward), so a level that every resample reads alike cannot take all the weight."""
LR_STEPS = "lr_steps"
"""The column `with_lr_steps` adds: the cumulative learning rate x optimizer steps at each evaluation."""


# --------------------------------------------------------------------------------------------- curves
@dataclass(frozen=True)
class _Runs:
    """One configuration's runs on its positive evaluation points: seed label per run (R,), the points xs
    (T,) ascending, and each column's values (R, T), nan where a run lacks a point."""

    labels: list
    xs: np.ndarray
    values: dict[str, np.ndarray]

    def mean(self, col: str, w: np.ndarray) -> np.ndarray:
        """(T,) the `w`-weighted mean over runs (a bootstrap draw; ones: the seed mean), nan where no drawn
        run has the point."""
        M = self.values[col]
        ok = np.isfinite(M)
        den = (ok * w[:, None]).sum(axis=0)
        num = (np.where(ok, M, 0.0) * w[:, None]).sum(axis=0)
        with np.errstate(all="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)

    def record(self, col: str, w: np.ndarray) -> np.ndarray:
        """(T,) the record of the weighted seed-mean curve at the evaluation points (studies.fit.nstar)."""
        return np.fmax.accumulate(self.mean(col, w))


def _runs(table: pd.DataFrame, cols: list[str], by: str, x: str, run_col: str, seed_col: str
          ) -> tuple[dict[Any, _Runs], list[Any]]:
    """({configuration: _Runs}, configurations whose runs share no evaluation points). The seed label of a
    run is its `seed_col` value, or its run id where the table has none. Runs of a configuration share
    evaluation points when the median point has >= 2 runs (studies.fit.nstar's rule for a seed mean)."""
    seeded = [seed_col] if seed_col in table.columns else []
    df = table.loc[:, list(dict.fromkeys([run_col, by, x, *cols, *seeded]))]
    df = df.assign(**{c: pd.to_numeric(df[c], errors="coerce") for c in [x, *cols]})
    xv = df[x].to_numpy(dtype=float)
    df = df.loc[np.isfinite(xv) & (xv > 0) & df[by].notna().to_numpy()]
    out, unshared = {}, []
    for k, g in df.groupby(by, sort=True, observed=True):
        wide = {c: g.pivot_table(index=run_col, columns=x, values=c, aggfunc="mean", dropna=False)
                for c in cols}
        index = wide[cols[0]].index
        columns = wide[cols[0]].columns
        values = {c: w.reindex(index=index, columns=columns).to_numpy(dtype=float) for c, w in wide.items()}
        if index.empty or not np.isfinite(values[cols[0]]).any():
            continue
        if index.size > 1 and float(np.median(np.isfinite(values[cols[0]]).sum(axis=0))) < 2:
            unshared.append(k)
            continue
        if seed_col in g.columns:
            first = g.groupby(run_col, sort=False)[seed_col].first()
            labels = [first.get(r) if pd.notna(first.get(r)) else r for r in index]
        else:
            labels = list(index)
        out[k] = _Runs(labels=labels, xs=columns.to_numpy(dtype=float), values=values)
    return out, unshared


def with_lr_steps(table: pd.DataFrame, run_col: str = "run_id") -> pd.DataFrame:
    """`table` with the column LR_STEPS: each run's cumulative sum over optimizer steps of its learning rate
    at each row, or the table unchanged without a usable `lr` column.

    Steps at a row are compute / batch (batch = bp * n where the table has no batch column). The table
    holds the lr only at its evaluation rows, so the sum is the trapezoid rule over those rows from step 0,
    with the first row's lr before it. An lr column that holds the run's peak lr (as the stores of this
    project do: its base lr scaled by the batch rule) makes this lr x steps, blind to a linear warm-up of w
    steps, which the table does not record: past the warm-up the true sum is lr x (s - w / 2), so at step s
    this overstates it by log2(s / (s - w / 2)) octaves; for w = 10: 0.54 at step 16, 0.12 at step 64,
    0.03 at step 256. The runs with the fewest steps (the largest n) at their lowest rewards are the ones it
    moves right most, so it overstates their lag on this axis."""
    need = "batch" in table.columns or {"bp", "n"} <= set(table.columns)
    if "lr" not in table.columns or "compute" not in table.columns or not need:
        return table
    df = table.copy()
    batch = (pd.to_numeric(df["batch"], errors="coerce") if "batch" in df.columns
             else pd.to_numeric(df["bp"], errors="coerce") * pd.to_numeric(df["n"], errors="coerce"))
    steps = pd.to_numeric(df["compute"], errors="coerce") / batch
    lr = pd.to_numeric(df["lr"], errors="coerce")
    if not (np.isfinite(lr.to_numpy(dtype=float)) & (lr.to_numpy(dtype=float) > 0)).any():
        return table
    order = np.lexsort((steps.to_numpy(dtype=float), df[run_col].astype(str).to_numpy()))
    s, v = steps.to_numpy(dtype=float)[order], lr.to_numpy(dtype=float)[order]
    runs = df[run_col].astype(str).to_numpy()[order]
    first = np.r_[True, runs[1:] != runs[:-1]]
    s_prev = np.where(first, 0.0, np.r_[0.0, s[:-1]])
    v_prev = np.where(first, v, np.r_[v[0], v[:-1]])
    area = (v + v_prev) / 2.0 * (s - s_prev)
    cum = pd.Series(area).groupby(np.cumsum(first)).cumsum().to_numpy()
    out = np.empty_like(cum)
    out[order] = cum
    df[LR_STEPS] = out
    return df


def _range(rec: np.ndarray) -> tuple[float, float]:
    """(first, top) of a record curve: its value at its first evaluation point and its highest value."""
    ok = rec[np.isfinite(rec)]
    return (float(ok[0]), float(ok[-1])) if ok.size else (math.nan, math.nan)


def _levels(rec_a: np.ndarray, rec_b: np.ndarray, n_levels: int, skip: float) -> np.ndarray | None:
    """The reward levels both records reach (module docstring), or None where their ranges overlap by
    no more than one record bin."""
    (a0, a1), (b0, b1) = _range(rec_a), _range(rec_b)
    lo, hi = max(a0, b0), min(a1, b1)
    if not hi - lo > RESOLUTION:
        return None
    return np.linspace(lo + skip * (hi - lo), hi, n_levels)


def _reach(xs: np.ndarray, rec: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Compute (or x) at which the record `rec` on `xs` first reaches each level (inf: never)."""
    return np.array([crossing(xs, rec, float(r)) for r in levels])


def _summary(levels: np.ndarray, y: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """[weighted mean of y over the levels, its change across their range (the weighted least-squares slope
    times the range's width)]; levels where y is nan are left out. y (..., L) -> (..., 2)."""
    y = np.atleast_2d(y)
    out = np.full((y.shape[0], 2), np.nan)
    for i, row in enumerate(y):
        ok = np.isfinite(row) & (weight > 0)
        if not ok.any():
            continue
        out[i, 0] = float(np.average(row[ok], weights=weight[ok]))
        if ok.sum() >= 3:
            slope = np.polyfit(levels[ok], row[ok], 1, w=np.sqrt(weight[ok]))[0]
            out[i, 1] = float(slope * (levels[-1] - levels[0]))
    return out


# ------------------------------------------------------------------------------------------- readouts
def _lag_at(a: _Runs, wa: np.ndarray, b: _Runs, wb: np.ndarray, col: str, levels: np.ndarray) -> np.ndarray:
    """(L,) the lag at each level in octaves: log2 of b's compute (or x) to reach it over a's; nan where one
    of them never reaches it."""
    ca = _reach(a.xs, a.record(col, wa), levels)
    cb = _reach(b.xs, b.record(col, wb), levels)
    with np.errstate(all="ignore"):
        lag = np.log2(cb / ca)
    return np.where(np.isfinite(lag), lag, np.nan)


def _val_at(r: _Runs, w: np.ndarray, train: str, val: str, levels: np.ndarray) -> np.ndarray:
    """Seed-mean val of one configuration at the computes where its train record first reaches each level
    (linear in log C between evaluation points; nan where it never does)."""
    c = _reach(r.xs, r.record(train, w), levels)
    v = r.mean(val, w)
    ok = np.isfinite(v)
    out = np.full(levels.size, np.nan)
    fin = np.isfinite(c)
    if ok.any():
        out[fin] = np.interp(np.log(c[fin]), np.log(r.xs[ok]), v[ok])
    return out


def _contrast_at(a: _Runs, wa: np.ndarray, b: _Runs, wb: np.ndarray, train: str, val: str,
                 levels: np.ndarray) -> np.ndarray:
    """(L,) b's val minus a's at each matched train level."""
    return _val_at(b, wb, train, val, levels) - _val_at(a, wa, train, val, levels)


def _draws(a: _Runs, b: _Runs, reps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """(weights of a's runs (reps, Ra), of b's (reps, Rb), seeds): paired draws where the two share their
    seed labels, else independent ones; seeds = the fewer runs of the two (what the t widening counts)."""
    order = sorted(map(str, a.labels))
    if order == sorted(map(str, b.labels)) and len(set(order)) == len(order):
        W = seed_weights(len(order), reps, rng)
        return (W[:, [order.index(str(s)) for s in a.labels]], W[:, [order.index(str(s)) for s in b.labels]],
                len(order))
    return (seed_weights(len(a.labels), reps, rng), seed_weights(len(b.labels), reps, rng),
            min(len(a.labels), len(b.labels)))


def _over_levels(at: Callable[[np.ndarray, np.ndarray], np.ndarray], a: _Runs, b: _Runs, Wa: np.ndarray,
                 Wb: np.ndarray, seeds: int, levels: np.ndarray, level: float) -> dict[str, Any]:
    """A per-level readout `at(wa, wb) -> (L,)` of the pair summed up over the levels (`_summary`) with
    intervals: {"point": (L,), "weight": (L,), "mean", "mean_interval", "change", "change_interval"}.

    Each level weighs by the inverse of its resampled variance (floored at VAR_FLOOR): where a curve is
    nearly flat, the compute at which it passes a level moves far with a little noise, and an unweighted
    mean or slope would be that noise. A level that fewer than half of the resamples reach (the top of the
    range, where the lower curve's record is its best point) weighs nothing. Without resamples (one seed)
    every level weighs the same."""
    point = at(np.ones(len(a.labels)), np.ones(len(b.labels)))
    if Wa.shape[0] == 0 or seeds < 2:
        weight = np.where(np.isfinite(point), 1.0, 0.0)
        summ = _summary(levels, point, weight)[0]
        return {"point": point, "weight": weight, "mean": summ[0], "mean_interval": [summ[0], summ[0]],
                "change": summ[1], "change_interval": [summ[1], summ[1]]}
    per = np.stack([at(Wa[i], Wb[i]) for i in range(Wa.shape[0])])  # (reps, L)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        var = np.nanvar(per, axis=0)
    enough = np.isfinite(per).sum(axis=0) >= max(2, Wa.shape[0] // 2)
    fin = np.isfinite(var) & enough
    typical = float(np.median(var[fin])) if fin.any() else VAR_FLOOR
    inverse = 1.0 / np.fmax(np.nan_to_num(var, nan=np.inf), max(typical, VAR_FLOOR))
    weight = np.where(np.isfinite(point) & enough, inverse, 0.0)
    summ = _summary(levels, point, weight)[0]
    samples = _summary(levels, per, weight)
    samples = summ[None, :] + small_sample_factor(seeds, level) * (samples - summ[None, :])
    lo, hi = intervals(summ, samples, level)
    return {"point": point, "weight": weight, "mean": summ[0], "mean_interval": [lo[0], hi[0]],
            "change": summ[1], "change_interval": [lo[1], hi[1]]}


def _speed_word(lo: float, hi: float) -> str:
    """What a lag interval says: "same" (within +-SAME_SPEED), "slower" (> 0), "faster" (< 0), or
    "undetermined"."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undetermined"
    if -SAME_SPEED <= lo and hi <= SAME_SPEED:
        return "same"
    if lo > 0:
        return "slower"
    if hi < 0:
        return "faster"
    return "undetermined"


def _trend_word(lo: float, hi: float) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undetermined"
    if -CONSTANT <= lo and hi <= CONSTANT:
        return "constant"
    if lo > 0:
        return "grows"
    if hi < 0:
        return "shrinks"
    return "undetermined"


def _same_word(lo: float, hi: float) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undetermined"
    if -SAME_VAL <= lo and hi <= SAME_VAL:
        return "same"
    if lo > 0:
        return "higher"
    if hi < 0:
        return "lower"
    return "undetermined"


def _axis(a: _Runs, b: _Runs, Wa, Wb, seeds, col: str, n_levels: int, skip: float, level: float) -> dict:
    """The lag block of one pair on one axis (the `lag_report` pair's "lag" or "lr_steps")."""
    ra, rb = a.record(col, np.ones(len(a.labels))), b.record(col, np.ones(len(b.labels)))
    ranges = [list(_range(ra)), list(_range(rb))]
    levels = _levels(ra, rb, n_levels, skip)
    if levels is None:
        return {"status": "no overlap", "ranges": ranges}
    r = _over_levels(lambda wa, wb: _lag_at(a, wa, b, wb, col, levels), a, b, Wa, Wb, seeds, levels, level)
    return {"status": "ok", "ranges": ranges, "range": [float(levels[0]), float(levels[-1])],
            "lag": r["mean"], "interval": r["mean_interval"], "change": r["change"],
            "speed": _speed_word(*r["mean_interval"]), "change_interval": r["change_interval"],
            "trend": _trend_word(*r["change_interval"]),
            "levels": levels, "lag_at": r["point"], "weight": r["weight"] / max(r["weight"].sum(), 1e-300)}


def _ceiling(a: _Runs, b: _Runs, Wa, Wb, seeds, train: str, val: str, n_levels: int, skip: float,
             level: float) -> dict:
    """The ceiling block of one pair: val at matched train reward."""
    ra, rb = a.record(train, np.ones(len(a.labels))), b.record(train, np.ones(len(b.labels)))
    levels = _levels(ra, rb, n_levels, skip)
    if levels is None:
        return {"status": "no overlap", "train": train, "ranges": [list(_range(ra)), list(_range(rb))]}
    r = _over_levels(lambda wa, wb: _contrast_at(a, wa, b, wb, train, val, levels), a, b, Wa, Wb, seeds,
                     levels, level)
    return {"status": "ok", "train": train, "range": [float(levels[0]), float(levels[-1])],
            "contrast": r["mean"], "interval": r["mean_interval"], "verdict": _same_word(*r["mean_interval"]),
            "levels": levels, "contrast_at": r["point"]}


def train_metric(metric: str, table: pd.DataFrame) -> str | None:
    """The train counterpart of a val metric (val_mean -> train_mean) when the table has it, else None."""
    if not metric.startswith("val_"):
        return None
    t = "train_" + metric[len("val_"):]
    if t not in table.columns or not np.isfinite(pd.to_numeric(table[t], errors="coerce")).any():
        return None
    return t


def lag_report(table: pd.DataFrame, metric: str = "val_mean", by: str = "n", x: str = "compute", *,
               n_levels: int = LEVELS, skip: float = SKIP, level: float = LEVEL, reps: int = REPS,
               seed: int = 0, run_col: str = "run_id", seed_col: str = "seed") -> dict:
    """Speed or ceiling (module docstring) for every pair (smallest `by`, other `by`), JSON values:

    {"metric", "by", "x", "reference": smallest, "level", "reps", "levels", "skip", "status": "ok" | why
     not, "pairs": [{<by>: v, "reference", "seeds", "lag": axis block, "lr_steps": axis block | {"status"},
     "ceiling": {"status", "train", "range", "contrast", "interval", "verdict":
     "same" | "higher" | "lower" | "undetermined", "levels", "contrast_at"}, "text": one line}]}

    An axis block: {"status": "ok" | "no overlap", "ranges": [[first, top] of the reference, of v], "range":
    [lo, hi] of the levels, "lag", "interval", "speed": "same" | "slower" | "faster" | "undetermined",
    "change", "change_interval", "trend": "constant" | "grows" | "shrinks" | "undetermined", "levels",
    "lag_at", "weight" (each level's share of the mean)} (lags in octaves of `x`, or of lr x steps). Data that
    cannot be read (fewer than two configurations, configurations that are not numbers, runs that share no
    evaluation points) give a status, never an error; missing columns raise ValueError."""
    missing = [c for c in (run_col, by, x, metric) if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks column(s) {', '.join(missing)}")
    head = {"metric": metric, "by": by, "x": x, "reference": None, "level": float(level), "reps": int(reps),
            "levels": int(n_levels), "skip": float(skip), "pairs": []}
    train = train_metric(metric, table)
    runs, unshared = _runs(table, [metric, *([train] if train else [])], by, x, run_col, seed_col)
    keys = sorted(runs)
    if len(keys) < 2 or not numeric_keys(keys):
        why = ("fewer than two " + by + " with data" if len(keys) < 2 else f"{by} values are not numbers")
        return jsonable({**head, "status": why, "unshared": [config_value(k) for k in unshared]})
    lr_table = with_lr_steps(table, run_col)
    lr_runs = (_runs(lr_table, [metric], by, LR_STEPS, run_col, seed_col)[0] if LR_STEPS in lr_table.columns
               else {})
    ref = keys[0]
    pairs = []
    for i, k in enumerate(keys[1:]):
        a, b = runs[ref], runs[k]
        Wa, Wb, seeds = _draws(a, b, int(reps), np.random.default_rng([int(seed), i]))
        item: dict[str, Any] = {by: config_value(k), "reference": config_value(ref), "seeds": seeds}
        item["lag"] = _axis(a, b, Wa, Wb, seeds, metric, n_levels, skip, level)
        if ref in lr_runs and k in lr_runs:
            item["lr_steps"] = _axis(lr_runs[ref], lr_runs[k], Wa, Wb, seeds, metric, n_levels, skip, level)
        else:
            item["lr_steps"] = {"status": "no lr column"}
        item["ceiling"] = (_ceiling(a, b, Wa, Wb, seeds, train, metric, n_levels, skip, level) if train else
                           {"status": f"no train counterpart of {metric}"})
        item["text"] = pair_text(jsonable(item), by, metric, x)
        pairs.append(item)
    status = "ok" if seeds_ok(pairs) else "one run per configuration: no intervals"
    return jsonable({**head, "reference": config_value(ref), "status": status, "pairs": pairs,
                     "unshared": [config_value(k) for k in unshared]})


def seeds_ok(pairs: list[dict]) -> bool:
    """Whether every pair has >= 2 seeds to resample."""
    return all(p["seeds"] >= 2 for p in pairs)


# ---------------------------------------------------------------------------------------------- words
def _f(v: Any, d: int = 2, sign: bool = False) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:+.{d}f}" if sign else f"{v:.{d}f}"


def _iv(iv: list | None, d: int = 2, sign: bool = False) -> str:
    lo, hi = iv or (None, None)
    return f"[{_f(lo, d, sign)}, {_f(hi, d, sign)}]"


def pair_text(p: dict, by: str = "n", metric: str = "val_mean", x: str = "compute") -> str:
    """One line for one pair of `lag_report`: the lag with its interval, its trend over the rewards both
    curves reach, and what that says (speed, ceiling, or that the seeds cannot tell)."""
    ref, k = p["reference"], p[by]
    ax = p["lag"]
    unit = "octaves" if x == "compute" else f"octaves of {x}"
    if ax["status"] != "ok":
        (a0, a1), (b0, b1) = ax["ranges"]
        return (f"{by} = {k} and {by} = {ref}: their {metric} records do not overlap ({by} = {ref}: "
                f"{_f(a0, 3)}-{_f(a1, 3)}, {by} = {k}: {_f(b0, 3)}-{_f(b1, 3)}): no lag, nothing "
                "extrapolated")
    lag, (lo, hi), speed = ax["lag"], ax["interval"], ax["speed"]
    if speed == "slower":
        head = f"{by} = {k} is {by} = {ref} delayed by {_f(lag)} {unit} {_iv(ax['interval'])}"
    elif speed == "faster":
        head = f"{by} = {k} is {by} = {ref} ahead by {_f(-lag)} {unit} {_iv([-hi, -lo])}"
    else:
        said_speed = "the same speed, " if speed == "same" else ""
        head = (f"{by} = {k} and {by} = {ref}: {said_speed}lag {_f(lag, 2, True)} {unit} "
                f"{_iv(ax['interval'], 2, True)}")
    r0, r1 = ax["range"]
    change = f"{_f(ax['change'], 2, True)} {_iv(ax['change_interval'], 2, True)} across them"
    ceil = p.get("ceiling") or {}
    differs = ceil.get("status") == "ok" and ceil.get("verdict") in ("higher", "lower")
    trend = ax["trend"]
    if trend == "constant":
        what = (f"constant over rewards {_f(r0)}-{_f(r1)} ({change})")
        if speed in ("slower", "faster"):
            said = (f"{by} changes speed, not ceiling" if not differs else
                    f"{by} changes speed, and val at matched train reward differs")
        elif speed == "same":
            said = ("the same curve" if not differs else
                    "the same speed, but val at matched train reward differs")
        else:
            said = "no resolved lag" if not differs else "val at matched train reward differs"
    elif trend == "grows":
        what = f"growing toward the top of rewards {_f(r0)}-{_f(r1)} ({change})"
        said = f"{by} = {k} falls further behind as the reward rises: a lower ceiling, if it lasts"
    elif trend == "shrinks":
        what = f"shrinking toward the top of rewards {_f(r0)}-{_f(r1)} ({change})"
        said = f"{by} = {k} catches up as the reward rises: it may rise higher, beyond {_f(r1)}"
    else:
        what = f"over rewards {_f(r0)}-{_f(r1)} ({change})"
        said = "the seeds cannot tell speed from ceiling"
    return f"{head}, {what}: {said}"


def lr_text(block: dict) -> str:
    """The lr x steps line of a pair: its lag with interval, and whether the lr rule accounts for the compute
    lag (the curves nearly coincide on that axis: the whole interval within +-CONSTANT octaves)."""
    if block.get("status") != "ok":
        return f"against cumulative lr x steps: {block.get('status')}"
    lo, hi = block["interval"]
    within = lo is not None and hi is not None and -CONSTANT <= lo and hi <= CONSTANT
    said = ("the curves nearly coincide: the lr rule accounts for the lag" if within else
            "the lr rule does not account for the lag")
    return (f"against cumulative lr x steps: lag {_f(block['lag'], 2, True)} octaves "
            f"{_iv(block['interval'], 2, True)}, trend {block['trend']}: {said}")


def ceiling_text(block: dict, by: str, k: Any, ref: Any, metric: str = "val_mean") -> str:
    """The ceiling line of a pair: val at matched train reward, the other n minus the reference."""
    if block.get("status") != "ok":
        if "ranges" in block:
            return f"{metric} at matched {block.get('train')}: the train records do not overlap"
        return f"{metric} at matched train reward: {block.get('status')}"
    r0, r1 = block["range"]
    said = {"same": "the same", "higher": f"higher for {by} = {k}", "lower": f"lower for {by} = {k}",
            "undetermined": "the seeds cannot tell"}[block["verdict"]]
    return (f"{metric} at matched {block['train']} {_f(r0)}-{_f(r1)}: {by} = {k} - {by} = {ref} = "
            f"{_f(block['contrast'], 3, True)} {_iv(block['interval'], 3, True)}: {said}")
