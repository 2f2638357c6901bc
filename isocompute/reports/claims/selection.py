"""Choices made on seeds that are not reported, growth with a direction, and families of tests.

Why: a learning rate, an arm or a base lr picked by the best mean on the same seeds that are then reported
is a winner's-curse estimate (the pick is, by construction, the luckiest draw; its CI ignores the pick).
Every choice in the claims report goes through this module, so no rule can select and report on one seed.

API
---
`directional_growth(n_stars) -> float`
    last / first of an n* sequence in budget order: > 1 when n* rises, < 1 when it falls ("32, 8, 8, 2" is
    1/16, not 16x growth). nan for an empty sequence or a non-positive end.
`log_slope(budgets, n_stars) -> dict`
    ordinary least-squares slope of log2 n* on log2 C with its 95% t-interval (n >= 3 points):
    {"slope", "ci", "points"}; a direction with its uncertainty for sequences long enough to have one.
`select_on_heldout(frame, *, tune_seeds, report_seeds, group_cols, choice_col, score_col, seed_col="seed")`
    -> DataFrame (group_cols + [choice_col, "tune_score"]): per group, the choice with the best mean score
    over the tuning seeds (ties: the first choice in sorted order). Raises ValueError when the tuning and
    reporting seeds overlap or either is empty, or when no tuning row exists.
`seed_folds(seeds, k=2) -> list[(tune_seeds, report_seeds)]`
    k disjoint folds, seed i in fold i mod k; each fold is reported once and tuned on the others.
`cross_fit(frame, *, group_cols, choice_col, score_col, seeds=None, k=2, seed_col="seed")`
    -> DataFrame: the rows of every reporting fold at the choice made on its tuning folds, plus columns
    "fold" and "chosen" (the choice). A cross-fitted estimate: every seed is reported, none at a choice it
    helped make (Chernozhukov et al. 2018, double/debiased machine learning, for the idea).
`holm(pvalues) -> np.ndarray`
    Holm (1979) step-down adjusted p-values of a family of tests: reject at level a where adjusted <= a;
    controls the family-wise error rate under any dependence.
`t_pvalue(mean, se, k) -> float`
    two-sided p-value of a t statistic mean / se with k - 1 degrees of freedom.
`saturated_edge(edge_reward, inner_reward, d_val) -> bool`
    an lr optimum on a grid edge whose reward is within half a validation problem (0.5 / d_val) of the next
    lr inward: a plateau along lr, not an optimum beyond the grid.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "cross_fit",
    "directional_growth",
    "holm",
    "log_slope",
    "saturated_edge",
    "seed_folds",
    "select_on_heldout",
    "t_pvalue",
]


def directional_growth(n_stars: Sequence[float | None]) -> float:
    """last / first of the n* sequence (budgets ascending; None entries, budgets without n*, are dropped)."""
    v = [float(s) for s in n_stars if s is not None]
    if not v or v[0] <= 0 or v[-1] <= 0:
        return float("nan")
    return v[-1] / v[0]


def log_slope(budgets: Sequence[float], n_stars: Sequence[float | None]) -> dict:
    """OLS slope of log2 n* on log2 C with its 95% t half-width (nan below 3 points or with no spread)."""
    from scipy.stats import t

    pts = [(float(b), float(s)) for b, s in zip(budgets, n_stars, strict=True) if s is not None and s > 0]
    out = {"slope": float("nan"), "ci": float("nan"), "points": len(pts)}
    if len(pts) < 2:
        return out
    x = np.log2([p[0] for p in pts])
    y = np.log2([p[1] for p in pts])
    sxx = float(((x - x.mean()) ** 2).sum())
    if sxx <= 0:
        return out
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / sxx)
    out["slope"] = slope
    if len(pts) >= 3:
        resid = y - (y.mean() + slope * (x - x.mean()))
        se = float(np.sqrt((resid**2).sum() / (len(pts) - 2) / sxx))
        out["ci"] = float(t.ppf(0.975, len(pts) - 2) * se)
    return out


def _seed_set(seeds: Iterable) -> set:
    return {int(s) for s in seeds}


def select_on_heldout(
    frame: pd.DataFrame,
    *,
    tune_seeds: Iterable[int],
    report_seeds: Iterable[int],
    group_cols: Sequence[str],
    choice_col: str,
    score_col: str,
    seed_col: str = "seed",
) -> pd.DataFrame:
    """Per group, the choice with the best mean `score_col` over the tuning seeds (see the module text)."""
    tune, rep = _seed_set(tune_seeds), _seed_set(report_seeds)
    if not tune or not rep:
        raise ValueError("select_on_heldout needs non-empty tuning and reporting seeds")
    both = sorted(tune & rep)
    if both:
        raise ValueError(f"selection on reported seeds refused: seed(s) {both} both tune and report")
    group_cols = list(group_cols)
    rows = frame.loc[frame[seed_col].astype(int).isin(tune)]
    if rows.empty:
        raise ValueError(f"no rows on the tuning seeds {sorted(tune)}")
    means = rows.groupby([*group_cols, choice_col], sort=True)[score_col].mean().dropna()
    if means.empty:
        raise ValueError(f"no finite {score_col} on the tuning seeds {sorted(tune)}")
    if group_cols:
        best = means.groupby(level=list(range(len(group_cols))), sort=True).idxmax()
        out = pd.DataFrame(list(best), columns=[*group_cols, choice_col])
        out["tune_score"] = [float(means.loc[k]) for k in best]
    else:
        k = means.idxmax()
        out = pd.DataFrame({choice_col: [k], "tune_score": [float(means.loc[k])]})
    return out.reset_index(drop=True)


def seed_folds(seeds: Iterable[int], k: int = 2) -> list[tuple[list[int], list[int]]]:
    """k disjoint folds (seed at sorted position i goes to fold i mod k) as (tuning, reporting) pairs."""
    s = sorted(_seed_set(seeds))
    k = min(int(k), len(s))
    if k < 2:
        raise ValueError(f"cross-fitting needs >= 2 seeds, got {s}")
    parts = [s[i::k] for i in range(k)]
    return [([v for j, p in enumerate(parts) if j != i for v in p], parts[i]) for i in range(k)]


def cross_fit(
    frame: pd.DataFrame,
    *,
    group_cols: Sequence[str],
    choice_col: str,
    score_col: str,
    seeds: Iterable[int] | None = None,
    k: int = 2,
    seed_col: str = "seed",
) -> pd.DataFrame:
    """Rows of each reporting fold at the choice made on the other folds (columns "fold", "chosen")."""
    seeds = frame[seed_col].unique() if seeds is None else seeds
    group_cols = list(group_cols)
    parts = []
    for i, (tune, rep) in enumerate(seed_folds(seeds, k)):
        pick = select_on_heldout(frame, tune_seeds=tune, report_seeds=rep, group_cols=group_cols,
                                 choice_col=choice_col, score_col=score_col, seed_col=seed_col)
        rows = frame.loc[frame[seed_col].astype(int).isin(rep)]
        keys = pick[[*group_cols, choice_col]]
        if group_cols:
            rows = rows.merge(keys, on=[*group_cols, choice_col], how="inner")
        else:
            rows = rows.loc[rows[choice_col] == keys[choice_col].iloc[0]]
        parts.append(rows.assign(fold=i, chosen=rows[choice_col]))
    return pd.concat(parts, ignore_index=True)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (nan entries stay nan and do not count in the family)."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adj, 1.0)
    return out


def t_pvalue(mean: float, se: float, k: int) -> float:
    """Two-sided p of mean / se on k - 1 degrees of freedom (nan without a positive finite se, k < 2)."""
    from scipy.stats import t

    if not (np.isfinite(mean) and np.isfinite(se) and se > 0 and k >= 2):
        return float("nan")
    return float(2 * t.sf(abs(mean / se), k - 1))


def saturated_edge(edge_reward: float, inner_reward: float, d_val: int) -> bool:
    """Whether an lr optimum on a grid edge is a plateau along lr (module text): its reward and the next lr
    inward's differ by less than half of one validation problem, 0.5 / d_val, below what the validation set
    resolves."""
    return bool(abs(edge_reward - inner_reward) < 0.5 / d_val)
