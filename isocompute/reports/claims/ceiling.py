"""Where every n reaches a common ceiling: what a top-budget rule can still measure.

A "large n wins at the top budget" rule (common.TOP_GAIN) reads the record reward of each n at the top
budget. Once every n has reached the same ceiling, that contrast is the ceiling's noise, whatever n*(C) did on
the way;
and several findings run on the same preset and dataset read the same ceiling, so they repeat one piece of
evidence rather than adding independent ones.

`common_ceiling` reads one study: the ceiling is the best seed-mean record reward over n at the top budget, an
n has reached it at the first budget of the grid (powers of two from 2^10) where its seed-mean record lies
within `judge.EQUIVALENCE_MARGIN` of it (the margin below which the report calls two allocations equivalent),
and the common-ceiling budget is the largest of those first budgets (None when some n never gets there). A
top-budget rule compares the best small n with the best large n, so the budget that matters for it is the
first at which both of those reach the ceiling ("arms"), even where the very largest n lags. `shared` groups
the sections whose rules' arms reach a common ceiling by the ceiling's value: sections whose ceilings lie
within the margin of each other share that evidence.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from isocompute.reports.claims.common import budget_text
from isocompute.reports.claims.judge import EQUIVALENCE_MARGIN


def grid(top: float, lo: int = 10) -> list[float]:
    """Budgets 2^lo, 2^(lo+1), ..., up to `top` (and `top` itself)."""
    hi = int(math.floor(math.log2(top)))
    out = [2.0**k for k in range(min(lo, hi), hi + 1)]
    return out if out[-1] == float(top) else [*out, float(top)]


def common_ceiling(table: pd.DataFrame, top: float, metric: str = "val_mean",
                   margin: float = EQUIVALENCE_MARGIN, small_max: int = 8, large_min: int = 32) -> dict:
    """{"ceiling": the best seed-mean record over n at `top`, "best": that n, "budget": the first budget of
    `grid(top)` by which every n is within `margin` of it (None: some n never is), "arms": the first budget
    by which the best n <= small_max and the best n >= large_min both are (None: not by `top`, or no such
    n), "small_max", "large_min", "top", "reach": {n: first budget within the margin, or None}, "gap": {n:
    ceiling minus its seed-mean record at `top`}, "metric"}. Budgets where an n has no evaluation yet count
    as not reached."""
    from isocompute.reports.claims.groupstd import records

    budgets = grid(top)
    rec = records(table, budgets, metric, keys=("n", "seed"))
    means = rec.groupby(["budget", "n"])["reward"].mean().unstack("n").reindex(budgets)
    at_top = means.loc[float(budgets[-1])]
    best = at_top.idxmax()
    ceiling = float(at_top.max())
    reach = {}
    for n in means.columns:
        ok = means.index[(means[n] >= ceiling - margin).to_numpy()]
        reach[_num(n)] = float(ok[0]) if len(ok) else None
    budget = None if any(v is None for v in reach.values()) else max(reach.values())
    small = [n for n in means.columns if float(n) <= small_max]
    large = [n for n in means.columns if float(n) >= large_min]
    arms = None
    if small and large:
        both = (means[small].max(axis=1) >= ceiling - margin) & (means[large].max(axis=1) >= ceiling - margin)
        hit = means.index[both.to_numpy()]
        arms = float(hit[0]) if len(hit) else None
    return {"ceiling": ceiling, "best": _num(best), "budget": budget, "arms": arms, "small_max": small_max,
            "large_min": large_min, "top": float(top), "reach": reach,
            "gap": {_num(n): float(ceiling - v) for n, v in at_top.items()}, "metric": metric,
            "margin": margin}


def _num(v):
    f = float(v)
    return int(f) if f.is_integer() else f


def note(label: str, c: dict) -> str:
    """One clause: 'recipe: every n is within ±0.01 of the ceiling 0.852 (val_mean) by 2^20 (top 2^22)' or
    'recipe: not every n within ±0.01 of the best by 2^22 (n = 2 is 0.051 below the best, 0.852 at n = 64)',
    with the budget by which the top-budget rule's arms both reach it where they do."""
    top = budget_text(c["top"])
    arms = (f"; the best n <= {c['small_max']} and the best n >= {c['large_min']}, the arms of the "
            f"top-budget rule, both by {budget_text(c['arms'])}" if c.get("arms") is not None else "")
    if c["budget"] is not None:
        return (f"{label}: every n is within ±{c['margin']:g} of the ceiling {c['ceiling']:.3f} "
                f"({c['metric']}) by {budget_text(c['budget'])} (top {top}){arms}")
    far = sorted(((g, n) for n, g in c["gap"].items() if np.isfinite(g) and g > c["margin"]), reverse=True)
    lag = ", ".join(f"n = {n} is {g:.3f} below" for g, n in far[:3]) or "not every n has data"
    return (f"{label}: not every n within ±{c['margin']:g} of the best by {top} ({lag} the best, "
            f"{c['ceiling']:.3f} at n = {c['best']}){arms}")


def section_note(ceilings: dict[str, dict]) -> str:
    """The sentence a section prints under its verdict: each study's note, and what a common ceiling means for
    its top-budget rule."""
    if not ceilings:
        return ""
    parts = "; ".join(note(k, c) for k, c in ceilings.items())
    reached = all(_saturated(c) for c in ceilings.values())
    why = (" Its arms reach that ceiling by the top budget, so the top-budget rule reads the ceiling they "
           "share (a contrast there is its noise), not how n*(C) moved on the way." if reached else "")
    metrics = ", ".join(sorted({c["metric"] for c in ceilings.values()}))
    return f"Common ceiling (seed-mean record, {metrics}): {parts}.{why}"


def shared(by_section: dict[str, dict[str, dict]], margin: float = EQUIVALENCE_MARGIN) -> list[list[str]]:
    """Groups of section keys (two or more) whose studies all reach a common ceiling by their top budget and
    whose ceilings (the mean over a section's studies) lie within `margin` of each other's neighbours, in
    order of ceiling: findings that measure one ceiling, not independent evidence."""
    full = {k: float(np.mean([c["ceiling"] for c in cs.values()])) for k, cs in by_section.items()
            if cs and all(_saturated(c) for c in cs.values())}
    order = sorted(full, key=full.get)
    groups: list[list[str]] = []
    for k in order:
        if groups and full[k] - full[groups[-1][-1]] <= margin:
            groups[-1].append(k)
        else:
            groups.append([k])
    return [g for g in groups if len(g) > 1]


def _saturated(c: dict) -> bool:
    """Whether the top-budget rule's arms (or, without them, every n) reach the common ceiling by the top."""
    return (c.get("arms") if "arms" in c else c.get("budget")) is not None


def shared_text(by_section: dict[str, dict[str, dict]], titles: dict[str, str]) -> str:
    """The report's paragraph on shared ceilings (empty when no two sections share one)."""
    groups = shared(by_section)
    if not groups:
        return ""
    parts = []
    for g in groups:
        vals = [c["ceiling"] for k in g for c in by_section[k].values()]
        parts.append(f"{', '.join(titles.get(k, k) for k in g)} (ceilings {min(vals):.3f}-{max(vals):.3f})")
    return ("Shared ceilings: these sections' top-budget rules compare n that have both reached a common "
            f"ceiling by the top budget, and their ceilings agree within ±{EQUIVALENCE_MARGIN:g}: "
            + "; ".join(parts) + ". Each group is one piece of evidence (the ceiling its preset and dataset "
            "share), not independent ones.")


__all__ = ["common_ceiling", "grid", "note", "section_note", "shared", "shared_text"]
