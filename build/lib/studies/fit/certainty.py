"""How sure an answer about n* is: ties, grid edges, flat frontiers and the regret of a recommendation.

`fit`, `plot`, `plan` and `predict` all answer "which n?" from a handful of seeds. Issue 28 found answers that
looked real but were not: n* = 2 on every row of a tabular sweep whose validation metric never moved, n* on
the last n of the grid with no word that the grid may be too short, and one recommended n on a frontier where
n = 16..256 were within 0.002 of each other. This module holds the one definition of each of these cases:

- **tie**: a frontier point where n* is not determined (`studies.fit.frontier.undetermined`: the frontier has
  gained < EARLY_GAIN of its total there), and the whole frontier when *no n improved at all* (every n's
  seed-mean curve gains at most `NO_GAIN` over its first evaluation: the metric never moved, e.g. the
  tabular preset's val_mean, whose validation problems share no parameters with the training ones).
- **edge**: n* at the budget equal to the largest n tried (the answer may lie beyond: extend the grid), or to
  the smallest one when that is above GRPO's floor MIN_N = 2.
- **flat set**: the n whose reward at the budget the seeds cannot tell from the best n's there: its reward
  interval reaches the best's (they overlap; `flat_set`). The intervals come from resamples (bootstrap over
  runs, i.e. seeds, within each n): `plan` refits the pilots' curves per resample (the budget may lie
  beyond the data), `fit` / `plot` / `predict` resample the runs' measured record reward at the budget
  (`run_reward_samples`, cheap, inside the data).
- **expected regret** of recommending n: the mean over resamples of (best reward of the resample - reward of
  n in it), the decision-theoretic cost of the choice under the seed noise (Bayes regret with the bootstrap
  as the posterior; 0 when n wins every resample).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from studies.fit.frontier import config_value, undetermined

NO_GAIN = 0.005
"""A configuration 'improved' when its seed-mean curve rises more than this above its first evaluation: the
record-breaking bin of the paper (Section 4, bin width 0.005), below which the workflow sees no record."""
MIN_N = 2
"""The smallest GRPO group: n = 1 has zero advantage, so n* = 2 on the grid's lower edge is no edge."""
LEVEL = 0.9
"""Default level of reward intervals (the bootstrap quantiles 5% and 95%)."""
REPS = 200
"""Default number of resamples of `run_reward_samples` (numpy only: milliseconds)."""
MIN_R2 = 0.5
"""An n* sigmoid fit with r2 below this explains too little of n*(C) to be drawn or read ('flat')."""
# ------------------------------------------------------------------------------------------------- ties
def curve_gains(table: pd.DataFrame, metric: str, by: str = "n", x: str = "compute") -> dict[Any, float]:
    """{by value: max of its seed-mean curve - its value at the first evaluation} (compute >= 0)."""
    df = table[[by, x, metric]].copy()
    df[x] = pd.to_numeric(df[x], errors="coerce")
    df[metric] = pd.to_numeric(df[metric], errors="coerce")
    df = df.loc[np.isfinite(df[x].to_numpy(dtype=float)) & np.isfinite(df[metric].to_numpy(dtype=float))]
    out = {}
    for v, g in df.groupby(by, sort=True, observed=True):
        m = g.groupby(x, sort=True)[metric].mean().to_numpy(dtype=float)
        if m.size:
            out[v] = float(m.max() - m[0])
    return out


def no_improvement(table: pd.DataFrame, metric: str, by: str = "n", tol: float = NO_GAIN,
                   x: str = "compute") -> bool:
    """True when no configuration improved on its first evaluation by more than `tol` (module docstring)."""
    gains = curve_gains(table, metric, by, x)
    return bool(gains) and max(gains.values()) <= tol


def tie_mask(rewards: Sequence[float], none_improved: bool) -> np.ndarray:
    """Per frontier point (compute order): True where n* is a tie (undetermined, or nothing improved)."""
    r = np.asarray([math.nan if v is None else float(v) for v in rewards], dtype=float)
    if none_improved:
        return np.ones(r.size, dtype=bool)
    return undetermined(r) if r.size else np.zeros(0, dtype=bool)


def no_improvement_note(metric: str, by: str = "n", model: str | None = None) -> str:
    from studies.io import preset_metric

    hint = preset_metric(model) if model else None
    flag = (f"; the {model} preset's claim is read on --metric {hint}" if hint and hint != metric
            else "; choose a metric that moves (--metric, e.g. train_mean)")
    return (f"no {by} improved {metric} by more than {NO_GAIN} at all: every {by} ties, the {by}* shown is "
            f"arbitrary{flag}")


# ------------------------------------------------------------------------------------------------ edges
def grid_edge(value: float | None, grid: Sequence[float]) -> str | None:
    """"upper" when `value` is the largest of `grid`, "lower" when it is the smallest and above MIN_N."""
    g = sorted(float(v) for v in grid)
    if value is None or len(g) < 2:
        return None
    v = float(value)
    if v == g[-1]:
        return "upper"
    if v == g[0] and g[0] > MIN_N:
        return "lower"
    return None


def edge_note(value: float, grid: Sequence[float], by: str = "n", where: str = "at the budget") -> str | None:
    side = grid_edge(value, grid)
    if side is None:
        return None
    g = sorted(float(v) for v in grid)
    if side == "upper":
        return (f"{by}* {where} is {value:g}, the largest {by} tried: the optimum may lie beyond; extend the "
                f"grid (e.g. --{by} ...,{2 * g[-1]:g},{4 * g[-1]:g})")
    return (f"{by}* {where} is {value:g}, the smallest {by} tried: the optimum may lie below; extend the "
            f"grid (e.g. --{by} {max(MIN_N, g[0] / 2):g},...)")


# ----------------------------------------------------------------------------------- flat set and regret
def run_reward_samples(table: pd.DataFrame, metric: str, by: str, budget: float, reps: int = REPS,
                       seed: int = 0, x: str = "compute", run_col: str = "run_id"
                       ) -> tuple[list, np.ndarray, np.ndarray]:
    """(configurations, point reward per configuration, resampled rewards of shape (reps, configs)).

    A configuration's reward at `budget` is the record (best-so-far) of its seed-mean curve over the
    evaluations at compute <= budget, as `FrontierFit(aggregate="mean")` reads it (averaging first keeps the
    record of a noisy curve from being a lucky draw); resamples draw its runs with replacement (the unit of
    noise is a run, i.e. a seed). Runs that share no evaluation points (users' logs) are read one by one:
    the mean of each run's own record. Configurations with no evaluation at or below `budget` (one step
    costs more) are left out."""
    df = table[[run_col, x, by, metric]].copy()
    df[x] = pd.to_numeric(df[x], errors="coerce")
    df[metric] = pd.to_numeric(df[metric], errors="coerce")
    df = df.loc[np.isfinite(df[x].to_numpy(dtype=float)) & np.isfinite(df[metric].to_numpy(dtype=float))]
    df = df.loc[(df[x] > 0) & (df[x] <= budget * (1 + 1e-9))]
    rng = np.random.default_rng(seed)
    keys, point, cols = [], [], []
    for k, g in df.groupby(by, sort=True, observed=True):
        wide = g.pivot_table(index=run_col, columns=x, values=metric, aggfunc="mean")
        if wide.empty:
            continue
        W = wide.to_numpy(dtype=float)  # runs x evaluation points
        idx = rng.integers(0, W.shape[0], size=(int(reps), W.shape[0]))
        shared = float(np.median(np.isfinite(W).sum(axis=0))) >= 2 or W.shape[0] == 1
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            if shared:  # record of the seed-mean curve
                point.append(float(np.nanmax(np.nanmean(W, axis=0))))
                cols.append(np.nanmax(np.nanmean(W[idx], axis=1), axis=1))
            else:  # mean of each run's record
                per_run = np.nanmax(W, axis=1)
                point.append(float(per_run.mean()))
                cols.append(per_run[idx].mean(axis=1))
        keys.append(k)
    samples = np.column_stack(cols) if cols else np.empty((int(reps), 0))
    return keys, np.asarray(point, dtype=float), samples


def final_slopes(table: pd.DataFrame, metric: str, by: str = "n") -> dict[Any, float]:
    """{by value: seed-mean reward gain per doubling of compute over the last third of its log-compute
    range} (a least-squares line in log2 C; configurations with fewer than 3 evaluations are left out)."""
    df = table.loc[pd.to_numeric(table["compute"], errors="coerce") > 0, [by, "compute", metric]].dropna()
    out = {}
    for v, g in df.groupby(by, sort=True, observed=True):
        m = g.groupby("compute", sort=True)[metric].mean()
        if m.size < 3:
            continue
        lc, y = np.log2(m.index.to_numpy(dtype=float)), m.to_numpy(dtype=float)
        keep = lc >= lc.max() - (lc.max() - lc.min()) / 3
        if keep.sum() >= 2:
            out[v] = float(np.polyfit(lc[keep], y[keep], 1)[0])
    return out


def optimistic_reward(last: float, slope: float, doublings: float) -> float:
    """The most a curve can reach `doublings` factors of 2 of compute beyond its data: its last record plus
    its final slope per doubling (never negative) times the distance. A sigmoid in log C is concave past its
    midpoint, so continuing the final slope bounds it from above there; before the midpoint nothing bounds
    it, which is why a configuration still rising at the end of its pilots cannot be ruled out."""
    return float(last + max(slope, 0.0) * max(doublings, 0.0))


def flat_set(keys: Sequence, point: np.ndarray, samples: np.ndarray, level: float = LEVEL
             ) -> tuple[list, Any, list[float]]:
    """(the configurations the resamples cannot tell from the best, the best, the best's interval [lo, hi]).

    best = the arg-max of the point rewards (ties to the smaller configuration); a configuration's interval
    = the (1 - level) / 2 and (1 + level) / 2 quantiles of its resampled rewards (widened to hold its point
    reward); it is in the set when its interval reaches the best's lower end (the two overlap). Overlap and
    not "its point inside the best's interval": a curve whose plateau is shorter has a lower record under
    the same noise, so its point can fall a hair below an interval that its own spread covers."""
    p = np.asarray(point, dtype=float)
    s = np.asarray(samples, dtype=float)
    ok = np.isfinite(p)
    if not ok.any():
        return [], None, [math.nan, math.nan]

    def interval(j: int) -> tuple[float, float]:
        col = s[:, j][np.isfinite(s[:, j])] if s.ndim == 2 and s.shape[0] else np.empty(0)
        if col.size == 0:
            return float(p[j]), float(p[j])
        lo, hi = (float(v) for v in np.quantile(col, [(1 - level) / 2, (1 + level) / 2]))
        return min(lo, float(p[j])), max(hi, float(p[j]))

    best = int(np.nanargmax(np.where(ok, p, -np.inf)))
    lo, hi = interval(best)
    members = [k for j, k in enumerate(keys) if ok[j] and interval(j)[1] >= lo]
    return members, keys[best], [lo, hi]


def expected_regret(samples: np.ndarray, index: int) -> float:
    """Mean over resamples of (the best configuration's reward - configuration `index`'s reward); resamples
    where that configuration has no value are skipped."""
    s = np.asarray(samples, dtype=float)
    if s.size == 0:
        return math.nan
    filled = np.where(np.isfinite(s), s, -np.inf)
    top = filled.max(axis=1)
    mine = s[:, index]
    use = np.isfinite(mine) & np.isfinite(top)
    return float(np.mean(top[use] - mine[use])) if use.any() else math.nan


def flat_note(members: Sequence, best: Any, interval: Sequence[float], by: str = "n",
              level: float = LEVEL) -> str | None:
    """One line when the frontier is flat at the budget (more than one configuration in the set)."""
    if len(members) < 2:
        return None
    shown = ", ".join(f"{v:g}" if isinstance(v, float | int) else str(v) for v in members)
    return (f"flat frontier at the budget: the {level:.0%} reward intervals of {by} = {shown} reach the "
            f"best's [{interval[0]:.4g}, {interval[1]:.4g}] ({by} = {best:g}, measured); any of them is as "
            "good as these seeds can tell")


# ---------------------------------------------------------------------------------------- whole answers
def assess_table(table: pd.DataFrame, metric: str, by: str, budget: float, frontier_rewards: Sequence[float],
                 level: float = LEVEL, reps: int = REPS, seed: int = 0, model: str | None = None
                 ) -> dict[str, Any]:
    """The certainty of a fitted frontier at `budget` (fit, plot, predict): a JSON-safe dict with
    "tie" (per frontier point), "none_improved", "budget", "n_star" (the measured best at the budget),
    "edge", "flat_set", "reward_interval", "expected_regret" (of n_star), "level" and "notes" (lines)."""
    none = no_improvement(table, metric, by)
    ties = tie_mask(frontier_rewards, none)
    out: dict[str, Any] = {"tie": [bool(t) for t in ties], "none_improved": none, "budget": float(budget),
                           "level": level, "n_star": None, "edge": None, "flat_set": [],
                           "reward_interval": [None, None], "expected_regret": None, "notes": []}
    notes = out["notes"]
    if none:
        notes.append(no_improvement_note(metric, by, model))
    try:
        keys, point, samples = run_reward_samples(table, metric, by, budget, reps=reps, seed=seed)
    except ValueError:
        return out
    if not keys:
        return out
    members, best, interval = flat_set(keys, point, samples, level)
    numeric = all(isinstance(k, int | float | np.integer | np.floating) for k in keys)
    out.update(n_star=config_value(best), flat_set=[config_value(v) for v in members],
               reward_interval=interval, expected_regret=expected_regret(samples, keys.index(best)))
    if numeric and not none:
        out["edge"] = grid_edge(float(best), [float(k) for k in keys])
        e = edge_note(float(best), [float(k) for k in keys], by)
        if e:
            notes.append(e)
        f = flat_note([float(v) for v in members], float(best), interval, by, level)
        if f:
            notes.append(f)
    return out


def n_star_fit_usable(fit: Any) -> bool:
    """Whether an n* sigmoid fit says something: converged and r2 >= MIN_R2 (else it is not drawn)."""
    if fit is None or not getattr(fit, "ok_", False):
        return False
    r2 = getattr(fit, "r2_", math.nan)
    return r2 is not None and math.isfinite(r2) and r2 >= MIN_R2


def annotate_report(report: dict[str, Any], table: pd.DataFrame, model: str | None = None,
                    level: float = LEVEL) -> dict[str, Any]:
    """Add the certainty of a `studies.fit.frontier.fit_report` in place: a "tie" flag on every frontier point
    and report["certainty"] (`assess_table` at the frontier's largest compute). Returns the report."""
    frontier = report.get("frontier") or []
    metric, by = report.get("metric", "val_mean"), report.get("by", "n")
    if not frontier:
        return report
    budget = float(frontier[-1]["compute"])
    cert = assess_table(table, metric, by, budget, [f.get("reward") for f in frontier], level=level,
                        model=model)
    for f, t in zip(frontier, cert["tie"], strict=True):
        f["tie"] = bool(t)
    report["certainty"] = {k: v for k, v in cert.items() if k != "tie"}
    return report


def table_model(table: pd.DataFrame) -> str | None:
    """The one policy preset of a table's runs (a `model` column), else None."""
    if "model" in table.columns:
        vals = table["model"].dropna().unique().tolist()
        if len(vals) == 1:
            return str(vals[0])
    return None
