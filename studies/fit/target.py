"""Compute to reach a target reward: the "compute-equivalent" the allocator papers quote (Knapsack RL's "~2x
compute-equivalent", Pilot-Commit's "reaching target accuracy up to 1.9x faster than GRPO in cumulative
rollouts"), measured on stored learning curves with a seed-bootstrap interval.

A curve is an arm's seed-mean record reward against compute. Each run's record reward (its best evaluation so
far, as studies.fit.frontier.run_rewards(stat="best") reads it at one budget) is taken at its evaluations and
joined linearly in log compute; before its first evaluation with compute > 0 a run holds its compute-0 value,
past its last evaluation it has none (the seed mean stops where any seed's run stops). The seed mean of those
per-run curves, on the union of the runs' evaluation computes, is again piecewise linear in log C, so the
compute at which it first reaches a target T is exact under that reading: interpolated in log C between the
two grid points around the crossing; 0 when the mean at compute 0 already reaches T; inf when it never does.

Targets come from reference arms: T(C) = their envelope at budget C (the best seed-mean record reward over
them, e.g. the fixed-n grid; one arm: that arm's curve). For an arm a and a comparison curve v (the same
envelope, or the arm's own base n), ratio(C) = C_v(T(C)) / C_a(T(C)): how many times fewer rollouts the arm
needs than v to reach the target (> 1: the arm is ahead; 0: the arm never reaches it; inf: only the arm does;
NaN: neither does). A crossing before a curve's first positive grid point reads as that grid point (log C has
no point between 0 and it). The interval is the percentile bootstrap over seeds (Efron & Tibshirani 1993, ch.
13): whole seeds are resampled with replacement, the same draw for every arm (runs of one seed share problems
and initial policy, so arms are paired), and targets, crossings and the ratio are recomputed in each
replicate. tests/studies/test_target.py checks it on synthetic curves with known answers (an arm that is a
reference curve shifted by 2x in compute has ratio 2, with the interval [2, 2])."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from studies.fit.bootstrap import seed_weights

REPS = 200
LEVEL = 0.95


def run_curve(compute, values, grid) -> np.ndarray:
    """One run's record reward on `grid` (computes > 0): the best-so-far of its evaluations (compute,
    values), joined linearly in log compute; its compute-0 value (or its first value) before its first
    evaluation with compute > 0, NaN past its last evaluation."""
    c = np.asarray(compute, dtype=float)
    v = np.asarray(values, dtype=float)
    ok = np.isfinite(c) & np.isfinite(v)
    c, v = c[ok], v[ok]
    order = np.argsort(c, kind="mergesort")
    c, v = c[order], np.maximum.accumulate(v[order])
    g = np.asarray(grid, dtype=float)
    out = np.full(g.shape, np.nan)
    pos = c > 0
    if not pos.any():
        return out
    first = v[0]  # the compute-0 value when the run has one, else its first positive evaluation's
    cp, vp = np.log(c[pos]), v[pos]
    inside = g <= c[pos][-1] * (1 + 1e-12)
    out[inside] = np.interp(np.log(g[inside]), cp, vp, left=np.nan)
    before = inside & (g < c[pos][0])
    out[before] = first
    return out


def start_value(compute, values) -> float:
    """A run's record reward at compute 0 (NaN when it has no evaluation there)."""
    c = np.asarray(compute, dtype=float)
    v = np.asarray(values, dtype=float)
    at0 = (c == 0) & np.isfinite(v)
    return float(v[at0].max()) if at0.any() else float("nan")


def crossing(grid, curve, target: float, start: float = float("nan")) -> float:
    """The compute at which `curve` (values on `grid`, piecewise linear in log C) first reaches `target`: 0
    when `start` (its compute-0 value) does, the first grid point when that one does, else interpolated in
    log C between the grid points around the crossing; inf when no finite point reaches it."""
    if np.isfinite(start) and start >= target:
        return 0.0
    y = np.asarray(curve, dtype=float)
    hit = np.flatnonzero(np.isfinite(y) & (y >= target))
    if hit.size == 0:
        return math.inf
    j = int(hit[0])
    if j == 0 or not np.isfinite(y[j - 1]):
        return float(grid[j])
    g0, g1, y0, y1 = math.log(grid[j - 1]), math.log(grid[j]), y[j - 1], y[j]
    return float(math.exp(g0 + (target - y0) / (y1 - y0) * (g1 - g0)))


def _arrays(table: pd.DataFrame, arms: Sequence[str], by: str, metric: str, x: str, seed_col: str):
    """(grid, seeds, {arm: (curves (S, G), starts (S,))}) of the arms' runs, one run per (arm, seed), on the
    union grid of their positive computes and the seeds every arm has."""
    df = table.loc[table[by].isin(list(arms))]
    missing = [a for a in arms if a not in set(df[by])]
    if missing:
        raise ValueError(f"no runs of {', '.join(map(str, missing))} in the table")
    seeds = sorted(set.intersection(*(set(df.loc[df[by] == a, seed_col]) for a in arms)))
    if not seeds:
        raise ValueError("the arms share no seed")
    c = pd.to_numeric(df[x], errors="coerce").to_numpy(dtype=float)
    grid = np.unique(c[np.isfinite(c) & (c > 0)])
    out = {}
    for a in arms:
        curves, starts = np.full((len(seeds), grid.size), np.nan), np.full(len(seeds), np.nan)
        for i, s in enumerate(seeds):
            r = df.loc[(df[by] == a) & (df[seed_col] == s)]
            if r["run_id"].nunique() != 1:
                raise ValueError(f"{a} has {r['run_id'].nunique()} runs at seed {s}; give one per seed")
            curves[i] = run_curve(r[x], r[metric], grid)
            starts[i] = start_value(r[x], r[metric])
        out[a] = (curves, starts)
    return grid, seeds, out


def _envelope(means: dict, arms: Sequence[str]) -> np.ndarray:
    """Pointwise best of the arms' curves (..., G); NaN where none has a value."""
    stack = np.stack([means[a] for a in arms])
    with np.errstate(all="ignore"):
        best = np.where(np.isfinite(stack), stack, -np.inf).max(axis=0)
    return np.where(np.isfinite(best), best, np.nan)


def _at(grid: np.ndarray, curve: np.ndarray, C: float) -> float:
    """A curve's value at budget C (linear in log C between grid points; NaN outside the grid)."""
    ok = np.isfinite(curve)
    if not ok.any() or C < grid[ok][0] * (1 - 1e-12) or C > grid[ok][-1] * (1 + 1e-12):
        return float("nan")
    return float(np.interp(math.log(C), np.log(grid[ok]), curve[ok]))


def _ratio(cv: float, ca: float) -> float:
    """c_versus / c_arm with the edge cases of the module docstring (0 / 0 = 1: both start at the target)."""
    if math.isinf(ca):
        return float("nan") if math.isinf(cv) else 0.0
    if ca == 0:
        return 1.0 if cv == 0 else math.inf
    return cv / ca


def _ratios(grid, means, starts, arm, targets_from, versus, budgets):
    """(target, C_arm, C_versus, ratio) per budget from seed-mean curves `means` and compute-0 values."""
    env = _envelope(means, targets_from)
    vs = _envelope(means, versus)
    vs_starts = [starts[a] for a in versus if np.isfinite(starts[a])]
    vs_start = max(vs_starts) if vs_starts else float("nan")
    out = []
    for C in budgets:
        T = _at(grid, env, C)
        if not np.isfinite(T):
            out.append((float("nan"),) * 4)
            continue
        ca = crossing(grid, means[arm], T, starts[arm])
        cv = crossing(grid, vs, T, vs_start)
        out.append((T, ca, cv, _ratio(cv, ca)))
    return out


def compute_to_target(
    table: pd.DataFrame,
    arm: str,
    budgets: Sequence[float],
    targets_from: Sequence[str],
    versus: Sequence[str] | None = None,
    *,
    by: str = "allocator",
    metric: str = "val_mean",
    x: str = "compute",
    seed_col: str = "seed",
    reps: int = REPS,
    level: float = LEVEL,
    rng_seed: int = 0,
) -> pd.DataFrame:
    """Per budget C of `budgets`: the target T = envelope of the `targets_from` arms at C, the compute the
    arm needs to reach it (c_arm; inf: never), the compute the `versus` curve needs (c_versus; default the
    same envelope, so <= C), ratio = c_versus / c_arm with its seed-bootstrap percentile interval lo, hi at
    `level` (`reps` replicates; reps 0: no interval), and `reached`, the share of replicates where the arm
    reaches T (module docstring). `table`: learning curves with columns run_id, `by`, `seed_col`, `x`,
    `metric`, one run per (arm, seed)."""
    versus = list(targets_from) if versus is None else list(versus)
    arms = list(dict.fromkeys([arm, *targets_from, *versus]))
    grid, seeds, data = _arrays(table, arms, by, metric, x, seed_col)
    with np.errstate(all="ignore"):
        means = {a: data[a][0].mean(axis=0) for a in arms}
        starts = {a: float(data[a][1].mean()) for a in arms}
    point = _ratios(grid, means, starts, arm, list(targets_from), versus, budgets)
    rows = [{"budget": float(C), "target": t, "c_arm": ca, "c_versus": cv, "ratio": r, "lo": np.nan,
             "hi": np.nan, "reached": np.nan, "seeds": len(seeds)}
            for C, (t, ca, cv, r) in zip(budgets, point, strict=True)]
    if reps > 0 and len(seeds) > 1:
        W = seed_weights(len(seeds), reps, np.random.default_rng(rng_seed)) / len(seeds)
        boot = np.full((reps, len(budgets)), np.nan)
        hits = np.zeros((reps, len(budgets)))
        with np.errstate(all="ignore"):
            for i in range(reps):
                w = W[i]
                m = {a: data[a][0].T @ w for a in arms}  # NaN past any seed's end, as the point estimate
                st = {a: float(data[a][1] @ w) for a in arms}
                for j, (_, ca, _, r) in enumerate(_ratios(grid, m, st, arm, list(targets_from), versus,
                                                          budgets)):
                    boot[i, j] = r
                    hits[i, j] = np.isfinite(ca)
        alpha = (1.0 - level) / 2.0
        for j, row in enumerate(rows):
            b = np.sort(boot[:, j][~np.isnan(boot[:, j])])
            if b.size:
                row["lo"] = float(b[int(math.floor(alpha * (b.size - 1)))])
                row["hi"] = float(b[int(math.ceil((1.0 - alpha) * (b.size - 1)))])
            row["reached"] = float(hits[:, j].mean())
    return pd.DataFrame(rows)
