"""`isocompute plan` (`make_plan`; its click command is studies.cli.plan): the paper's workflow as a
recommendation for one target budget (issue 14).

Pilot runs (ours, or TRL / verl logs) -> `studies.fit.frontier.FrontierFit` -> n*(C) from its sigmoid fit of
log2 n* vs log C (docs/PAPER.md step 3), snapped to the pilots' grid of n (inside the pilots' compute: their
frontier's n at the budget); bp from the pilots (their n-vs-bp
frontier when they vary bp), capped by --bp-max; m = C / (bp n). How sure: a bootstrap over runs (seeds),
resampled within each n, refits everything; how far out: the extrapolation check of the pilots themselves
at the same extrapolation factor (fit on frac of their compute, predict the rest: docs/PAPER.md step 4).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import click
import numpy as np
import pandas as pd

from studies.config import StudiesError
from studies.fit.frontier import FrontierFit, extrapolation_check

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


def _recommend_n(ff: FrontierFit, budget: float, cmax: float) -> tuple[float, float, str]:
    """(n on the grid, continuous n, method)."""
    grid = np.asarray(sorted(ff.curves_), dtype=float)
    if budget <= cmax:  # inside the pilots the frontier itself answers; its sigmoid smooths over switches
        at = ff.n_star_at(budget)
        if at[ff.by].iloc[0] is not None:
            n = float(at[ff.by].iloc[0])
            return n, n, "pilots' frontier at the budget (inside their compute)"
    if ff.n_star_fit_ is not None and ff.n_star_fit_.ok_:
        cont = float(ff.predict_n_star(np.array([budget]))[0])
        return _snap(cont, grid), cont, "n* sigmoid fit of the pilots' frontier"
    at = ff.n_star_at(min(budget, cmax))
    n = at[ff.by].iloc[0]
    if n is None:
        raise StudiesError("the pilots' frontier has no curve at the budget; give pilots nearer it")
    return float(n), float(n), "pilots' frontier at their largest compute (no n* sigmoid fit)"


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
            if fb.n_star_fit_ is not None and fb.n_star_fit_.ok_:
                bp = _snap(float(2.0 ** fb.n_star_fit_.predict(np.array([budget]))[0]), values)
            else:
                bp = float(fb.n_star_at(pilots["compute"].max())["bp"].iloc[0] or values[-1])
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
         max_compute: float | None = None, bootstrap: int = 100, seed: int = 0, level: float = 0.9,
         warn_factor: float = WARN_FACTOR) -> dict[str, Any]:
    """Recommended n, bp, m for `budget` rollouts from pilot runs (rows with compute <= max_compute when
    given), with bootstrap intervals, the expected reward and the pilots' own extrapolation error. Returns
    a JSON-serialisable dict (NaN -> None is left to the caller's encoder)."""
    if not budget > 0:
        raise StudiesError(f"--budget must be positive, got {budget}")
    if not 0 < level < 1:
        raise StudiesError(f"the interval level must be in (0, 1), got {level}")
    for col in ("run_id", "compute", "n", "bp", metric):
        if col not in table.columns:
            raise StudiesError(f"the pilots lack column {col}")
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
    try:
        ff = FrontierFit(metric=metric, by="n").fit(pilots)
    except ValueError as e:
        raise StudiesError(f"cannot fit the pilots: {e}") from None
    notes: list[str] = list(ff.warnings_)
    n_rec, n_cont, method = _recommend_n(ff, budget, cmax)
    bp_rec = _recommend_bp(pilots, n_rec, budget, metric, bp_max, notes)
    m_rec = int(budget // (bp_rec * n_rec))
    if m_rec < 1:
        notes.append(f"the budget buys less than one step of bp * n = {bp_rec * n_rec:g} rollouts")
    reward = _curve_at(ff, n_rec, budget)

    # bootstrap over runs, stratified by n: every statistic refitted on each resample
    rng = np.random.default_rng(seed)
    ns, rewards, every = [], [], []
    grid = np.asarray(sorted(ff.curves_), dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(int(bootstrap)):
            try:
                fb = FrontierFit(metric=metric, by="n").fit(_resample(pilots, rng))
                nb, _, _ = _recommend_n(fb, budget, cmax)
            except (ValueError, StudiesError):
                continue
            ns.append(nb)
            rewards.append(_curve_at(fb, n_rec, budget))
            every.append([_curve_at(fb, k, budget) for k in grid])
    q = [(1 - level) / 2, (1 + level) / 2]
    runs_per_n = pilots.groupby("n")["run_id"].nunique()
    boot: dict[str, Any] = {"reps": int(bootstrap), "ok": len(ns), "unit": "run, resampled within each n",
                            "level": level}
    if len(ns) >= 10 and runs_per_n.min() >= 2:
        l2 = np.log2(np.asarray(ns))
        n_int = [int(_snap(2.0 ** v, grid)) for v in np.quantile(l2, q)]
        r = np.asarray(rewards, dtype=float)
        r_int = [float(v) for v in np.nanquantile(r, q)] if np.isfinite(r).any() else [None, None]
        agree = float(np.mean(np.asarray(ns) == n_rec))
    else:
        n_int, r_int, agree = [None, None], [None, None], None
        notes.append("no bootstrap interval: it needs >= 2 runs (seeds) at every n"
                     if runs_per_n.min() < 2 else f"only {len(ns)} bootstrap refits succeeded")

    cert = _certainty(ff, pilots, grid, n_rec, n_cont, budget, np.asarray(every, dtype=float), level, metric,
                      enough=len(ns) >= 10 and runs_per_n.min() >= 2, notes=notes)

    factor = budget / cmax
    frac = float(min(0.5, max(1.0 / factor, 1.0 / 64)))
    check = extrapolation_check(pilots, metric, "n", frac=frac, full=ff)
    check_out = {k: check.get(k) for k in ("frac", "fit_max_compute", "status", "mean_abs_error_steps",
                                           "final_error_steps", "predictable", "max_reward_loss")}
    if factor > warn_factor:
        notes.append(f"the budget {budget:.4g} is {factor:.3g}x the pilots' largest compute {cmax:.4g} (more "
                     f"than {warn_factor:g}x): n* is extrapolated; a pilot nearer the budget would check it")
    at_max = ff.n_star_at(cmax)
    return {
        "budget": float(budget),
        "metric": metric,
        "recommended": {"n": int(n_rec), "bp": int(bp_rec), "m": m_rec, "batch": int(bp_rec * n_rec),
                        "n_continuous": n_cont},
        "n_interval": n_int,
        "n_agreement": agree,
        "expected_reward": reward,
        "reward_interval": r_int,
        "method": method,
        "bootstrap": boot,
        "pilots": {"runs": int(pilots["run_id"].nunique()), "max_compute": cmax,
                   "n": sorted(int(v) for v in pilots["n"].unique()),
                   "bp": sorted(int(v) for v in pilots["bp"].unique()),
                   "runs_per_n": {str(int(k)): int(v) for k, v in runs_per_n.items()}},
        "frontier_at_pilot_max": {"compute": cmax, "n": at_max["n"].iloc[0],
                                  "reward": float(at_max["reward"].iloc[0])},
        "extrapolation_factor": factor,
        "extrapolation_check": check_out,
        "certainty": cert,
        "warnings": notes,
    }


def _certainty(ff: FrontierFit, pilots: pd.DataFrame, grid: np.ndarray, n_rec: float, n_cont: float,
               budget: float, samples: np.ndarray, level: float, metric: str, enough: bool,
               notes: list[str]) -> dict[str, Any]:
    """How sure the recommendation is (studies.fit.certainty), from the bootstrap refits: the recommended set
    (every n whose reward interval at the budget reaches the best n's, or still rising toward it), the
    expected regret of n_rec, ties of the pilots' frontier, and n* on the grid's edge. Notes go to `notes`."""
    from studies.fit.certainty import (
        edge_note,
        expected_regret,
        final_slopes,
        flat_set,
        grid_edge,
        no_improvement,
        no_improvement_note,
        optimistic_reward,
        run_reward_samples,
        tie_mask,
    )

    point = np.asarray([_curve_at(ff, k, budget) for k in grid], dtype=float)
    none = no_improvement(pilots, metric, "n")
    ties = tie_mask(ff.frontier_["reward"].to_numpy(dtype=float), none)
    out: dict[str, Any] = {"none_improved": none, "frontier_ties": int(ties.sum()),
                           "frontier_points": int(ties.size), "edge": grid_edge(n_rec, grid.tolist()),
                           "expected_rewards": {str(int(k)): (float(v) if np.isfinite(v) else None)
                                                for k, v in zip(grid, point, strict=True)}}
    if none:
        notes.append(no_improvement_note(metric, "n", pilots.attrs.get("model"))
                     + "; no n can be recommended from these pilots")
    if enough and samples.ndim == 2 and samples.shape[0]:
        q = [(1 - level) / 2, (1 + level) / 2]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ivs = np.nanquantile(samples, q, axis=0)
        out["reward_intervals"] = {str(int(k)): [float(a), float(b)] if np.isfinite(a) else [None, None]
                                   for k, a, b in zip(grid, ivs[0], ivs[1], strict=True)}
        members, best, interval = flat_set(grid.tolist(), point, samples, level)
        # n still rising where its pilots end: its fit may stop short; the optimistic bound decides
        keys, last, _ = run_reward_samples(pilots, metric, "n", float(pilots["compute"].max()), reps=1)
        last_by = dict(zip(keys, last, strict=True))
        slopes = final_slopes(pilots, metric, "n")
        rising = {}
        for k in grid:
            end = ff.ranges_[k][1]
            if k in members or k not in last_by or k not in slopes or budget <= end:
                continue
            bound = optimistic_reward(last_by[k], slopes[k], math.log2(budget / end))
            if bound >= interval[0]:
                rising[float(k)] = {"last": float(last_by[k]), "slope_per_doubling": slopes[k],
                                    "doublings": math.log2(budget / end), "bound": bound}
        out["not_ruled_out"] = {str(int(k)): v for k, v in rising.items()}
        members = sorted(set(members) | set(rising))
        idx = int(np.argmin(np.abs(grid - n_rec)))
        bi = None if best is None else int(np.argmin(np.abs(grid - best)))
        out.update(recommended_set=[int(v) for v in members],
                   best_expected=None if best is None else int(best), best_reward_interval=interval,
                   expected_regret=expected_regret(samples, idx),
                   regret_if_best=None if bi is None else expected_regret(samples, bi))
        flat = [v for v in members if v not in rising]
        if len(flat) > 1:
            shown = ", ".join(f"{v:g}" for v in flat)
            notes.append(f"flat at the budget: the reward intervals of n in {{{shown}}} reach the best's "
                         f"{level:.0%} interval [{interval[0]:.4g}, {interval[1]:.4g}] "
                         f"(n = {best:g}); any of them is as good as these pilots can tell")
        if rising:
            shown = ", ".join(f"{k:g} (+{v['slope_per_doubling']:.3f})" for k, v in rising.items())
            notes.append(f"not ruled out: n = {shown} per doubling of compute, still rising where the pilots "
                         f"end; continued at that slope each would reach the best n's interval (>= "
                         f"{interval[0]:.4g}) by the budget, so the recommended set keeps them; a pilot "
                         "nearer the budget would tell")
    else:
        out.update(recommended_set=[int(n_rec)], best_expected=None, best_reward_interval=[None, None],
                   expected_regret=None, regret_if_best=None)
    e = edge_note(n_rec, grid.tolist(), "n", where="recommended")
    if e is None and grid.size > 1 and n_cont >= grid.max() * (1 - 1e-9):
        e = (f"the n* fit sits on the grid's ceiling (log2 n* = {np.log2(n_cont):.3g}, the largest n tried): "
             "extend the grid")
    if e:
        notes.append(e)
    return out


def print_plan(p: dict[str, Any], echo=click.echo) -> None:
    r = p["recommended"]
    level = int(round(100 * p["bootstrap"]["level"]))

    def iv(pair, fmt):
        return "n/a" if pair[0] is None else f"[{format(pair[0], fmt)}, {format(pair[1], fmt)}]"

    echo(f"budget C = {p['budget']:.4g} rollouts, metric {p['metric']} "
         f"({p['pilots']['runs']} pilot runs up to C = {p['pilots']['max_compute']:.4g})")
    echo(f"recommended: n = {r['n']}, bp = {r['bp']}, m = {r['m']} steps (batch {r['batch']}; "
         f"n* fit {r['n_continuous']:.3g})")
    agree = "" if p["n_agreement"] is None else f", {p['n_agreement']:.0%} of resamples agree"
    echo(f"  n {level}% interval {iv(p['n_interval'], 'g')}{agree}")
    er = p["expected_reward"]
    echo(f"  expected {p['metric']} {'n/a' if er is None or not math.isfinite(er) else format(er, '.4f')} "
         f"{level}% interval {iv(p['reward_interval'], '.4f')}")
    ex = p["extrapolation_check"]
    err = ex.get("mean_abs_error_steps")
    echo(f"  extrapolation {p['extrapolation_factor']:.3g}x beyond the pilots; the pilots' own check at "
         f"{ex['frac']:.3g} of their compute: " + (f"mean |err| {err:.3g} grid steps" if err is not None
                                                   else str(ex.get("status"))))
    echo(f"  method: {p['method']}")
    c = p.get("certainty") or {}
    if c.get("expected_regret") is not None:
        members = ", ".join(map(str, c.get("recommended_set") or []))
        echo(f"  recommended set (reward interval reaching the best n's {level}% one, or rising toward it): "
             f"{{{members}}}; expected regret of n = {r['n']}: {c['expected_regret']:.4f} {p['metric']}")
