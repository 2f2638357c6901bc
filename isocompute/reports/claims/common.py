"""What every claims section shares: sizes (ClaimsMode), the Section declaration, and the statistics.

Conventions: seeds are paired across n (seed s uses problem_seed s, so every n sees the same
problems and initial policy); differences and their SEs are taken per seed; CIs are 95% t-intervals over
seeds. "record" reward = a run's best-so-far value up to a budget (the record-breaking envelope the paper
fits, Section 4 step 1), "final" = its value when the budget is spent. n*(C) is always read by the estimator
of `isocompute fit` (studies.fit.nstar through `FrontierFit.n_star_at`): the best n's measured seed-mean
record and the set of n the seeds cannot tell from it. Every choice (an lr, a base lr, the best small and
large n of a contrast) is made on seeds that are not reported (isocompute/reports/claims/selection.py), and
growth of n* counts only where n* is determined (a rise that every later set stays above).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from isocompute.reports.claims.judge import NAN_INTERVAL, Interval, Rule, equivalent, t_interval
from isocompute.reports.claims.recipe import RECIPE, TUNE_SEED0, regularisation
from isocompute.reports.claims.selection import directional_growth, seed_folds, select_on_heldout
from studies.config import RunConfig
from studies.declared import StudySpec, Tables
from studies.fit.analyses import run_rewards
from studies.fit.frontier import FrontierFit
from studies.presets import preset_lr, presets_for

VERDICTS = ("reproduced", "partly", "not reproduced", "inconclusive", "does not replicate",
            "not applicable to a simulator", "measured")
"""Every verdict a section may give (judge.py: the first five come from intervals; 'does not replicate' where
two seed sets disagree)."""

@dataclass(frozen=True)
class ClaimsMode:
    """Sizes of the studies; QUICK is for CI (<= 5 min on 2 cores), FULL for the committed report,
    LLM_QUICK the CPU-sized real-model run (minutes)."""

    name: str
    backend: str
    seeds: int
    top: int
    """Top budget of the theory, finding 1 and the mechanism sections."""
    side_top: int
    """Top budget of the other sections."""
    ns: tuple[int, ...]
    side_ns: tuple[int, ...]
    d: int | None
    """d = d_val of the simulator (None: the backend's default)."""
    lrs: tuple[float, ...]
    """Constant learning rates of finding 1's lr study (empty: the preset's lr only)."""
    sqrt_lrs: tuple[float, ...]
    """Grid of the recipe's base lr (the lr at batch bp n = 256 under the sqrt rule), tuned on the tuning
    seeds for every recipe study (recipe.py); the constant-lr grid of the envelope, so both are tuned on one
    grid. Empty: no recipe (the llm plans)."""
    bp: int = 32
    small_max: int = 8
    large_min: int = 32
    pass1_ns: tuple[int, int] = (8, 128)
    """(small n, large n) of the pass@1 distribution comparison (finding 5)."""
    lm: str | None = None
    """The llm backend's model (`--lm`; None: SmolLM2's CPU preset); "tiny" picks the tiny LM's presets."""
    tune_seeds: int = 2
    """Tuning seeds of the recipe's base lr (recipe.TUNE_SEED0 + seed_offset onward), never reported."""
    seed_offset: int = 0
    """Reported seeds are seed_offset .. seed_offset + seeds - 1 (`--seed-offset`); tuning seeds shift too."""
    tuned: tuple[tuple[str, float], ...] = ()
    """(study name, base lr) chosen by the tuning stage (report.build_report): the recipe studies' lrs."""

    @property
    def presets(self) -> dict[str, dict[str, Any]]:
        """The policy roles of this plan (studies.presets): the backend's, or the tiny LM's (lm "tiny")."""
        return presets_for(self.backend, self.lm)

    def preset_lr(self, role: str = "interference") -> float | None:
        """The lr a role's preset trains with (studies.presets.preset_lr; None: the LM's own)."""
        return preset_lr(self.backend, role, self.lm)

    @property
    def recipe(self) -> bool:
        """Whether the plan's studies follow the paper's recipe with a tuned base lr (recipe.py): on the
        simulator with a base-lr grid; the llm plans run their backend's own recipe and lr."""
        return self.backend == "sim" and bool(self.sqrt_lrs)

    @property
    def reported_seeds(self) -> list[int]:
        return list(range(self.seed_offset, self.seed_offset + self.seeds))

    @property
    def tuning_seeds(self) -> list[int]:
        return list(range(TUNE_SEED0 + self.seed_offset, TUNE_SEED0 + self.seed_offset + self.tune_seeds))

    def seeds_text(self) -> str:
        """'0..7' (the reported seeds)."""
        return f"{self.seed_offset}..{self.seed_offset + self.seeds - 1}"

    def budgets(self, top: int) -> list[int]:
        """Budgets 4x apart up to `top`, at most six, from 2^10 (below it the largest n has not stepped)."""
        hi = int(math.log2(top))
        lo = max(hi - 10, min(10, hi))
        return [2**k for k in range(hi, lo - 1, -2)][::-1]

    def over(self, **kw: Any) -> tuple[tuple[str, Any], ...]:
        """Overrides shared by the plan's runs (problem-set sizes, no pass@1 snapshots unless asked) + kw."""
        base: dict[str, Any] = {}
        if self.backend == "sim":
            base = {"d": self.d, "d_val": self.d, "snapshots": False} if self.d else {"snapshots": False}
        return tuple(sorted((base | kw).items()))

    def lr_overrides(self, full_name: str, dataset: str, lr: float | str = RECIPE,
                     preset: str = "interference") -> dict[str, Any]:
        """The RunConfig overrides of a study's lr (see `study`): for the recipe the sqrt rule, the
        dataset's regularisation and, once the tuning stage has chosen it, the base lr of `full_name`; for a
        constant lr that lr, left unwritten where it is the one `preset` trains with, so that the constant
        lr row and the preset's runs are one run id (studies.presets)."""
        if lr == RECIPE and self.recipe:
            extra: dict[str, Any] = regularisation(dataset) | {"lr_rule": "sqrt"}
            chosen = dict(self.tuned).get(full_name)
            if chosen is not None:
                extra["lr"] = chosen
            return extra
        if isinstance(lr, int | float):
            return {} if float(lr) == self.preset_lr(preset) else {"lr": float(lr)}
        return {}

    def study(
        self,
        name: str,
        preset: str = "interference",
        n: Sequence[int] | None = None,
        budget: int | None = None,
        dataset: str = "easy",
        bp: int | None = None,
        lr: float | str = RECIPE,
        **kw: Any,
    ) -> StudySpec:
        """An n-vs-m StudySpec at this plan's sizes and seeds (name prefixed by the plan, so sizes never mix).

        `lr`: RECIPE (default) trains with the paper's recipe (recipe.py: sqrt rule, the base lr the tuning
        stage chose for this study, KL + entropy on Easy; explicit kw win); PRESET_LR with the preset's own
        lr; a number with that constant lr. Plans without the recipe (llm) treat RECIPE as PRESET_LR."""
        full = f"{self.name}/{name}"
        extra = self.lr_overrides(full, dataset, lr, preset)
        return StudySpec(
            full,
            kind="n-vs-m",
            preset=preset,
            dataset=dataset,
            n=tuple(n or self.ns),
            bp=(bp or self.bp,),
            budget=budget or self.top,
            seeds=self.seeds,
            seed0=self.seed_offset,
            base=self.over(**(extra | kw)),
        )


FULL = ClaimsMode(
    "full",
    "sim",
    seeds=8,
    top=2**22,
    side_top=2**20,
    ns=(2, 4, 8, 16, 32, 64, 128, 256, 512),
    side_ns=(2, 8, 32, 128, 512),
    d=1024,
    lrs=(3e-5, 1e-4, 3e-4, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0),
    sqrt_lrs=(3e-5, 1e-4, 3e-4, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0),
)
QUICK = ClaimsMode(
    "quick",
    "sim",
    seeds=3,
    top=2**16,
    side_top=2**15,
    ns=(2, 4, 8, 32, 128),
    side_ns=(2, 8, 32, 128),
    d=256,
    lrs=(0.03, 0.1),
    sqrt_lrs=(0.003, 0.03),
    tune_seeds=1,
)
LLM_QUICK = ClaimsMode(
    "llm-quick",
    "llm",
    seeds=1,
    top=256,
    side_top=256,
    ns=(2, 4, 8),
    side_ns=(2, 4, 8),
    d=None,
    lrs=(),
    sqrt_lrs=(),
    bp=4,
    small_max=2,
    large_min=8,
    pass1_ns=(2, 8),
)
TINY_QUICK = ClaimsMode(
    "tiny-quick",
    "llm",
    seeds=2,
    top=2**14,
    side_top=2**14,
    ns=(2, 8, 32),
    side_ns=(2, 8, 32),
    d=None,
    lrs=(),
    sqrt_lrs=(),
    bp=16,
    small_max=2,
    large_min=32,
    pass1_ns=(2, 32),
    lm="tiny",
)
"""The tiny LM's quick plan (`isocompute report claims --backend llm --lm tiny --quick`): bp 16, n 2 / 8 / 32
to 2^14 rollouts (n = 32 takes 32 steps), 2 seeds; minutes on 2 cores."""
MODES = {("sim", False): FULL, ("sim", True): QUICK, ("llm", True): LLM_QUICK, ("llm", False): LLM_QUICK,
         ("tiny", True): TINY_QUICK, ("tiny", False): TINY_QUICK}
"""(backend, or "tiny" for the llm backend on the tiny LM; quick) -> ClaimsMode. The llm plans are CPU-sized
either way."""


@dataclass(frozen=True)
class Section:
    """One claim of the report, declared: the studies it needs, a measurement of the finished runs into
    plain numbers, a pure verdict rule on those numbers, and the Markdown body drawn from them."""

    key: str
    title: str
    paper: str
    studies: Callable[[ClaimsMode], tuple[StudySpec, ...]]
    measure: Callable[[Tables, ClaimsMode], dict]
    verdict: Callable[[dict], tuple[str, str]]
    body: Callable[[dict], list[str]]
    setup: Callable[[ClaimsMode], str]
    backends: tuple[str, ...] = ("sim",)
    refused: str = "it needs the simulator"
    """One line: why the section does not run on the other backends."""
    probe: Callable[[Any, Tables, ClaimsMode], None] | None = None
    """Measurements from inside runs (sandbox diagnostics), recorded beside the tables before `measure`."""
    rules: tuple[Rule, ...] = ()
    """The rules its verdict reads (the report lists each with its margin and the margin's provenance)."""
    ceiling: Callable[[ClaimsMode], dict[str, tuple[StudySpec, str]]] | None = None
    """{label: (study, metric)} whose top-budget contrast its rules read: the report says by which budget
    every n of each reaches a common ceiling (claims.ceiling)."""


# --------------------------------------------------------------------------------------------- statistics
def tq(k: int) -> float:
    """Two-sided 95% t quantile for k values (k - 1 degrees of freedom); nan for k < 2."""
    from scipy.stats import t

    return float(t.ppf(0.975, k - 1)) if k > 1 else float("nan")


def ci(values) -> tuple[float, float]:
    """(mean, 95% t half-width) of the finite values; half-width nan for a single value."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("nan"), float("nan")
    if v.size == 1:
        return float(v[0]), float("nan")
    return float(v.mean()), float(tq(v.size) * v.std(ddof=1) / np.sqrt(v.size))


def fmt(m: float, h: float | None = None, digits: int = 3) -> str:
    if m is None or not np.isfinite(m):
        return "n/a"
    if h is None or not np.isfinite(h):
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {h:.{digits}f}"


def budget_text(b: float) -> str:
    """2^k for a power of two, else 3 significant digits."""
    k = math.log2(b) if b > 0 else float("nan")
    return f"2^{int(round(k))}" if math.isfinite(k) and abs(k - round(k)) < 1e-9 else f"{b:.3g}"


def growth(n_stars: Sequence) -> float:
    """Growth of n* over the budgets. Rows of `n_star_rows` (budgets ascending): the determined change of
    studies.fit.nstar.change, its rise factor, 1 / its fall factor, or 1 when the sets show neither (a tie
    is no growth). Plain n* values: last / first (selection.directional_growth), < 1 when n* falls."""
    if n_stars and isinstance(n_stars[0], dict):
        from studies.fit.nstar import change

        ch = change([r["budget"] for r in n_stars], [r.get("set") or [r["n_star"]] for r in n_stars],
                    [r.get("competitors", 2) for r in n_stars])
        if ch["rise"]:
            return ch["rise"]["factor"]
        return 1.0 / ch["fall"]["factor"] if ch["fall"] else 1.0
    return directional_growth(n_stars)


def growth_text(g: float) -> str:
    """'16x' for a rise, '1/16x (falls)' for a fall, 'n/a' without a sequence."""
    if not np.isfinite(g):
        return "n/a"
    return f"{g:.0f}x" if g >= 1 else f"1/{1 / g:.0f}x (falls)"


def monotone(n_stars: Sequence[int]) -> bool:
    return all(b >= a for a, b in zip(n_stars, n_stars[1:], strict=False))


def seed_rewards(
    table: pd.DataFrame,
    budget: float,
    metric: str = "val_mean",
    stat: str = "best",
    by: str = "n",
    x: str = "compute",
) -> pd.DataFrame:
    """Seed x configuration matrix of each run's reward at `budget` (stat "best" = record, "final")."""
    r = run_rewards(table, metric, keys=(by, "seed"), budget=budget, stat=stat, x=x)
    return r.pivot_table(index="seed", columns=by, values="reward")


def n_star_rows(
    table: pd.DataFrame,
    budgets: Sequence[float],
    metric: str = "val_mean",
    by: str = "n",
    x: str = "compute",
    boot: int = 0,
    small: Sequence[int] | None = None,
) -> list[dict]:
    """Per budget (ascending): n* by the estimator of `isocompute fit` (studies.fit.nstar, through
    `FrontierFit.n_star_at`): "n_star" the best n (highest seed-mean record), "set" every n the seeds
    cannot tell from it, "n_lo" / "n_hi" its smallest and largest member, "undetermined" (a tie, or the only n
    with data), "competitors" (n with data at the budget); and the record reward of the best over seeds
    (mean, CI). `boot`: resamples of the runs (0: studies.fit.nstar.REPS). `small` given: also "stake", the
    reward n* gains over the best of those small n (`stakes`)."""
    from studies.fit.nstar import REPS, set_text

    ff = FrontierFit(metric=metric, by=by, x=x, reps=boot or REPS).fit(table)
    at = ff.n_star_at(budgets)
    comp = ff._sets(list(at[x])).competitors
    rows = []
    for j, (b, n) in enumerate(zip(at[x], at[by], strict=True)):
        # no n has data at b (None, or NaN in a numeric column, and an empty set)
        if n is None or pd.isna(n) or not len(at["set"].iloc[j]):
            continue
        piv = seed_rewards(table, b, metric, "best", by, x)
        m, h = ci(piv[n]) if n in piv.columns else (float("nan"), float("nan"))
        members = [_num(v) for v in at["set"].iloc[j]]
        rows.append({"budget": float(b), "n_star": _num(n), "mean": m, "ci": h, "set": members,
                     "set_text": set_text(members, list(ff.curves_)),
                     "n_lo": min(members), "n_hi": max(members), "competitors": int(comp[j]),
                     "undetermined": not bool(at["determined"].iloc[j])})
    if small and rows and "seed" in table.columns and table["seed"].nunique() >= 2:
        for r, iv in zip(rows, stakes(table, [r["budget"] for r in rows], small, metric, by, x), strict=True):
            r["stake"] = iv
    return rows


def stakes(
    table: pd.DataFrame,
    budgets: Sequence[float],
    small: Sequence[int],
    metric: str = "val_mean",
    by: str = "n",
    x: str = "compute",
    k: int = 2,
) -> list[Interval]:
    """The reward at stake beside n*: per budget, what following the frontier's n* gains over the best
    small n, as an interval over seeds, with both choices made on seeds that are not reported. k-fold
    cross-fitting (selection.seed_folds): on each fold's tuning seeds the frontier's n*
    (FrontierFit.n_star_at, the estimator of `isocompute fit`) and the small n with the best seed-mean record
    at the budget; on its reporting seeds, per seed, the record reward of that n* minus that small n's. The
    pooled per-seed differences give a t-interval (0 where n* is that small n)."""
    seeds = sorted(int(v) for v in table["seed"].unique())
    folds = seed_folds(seeds, k)
    per: list[list[float]] = [[] for _ in budgets]
    for tune, rep in folds:
        part = table.loc[table["seed"].astype(int).isin(tune)]
        at = FrontierFit(metric=metric, by=by, x=x).fit(part).n_star_at(list(budgets))
        for j, b in enumerate(budgets):
            nstar = at[by].iloc[j]
            if nstar is None:
                continue
            piv = seed_rewards(table, b, metric, "best", by, x)
            cand = [v for v in small if v in piv.columns]
            if not cand or nstar not in piv.columns:
                continue
            tune_means = piv.loc[piv.index.astype(int).isin(tune), cand].mean()
            if tune_means.isna().all():
                continue
            best_small = tune_means.idxmax()
            r = piv.loc[piv.index.astype(int).isin(rep)]
            per[j] += list((r[nstar] - r[best_small]).dropna().to_numpy(dtype=float))
    return [t_interval(v) for v in per]


def stake_text(iv: Interval | None) -> str:
    """'stake +0.0041 [+0.0012, +0.0070]', with '(within ±0.01)' where TOST shows it below the margin."""
    if iv is None or not np.isfinite(iv.estimate):
        return "stake n/a"
    if iv.estimate == 0 and iv.lo == 0 and iv.hi == 0:
        return "stake 0: n* is the best small n"
    from isocompute.reports.claims.judge import EQUIVALENCE_MARGIN

    eq = f" (within ±{EQUIVALENCE_MARGIN:g})" if equivalent(iv) else ""
    return f"stake {iv.text()}{eq}"


def n_star_cell(r: dict) -> str:
    """'n*' where it is determined; its set and 'tie' where the seeds cannot tell n apart (studies.fit.nstar
    set_text: '16-256 tie'); '(alone)' where only one n has data."""
    from studies.fit.nstar import set_text

    members = r.get("set") or [r["n_star"]]
    if len(members) > 1:
        return f"{r.get('set_text') or set_text(members)} tie"
    return str(r["n_star"]) + (" (alone)" if r.get("undetermined") else "")


def _num(v):
    f = float(v)
    return int(f) if f.is_integer() else f


BOOT = 200
"""Seed-bootstrap replicates of n* in the claims tables (studies.fit.bootstrap)."""

NO_CONTRAST = {"diff": float("nan"), "se": float("nan"), "z": float("nan"), "ci": float("nan"), "wins": 0,
               "seeds": 0, "iv": NAN_INTERVAL, "per_seed": {}}


def _one_of(values: list):
    """One value when all folds agree, else 'a/b' (the choice of each fold)."""
    vals = [_num(v) for v in values]
    return vals[0] if len(set(vals)) == 1 else "/".join(map(str, vals))


def heldout_contrast(
    rr: pd.DataFrame,
    small: Sequence,
    large: Sequence,
    arm: str | None = None,
    tune_seeds: Sequence[int] | None = None,
    k: int = 2,
) -> dict:
    """Best large n minus best small n, paired over seeds, every choice made on seeds that are not reported.

    `rr`: long frame with columns seed, n, reward (and `arm`, e.g. an lr index, when each n has several arms).
    Per split (tuning, reporting seeds): on the tuning seeds the best arm of each n, then the best small and
    the best large n at their arms (selection.select_on_heldout); on the reporting seeds the per-seed
    difference of those two (n, arm) cells. `tune_seeds` given: one split (the rest is reported); else
    k-fold cross-fitting (selection.seed_folds), every seed reported once. SE of the pooled per-seed
    differences, CI = t-interval; n_small / n_large are 'a/b' when the folds chose differently."""
    small = [v for v in small if v in set(rr["n"])]
    large = [v for v in large if v in set(rr["n"])]
    seeds = sorted(int(v) for v in rr["seed"].unique())
    if not small or not large or len(seeds) < 2:
        return dict(NO_CONTRAST)
    df = rr.assign(_arm=rr[arm] if arm else 0)
    if tune_seeds is not None:
        t = sorted({int(v) for v in tune_seeds})
        splits = [(t, [v for v in seeds if v not in t])]
        how = f"arms chosen on seeds {', '.join(map(str, t))}, reported on the others"
    else:
        splits = seed_folds(seeds, k)
        how = f"arms chosen by {len(splits)}-fold cross-fitting over seeds"
    diffs, picks = [], []
    for tune, rep in splits:
        best = select_on_heldout(df, tune_seeds=tune, report_seeds=rep, group_cols=["n"], choice_col="_arm",
                                 score_col="reward")
        score = dict(zip(best["n"], best["tune_score"], strict=True))
        arms = dict(zip(best["n"], best["_arm"], strict=True))
        cand_s = [v for v in small if v in score]
        cand_l = [v for v in large if v in score]
        if not cand_s or not cand_l:
            continue
        ns_, nl_ = max(cand_s, key=lambda v: score[v]), max(cand_l, key=lambda v: score[v])
        r = df.loc[df["seed"].astype(int).isin(rep)]
        a = r.loc[(r["n"] == nl_) & (r["_arm"] == arms[nl_])].set_index("seed")["reward"]
        b = r.loc[(r["n"] == ns_) & (r["_arm"] == arms[ns_])].set_index("seed")["reward"]
        diffs.append((a - b).dropna())
        picks.append((ns_, nl_, arms[ns_], arms[nl_]))
    if not picks:
        return dict(NO_CONTRAST)
    per_seed = pd.concat(diffs)
    diff = per_seed.to_numpy(dtype=float)
    if diff.size == 0:
        return dict(NO_CONTRAST)
    se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("nan")
    mean = float(diff.mean())
    out = {
        "n_small": _one_of([p[0] for p in picks]),
        "n_large": _one_of([p[1] for p in picks]),
        "diff": mean,
        "se": se,
        "z": mean / se if se and se > 0 else float("nan"),
        "ci": tq(diff.size) * se,
        "wins": int((diff > 0).sum()),
        "seeds": int(diff.size),
        "selection": how,
        "iv": t_interval(diff),
        "per_seed": {int(k): float(v) for k, v in per_seed.items()},
    }
    if arm:
        out["arm_small"] = _one_of([p[2] for p in picks])
        out["arm_large"] = _one_of([p[3] for p in picks])
    return out


def paired_contrast(piv: pd.DataFrame, small: Sequence, large: Sequence, k: int = 2) -> dict:
    """heldout_contrast of a seed x n matrix (one arm per n): the best small and large n are chosen by
    k-fold cross-fitting, so the seeds that pick an n never report its difference."""
    rr = piv.rename_axis(index="seed", columns="n").stack().rename("reward").reset_index()
    return heldout_contrast(rr, small, large, k=k)


def contrast(
    table: pd.DataFrame,
    budget: float,
    plan: ClaimsMode,
    ns: Sequence[int],
    stat: str = "best",
    metric: str = "val_mean",
    x: str = "compute",
) -> dict:
    """paired_contrast of the plan's small n (<= small_max) vs large n (>= large_min) at `budget` (of `x`:
    compute or tokens)."""
    piv = seed_rewards(table, budget, metric, stat, x=x)
    return paired_contrast(
        piv, [n for n in ns if n <= plan.small_max], [n for n in ns if n >= plan.large_min]
    )


def mean_contrast(table: pd.DataFrame, budgets: Sequence[float], plan: ClaimsMode, ns: Sequence[int],
                  metric: str = "val_mean") -> dict:
    """`contrast` (record reward) at each budget, and "iv": the t-interval over seeds of each seed's mean over
    the budgets of its contrast (every budget's arms chosen by cross-fitting): one quantity for a claim
    about all budgets at once."""
    cs = [contrast(table, float(b), plan, ns, "best", metric) for b in budgets]
    per: dict[int, list[float]] = {}
    for c in cs:
        for sd, v in c.get("per_seed", {}).items():
            per.setdefault(sd, []).append(v)
    full = [float(np.mean(v)) for v in per.values() if len(v) == len(cs)]
    return {"by_budget": cs, "iv": t_interval(full)}


TOP_GAIN = "top-budget gain of large n: record reward of the best large n minus the best small n, paired"
"""The key quantity of the n*-rise claims (findings 1, 3, 4, 8, 10, 11): where n* rises to a large n, a
large n beats every small n at the top budget. Arms (best small n <= small_max, best large n >= large_min) are
chosen by 2-fold cross-fitting over the reported seeds, so no seed reports an arm it chose."""
def contrast_text(c: dict) -> str:
    """'n=256 − n=8: +0.0264 [+0.0158, +0.0370], larger n wins on 8/8 seeds' (95% t-interval)."""
    if "n_small" not in c:
        return "n/a"
    return (f"n={c['n_large']} − n={c['n_small']}: {c['iv'].text()}, larger n wins on "
            f"{c['wins']}/{c['seeds']} seeds")


def n_star_table(rows_by_label: dict[str, list[dict]]) -> list[str]:
    """Markdown: one row per budget, one 'n* (reward ± CI; stake [95% interval])' column per label (the stake
    where the rows carry one: what n* gains over the best small n, `stakes`)."""
    labels = list(rows_by_label)
    budgets = sorted({r["budget"] for rows in rows_by_label.values() for r in rows})
    lines = [
        "| budget C | " + " | ".join(f"{lab}: n* (reward ± CI; stake)" for lab in labels) + " |",
        "|" + "---|" * (len(labels) + 1),
    ]
    for b in budgets:
        cells = []
        for lab in labels:
            r = next((r for r in rows_by_label[lab] if r["budget"] == b), None)
            st = f"; {stake_text(r['stake'])}" if r is not None and "stake" in r else ""
            cells.append("n/a" if r is None else f"{n_star_cell(r)} ({fmt(r['mean'], r['ci'])}{st})")
        lines.append(f"| {budget_text(b)} | " + " | ".join(cells) + " |")
    return lines


def stars(rows: list[dict]) -> list:
    return [r["n_star"] for r in rows]


def stars_text(rows: list[dict]) -> str:
    return ", ".join(n_star_cell(r) for r in rows)


def yes(v: bool | None) -> str:
    return "n/a" if v is None else ("yes" if v else "no")


def setup_text(plan: ClaimsMode, st: StudySpec, extra: str = "") -> str:
    """`RunConfig(...)` of a study's shared fields, for the report's Setup lines; the lr is the one the runs
    train with, also where the preset leaves it to the backend (studies.presets.preset_lr)."""
    from studies.declared import study_configs

    cfg = study_configs(st, plan.presets, plan.backend)[0][1]
    if cfg.lr is None and plan.preset_lr(st.preset) is not None:
        cfg = cfg.replace(lr=plan.preset_lr(st.preset))
    skip = {"n", "seed", "problem_seed", "backend", "options"}
    default = RunConfig().to_dict()
    fields = {k: v for k, v in cfg.to_dict().items() if k not in skip and v != default.get(k)}
    opts = {k: v for k, v in cfg.options if k != "snapshots"}
    body = ", ".join(f"{k}={v!r}" for k, v in (fields | opts).items())
    return f"`RunConfig({body})`{extra}"


# ---------------------------------------------------------------------------------- pass@1 and gradients
def polarisation(p: np.ndarray, zero: float = 1e-3, one: float = 0.99) -> dict:
    """Summary of one pass@1 vector (Fig 11 / 27): zero share, solved share, polarised share, mean, std."""
    p = np.asarray(p, dtype=float)
    p = p[np.isfinite(p)]
    z, o = float((p < zero).mean()), float((p >= one).mean())
    return {
        "mean": float(p.mean()),
        "zero_frac": z,
        "one_frac": o,
        "polar_frac": z + o,
        "std": float(p.std()),
    }


def noise_scale_from_pieces(pieces: np.ndarray) -> dict:
    """B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018) from N per-sample gradients (N, P): unbiased
    tr(Sigma), |G|^2 = |mean|^2 - tr(Sigma) / N."""
    pieces = np.asarray(pieces, dtype=float)
    N = pieces.shape[0]
    G = pieces.mean(axis=0)
    tr_sigma = float(((pieces - G) ** 2).sum(axis=1).sum() / (N - 1))
    g2 = float(G @ G - tr_sigma / N)
    return {"b_simple": tr_sigma / g2 if g2 > 0 else float("inf"), "tr_sigma": tr_sigma, "g2": g2}
