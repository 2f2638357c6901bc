"""`isocompute predict`: the compute-optimal n*(C) up to a target budget from pilot runs limited to a small
fraction of it (docs/PAPER.md names "statistics measured early that predict the allocation" as
open).

Two rules, both from the same pilots (runs of every n of the grid, each with budget <= fraction x target):

- `paper`: the paper's workflow (Section 4 step 4): fit the frontier of the pilots (`FrontierFit`), then
  extrapolate the sigmoid of log2 n* vs log C (`FrontierFit.predict_n_star`).
- `signal` (default): the zero-variance rule. A GRPO group carries no gradient when its n rewards agree; as
  training polarises pass@1 (finding 5) the share of such groups, `zero_var_frac` z(n, C), rises, faster for
  small n. Two measured regularities make a closed form:
    (i)  along the pilot frontier the chosen n keeps z near a level z* (measured: the median of
         z(n*(C), C) over the determined pilot frontier points: calibrated per case, not tuned);
    (ii) the compute at which an n reaches z* grows as a power of n: log C_z*(n) = a + gamma log n
         (fitted by least squares on the n whose pilot curve crosses z*).
  Hence n*(C) = (C / e^a)^(1 / gamma), clipped to the grid and snapped to its nearest value. The statistic is
  the one TRL logs as `frac_reward_zero_std`, so the rule also runs on users' pilot logs.
If the signal rule lacks data (fewer than two crossings), it falls back to the paper rule and says so.

Everything runs through the one pipeline (RunConfig -> sweep -> run_sweep -> ResultStore -> FrontierFit);
the evaluation against the swept n*(C) of full-budget runs is a report: isocompute/reports/predict_eval.py
(`isocompute report predict`); the `predict` command is in studies/cli.py.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studies.config import RunConfig, StudiesError

PILOT_FRACTION = 0.05
"""Default share of the target budget that each pilot run may spend (the predict command's contract)."""
GRID_OCTAVES = 10
"""The prediction grid spans the last GRID_OCTAVES factors of 2 below the budget ..."""
GRID_PER_OCTAVE = 2
"""... with this many log-spaced points per factor of 2 (21 points)."""
UPPER_SHARE = 0.7
"""Evaluation: hit rates count grid points in the upper 70% of the log-compute range."""
HIT_STEPS = 1.0
"""A prediction hits when it is within this many grid steps (a factor 2 for powers of two) of the truth."""
RULES = ("signal", "paper")
ZVF = "zero_var_frac"


def prediction_grid(budget: float, octaves: int = GRID_OCTAVES, per_octave: int = GRID_PER_OCTAVE
                    ) -> np.ndarray:
    """Log-spaced computes budget * 2^-octaves .. budget (octaves * per_octave + 1 points)."""
    return float(budget) * 2.0 ** np.linspace(-octaves, 0, octaves * per_octave + 1)


def upper_mask(C: np.ndarray, share: float = UPPER_SHARE) -> np.ndarray:
    """Points in the upper `share` of the log-compute range of the grid C."""
    lc = np.log(np.asarray(C, dtype=float))
    return lc >= lc.max() - share * (lc.max() - lc.min()) - 1e-12


def snap(n: np.ndarray, grid: Sequence[float]) -> np.ndarray:
    """Nearest grid value in log2 of each continuous n."""
    g = np.sort(np.asarray(grid, dtype=float))
    idx = np.abs(np.log2(np.asarray(n, dtype=float))[:, None] - np.log2(g)[None, :]).argmin(1)
    return g[idx]


# ----------------------------------------------------------------------------------------------- pilots
def pilot_configs(base: RunConfig, n: Sequence[int], budget: int, fraction: float = PILOT_FRACTION,
                  seeds: int = 4, seed_offset: int = 0) -> tuple[list[RunConfig], list[int]]:
    """The pilot runs of an n-vs-m grid (studies.sweeps), each with budget floor(fraction * budget), seeds
    seed_offset .. seed_offset + seeds - 1 (problem_seed = seed, paired across n). Values of n for which one
    step already exceeds the pilot budget are left out; returns (configs, n values left out)."""
    from studies.sweeps import build_sweep

    if not 0 < fraction <= 1:
        raise StudiesError(f"--pilot-fraction must lie in (0, 1], got {fraction}")
    pb = int(math.floor(fraction * budget))
    ok = [v for v in n if base.bp * (v + base.n_est) <= pb]
    skipped = [v for v in n if v not in ok]
    if len(ok) < 2:
        raise StudiesError(f"a pilot budget of {pb} rollouts ({fraction} x {budget}) pays one step of fewer "
                           f"than two n of {list(n)} at bp = {base.bp}; raise --pilot-fraction or lower --bp")
    cfgs = build_sweep("n-vs-m", base.replace(budget=pb, n=ok[0]), n=ok, seeds=seeds, budget=pb)
    return offset_seeds(cfgs, seed_offset, base.problem_seed), skipped


def offset_seeds(cfgs: list[RunConfig], offset: int, fixed_problem_seed: int | None = None
                 ) -> list[RunConfig]:
    """Shift the seeds of a sweep by `offset` (seed s -> s + offset, problem_seed likewise unless fixed), so
    rules are evaluated on seeds they were not designed on."""
    if not offset:
        return cfgs
    return [c.replace(seed=c.seed + offset,
                      problem_seed=c.seed + offset if fixed_problem_seed is None else fixed_problem_seed)
            for c in cfgs]


def run_configs(configs: list[RunConfig], out: Path, jobs: int | None = None, progress: bool = False,
                desc: str = "pilots") -> pd.DataFrame:
    """Run the configs through the pipeline into `out` (resumable) and return their learning-curve table."""
    from studies.executors import run_sweep
    from studies.io import LeftOutRunsWarning, load_table
    from studies.store import ResultStore

    with ResultStore(out, study="n-vs-m") as store:
        s = run_sweep(configs, store, jobs=jobs, progress=progress, desc=desc)
    if s.failed:
        rid, why = next(iter(s.failed.items()))
        raise StudiesError(f"{len(s.failed)} run(s) failed, e.g. {rid}: {why}")
    ids = {c.run_id for c in configs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LeftOutRunsWarning)
        table = load_table(out)
    return table.loc[table["run_id"].isin(ids)].reset_index(drop=True)


# ------------------------------------------------------------------------------------------ the statistic
def seed_mean_curves(table: pd.DataFrame, col: str, by: str = "n"
                     ) -> dict[Any, tuple[np.ndarray, np.ndarray]]:
    """{by value: (compute, seed-mean of col)} over the evaluation points shared by the runs (compute > 0)."""
    df = table.loc[pd.to_numeric(table["compute"], errors="coerce") > 0, [by, "compute", col]].dropna()
    out = {}
    for v, g in df.groupby(by, sort=True):
        m = g.groupby("compute", sort=True)[col].mean()
        out[v] = (m.index.to_numpy(dtype=float), m.to_numpy(dtype=float))
    return out


def value_at(C: np.ndarray, y: np.ndarray, c: float) -> float:
    """The curve (C, y) at compute c: linear in log C between points, the last value held beyond them; nan
    before the first point."""
    if c < C[0] * (1 - 1e-9):
        return float("nan")
    return float(np.interp(np.log(c), np.log(C), y))


def crossing(C: np.ndarray, z: np.ndarray, level: float) -> float | None:
    """First compute where the running maximum of z reaches `level` (log-linear interpolation); None if never.
    The running maximum makes a noisy, nearly monotone curve cross once."""
    zm = np.maximum.accumulate(z)
    above = np.nonzero(zm >= level)[0]
    if above.size == 0:
        return None
    i = int(above[0])
    if i == 0:
        return float(C[0]) if z[0] == level else None  # already above at the first point: unknown crossing
    lc0, lc1, z0, z1 = math.log(C[i - 1]), math.log(C[i]), zm[i - 1], zm[i]
    t = 0.0 if z1 == z0 else (level - z0) / (z1 - z0)
    return float(math.exp(lc0 + t * (lc1 - lc0)))


@dataclass
class SignalRule:
    """The zero-variance rule (module docstring): z* from the pilot frontier, C_z*(n) = e^a n^gamma.

    After `fit(table)`: `z_star_`, `a_`, `gamma_`, `crossings_` {n: C}, `grid_` (the n values),
    `status_` ("ok" or why not), `pilot_frontier_` (FrontierFit of the pilots)."""

    metric: str = "val_mean"
    by: str = "n"
    z_star: float | None = None
    """Fixed level instead of the calibrated one (for tests and the mechanism study)."""
    crossings_: dict = field(default_factory=dict)

    def fit(self, table: pd.DataFrame, frontier=None) -> SignalRule:
        from studies.fit.frontier import FrontierFit

        if ZVF not in table.columns:
            raise StudiesError(f"the signal rule needs the {ZVF} column (TRL: frac_reward_zero_std)")
        self.pilot_frontier_ = frontier or FrontierFit(metric=self.metric, by=self.by).fit(table)
        curves = seed_mean_curves(table, ZVF, self.by)
        self.grid_ = sorted(float(v) for v in curves)
        fr = self.pilot_frontier_.frontier_
        det = fr.loc[fr["determined"].to_numpy(dtype=bool)]
        zs = []
        for c, v in zip(det["compute"], det[self.by], strict=True):
            if v in curves:
                zs.append(value_at(*curves[v], float(c)))
        zs = [z for z in zs if np.isfinite(z)]
        self.z_star_ = float(self.z_star) if self.z_star is not None else (
            float(np.median(zs)) if zs else float("nan"))
        self.a_ = self.gamma_ = float("nan")
        if not np.isfinite(self.z_star_):
            self.status_ = "no determined pilot frontier points to calibrate z*"
            return self
        self.crossings_ = {}
        for v, (C, z) in curves.items():
            c = crossing(C, z, self.z_star_)
            if c is not None:
                self.crossings_[float(v)] = c
        if len(self.crossings_) < 2:
            self.status_ = f"{len(self.crossings_)} pilot curve(s) reach z* = {self.z_star_:.3f} (need 2)"
            return self
        ln = np.log(np.array(list(self.crossings_)))
        lc = np.log(np.array(list(self.crossings_.values())))
        gamma, a = np.polyfit(ln, lc, 1)
        if not gamma > 0:
            self.status_ = f"the crossing compute does not grow with n (gamma = {gamma:.3g})"
            return self
        self.gamma_, self.a_ = float(gamma), float(a)
        self.status_ = "ok"
        return self

    @property
    def ok_(self) -> bool:
        return self.status_ == "ok"

    def predict_n_star(self, C) -> np.ndarray:
        """Continuous n*(C) = (C / e^a)^(1/gamma), clipped to the n grid."""
        C = np.asarray(C, dtype=float)
        n = np.exp((np.log(C) - self.a_) / self.gamma_)
        return np.clip(n, min(self.grid_), max(self.grid_))

    def params(self) -> dict[str, Any]:
        return {"z_star": self.z_star_, "a": self.a_, "gamma": self.gamma_, "exponent": 1 / self.gamma_
                if np.isfinite(self.gamma_) else None,
                "crossings": [{"n": plain_int(k), "compute": v} for k, v in sorted(self.crossings_.items())]}


def plain_int(v: Any) -> Any:
    """8.0 -> 8 (grid values are integers); other floats, NaN included, stay floats."""
    f = float(v)
    return int(f) if f.is_integer() else f


# ------------------------------------------------------------------------------------------------ predict
def predict_from_table(table: pd.DataFrame, budget: int, metric: str = "val_mean", rule: str = "signal",
                       by: str = "n", octaves: int = GRID_OCTAVES) -> dict[str, Any]:
    """The `isocompute predict --json` object from pilot runs: n*(C) on `prediction_grid(budget)` by `rule`,
    the other rule's prediction beside it, and the pilot statistics it used."""
    from studies.fit.frontier import FrontierFit, params_json, usable_fit

    if rule not in RULES:
        raise StudiesError(f"unknown rule {rule!r}; choose one of {', '.join(RULES)}")
    try:
        ff = FrontierFit(metric=metric, by=by).fit(table)
    except ValueError as e:
        raise StudiesError(f"cannot fit the pilots: {e}") from None
    grid_n = sorted(float(v) for v in ff.curves_)
    C = prediction_grid(budget, octaves)
    preds: dict[str, np.ndarray | None] = {}
    status: dict[str, str] = {}
    if ff.n_star_fit_ is not None and usable_fit(ff.n_star_fit_):
        preds["paper"] = np.clip(ff.predict_n_star(C), min(grid_n), max(grid_n))
        status["paper"] = ("ok" if ff.n_star_fit_.ok_ else
                           f"{ff.n_star_fit_.status_}: n* constant where determined")
    else:
        preds["paper"] = None
        status["paper"] = ("no n* fit of the pilots" if ff.n_star_fit_ is None else
                           f"n* fit of the pilots {ff.n_star_fit_.status_}")
    sig = None
    if ZVF in table.columns:
        sig = SignalRule(metric=metric, by=by).fit(table, frontier=ff)
        preds["signal"] = sig.predict_n_star(C) if sig.ok_ else None
        status["signal"] = sig.status_
    else:
        preds["signal"], status["signal"] = None, f"no {ZVF} column in the pilots"
    used = rule
    if preds[rule] is None:
        other = "paper" if rule == "signal" else "signal"
        if preds[other] is None:
            raise StudiesError(f"no rule can predict from these pilots: {status}")
        used = other
    n_pred = snap(preds[used], grid_n)
    pcmax = float(pd.to_numeric(table["compute"]).max())
    out: dict[str, Any] = {
        "budget": int(budget),
        "rule": used,
        "rule_requested": rule,
        "metric": metric,
        "n_star": [{"compute": float(c), by: plain_int(v)} for c, v in zip(C, n_pred, strict=True)],
        "n_star_continuous": [float(v) for v in preds[used]],
        "pilots": {
            "runs": int(table["run_id"].nunique()),
            "n": [plain_int(v) for v in grid_n],
            "max_compute": pcmax,
            "fraction": pcmax / float(budget),
            "frontier": [{"compute": float(c), "reward": float(r), by: plain_int(v),
                          "set": [plain_int(m) for m in s], "determined": bool(d)} for c, r, v, s, d in
                         zip(ff.frontier_["compute"], ff.frontier_["reward"], ff.frontier_[by],
                             ff.frontier_["set"], ff.frontier_["determined"], strict=True)],
        },
        "status": status,
        "alternatives": {k: ([{"compute": float(c), by: plain_int(v)} for c, v in zip(C, snap(p, grid_n),
                                                                                 strict=True)]
                             if p is not None else None) for k, p in preds.items()},
    }
    if ff.n_star_fit_ is not None:
        out["paper_n_star_fit"] = {"params": params_json(ff.n_star_fit_), "r2": ff.n_star_fit_.r2_}
    if sig is not None:
        out["signal"] = sig.params()
        curves = seed_mean_curves(table, ZVF, by)
        out["pilots"]["zero_var_frac_final"] = {str(plain_int(k)): float(z[-1])
                                                for k, (_, z) in curves.items()}
    if "val_zero_frac" in table.columns:
        last = table.sort_values("compute").groupby(by)["val_zero_frac"].last()
        out["pilots"]["val_zero_frac_final"] = {str(plain_int(k)): float(v) for k, v in last.items()}
    from studies.fit.certainty import final_slopes

    slope = {str(plain_int(k)): v for k, v in final_slopes(table, metric, by).items()}
    if slope:
        out["pilots"]["reward_slope_per_octave"] = slope
    out["certainty"] = prediction_certainty(out, table, ff, by)
    return out


def prediction_certainty(rep: dict[str, Any], table: pd.DataFrame, ff, by: str = "n") -> dict[str, Any]:
    """How sure a prediction is (studies.fit.certainty): the pilots' own frontier (ties, none improved, the
    flat set at their largest compute), the predicted n* at the budget on the grid's edge, and whether the two
    rules agree at the budget (more than HIT_STEPS grid steps apart: the prediction is uncertain)."""
    from studies.files import jsonable
    from studies.fit.certainty import assess, edge_note, grid_edge

    metric = rep["metric"]
    cert = jsonable(assess(ff.nstar_, -1, metric=metric, by=by, model=table.attrs.get("model")))
    cert = {"pilots": {k: v for k, v in cert.items() if k != "notes"}, "notes": list(cert["notes"])}
    cert["pilots"]["tie"] = [bool(t) for t in ff.frontier_["tie"]]
    grid = rep["pilots"]["n"]
    at_budget = rep["n_star"][-1][by]
    cert["edge"] = grid_edge(at_budget, grid)
    note = edge_note(at_budget, grid, by, where=f"predicted at the budget ({rep['rule']} rule)")
    if note:
        cert["notes"].append(note)
    alt = {k: v[-1][by] for k, v in rep["alternatives"].items() if v}
    cert["rules_at_budget"] = alt
    if len(alt) == 2:
        a, b = alt["signal"], alt["paper"]
        steps = abs(math.log2(a) - math.log2(b))
        cert["rules_agree"] = bool(steps <= HIT_STEPS)
        if not cert["rules_agree"]:
            cert["notes"].append(f"the rules disagree at the budget ({by} = {a:g} by the signal rule, {b:g} "
                                 f"by the paper rule, {steps:.3g} factors of 2 apart): treat either as "
                                 "uncertain; a pilot nearer the budget (plan, fit) would tell")
    return cert


# ---------------------------------------------------------------------------------------------- evaluate
def swept_n_star(table: pd.DataFrame, C: np.ndarray, metric: str = "val_mean", by: str = "n") -> np.ndarray:
    """The swept n*(C) of full-budget runs: the frontier of `FrontierFit` at the computes C."""
    from studies.fit.frontier import FrontierFit

    ff = FrontierFit(metric=metric, by=by).fit(table)
    v = ff.n_star_at(C)[by].to_numpy()
    return np.array([np.nan if x is None else float(x) for x in v])


def hit_rate(pred: Sequence[float] | None, truth: Sequence[float], C: np.ndarray,
             steps: float = HIT_STEPS) -> dict[str, Any]:
    """Share of upper-range grid points where |log2 pred - log2 truth| <= steps (nan truth points skipped)."""
    up = upper_mask(C)
    t = np.asarray(truth, dtype=float)
    if pred is None:
        return {"hit_rate": None, "points": int((up & np.isfinite(t)).sum())}
    p = np.asarray(pred, dtype=float)
    ok = up & np.isfinite(t)
    err = np.abs(np.log2(p[ok]) - np.log2(t[ok]))
    return {"hit_rate": float(np.mean(err <= steps + 1e-9)) if ok.any() else None,
            "mean_abs_err_steps": float(err.mean()) if ok.any() else None, "points": int(ok.sum())}
