"""Group-std study: does n*(C) rise under a tuned lr, and is the group-std gain w_n(p) the reason?

The gain (isocompute/reports/claims/wgain.py) predicts that std-normalised advantages (`scale_rewards=group`)
re-weight problems toward the extremes of p as n grows, a change of objective that no lr absorbs; against a
pull that does not depend on n (KL to the initial policy) that predicts a higher plateau for large n once it
gets enough steps, and nothing of the kind without std normalisation (`none`: w = (n - 1) / n, flat by n ~ 8).

Declared studies (one per arm, run through studies.declared: RunConfig -> sweep -> executor -> ResultStore):
arms `scale_rewards` {group, none} x `kl_coef` {0, 1}, each an n-vs-m sweep to the top budget with
log-spaced evaluations (one run gives every budget's record reward) and a variant per Adam lr; the same arms
at a fixed total batch B = bp * n (finding 3); and, n vs m only, both scale arms at `PAPER_KL` = 0.1, a tenth
of the verdict's KL, so that the report shows where the effect fades as the KL pull weakens (declared after
the KL 1 verdict was known; the report says so). Every lr is chosen per (arm, n, budget)
on the tuning seeds (isocompute.reports.claims.selection.select_on_heldout, which refuses overlapping seeds);
every number reported comes from the other seeds.

Readout per arm: the paired contrast largest n - smallest n at every budget (95% t-interval over the
reported seeds), n*(C) of the FrontierFit frontier over (n, tuned lr) arms with a bootstrap interval over the
reported seeds, and the compute each n needs to reach 95% of the best plateau. `verdict` is the study's rule,
fixed before the runs and read on the KL 1 arms (`verdicts_by_kl` reads it at every KL coefficient that has
both scale arms, beside the declared verdict, never in it):
- shown: group + KL has a top-budget contrast with CI above 0 and n*(C) rising >= 4x (last / first,
  `directional_growth`), while none + KL is flat (its contrast CI contains 0 or lies below it);
- ruled out: the group + KL contrast's upper bound is below +0.01;
- inconclusive otherwise, with what would decide it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from isocompute.reports.claims.common import ci, paired_contrast, tq
from isocompute.reports.claims.selection import directional_growth, saturated_edge, select_on_heldout
from isocompute.reports.claims.wgain import w_gain
from studies.declared import StudySpec, Tables, run_studies
from studies.fit.frontier import FrontierFit
from studies.presets import presets_for

SHOWN, RULED_OUT, INCONCLUSIVE = "shown", "ruled out", "inconclusive"
RULED_OUT_BELOW = 0.01
"""The rule's threshold: a group + KL contrast whose upper bound is below +0.01 rules the mechanism out."""
RISE = 4.0
"""n*(C) must rise >= 4x over the budgets (last / first) for 'shown'."""
PLATEAU_FRAC = 0.95
BOOT = 100
"""Bootstrap resamples of the reported seeds for the n*(C) intervals (seeded: the same on every run)."""


@dataclass(frozen=True)
class Arm:
    key: str
    scale_rewards: str
    kl_coef: float
    entropy_coef: float = 0.0

    @property
    def label(self) -> str:
        ent = f", entropy {self.entropy_coef:g}" if self.entropy_coef else ""
        return f"{self.scale_rewards} + KL {self.kl_coef:g}{ent}"

    def over(self) -> dict:
        out = {"scale_rewards": self.scale_rewards, "kl_coef": self.kl_coef}
        return out | ({"entropy_coef": self.entropy_coef} if self.entropy_coef else {})


ARMS = (
    Arm("group-kl0", "group", 0.0),
    Arm("none-kl0", "none", 0.0),
    Arm("group-kl1", "group", 1.0),
    Arm("none-kl1", "none", 1.0),
)
GROUP_KL, NONE_KL = "group-kl1", "none-kl1"
"""The two arms the verdict reads."""
PAPER_KL = 0.1
"""The KL coefficient of the arms that show where the effect fades: a tenth of the verdict's (the claims
report's recipe uses 0.01 on Easy: the paper's KL term is small beside its policy gradient)."""
PAPER_KL_ARMS = (Arm(f"group-kl{PAPER_KL:g}", "group", PAPER_KL),
                 Arm(f"none-kl{PAPER_KL:g}", "none", PAPER_KL))

ADAM_LRS = (3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0)
"""Half-decade steps around the mechanism study's tuned lrs (0.003..0.03 at 2^16 on the same preset), up to
1.0 for the KL arms (the first n = 2 runs peaked at 0.1-0.3 there). 1e-4 was in the first grid and dropped
to fit the machine (load ~15 on 2 cores): on the first n = 2 runs (n vs m and fixed batch) its
mean record reward (the seeds done) was below 3e-4's in every arm at 2^14 and 2^20."""

KL_MID = round(float(w_gain(0.5, 2) / w_gain(0.5, 128)), 4)
KL_EXT = round(float(w_gain(0.01, 2) / w_gain(0.01, 128)), 4)
"""KL coefficients at which n = 2 has the ratio of policy-gradient gain to KL pull that n = 128 has with
kl_coef = 1 at p = 1/2 (w_2 / w_128 = 0.356: the p-independent part of the gain) and at p = 0.01 (0.086: the
gain at the extremes, which n = 128 reaches only there). If n = 2 at KL_MID already reaches n = 128's plateau,
the overall gain against the KL pull suffices; if only KL_EXT does, the extremes' re-weighting is needed."""
DIAG_ARMS = (Arm(f"group-kl{KL_MID:g}", "group", KL_MID), Arm(f"group-kl{KL_EXT:g}", "group", KL_EXT))


@dataclass(frozen=True)
class Size:
    name: str
    backend: str
    ns: tuple[int, ...]
    bp: int
    budgets: tuple[int, ...]
    """Budgets of the readout, ascending; every run goes to the last (log-spaced evaluations)."""
    seeds: int
    tune: int
    """Seeds 0..tune-1 choose the lrs; tune..seeds-1 are reported."""
    lrs: tuple[float, ...]
    over: tuple[tuple[str, object], ...]
    """Overrides shared by every run (problem-set sizes, backend options)."""
    arms: tuple[Arm, ...] = ARMS
    nvm_arms: tuple[Arm, ...] = ()
    """Arms run at n vs m only (not at the fixed total batch): the KL coefficients beside the verdict's."""
    batch: int | None = None
    """Total batch B = bp * n of the fixed-batch part (None: not run)."""
    batch_ns: tuple[int, ...] = ()
    boot: int = BOOT
    verdict_arms: tuple[str, str] = (GROUP_KL, NONE_KL)
    diag: tuple[Arm, ...] = ()
    """Diagnostic arms (not in the verdict), run at `diag_ns` only: which part of w_n(p) does the work."""
    diag_ns: tuple[int, ...] = ()
    """(group arm, none arm) the verdict rule reads: the KL arms (the LM size: its one KL setting)."""
    staged: bool = False
    """Run the tuning seeds on the whole lr grid first, then the reported seeds only at the lrs the tuning
    seeds chose for some readout budget (build_staged): the same selection, without the reported-seed runs
    at lrs no readout reads."""

    @property
    def top(self) -> int:
        return self.budgets[-1]

    @property
    def presets(self) -> dict[str, dict[str, object]]:
        """The policy roles of this size's backend and LM (studies.presets; `over` names the LM)."""
        return presets_for(self.backend, dict(self.over).get("lm"))

    @property
    def tune_seeds(self) -> list[int]:
        return list(range(self.tune))

    @property
    def report_seeds(self) -> list[int]:
        return list(range(self.tune, self.seeds))


_SIM_OVER = (("d", 256), ("d_val", 256), ("snapshots", False))
LM_KL = 0.1
"""The one KL setting of the tiny-LM arms: kl_coef is the same per-token reverse KL on both backends
(llm_backend/grpo.py); 0.1 is the upper end of the usual GRPO range (DeepSeekMath used 0.04), a choice, not
tuned: the simulator's kl_coef = 1 is a per-problem KL over K = 8 answers, not the same scale."""
LM_ARMS = (Arm("group-kl0.1", "group", LM_KL), Arm("none-kl0.1", "none", LM_KL))
SIZES = {
    "full": Size(
        "full",
        "sim",
        ns=(2, 8, 32, 128),
        bp=32,
        budgets=tuple(2**k for k in range(14, 21)),
        seeds=8,
        tune=2,
        lrs=ADAM_LRS,
        over=_SIM_OVER,
        nvm_arms=PAPER_KL_ARMS,
        batch=256,
        batch_ns=(2, 8, 32, 128),
        diag=DIAG_ARMS,
        diag_ns=(2, 8),
    ),
    "quick": Size(
        "quick",
        "sim",
        ns=(2, 8),
        bp=8,
        budgets=(2**9, 2**10, 2**11),
        seeds=3,
        tune=1,
        lrs=(0.01, 0.1, 1.0),
        over=(("d", 16), ("d_val", 16), ("snapshots", False)),
        batch=32,
        batch_ns=(2, 8),
        boot=5,
    ),
    # the tiny LM (`--lm tiny`): the declaration of the earlier runs that docs/GROUP_STD.md quotes ("Tiny
    # LM"; they were never committed, so no command runs or reads this size: `llm-quick` runs its
    # machinery): easy split, bp 16, both scale arms at one KL setting (LM_KL), a 5-point lr grid around
    # the tiny LM's then default 3e-4, lrs chosen on seeds 0-1 and reported on 2-5. Sized down from n 2..64
    # to 2^18 (about 360 runs, ~6 CPU-hours at the tiny LM's ~2,500 rollouts/s per core) to n 2, 8, 32 to
    # 2^16 (180 runs, ~1.5 CPU-hours): n = 32 gets 128 steps at the top budget
    "llm": Size(
        "llm",
        "llm",
        ns=(2, 8, 32),
        bp=16,
        budgets=tuple(2**k for k in range(12, 17, 2)),
        seeds=6,
        tune=2,
        lrs=(3e-5, 1e-4, 3e-4, 1e-3, 3e-3),
        over=(("lm", "tiny"),),
        arms=LM_ARMS,
        boot=100,
        verdict_arms=tuple(a.key for a in LM_ARMS),
        staged=True,
    ),
    # the machinery of part 3 on the tiny LM in minutes (a 512-rollout run with the tiny LM's 256 validation
    # problems costs ~40 s of CPU; 32 problems and 4 evaluations keep a 64-rollout run near 10 s)
    "llm-quick": Size(
        "llm-quick",
        "llm",
        ns=(2, 4),
        bp=4,
        budgets=(32, 64),
        seeds=3,
        tune=1,
        lrs=(3e-4, 1e-3),
        over=(("lm", "tiny"), ("d_val", 32), ("n_evals", 4)),
        arms=LM_ARMS,
        boot=5,
        verdict_arms=tuple(a.key for a in LM_ARMS),
        staged=True,
    ),
}


def spec(size: Size, arm: Arm, fixed_batch: bool = False, ns: tuple[int, ...] | None = None) -> StudySpec:
    """The declared study of one arm: an n-vs-m sweep (or the fixed-batch sweep) with one variant per lr;
    `ns` overrides the n grid (the diagnostic arms)."""
    base = dict(size.over) | arm.over()
    kind = "fixed-batch" if fixed_batch else "n-vs-m"
    return StudySpec(
        f"{size.name}/groupstd-{'fb-' if fixed_batch else ''}{arm.key}",
        kind=kind,
        preset="interference",
        dataset="easy",
        n=ns or (size.batch_ns if fixed_batch else size.ns),
        bp=(size.bp,),
        batch=(size.batch,) if fixed_batch else (),
        budget=size.top,
        seeds=size.seeds,
        base=tuple(sorted(base.items())),
        variants=tuple((f"lr={lr:g}", (("lr", lr),)) for lr in size.lrs),
    )


def studies_of(size: Size) -> dict[str, StudySpec]:
    out = {}
    for arm in size.arms:
        for fb in (False, True) if size.batch else (False,):
            st = spec(size, arm, fb)
            out[st.name] = st
    for arm in size.nvm_arms:
        st = spec(size, arm)
        out[st.name] = st
    for arm in size.diag:
        st = spec(size, arm, ns=size.diag_ns)
        out[st.name] = st
    return out


# ------------------------------------------------------------------------------------------------ readout
def _lr(label: str) -> float:
    return float(label.split("=", 1)[1])


def records(
    table: pd.DataFrame,
    budgets,
    metric: str = "val_mean",
    keys: tuple[str, ...] = ("variant", "n", "bp", "seed"),
) -> pd.DataFrame:
    """Record reward of every run at every budget at once: columns run_id, keys, budget, reward. The same
    numbers as `studies.fit.analyses.run_rewards(stat="best")` budget by budget (tested), one pass instead of
    one pandas group-by per budget (the readout asks for ~30 budgets per arm)."""
    cols = ["run_id", "compute", metric, *keys]
    df = table[cols].copy()
    df["compute"] = pd.to_numeric(df["compute"], errors="coerce")
    df[metric] = pd.to_numeric(df[metric], errors="coerce")
    df = df.loc[
        np.isfinite(df[metric].to_numpy(dtype=float)) & np.isfinite(df["compute"].to_numpy(dtype=float))
    ]
    df = df.sort_values(["run_id", "compute"], kind="mergesort").reset_index(drop=True)
    rec = df.groupby("run_id", sort=False)[metric].cummax().to_numpy(dtype=float)
    _, starts = np.unique(df["run_id"].to_numpy(), return_index=True)
    starts = np.sort(starts)
    first = df.iloc[starts][["run_id", *keys]].reset_index(drop=True)
    c = df["compute"].to_numpy(dtype=float)
    parts = []
    for b in budgets:
        cnt = np.add.reduceat((c <= float(b) * (1 + 1e-9)).astype(np.int64), starts)
        ok = cnt > 0
        parts.append(first.loc[ok].assign(budget=float(b), reward=rec[(starts + cnt - 1)[ok]]))
    return pd.concat(parts, ignore_index=True)


def choose(rec: pd.DataFrame, budget: float, size: Size) -> pd.DataFrame:
    """Per n, the lr label with the best tuning-seed mean record reward at `budget` (`rec` from `records`;
    only n whose first step fits the budget): columns n, variant, tune_score."""
    rr = rec.loc[(rec["budget"] == float(budget)) & (rec["bp"] * rec["n"] <= budget)]
    return select_on_heldout(
        rr,
        tune_seeds=size.tune_seeds,
        report_seeds=size.report_seeds,
        group_cols=["n"],
        choice_col="variant",
        score_col="reward",
    )


def at_choice(rec: pd.DataFrame, budget: float, pick: pd.DataFrame, seeds) -> pd.DataFrame:
    """Seed x n matrix of the record reward at `budget` of each n at its chosen lr, on `seeds`."""
    rr = rec.loc[(rec["budget"] == float(budget)) & rec["seed"].isin(list(seeds))]
    rr = rr.merge(pick[["n", "variant"]], on=["n", "variant"], how="inner")
    return rr.pivot_table(index="seed", columns="n", values="reward")


def extreme_contrast(piv: pd.DataFrame) -> dict:
    """Largest n minus smallest n (columns of `piv`), paired over its rows (seeds): mean, 95% t half-width."""
    lo, hi = min(piv.columns), max(piv.columns)
    d = (piv[hi] - piv[lo]).dropna().to_numpy()
    se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")
    h = tq(d.size) * se
    return {
        "n_small": int(lo),
        "n_large": int(hi),
        "diff": float(d.mean()) if d.size else float("nan"),
        "ci": float(h),
        "lo": float(d.mean() - h) if d.size else float("nan"),
        "hi": float(d.mean() + h) if d.size else float("nan"),
        "wins": int((d > 0).sum()),
        "seeds": int(d.size),
    }


class PointFrontier(FrontierFit):
    """FrontierFit without its sigmoid of log2 n* over C: n_star_at reads the per-arm fits only, and the extra
    fit was 60% of a bootstrap's time (and a third of the tiny-LM study's report)."""

    def _fit_n_star(self) -> None:
        self.n_star_fit_ = None


def _frontier_stars(keep: pd.DataFrame, budgets, metric: str) -> list:
    at = PointFrontier(metric=metric, by="arm").fit(keep).n_star_at(list(map(float, budgets)))
    return [None if a is None else int(a) for a in at["arm"]]


def boot_stars(
    keep: pd.DataFrame, budgets, seeds: list[int], reps: int, metric: str = "val_mean", rng_seed: int = 0
) -> list[tuple[int | None, int | None]]:
    """95% percentile interval of n*(C) per budget from the seed bootstrap of the project
    (studies.fit.bootstrap.bootstrap_n_star: whole seeds resampled, the same frontier refitted), over the arms
    (n, tuned lr) of `keep` on `seeds`, as n values."""
    from studies.fit.bootstrap import bootstrap_n_star

    rows = keep.loc[keep["seed"].isin(list(seeds))]
    ff = PointFrontier(metric=metric, by="arm").fit(rows)
    b = bootstrap_n_star(ff, rows, list(map(float, budgets)), reps=reps, rng_seed=rng_seed)
    return [
        (None, None) if lo is None else (int(lo), int(hi)) for lo, hi in zip(b["lo"], b["hi"], strict=True)
    ]


def plateau_grid(table: pd.DataFrame, top: float, per_octave: int = 2) -> list[float]:
    """Budgets `per_octave` per doubling from the first positive compute of any run to `top`."""
    c = table["compute"].to_numpy(dtype=float)
    lo = float(c[c > 0].min())
    k = np.arange(math.floor(math.log2(lo) * per_octave), round(math.log2(top) * per_octave) + 1)
    return [float(v) for v in 2.0 ** (k / per_octave) if lo * (1 - 1e-9) <= v <= top * (1 + 1e-9)]


def measure_arm(table: pd.DataFrame, size: Size, metric: str = "val_mean", budgets=None) -> dict:
    """Everything the report shows of one arm (module text); `table` has columns variant, n, bp, seed."""
    budgets = [float(b) for b in (budgets or size.budgets)]
    grid = sorted({_lr(v) for v in table["variant"].unique()})
    pgrid = plateau_grid(table, budgets[-1])
    rec = records(table, sorted(set(budgets) | set(pgrid)), metric)
    rows, arms, edges = [], set(), []
    for b in budgets:
        pick = choose(rec, b, size)
        lab = dict(zip(pick["n"].astype(int), pick["variant"], strict=True))
        arms |= set(lab.items())
        piv = at_choice(rec, b, pick, size.report_seeds)
        ns = sorted(int(n) for n in piv.columns)
        best = paired_contrast(piv, [n for n in ns if n <= 8], [n for n in ns if n >= 32])
        rows.append(
            {
                "budget": b,
                "lr": {n: _lr(v) for n, v in sorted(lab.items())},
                "per_n": {int(n): ci(piv[n]) for n in piv.columns},
                "extreme": extreme_contrast(piv),
                "best": best,
            }
        )
        for n, v in lab.items():
            if _lr(v) in (grid[0], grid[-1]):
                edges.append(edge_detail(rec, b, size, n, _lr(v), grid))
    rep = table.loc[table["seed"].isin(size.report_seeds)]
    order = {f"lr={lr:g}": i for i, lr in enumerate(grid)}
    keep = rep.loc[[(int(n), v) in arms for n, v in zip(rep["n"], rep["variant"], strict=True)]].copy()
    keep["arm"] = keep["n"] + keep["variant"].map(order) / 100.0
    stars = _frontier_stars(keep, budgets, metric)
    out = {
        "budgets": budgets,
        "rows": rows,
        "stars": stars,
        "edges": edges,
        "grid": grid,
        "growth": directional_growth(stars),
        "top": rows[-1]["extreme"],
        "seeds": len(size.report_seeds),
    }
    out["stars_ci"] = boot_stars(keep, budgets, size.report_seeds, size.boot, metric) if size.boot else []
    out["to_plateau"] = compute_to_plateau(rec, pgrid, size)
    return out


def edge_detail(rec: pd.DataFrame, budget: float, size: Size, n: int, lr: float, grid: list[float]) -> dict:
    """An lr optimum on a grid edge: the tuning seeds' mean record reward there and at the next lr inward
    (`saturated`: closer than half a validation problem, a plateau along lr, not an optimum beyond it)."""
    rr = rec.loc[(rec["budget"] == float(budget)) & rec["seed"].isin(size.tune_seeds) & (rec["n"] == n)]
    t = rr.groupby("variant")["reward"].mean()
    inner = grid[-2] if lr == grid[-1] else grid[1]
    d_val = int(dict(size.over).get("d_val", 16))
    r, ri = float(t[f"lr={lr:g}"]), float(t[f"lr={inner:g}"])
    return {
        "n": int(n),
        "budget": float(budget),
        "lr": lr,
        "reward": r,
        "inner_lr": inner,
        "inner": ri,
        "saturated": saturated_edge(r, ri, d_val),
    }


def compute_to_plateau(rec: pd.DataFrame, grid: list[float], size: Size, frac: float = PLATEAU_FRAC) -> dict:
    """Compute each n needs to reach `frac` of the best plateau: at each grid budget, the reported-seed mean
    record reward of n at the lr tuned (tuning seeds) for that budget; the plateau is the best n's value at
    the top of the grid; the first grid budget where n reaches frac * plateau (None: not by the top)."""
    curve: dict[int, list[float]] = {}
    for j, b in enumerate(grid):
        try:
            pick = choose(rec, b, size)
        except ValueError:  # no n has stepped yet
            continue
        piv = at_choice(rec, b, pick, size.report_seeds)
        for n in piv.columns:
            curve.setdefault(int(n), [float("nan")] * len(grid))[j] = float(piv[n].mean())
    plateau = max(c[-1] for c in curve.values())
    need = {}
    for n, c in sorted(curve.items()):
        hit = [b for b, r in zip(grid, c, strict=True) if np.isfinite(r) and r >= frac * plateau]
        need[n] = hit[0] if hit else None
    return {
        "plateau": plateau,
        "frac": frac,
        "need": need,
        "top": {n: c[-1] for n, c in sorted(curve.items())},
    }


def facts_text(group_kl: dict, none_kl: dict, kl: float | None = None) -> str:
    """What the rule reads, in one clause: each arm's top-budget contrast (largest - smallest n, 95% CI) and
    the group arm's n* growth."""
    g, z = group_kl["top"], none_kl["top"]
    k = "KL" if kl is None else f"KL {kl:g}"
    return (f"group + {k}: n={g['n_large']} - n={g['n_small']} = {g['diff']:+.4f} [{g['lo']:+.4f}, "
            f"{g['hi']:+.4f}], n* growth {group_kl['growth']:.2g}x; none + {k}: {z['diff']:+.4f} "
            f"[{z['lo']:+.4f}, {z['hi']:+.4f}]")


def verdict(group_kl: dict, none_kl: dict, kl: float | None = None) -> tuple[str, str]:
    """The study's rule (module text) on the two KL arms' measurements: `top` (the largest - smallest n
    contrast at the top budget, with lo / hi bounds) and `growth` (last / first n*); `kl`, the arms' KL
    coefficient, is named in the text ("group + KL 1")."""
    g, z = group_kl["top"], none_kl["top"]
    gr = group_kl["growth"]
    up = bool(np.isfinite(g["lo"]) and g["lo"] > 0)
    rises = bool(np.isfinite(gr) and gr >= RISE)
    flat = bool(np.isfinite(z["lo"]) and z["lo"] <= 0)
    k = "KL" if kl is None else f"KL {kl:g}"
    facts = facts_text(group_kl, none_kl, kl)
    if up and rises and flat:
        return (
            SHOWN,
            f"{facts}: the group + {k} contrast is above 0, n* rises >= {RISE:g}x and none + {k} is flat.",
        )
    if np.isfinite(g["hi"]) and g["hi"] < RULED_OUT_BELOW:
        return RULED_OUT, (f"{facts}: the group + {k} contrast's upper bound is below +{RULED_OUT_BELOW:g}.")
    need = []
    if not up:
        need.append(
            f"a group + {k} contrast CI above 0 (more seeds or larger budgets) or an upper bound below "
            f"+{RULED_OUT_BELOW:g}"
        )
    if not rises:
        need.append(f"n*(C) rising >= {RISE:g}x (budgets large enough for the largest n)")
    if not flat:
        need.append(
            f"none + {k} flat (its contrast CI reaching 0): with it also above 0 the gain is not the cause"
        )
    return INCONCLUSIVE, f"{facts}. What would decide it: {'; '.join(need)}."


def kl_pairs(arms) -> dict[float, tuple[str, str]]:
    """{kl_coef: (group arm key, none arm key)} of every KL coefficient at which `arms` (Arm objects) have
    both scale arms, ascending."""
    by: dict[float, dict[str, str]] = {}
    for a in arms:
        by.setdefault(float(a.kl_coef), {})[a.scale_rewards] = a.key
    return {kl: (v["group"], v["none"]) for kl, v in sorted(by.items()) if "group" in v and "none" in v}


def verdicts_by_kl(measured: dict, arms) -> dict[float, tuple[str, str]]:
    """The study's rule read at each KL coefficient of `kl_pairs(arms)` whose two arms were measured
    (`measured`: {arm key: measure_arm output}): {kl_coef: (verdict, why)}. Only the verdict's own KL (the
    size's `verdict_arms`) is the declared verdict; the others show how the effect depends on the KL pull."""
    return {kl: verdict(measured[g], measured[z], kl) for kl, (g, z) in kl_pairs(arms).items()
            if g in measured and z in measured}


# ----------------------------------------------------------------------------------------------- pipeline
def measure(t: Tables, size: Size, jobs: int = 1, progress: bool = False) -> dict:
    """measure_arm of every arm (n vs m and fixed batch), in `jobs` spawned processes (each arm is a pure
    function of its table; the bootstrap refits the frontier hundreds of times), then the verdicts."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from tqdm.auto import tqdm

    tasks = [("arms", arm.key, spec(size, arm)) for arm in all_arms(size)]
    if size.batch:
        tasks += [("fixed_batch", arm.key, spec(size, arm, True)) for arm in size.arms]
    tasks += [("diag", arm.key, spec(size, arm, ns=size.diag_ns)) for arm in size.diag]
    tables = [t[st.name] for _, _, st in tasks]
    bar = tqdm(total=len(tasks), desc="groupstd readout", unit="arm", disable=not progress)
    out: dict = {"arms": {}, "fixed_batch": {}, "diag": {}}
    if jobs > 1:
        with ProcessPoolExecutor(
            max_workers=min(jobs, len(tasks)), mp_context=mp.get_context("spawn")
        ) as pool:
            futs = [pool.submit(measure_arm, tab, size) for tab in tables]
            for (part, key, _), fut in zip(tasks, futs, strict=True):
                out[part][key] = fut.result()
                bar.update()
    else:
        for (part, key, _), tab in zip(tasks, tables, strict=True):
            out[part][key] = measure_arm(tab, size)
            bar.update()
    bar.close()
    g, z = size.verdict_arms
    kl = verdict_kl(size)
    if g in out["arms"] and z in out["arms"]:
        out["verdict"] = verdict(out["arms"][g], out["arms"][z], kl)
        out["kl"] = kl
        out["by_kl"] = verdicts_by_kl(out["arms"], all_arms(size))
        if size.batch:
            out["fb_verdict"] = verdict(out["fixed_batch"][g], out["fixed_batch"][z], kl)
    return out


def all_arms(size: Size) -> list[Arm]:
    """The n-vs-m arms of a size (`arms` and `nvm_arms`), by KL coefficient (stable: group before none)."""
    return sorted((*size.arms, *size.nvm_arms), key=lambda a: a.kl_coef)


def verdict_kl(size: Size) -> float | None:
    """The KL coefficient of the arms the declared verdict reads (None if they differ)."""
    kls = {a.kl_coef for a in all_arms(size) if a.key in size.verdict_arms}
    return float(kls.pop()) if len(kls) == 1 else None


def wall_seconds(t: Tables, names) -> float:
    """Sum of the runs' own wall times (the status records' wall_s): the CPU cost of the study's runs."""
    tot = 0.0
    for name in names:
        for _, cfg in t.configs(name):
            rec = t.store.record(cfg.run_id) or {}
            tot += float(rec.get("wall_s") or (rec.get("info") or {}).get("wall_s") or 0.0)
    return tot


def chosen_lrs(table: pd.DataFrame, size: Size, metric: str = "val_mean") -> set[tuple[int, str]]:
    """(n, lr label) pairs the tuning seeds choose at some readout budget (`choose`, budget by budget)."""
    rec = records(table, [float(b) for b in size.budgets], metric)
    out: set[tuple[int, str]] = set()
    for b in size.budgets:
        try:
            pick = choose(rec, float(b), size)
        except ValueError:  # no n has stepped at this budget
            continue
        out |= {(int(n), v) for n, v in zip(pick["n"], pick["variant"], strict=True)}
    return out


def _run(configs, results: Path, jobs: int, progress: bool, desc: str) -> None:
    """Run the `configs` that `results` lacks into it (finished runs are reused)."""
    from studies.executors import run_sweep
    from studies.store import ResultStore

    with ResultStore(results, study="groupstd") as store:
        run_sweep(configs, store, jobs=jobs, progress=progress, desc=desc)


def build_staged(studies: dict[str, StudySpec], size: Size, results: Path, jobs: int, progress: bool):
    """Stage 1: every study's runs on the tuning seeds (the whole lr grid). Stage 2: the reported seeds at the
    (n, lr) pairs stage 1 chose for a readout budget. The selection is the unstaged one (the tuning seeds
    alone choose); readouts at other budgets (compute to plateau) see a reported-seed value only where their
    choice was run, and leave the others out."""
    from studies.declared import study_configs

    full = {name: study_configs(st, size.presets, size.backend) for name, st in studies.items()}
    tune = set(size.tune_seeds)
    stage1 = {name: [(lab, c) for lab, c in runs if c.seed in tune] for name, runs in full.items()}
    _run([c for runs in stage1.values() for _, c in runs], results, jobs, progress, "groupstd tuning runs")
    t1 = Tables(results, stage1)
    plan = {}
    for name, runs in full.items():
        tab = t1[name]
        keep = chosen_lrs(tab, size) if len(tab) else set()
        plan[name] = stage1[name] + [(lab, c) for lab, c in runs
                                     if c.seed not in tune and (int(c.n), lab) in keep]
    _run([c for runs in plan.values() for _, c in runs if c.seed not in tune], results, jobs, progress,
         "groupstd reported runs")
    return plan


def build(size: Size, results: Path, jobs: int = 2, progress: bool = False) -> tuple[dict, Tables, float]:
    """Run (or reuse) the declared studies of `size` and measure them."""
    t0 = time.perf_counter()
    studies = studies_of(size)
    if size.staged:
        plan = build_staged(studies, size, results, jobs, progress)
    else:
        plan = run_studies(
            studies,
            results,
            size.presets,
            size.backend,
            jobs,
            progress,
            study="groupstd",
            desc="groupstd runs",
        )
    t = Tables(results, plan)
    x = measure(t, size, jobs, progress)
    x["wall"] = {
        "elapsed_s": time.perf_counter() - t0,
        "runs_s": wall_seconds(t, studies),
        "runs": sum(len(v) for v in plan.values()),
    }
    x["size"] = size
    return x, t, x["wall"]["elapsed_s"]


__all__ = [
    "ARMS",
    "PointFrontier",
    "all_arms",
    "DIAG_ARMS",
    "KL_EXT",
    "KL_MID",
    "PAPER_KL",
    "PAPER_KL_ARMS",
    "SIZES",
    "Arm",
    "Size",
    "build",
    "compute_to_plateau",
    "extreme_contrast",
    "facts_text",
    "kl_pairs",
    "measure",
    "measure_arm",
    "spec",
    "studies_of",
    "verdict",
    "verdict_kl",
    "verdicts_by_kl",
]
