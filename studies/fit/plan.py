"""`isocompute plan` (`make_plan`; its click command is studies.cli.plan): the paper's workflow as a
recommendation for one target budget.

Pilot runs (ours, or TRL / verl logs) -> `studies.fit.frontier.FrontierFit` -> the set of n that the pilots
cannot tell from the best at the budget (studies.fit.nstar's rule) -> the smallest n of that set; bp from
the pilots (their n-vs-bp frontier when they vary bp), capped by --bp-max; m = C / (bp n).

- Inside the pilots' compute (budget <= their largest compute) the set is measured: the n* of `fit` at that
  compute (seed-mean records, runs resampled), nothing is extrapolated and no refit is needed.
- Beyond it, each n's fitted sigmoid is carried to the budget, refitted on resamples of the runs (a
  bootstrap within each n) for the intervals; a prediction never falls below that n's own measured record
  (a checkpoint reached for less compute can be kept), so the expected reward of the recommendation is never
  below what the pilots measured for it. How far out: the pilots' own extrapolation check at the same
  factor (fit on a fraction of their compute, predict the rest: docs/PAPER.md step 4), worded by the one
  function `fit` uses (`studies.fit.extrapolation.extrapolation_verdict`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from studies.config import StudiesError
from studies.fit.certainty import edge_note
from studies.fit.extrapolation import extrapolation_check
from studies.fit.frontier import FrontierFit
from studies.fit.nstar import LEVEL, flat_set, intervals, regret, set_text

WARN_FACTOR = 4.0
"""A budget more than this many times the pilots' largest compute is an extrapolation worth a warning: the
paper's extrapolation checks (and ours, `fit`) go from a quarter to a tenth of the data's compute."""


def _snap(value: float, grid: np.ndarray) -> float:
    """The grid value nearest to `value` in log2 (configurations are log-spaced)."""
    return float(grid[int(np.argmin(np.abs(np.log2(grid) - math.log2(value))))])


def _curve_at(ff: FrontierFit, key, C: float) -> float:
    fit = ff.curves_.get(key)
    if fit is None:
        return math.nan
    if fit.ok_:
        return float(fit.predict(np.array([C]))[0])
    return float(ff.record_curve(key, np.array([C]))[0])


def _recommend_bp(pilots: pd.DataFrame, n: float, budget: float, metric: str, bp_max: int | None,
                  notes: list[str]) -> int:
    at_n = pilots.loc[pilots["n"].astype(float) == n]
    values = np.asarray(sorted(at_n["bp"].dropna().unique()), dtype=float)
    if values.size == 0:
        values = np.asarray(sorted(pilots["bp"].dropna().unique()), dtype=float)
    bp = float(values[-1])
    if values.size > 1:
        try:
            fb = FrontierFit(metric=metric, by="bp").fit(at_n)
            if fb.n_star_shape_ == "sigmoid" and budget > pilots["compute"].max():
                bp = _snap(float(2.0 ** fb.n_star_fit_.predict(np.array([budget]))[0]), values)
            else:
                at = fb.n_star_at(min(budget, pilots["compute"].max()))
                bp = float(min(at["set"].iloc[0]) if at["set"].iloc[0] else values[-1])
        except ValueError as e:
            notes.append(f"no bp frontier at n={n:g} ({e}); largest pilot bp used")
    if bp_max is not None and bp > bp_max:
        notes.append(f"bp {bp:g} of the pilots capped at --bp-max {bp_max}: the expected reward is that "
                     f"of the pilots' bp")
        bp = float(bp_max)
    return int(bp)


def _resample(pilots: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Runs drawn with replacement within each n (the unit of noise is a run, i.e. a seed)."""
    parts = []
    runs = pilots.groupby("n", sort=True)["run_id"].unique()
    groups = dict(tuple(pilots.groupby("run_id", sort=False)))
    for ids in runs:
        for j, rid in enumerate(rng.choice(ids, size=len(ids), replace=True)):
            parts.append(groups[rid].assign(run_id=f"{rid}~{j}"))
    return pd.concat(parts, ignore_index=True)


def make_plan(table: pd.DataFrame, budget: float, metric: str = "val_mean", bp_max: int | None = None,
              max_compute: float | None = None, bootstrap: int = 100, seed: int = 0, level: float = LEVEL,
              warn_factor: float = WARN_FACTOR, progress: Callable[[str, int, int], None] | None = None,
              lr_rule: str = "sqrt", lr: float | None = None) -> dict[str, Any]:
    """Recommended n, bp, m for `budget` rollouts from pilot runs (rows with compute <= max_compute when
    given): the smallest n of the set the pilots cannot tell from the best there, its expected reward and
    interval, the set and its regret, and beyond the pilots their own extrapolation check; its learning rate
    under `lr_rule` from the pilots' own lr (or `lr`, the pilots' at their batch) and the n schedule along
    the pilots' n*(C) where n* rises to it inside the budget (studies.fit.emit). `progress(what, done,
    total)` is called as work proceeds (the bootstrap refits take seconds). Returns a JSON-serialisable dict
    (NaN -> None is left to the caller's encoder)."""
    from studies.fit.emit import pilots_lr, schedule_from_frontier

    if not budget > 0:
        raise StudiesError(f"--budget must be positive, got {budget}")
    if not 0 < level < 1:
        raise StudiesError(f"the interval level must be in (0, 1), got {level}")
    for col in ("run_id", "compute", "n", "bp", metric):
        if col not in table.columns:
            raise StudiesError(f"the pilots lack column {col}")
    tell = progress or (lambda what, done, total: None)
    pilots = table.copy()
    pilots["compute"] = pd.to_numeric(pilots["compute"], errors="coerce")
    if max_compute is not None:
        pilots = pilots.loc[pilots["compute"] <= max_compute * (1 + 1e-9)]
    pilots = pilots.loc[pilots["compute"].notna()].reset_index(drop=True)
    if pilots.empty or pilots["compute"].max() <= 0:
        upto = f" up to {max_compute:g}" if max_compute else ""
        raise StudiesError(f"no pilot rows with compute > 0{upto}")
    if pilots["n"].nunique() < 2:
        raise StudiesError(f"the pilots have one value of n ({pilots['n'].iloc[0]}); plan needs runs at "
                           f"two or more n to place n*(C)")
    cmax = float(pilots["compute"].max())
    inside = budget <= cmax * (1 + 1e-9)
    tell(f"fitting {pilots['run_id'].nunique()} pilot runs", 0, 1)
    try:
        ff = FrontierFit(metric=metric, by="n", level=level).fit(pilots)
    except ValueError as e:
        raise StudiesError(f"cannot fit the pilots: {e}") from None
    notes: list[str] = list(ff.warnings_)
    grid = np.asarray(sorted(ff.curves_), dtype=float)
    runs_per_n = pilots.groupby("n")["run_id"].nunique()
    at = ff._sets([min(budget, cmax)])  # measured: at the budget, or at the pilots' end beyond it
    measured = at.point[0]  # (K,) each n's seed-mean record at min(budget, cmax)
    keys = [float(k) for k in at.keys]
    rec_at = {k: float(v) for k, v in zip(keys, measured, strict=True)}
    boot: dict[str, Any] = {"reps": 0, "ok": 0, "unit": "run, resampled within each n", "level": level}
    if inside:
        point, samples = measured, at.samples[:, 0, :]
        boot.update(reps=at.reps, ok=at.reps)
        method = ("measured at the budget (inside the pilots' compute): the smallest n the pilots cannot "
                  "tell from the best")
    else:
        point = np.array([max(_curve_at(ff, k, budget), rec_at.get(float(k), -np.inf)) for k in grid])
        rows = []
        rng = np.random.default_rng(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(int(bootstrap)):
                tell("bootstrap refits of the pilots' curves", i, int(bootstrap))
                try:
                    fb = FrontierFit(metric=metric, by="n", reps=0).fit(_resample(pilots, rng))
                except ValueError:
                    continue
                rows.append([max(_curve_at(fb, k, budget), rec_at.get(float(k), -np.inf)) for k in grid])
            tell("bootstrap refits of the pilots' curves", int(bootstrap), int(bootstrap))
        samples = np.asarray(rows, dtype=float).reshape(-1, grid.size)
        boot.update(reps=int(bootstrap), ok=len(rows))
        method = ("each n's fitted sigmoid carried to the budget (never below its measured record), refitted "
                  "on resamples of the runs; the smallest n the pilots cannot tell from the best")
    enough = samples.shape[0] >= 10 and runs_per_n.min() >= 2
    if not enough:
        notes.append("no interval: it needs >= 2 runs (seeds) at every n" if runs_per_n.min() < 2 else
                     f"only {samples.shape[0]} bootstrap refits succeeded")
        samples = np.empty((0, grid.size))
    cert = _certainty(ff, pilots, grid, budget, point, samples, level, metric, inside, notes)
    members = cert["recommended_set"]
    flat = [v for v in members if str(v) not in cert["not_ruled_out"]]
    n_rec = float(min(flat)) if flat else float(grid[int(np.nanargmax(point))])
    k_rec = int(np.argmin(np.abs(grid - n_rec)))
    r = regret(samples, k_rec, int(runs_per_n.min()), level)
    cert.update(expected_regret=r["mean"], expected_regret_interval=r["interval"])
    if r["note"] and samples.size:
        notes.append(r["note"])
    lo, hi = intervals(point, samples, level)
    reward = float(point[k_rec])
    r_int = [float(lo[k_rec]), float(hi[k_rec])] if samples.size else [None, None]
    bp_rec = _recommend_bp(pilots, n_rec, budget, metric, bp_max, notes)
    m_rec = int(budget // (bp_rec * n_rec))
    if m_rec < 1:
        notes.append(f"the budget buys less than one step of bp * n = {bp_rec * n_rec:g} rollouts")
    e = edge_note(n_rec, grid.tolist(), "n", where="recommended")
    if e:
        notes.append(e)

    factor = budget / cmax
    check_out = None
    if not inside:
        frac = float(min(0.5, max(1.0 / factor, 1.0 / 64)))
        tell("the pilots' own extrapolation check", 0, 1)
        check = extrapolation_check(pilots, metric, "n", frac=frac, full=ff)
        check_out = {k: check.get(k) for k in ("frac", "fit_max_compute", "status", "mean_abs_error_steps",
                                               "final_error_steps", "predictable", "predictable_mean",
                                               "predictable_largest", "max_reward_loss", "points")}
        if factor > warn_factor:
            notes.append(f"the budget {budget:.4g} is {factor:.3g}x the pilots' largest compute {cmax:.4g} "
                         f"(more than {warn_factor:g}x): the rewards are extrapolated; a pilot nearer the "
                         "budget would check them")
    j_best = at.best[0]
    kb = at.keys.index(j_best) if j_best is not None else None
    n_sig = (float(ff.predict_n_star(np.array([budget]))[0]) if ff.n_star_shape_ == "sigmoid" else None)
    lr_out = pilots_lr(pilots, int(n_rec), bp_rec, lr_rule, lr)
    if lr_out["note"]:
        notes.append(lr_out["note"])
    return {
        "budget": float(budget),
        "metric": metric,
        "recommended": {"n": int(n_rec), "bp": int(bp_rec), "m": m_rec, "batch": int(bp_rec * n_rec)},
        "recommended_set": [int(v) for v in members],
        "n_interval": [int(min(members)), int(max(members))] if members else [None, None],
        "expected_reward": reward,
        "reward_interval": r_int,
        "method": method,
        "inside_pilots": bool(inside),
        "n_star_sigmoid": n_sig,
        "bootstrap": boot,
        "pilots": {"runs": int(pilots["run_id"].nunique()), "max_compute": cmax,
                   "n": sorted(int(v) for v in pilots["n"].unique()),
                   "bp": sorted(int(v) for v in pilots["bp"].unique()),
                   "runs_per_n": {str(int(k)): int(v) for k, v in runs_per_n.items()}},
        "measured": {"compute": float(at.compute[0]), "n": None if kb is None else int(j_best),
                     "set": [int(v) for v in at.sets[0]],
                     "reward": None if kb is None else float(at.point[0, kb]),
                     "reward_interval": [None, None] if kb is None else [float(at.lo[0, kb]),
                                                                         float(at.hi[0, kb])],
                     "recommended_record": rec_at.get(float(n_rec))},
        "extrapolation_factor": factor,
        "extrapolation_check": check_out,
        "certainty": cert,
        "lr": lr_out,
        "schedule": schedule_from_frontier(ff, int(n_rec), budget),
        "warnings": notes,
    }


def _certainty(ff: FrontierFit, pilots: pd.DataFrame, grid: np.ndarray, budget: float, point: np.ndarray,
               samples: np.ndarray, level: float, metric: str, inside: bool, notes: list[str]
               ) -> dict[str, Any]:
    """How sure the recommendation is: the recommended set (studies.fit.nstar's rule on the rewards at the
    budget, plus, beyond the pilots, every n still rising toward the best where its pilots end), the best,
    the rewards per n and their intervals, ties of the pilots' frontier. Notes go to `notes`."""
    from studies.fit.certainty import final_slopes, no_improvement_note, optimistic_reward

    none = ff.nstar_.none_improved
    out: dict[str, Any] = {"none_improved": none, "frontier_ties": int(ff.frontier_["tie"].sum()),
                           "frontier_points": int(len(ff.frontier_)),
                           "expected_rewards": {str(int(k)): (float(v) if np.isfinite(v) else None)
                                                for k, v in zip(grid, point, strict=True)}}
    if none:
        notes.append(no_improvement_note(metric, "n", pilots.attrs.get("model"))
                     + "; no n can be recommended from these pilots: the set is every n")
    lo, hi = intervals(point, samples, level)
    if samples.size:
        out["reward_intervals"] = {str(int(k)): [float(a), float(b)] if np.isfinite(a) else [None, None]
                                   for k, a, b in zip(grid, lo, hi, strict=True)}
    members, best, interval = flat_set(grid.tolist(), point, samples, level)
    if none:
        members = [float(k) for k, v in zip(grid, point, strict=True) if np.isfinite(v)]
    rising: dict[float, dict] = {}
    if not inside and samples.size and not none:
        # an n still rising where its pilots end: its fit may stop short; the optimistic bound decides
        cmax = float(pilots["compute"].max())
        last = ff._sets([cmax])
        last_by = {float(k): float(v) for k, v in zip(last.keys, last.point[0], strict=True)}
        slopes = final_slopes(pilots, metric, "n")
        for k in grid:
            end = ff.ranges_[k][1]
            if k in members or k not in last_by or k not in slopes or budget <= end:
                continue
            bound = optimistic_reward(last_by[k], slopes[k], math.log2(budget / end))
            if bound >= interval[0]:
                rising[float(k)] = {"last": last_by[k], "slope_per_doubling": slopes[k],
                                    "doublings": math.log2(budget / end), "bound": bound}
    out["not_ruled_out"] = {str(int(k)): v for k, v in rising.items()}
    members = sorted(set(members) | set(rising))
    bi = None if best is None else int(np.argmin(np.abs(grid - best)))
    out.update(recommended_set=[int(v) for v in members], best_expected=None if best is None else int(best),
               best_reward_interval=interval if samples.size else [None, None],
               regret_if_best=None if bi is None else regret(
                   samples, bi, int(pilots.groupby("n")["run_id"].nunique().min()), level)["mean"])
    flat = [v for v in members if v not in rising]
    if len(flat) > 1 and not none:
        notes.append(f"flat at the budget: the {level:.0%} reward intervals of n = {set_text(flat, grid)} "
                     f"reach the best's [{interval[0]:.4g}, {interval[1]:.4g}] (n = {best:g}); any of them "
                     "is as good as these pilots can tell: the smallest is recommended")
    if rising:
        shown = ", ".join(f"{k:g} (+{v['slope_per_doubling']:.3f})" for k, v in rising.items())
        notes.append(f"not ruled out: n = {shown} per doubling of compute, still rising where the pilots "
                     f"end; continued at that slope each would reach the best n's interval (>= "
                     f"{interval[0]:.4g}) by the budget, so the recommended set keeps them; a pilot "
                     "nearer the budget would tell")
    return out


def print_plan(p: dict[str, Any], echo: Callable[[str], None]) -> None:
    """A plan as text: the recommendation and its set, the expected reward (beside what the pilots measured),
    where the budget lies against the pilots, and the pilots' own extrapolation check beyond them."""
    from studies.fit.extrapolation import extrapolation_verdict

    r = p["recommended"]
    level = int(round(100 * p["bootstrap"]["level"]))

    def iv(pair, fmt):
        return "n/a" if pair[0] is None else f"[{format(pair[0], fmt)}, {format(pair[1], fmt)}]"

    echo(f"budget C = {p['budget']:.4g} rollouts, metric {p['metric']} "
         f"({p['pilots']['runs']} pilot runs up to C = {p['pilots']['max_compute']:.4g})")
    members = p.get("recommended_set") or [r["n"]]
    shown = set_text(members, p["pilots"]["n"])
    tie = f" (the smallest of the set n = {shown}: the pilots cannot tell them apart)" if len(members) > 1 \
        else ""
    echo(f"recommended: n = {r['n']}, bp = {r['bp']}, m = {r['m']} steps (batch {r['batch']}){tie}")
    lr = p.get("lr") or {}
    if lr.get("lr") is not None:
        echo(f"  learning rate {lr['lr']:.4g} ({lr['rule']} rule from the pilots' {lr['pilot_lr']:.4g} at "
             f"batch {lr['pilot_batch']})")
    if p.get("schedule"):
        echo("  n schedule along the pilots' n*(C): " + ", ".join(
            f"n = {n} from C = {c:.4g}" for c, n in p["schedule"]["phases"]))
    er = p["expected_reward"]
    echo(f"  expected {p['metric']} of n = {r['n']}: "
         f"{'n/a' if er is None or not math.isfinite(er) else format(er, '.4f')} {level}% interval "
         f"{iv(p['reward_interval'], '.4f')}")
    fm = p["measured"]
    if fm["reward"] is not None:
        own = fm.get("recommended_record")
        mine = "" if own is None or not math.isfinite(own) or fm["n"] == r["n"] else \
            f"; n = {r['n']}: {own:.4f}"
        echo(f"  measured by the pilots at C = {fm['compute']:.4g}: best n = {fm['n']} {fm['reward']:.4f} "
             f"{level}% interval {iv(fm['reward_interval'], '.4f')}{mine}; set n = "
             f"{set_text(fm['set'], p['pilots']['n'])}")
    c = p.get("certainty") or {}
    if c.get("expected_regret") is not None:
        r_iv = c.get("expected_regret_interval")
        echo(f"  expected regret of n = {r['n']}: {c['expected_regret']:.4f} {p['metric']}"
             + (f" {level}% interval {iv(r_iv, '.4f')}" if r_iv else ""))
    if p.get("inside_pilots"):
        echo(f"  inside the pilots' compute (the budget is {p['extrapolation_factor']:.3g}x their largest): "
             "measured, nothing extrapolated")
    else:
        echo(f"  extrapolation {p['extrapolation_factor']:.3g}x beyond the pilots; their own check at "
             f"{p['extrapolation_check']['frac']:.3g} of their compute: "
             + extrapolation_verdict(p["extrapolation_check"]))
        if p.get("n_star_sigmoid") is not None:
            echo(f"  the n* sigmoid of the pilots' determined frontier says {p['n_star_sigmoid']:.3g} at the "
                 "budget (the paper's rule; the recommendation reads the per-n curves)")
    echo(f"  method: {p['method']}")
