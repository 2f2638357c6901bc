"""How sure an answer about n* is: ties, grid edges, flat frontiers and the regret of a recommendation.

`fit`, `plot`, `plan` and `predict` all answer "which n?" from a handful of seeds. Answers that look real but
are not: n* = 2 on every row of a tabular sweep whose validation metric never moved, n* on the last n of the
grid with no word that the grid may be too short, one recommended n on a frontier where n = 16..256 were
within 0.002 of each other. The set of n the seeds cannot tell apart is defined once, in
`studies.fit.nstar` (measured seed-mean records, resampled runs); this module words what it means:

- **none improved**: every n's seed-mean curve gains at most `NO_GAIN` over its first evaluation (the metric
  never moved, e.g. the tabular preset's val_mean, whose validation problems share no parameters with the
  training ones): every n ties, with a hint at the metric to read instead.
- **edge**: n* at the budget equal to the largest n tried (the answer may lie beyond: extend the grid), or to
  the smallest one when that is above GRPO's floor MIN_N = 2.
- **flat set**: more than one n in the set at the budget.
- **expected regret** of recommending n: the mean over resamples of (best reward of the resample - reward of
  n in it), the decision-theoretic cost of the choice under the seed noise (Bayes regret with the bootstrap
  as the posterior; 0 when n wins every resample), with its interval over the resamples; not reported
  from fewer than MIN_REGRET_RUNS seeds per n (`studies.fit.nstar.regret`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from studies.fit.nstar import LEVEL, NO_GAIN, NStar, config_value, numeric_keys, regret, set_text

MIN_N = 2
"""The smallest GRPO group: n = 1 has zero advantage, so n* = 2 on the grid's lower edge is no edge."""


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


def edge_note(value: float, grid: Sequence[float], by: str = "n", where: str = "at the budget",
              members: Sequence | None = None) -> str | None:
    """One line when `value` sits on an edge of `grid` (`grid_edge`). With `members` (the set the seeds
    cannot tell from the best) of more than one configuration, the line names the best as the best measured
    and the set beside it, so it never reads as a lone n* the set contradicts."""
    side = grid_edge(value, grid)
    if side is None:
        return None
    g = sorted(float(v) for v in grid)
    many = members is not None and len(members) > 1
    head = (f"the best measured {by} {where} is {value:g}, inside the set {{{set_text(members, grid)}}} the "
            f"seeds cannot tell apart, and" if many else f"{by}* {where} is {value:g},")
    if side == "upper":
        return (f"{head} the largest {by} tried: the optimum may lie beyond; extend the grid (e.g. --{by} "
                f"...,{2 * g[-1]:g},{4 * g[-1]:g})")
    return (f"{head} the smallest {by} tried: the optimum may lie below; extend the grid (e.g. --{by} "
            f"{max(MIN_N, g[0] / 2):g},...)")


# ----------------------------------------------------------------------------------- flat set and regret
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


def flat_note(members: Sequence, best: Any, interval: Sequence[float], by: str = "n", level: float = LEVEL,
              grid: Sequence | None = None) -> str | None:
    """One line when the frontier is flat at the budget (more than one configuration in the set)."""
    if len(members) < 2:
        return None
    return (f"flat frontier at the budget: the {level:.0%} reward intervals of {by} = "
            f"{set_text(members, grid)} reach the best's [{interval[0]:.4g}, {interval[1]:.4g}] ({by} = "
            f"{best:g}, measured); any of them is as good as these seeds can tell")


# ---------------------------------------------------------------------------------------- whole answers
def assess(ns: NStar, j: int = -1, metric: str = "val_mean", by: str = "n", model: str | None = None
           ) -> dict[str, Any]:
    """The certainty of row j of an NStar (fit, plot, predict: its largest compute): a JSON-safe dict with
    "budget", "n_star" (the best), "flat_set" (the set), "reward_interval" (the best's), "expected_regret"
    and "expected_regret_interval" (of the best; None from too few seeds, a note says so),
    "none_improved", "edge", "level" and "notes" (lines). The numbers are the row's own, so they equal that
    row of the frontier."""
    j = j % len(ns.best) if len(ns.best) else 0
    out: dict[str, Any] = {"budget": float(ns.compute[j]) if len(ns.compute) else None,
                           "none_improved": ns.none_improved, "level": ns.level, "n_star": None, "edge": None,
                           "flat_set": [], "reward_interval": [None, None], "expected_regret": None,
                           "expected_regret_interval": None, "notes": []}
    notes = out["notes"]
    if ns.none_improved:
        notes.append(no_improvement_note(metric, by, model))
    if not len(ns.best) or ns.best[j] is None:
        return out
    best, members = ns.best[j], ns.sets[j]
    k = ns.keys.index(best)
    r = regret(ns.samples[:, j, :], k, ns.runs, ns.level)
    out.update(n_star=config_value(best), flat_set=[config_value(v) for v in members],
               reward_interval=[float(ns.lo[j, k]), float(ns.hi[j, k])], expected_regret=r["mean"],
               expected_regret_interval=r["interval"])
    if r["note"] and ns.reps:
        notes.append(r["note"])
    competing = [v for v in ns.keys if np.isfinite(ns.point[j, ns.keys.index(v)])]
    if numeric_keys(ns.keys) and not ns.none_improved:
        grid = [float(v) for v in competing]
        out["edge"] = grid_edge(float(best), grid)
        e = edge_note(float(best), grid, by, members=members)
        if e:
            notes.append(e)
        f = flat_note(members, best, out["reward_interval"], by, ns.level, grid)
        if f:
            notes.append(f)
    return out


def table_model(table: pd.DataFrame) -> str | None:
    """The one policy preset of a table's runs (a `model` column), else None."""
    if "model" in table.columns:
        vals = table["model"].dropna().unique().tolist()
        if len(vals) == 1:
            return str(vals[0])
    return None
