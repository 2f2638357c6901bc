"""What a tiny-LM study's curves show beside its verdict: the contrast of each larger n against the smallest
at every readout budget, read two ways, the smallest and largest n's gain per octave with where a plateau
check would hold, and the speed-or-ceiling readout of studies.fit.lag.

Two readings of a record reward at a budget C (both labelled wherever they are shown):
- **step**: the record of the last evaluation at or below C (what the preregistered rules read;
  isocompute.reports.claims.groupstd.records). On a curve evaluated at log-spaced points of its own length it
  lags the curve by up to the gap between two points, so a gain "from C/2 to C" can span more than an octave.
- **interpolated**: the record curve (running maximum over the evaluation points) joined linearly in log2 C,
  read at C (the reading studies.fit.nstar and studies.fit.lag use); at C past a run's last point, its last
  record.

Used by the stage-1 report (docs/TINY_STUDY.md, "What the data show") and stage 2's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

STEP, INTERP = "step", "interpolated"
READINGS = (STEP, INTERP)
TARGET_GAIN = 0.01
"""The plateau checks' gain per octave (isocompute.reports.tiny_study.PLATEAU_GAIN)."""


def interp_records(table: pd.DataFrame, budgets: Iterable[float], metric: str = "val_mean",
                   keys: tuple[str, ...] = ("n", "seed")) -> pd.DataFrame:
    """The interpolated record reward (module text) of every run at every budget: columns run_id, keys,
    budget, reward. A budget below a run's first evaluation after step 0 reads the record at step 0."""
    rows = []
    budgets = sorted(float(b) for b in budgets)
    for rid, g in table.sort_values("compute").groupby("run_id", sort=False):
        c = g["compute"].to_numpy(dtype=float)
        v = np.maximum.accumulate(g[metric].to_numpy(dtype=float))
        pos = c > 0
        head = {k: g[k].iloc[0] for k in keys}
        for b in budgets:
            if b <= 0 or not pos.any() or b < c[pos][0]:
                r = float(v[c <= max(b, 0.0)][-1]) if (c <= max(b, 0.0)).any() else float("nan")
            else:
                r = float(np.interp(np.log2(b), np.log2(c[pos]), v[pos]))
            rows.append({"run_id": rid, **head, "budget": b, "reward": r})
    return pd.DataFrame(rows, columns=["run_id", *keys, "budget", "reward"])


def contrasts(rec: pd.DataFrame, budgets: Sequence[float], ns: Sequence[int]) -> list[dict]:
    """Per budget and larger n: record(n) - record(smallest n), paired over seeds, mean with its 95%
    t-interval (isocompute.reports.claims.judge.t_interval)."""
    from isocompute.reports.claims.judge import t_interval

    small = min(ns)
    out = []
    for b in budgets:
        piv = rec.loc[np.isclose(rec["budget"], float(b))].pivot_table(index="seed", columns="n",
                                                                       values="reward")
        for n in ns:
            if n == small or n not in piv.columns or small not in piv.columns:
                continue
            iv = t_interval((piv[n] - piv[small]).dropna().to_numpy(dtype=float))
            out.append({"budget": float(b), "n": int(n), "mean": iv.estimate, "lo": iv.lo, "hi": iv.hi,
                        "k": iv.k})
    return out


def gains(rec: pd.DataFrame, budgets: Sequence[float], n: int) -> list[dict]:
    """The seed-mean record gain of `n` over each octave ending at a budget of `budgets` (budget / 2 must be
    in `rec` too): [{"budget", "gain"}]."""
    m = rec.loc[rec["n"] == n].groupby("budget")["reward"].mean()
    out = []
    for b in budgets:
        if float(b) in m.index and float(b) / 2 in m.index:
            out.append({"budget": float(b), "gain": float(m[float(b)] - m[float(b) / 2])})
    return out


def plateau_at(gs: Sequence[dict], target: float = TARGET_GAIN, last: int = 4) -> float | None:
    """log2 of the budget at which the gain per octave would fall below `target`, by a straight line through
    the last `last` gains against log2 budget (the arithmetic behind "the rule cannot say no at an
    affordable budget"); None when the gains do not fall or there are fewer than 2."""
    pts = [(np.log2(g["budget"]), g["gain"]) for g in gs][-last:]
    if len(pts) < 2:
        return None
    x, y = np.array(pts).T
    slope, icept = np.polyfit(x, y, 1)
    if y[-1] < target:
        return float(x[-1])
    if slope >= 0:
        return None
    return float((target - icept) / slope)


def arm_readings(curves: pd.DataFrame, budgets: Sequence[float], ns: Sequence[int], reps: int = 400,
                 lr_ref_batch: int | None = None) -> dict:
    """Everything this module reads off one arm's curves (reported seeds): contrasts per budget in both
    readings, the smallest and largest n's gains per octave (interpolated) with where a plateau check would
    hold, and studies.fit.lag's speed-or-ceiling report. `lr_ref_batch`: the curves' `lr` column holds a base
    lr at this batch under the sqrt rule (the stage-1 store's tables as isocompute.reports.tiny_study.Runs
    reads them), turned into each run's own lr for the lag against lr x steps. Empty dict without curves."""
    from isocompute.reports.claims.groupstd import records
    from studies.fit.lag import lag_report

    if curves is None or curves.empty:
        return {}
    budgets = [float(b) for b in budgets]
    step = records(curves, budgets, "val_mean", keys=("n", "seed"))
    halves = sorted(set(budgets) | {b / 2 for b in budgets})
    inter = interp_records(curves, halves)
    out = {"budgets": budgets, "contrasts": {STEP: contrasts(step, budgets, ns),
                                             INTERP: contrasts(inter, budgets, ns)}}
    step_h = records(curves, halves, "val_mean", keys=("n", "seed"))
    for name, n in (("small", min(ns)), ("large", max(ns))):
        gi = gains(inter, budgets, n)
        out[f"gains_{name}"] = {INTERP: gi, STEP: gains(step_h, budgets, n)}
        out[f"plateau_{name}"] = plateau_at(gi)
    lag_cols = [c for c in ("run_id", "n", "seed", "compute", "val_mean", "train_mean", "lr", "bp", "batch",
                            "m") if c in curves.columns]
    lagged = curves[lag_cols].copy()
    if lr_ref_batch and "lr" in lagged.columns:
        lagged["lr"] = lagged["lr"] * np.sqrt(lagged["batch"].astype(float) / lr_ref_batch)
    out["lag"] = lag_report(lagged, "val_mean", "n", reps=reps)
    return out
