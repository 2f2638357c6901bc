"""The tiny-LM allocation study: does the compute-optimal group size n*(C) rise on a real transformer once
large n gets about a thousand optimizer steps, under the paper's recipe (arm R) and under a per-(n, C) tuned
lr (arm E)? Declared here, run in stages, judged by a rule fixed before the runs (docs/PAPER.md "The
question").

Declaration (`FULL`; `QUICK` is the same machinery on a plan of seconds, for CI):
- Easy split of the tiny LM, all of its validation problems, val avg@16 at 16 log-spaced evaluations, bp 16,
  every run to 2^20 rollouts; n in {4, 8, 16, 32, 64} in arm R, {4, 16, 64} in arm E.
- Recipe (the paper's Easy recipe, `Part.overrides`): AdamW, the sqrt rule with B_ref 64 (lr * sqrt(bp n /
  64)), a 10-step linear warm-up, group-std advantages with the sample std, KL + entropy at the fixed
  coefficients KL_COEF and ENTROPY_COEF, temperature 1. Hard: arm R only, no KL, no entropy, n in {4, 16, 64},
  to 2^19.
- Base lrs (at B_ref 64 under the sqrt rule) on a grid of 1.78x (10^(1/4)) steps centred on 1e-4 (`lr_point`);
  an optimum on a grid edge adds the next point outward on the tuning seeds (`extra_grid_point`) before
  anything is reported, at most MAX_EXTRA points each way, unless it is a plateau along lr (within half a
  validation problem of the next lr inward: no grid point can then change what is reported).
- Arm R: one base lr for every n and budget, the argmax over lrs of the mean over n of the tuning seeds'
  top-budget record reward (`choose_r`). Arm E: a base lr per (n, C), argmax of the tuning seeds' mean record
  reward at C (`choose_e`). Tuning seeds 0-1; reported seeds 2-7 (Hard: 2-5) run only at the chosen lrs, so
  the reported stage's run list is a function of the tuning stage's store (`stage_plan`).
- Verdict per arm (`verdict`, one-sided alpha 0.025): RULE_TEXT, verbatim in the report.

Every lr is given explicitly in each run's config (run ids are config hashes), so the store never depends on
a backend default. A run that diverged scores 0 at every budget after its divergence (a NaN policy answers
nothing), so a too-large lr loses its tuning comparison instead of dropping out of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from isocompute.contract.status import DIVERGED, DONE
from studies.config import RunConfig
from studies.declared import StudySpec, study_configs
from studies.presets import presets_for

# ---------------------------------------------------------------------------------------------- the recipe
LR_CENTRE = 1e-4
"""Centre of the base-lr grid: the base lr the earlier tiny-LM study's tuning seeds chose for every n at 2^14
and 2^16 (docs/GROUP_STD.md, "Tiny LM"), now the tiny LM's default."""
LR_STEP = 10**0.25
"""Ratio between neighbouring grid points (1.78x: four points per decade)."""
GRID_K = (-1, 0, 1)
"""Declared grid points, as powers of LR_STEP around the centre: 5.62e-5, 1e-4, 1.78e-4."""
MAX_EXTRA = 3
"""Most points the edge rule may add beyond the declared grid in each direction (down to 1e-5, up to 1e-3);
an optimum still on the edge after that is reported as an open edge and its arm is inconclusive."""
KL_COEF = 0.01
"""Easy's KL(pi || pi_init) coefficient (per-token k3, docs/CONTRACTS.md). The earlier tiny-LM study used 0.1
(the upper end of the usual GRPO range; DeepSeekMath 0.04); here a tenth of it, so that the anchor acts where
the policy gradient is silent (zero-variance groups: most groups once train reward nears 0.9) without setting
the ceiling: at a per-token drift of 0.1-1 nat its pull is 0.001-0.01 per token against a policy-gradient term
of order |A| ~ 0.8 per token of an informative group."""
ENTROPY_COEF = 0.001
"""Easy's entropy-bonus coefficient (full-vocabulary entropy per completion token): verl's long-standing
default; at the tiny LM's largest per-token entropy (ln 18 = 2.9 nats) the bonus is under 0.3% of the policy
gradient of an informative group, so it only acts against collapse. Paired with KL, as the paper requires."""
WARMUP_STEPS = 10
"""The paper's linear lr warm-up (LLMConfig.warmup_steps)."""
LR_REF_BATCH = 64
"""B_ref of the sqrt rule: every lr of this study is a base lr at batch 64 (n = 4 at bp 16 runs at it)."""

# --------------------------------------------------------------------------------------------- the verdict
ALPHA = 0.025
"""One-sided level of each arm's test: S's bounds are mean -/+ t_{0.975, k-1} se over k reported seeds."""
GROWTH = 4.0
"""REPRODUCED needs n*(top) >= GROWTH * n*(low)."""
PLATEAU_GAIN = 0.01
"""P_small / P_large: the reported-seed mean record reward gains less than this from `prev` to `top`."""
STAKE_MIN = 0.02
"""REPRODUCED needs S's mean >= +0.02 (and its lower bound > 0)."""
STAKE_NULL = 0.015
"""NOT REPRODUCED needs S's upper bound < +0.015 (with both plateau checks)."""
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE"

RULE_TEXT = (
    "Verdict per arm (one-sided alpha 0.025 each). Plateau checks: P_small, n = {small}'s reported-seed mean "
    "record reward gains < 0.01 from {prev} to {top}; P_large, the same for the largest n ({large}). Stake "
    "S: "
    "paired over seeds at {top}, (the better of {cands}, picked on the tuning seeds) minus n = {small}. "
    "REPRODUCED if n*({top}) >= 4 n*({low}) with the {top} seed-bootstrap interval excluding the smallest n, "
    "and S's lower bound > 0 with mean >= +0.02. NOT REPRODUCED if P_small and P_large hold and S's upper "
    "bound "
    "< +0.015. INCONCLUSIVE otherwise, saying what would decide it (a large n still rising below a plateaued "
    "small n means the budget is too small: reported, with the extrapolated crossing if the fits give one). "
    '"Survives lr tuning" = REPRODUCED in R and E.'
)
"""The rule as declared before the runs, verbatim but for the budgets and n of the part it is read on
(`rule_text`)."""


def lr_point(k: int, centre: float = LR_CENTRE) -> float:
    """Grid point k: centre * LR_STEP^k, to 3 significant digits (the value every run's config carries); the
    grid of this study is centred on LR_CENTRE, others (isocompute.reports.alloc_study) on their own."""
    return float(f"{centre * LR_STEP**k:.3g}")


def lr_index(lr: float, centre: float = LR_CENTRE) -> int:
    """The k of a grid point (inverse of lr_point)."""
    return int(round(4 * math.log10(lr / centre)))


def lr_label(lr: float) -> str:
    """The `variant` label of a base lr in the declared studies' tables."""
    return f"lr={lr:g}"


def extra_grid_point(
    grid: Sequence[float],
    chosen: float,
    scores: Mapping[float, float] | None = None,
    d_val: int | None = None,
    centre: float = LR_CENTRE,
) -> float | None:
    """The rule "an optimum on a grid edge adds a grid point on the tuning seeds before anything is reported":
    the next point outward (1.78x beyond the edge) when `chosen` is the grid's largest or smallest lr, else
    None. With the tuning `scores` of the grid's lrs and the validation size `d_val`, an edge optimum within
    half a validation problem of the next lr inward is a plateau along lr (selection.saturated_edge) and adds
    nothing. A one-point grid has both edges; it grows upward first."""
    from isocompute.reports.claims.selection import saturated_edge

    ks = sorted(lr_index(v, centre) for v in grid)
    k = lr_index(chosen, centre)
    if k not in ks:
        raise ValueError(f"chosen lr {chosen:g} is not on the grid {', '.join(f'{v:g}' for v in grid)}")
    if k not in (ks[0], ks[-1]):
        return None
    if scores is not None and d_val and len(ks) > 1:
        inner = lr_point(ks[-2] if k == ks[-1] else ks[1], centre)
        if saturated_edge(scores[chosen], scores[inner], d_val):
            return None
    return lr_point(k + 1 if k == ks[-1] else k - 1, centre)


def within_cap(lr: float, max_extra: int = MAX_EXTRA, centre: float = LR_CENTRE,
               grid_k: Sequence[int] = GRID_K) -> bool:
    """Whether the edge rule may still add `lr` (at most `max_extra` points beyond the declared grid)."""
    k = lr_index(lr, centre)
    return min(grid_k) - max_extra <= k <= max(grid_k) + max_extra


# ----------------------------------------------------------------------------------------- the declaration
@dataclass(frozen=True)
class Part:
    """One split's study: its grid, seeds, budgets and recipe."""

    key: str
    """easy or hard (the study's name in the store and the report)."""
    dataset: str
    ns: tuple[int, ...]
    """n of arm R (ascending)."""
    ns_e: tuple[int, ...]
    """n of arm E (empty: no arm E)."""
    budget: int
    """Every run's compute cap in rollouts: the verdict's top budget."""
    prev: int
    """The plateau checks read the record reward's gain from `prev` to `budget`."""
    low: int
    """REPRODUCED compares n*(budget) with n*(low)."""
    readout: tuple[int, ...]
    """Budgets of the readouts and of arm E's lr choice per (n, C) (ascending; contains low, prev, budget)."""
    tune_seeds: tuple[int, ...]
    report_seeds: tuple[int, ...]
    d_val: int
    kl_coef: float
    entropy_coef: float
    stake_from: tuple[int, ...]
    """Candidates of S's larger n (the better on the tuning seeds is reported)."""

    @property
    def arms(self) -> tuple[str, ...]:
        return ("R", "E") if self.ns_e else ("R",)

    def arm_ns(self, arm: str) -> tuple[int, ...]:
        return self.ns if arm == "R" else self.ns_e

    @property
    def small(self) -> int:
        return min(self.ns)

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.tune_seeds) | set(self.report_seeds)))


@dataclass(frozen=True)
class Plan:
    """A declared study: its parts and what every run shares."""

    name: str
    parts: tuple[Part, ...]
    bp: int = 16
    k: int = 16
    """Samples per validation problem (avg@k; best@k, worst@k)."""
    n_evals: int = 16
    pilot_ns: tuple[int, ...] = (4, 64)
    """The pilot: these n of the first part, one tuning seed, at the centre lr (tuning runs, reused)."""
    boot: int = 200
    """Seed-bootstrap resamples of the n* intervals."""
    max_extra: int = MAX_EXTRA
    """Most grid points the edge rule adds each way (QUICK: 1, so that CI stays in seconds)."""

    def part(self, key: str) -> Part:
        for p in self.parts:
            if p.key == key:
                return p
        raise KeyError(key)

    def overrides(self, part: Part) -> dict[str, Any]:
        """RunConfig fields and llm options every run of `part` shares (its lr comes from its variant)."""
        return {
            "lr_rule": "sqrt",
            "scale_rewards": "group",
            "adv_std": "sample",
            "kl_coef": part.kl_coef,
            "entropy_coef": part.entropy_coef,
            "d_val": part.d_val,
            "k": self.k,
            "n_evals": self.n_evals,
            "options": (("lr_ref_batch", LR_REF_BATCH), ("temperature", 1.0), ("warmup_steps", WARMUP_STEPS)),
        }


EASY_VAL = 317
"""Validation problems of the tiny LM's easy split: all of them (a test checks that it still has as many)."""
OCTAVES = tuple(2**e for e in range(12, 21))

FULL = Plan(
    "full",
    parts=(
        Part(
            "easy",
            "easy",
            ns=(4, 8, 16, 32, 64),
            ns_e=(4, 16, 64),
            budget=2**20,
            prev=2**19,
            low=2**12,
            readout=OCTAVES,
            tune_seeds=(0, 1),
            report_seeds=(2, 3, 4, 5, 6, 7),
            d_val=EASY_VAL,
            kl_coef=KL_COEF,
            entropy_coef=ENTROPY_COEF,
            stake_from=(16, 64),
        ),
        # Hard: the paper's Hard recipe (no KL, no entropy), arm R, one octave less compute; its validation
        # set is the first 317 of the split's 768 problems, so that an evaluation costs what Easy's does
        Part(
            "hard",
            "hard",
            ns=(4, 16, 64),
            ns_e=(),
            budget=2**19,
            prev=2**18,
            low=2**12,
            readout=OCTAVES[:-1],
            tune_seeds=(0, 1),
            report_seeds=(2, 3, 4, 5),
            d_val=EASY_VAL,
            kl_coef=0.0,
            entropy_coef=0.0,
            stake_from=(16, 64),
        ),
    ),
)
"""The study of record (module text)."""

QUICK = Plan(
    "quick",
    parts=(
        Part(
            "easy",
            "easy",
            ns=(2, 4),
            ns_e=(2, 4),
            budget=2**6,
            prev=2**5,
            low=2**4,
            readout=(16, 32, 64),
            tune_seeds=(0,),
            report_seeds=(1, 2),
            d_val=8,
            kl_coef=KL_COEF,
            entropy_coef=ENTROPY_COEF,
            stake_from=(4,),
        ),
        Part(
            "hard",
            "hard",
            ns=(2, 4),
            ns_e=(),
            budget=2**5,
            prev=2**4,
            low=2**3,
            readout=(8, 16, 32),
            tune_seeds=(0,),
            report_seeds=(1, 2),
            d_val=8,
            kl_coef=0.0,
            entropy_coef=0.0,
            stake_from=(4,),
        ),
    ),
    bp=2,
    k=2,
    n_evals=4,
    pilot_ns=(2,),
    boot=5,
    max_extra=1,
)
"""The same machinery in seconds (CI: `isocompute report tiny-study --quick`): the science is not in it."""

PLANS = {"full": FULL, "quick": QUICK}

STAGES = ("pilot", "tune", "report", "hard-tune", "hard-report")
"""The named stages, in order (`stage_plan`)."""


def rule_text(part: Part) -> str:
    """RULE_TEXT read on `part`'s budgets and n."""
    from isocompute.reports.claims.common import budget_text

    cands = " and ".join(f"n = {n}" for n in part.stake_from)
    return RULE_TEXT.format(
        small=part.small,
        large=max(part.ns),
        prev=budget_text(part.prev),
        top=budget_text(part.budget),
        low=budget_text(part.low),
        cands=cands,
    )


def spec(plan: Plan, part: Part, lrs: Iterable[float]) -> StudySpec:
    """The declared study of one part over base lrs `lrs` (one variant per lr), through studies.declared."""
    return StudySpec(
        f"tiny-study-{plan.name}/{part.key}",
        kind="n-vs-m",
        preset="interference",
        dataset=part.dataset,
        n=part.ns,
        bp=(plan.bp,),
        budget=part.budget,
        seeds=max(part.seeds) + 1,
        base=tuple(sorted(plan.overrides(part).items())),
        variants=tuple((lr_label(lr), (("lr", lr),)) for lr in sorted(lrs)),
    )


def configs(plan: Plan, part: Part, lrs: Iterable[float]) -> dict[tuple[int, int, float], RunConfig]:
    """{(n, seed, lr): RunConfig} of every declared run of `part` at base lrs `lrs`."""
    out = {}
    for _, cfg in study_configs(spec(plan, part, lrs), presets_for("llm", "tiny"), "llm"):
        out[(int(cfg.n), int(cfg.seed), float(cfg.lr))] = cfg
    return out


def all_lrs() -> list[float]:
    """Every base lr the edge rule may ever reach."""
    return [lr_point(k) for k in range(min(GRID_K) - MAX_EXTRA, max(GRID_K) + MAX_EXTRA + 1)]


# ------------------------------------------------------------------------------------- reading the store
class Runs:
    """The finished runs of one part in a results directory, by (n, seed, lr), read once. `status` holds
    done and diverged runs; `table(keys)` their learning curves with columns n, seed, lr (and `variant`).
    `cfgs`: {key: RunConfig} of another declaration keyed (arm, seed, lr) (isocompute.reports.alloc_study);
    default this study's."""

    def __init__(self, root: Path, plan: Any, part: Any, cfgs: Mapping[tuple, RunConfig] | None = None):
        from studies.store import ResultStore

        self.root, self.plan, self.part = Path(root), plan, part
        self.store = ResultStore(self.root)
        self.cfgs = dict(cfgs) if cfgs is not None else configs(plan, part, all_lrs())
        self.status: dict[tuple[int, int, float], str] = {}
        self.records: dict[tuple[int, int, float], dict] = {}
        if self.store.runs_dir.is_dir():
            for key, cfg in self.cfgs.items():
                rec = self.store.record(cfg.run_id)
                if rec is not None and rec.get("status") in (DONE, DIVERGED):
                    self.status[key] = rec["status"]
                    self.records[key] = rec
        self._tables: dict[tuple[int, int, float], pd.DataFrame] = {}
        self.tuning_: Tuning | None = None
        """The tuning state of this store (`tuning`), computed on first use."""

    def done(self, key) -> bool:
        return key in self.status

    def _table(self, key) -> pd.DataFrame:
        if key not in self._tables:
            t = self.store.read_run(self.cfgs[key].run_id, "table")
            t["lr"] = key[2]  # the base lr (the table's own lr column is the effective one)
            t["variant"] = lr_label(key[2])
            t["seed"] = key[1]
            t["_diverged"] = self.status[key] == DIVERGED
            self._tables[key] = t
        return self._tables[key]

    def table(self, keys: Iterable[tuple[int, int, float]]) -> pd.DataFrame:
        frames = [self._table(k) for k in keys if self.done(k)]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def pass1(self, keys: Iterable[tuple[int, int, float]]) -> pd.DataFrame:
        frames = []
        for k in keys:
            if self.done(k):
                p = self.store.read_run(self.cfgs[k].run_id, "pass1")
                frames.append(p.assign(n=k[0], seed=k[1], lr=k[2]))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def wall(self, key) -> float:
        """The run's wall time in seconds (the executor's, evaluations included)."""
        rec = self.records[key]
        return float(rec.get("wall_s") or (rec.get("info") or {}).get("wall_s") or float("nan"))


def record_rewards(table: pd.DataFrame, budgets: Iterable[float], metric: str = "val_mean",
                   keys: tuple[str, ...] = ("n", "seed", "lr")) -> pd.DataFrame:
    """Record (best-so-far) reward of every run at every budget: columns run_id, keys (n, seed, lr),
    budget, reward (isocompute.reports.claims.groupstd.records). A diverged run scores 0 at budgets past its
    last row."""
    from isocompute.reports.claims.groupstd import records

    budgets = sorted(float(b) for b in budgets)
    if table.empty:
        return pd.DataFrame(columns=["run_id", *keys, "budget", "reward"])
    rec = records(table, budgets, metric, keys=keys)
    dead = table.loc[table["_diverged"]].groupby("run_id")["compute"].max()
    if len(dead):
        last = rec["run_id"].map(dead)
        rec.loc[last.notna() & (rec["budget"] > last), "reward"] = 0.0
    return rec


# -------------------------------------------------------------------------------------------- the choices
@dataclass
class Choices:
    """The tuning seeds' choices of one part: arm R's lr (and every lr's score), arm E's lr per (n, C), and
    the edges still open after the rule's MAX_EXTRA points."""

    r_lr: float
    r_scores: dict[float, float]
    e_lr: dict[tuple[int, float], float] = field(default_factory=dict)
    e_scores: dict[tuple[int, float], dict[float, float]] = field(default_factory=dict)
    open_edges: list[str] = field(default_factory=list)


def choose_r(
    rec: pd.DataFrame, ns: Sequence[int], budget: float, lrs: Sequence[float]
) -> tuple[float, dict[float, float]]:
    """Arm R: the base lr maximising the mean over n of the tuning-seed mean record reward at `budget`
    (`rec`: record_rewards on the tuning seeds), over the lrs every n ran; (lr, {lr: score})."""
    rr = rec.loc[(rec["budget"] == float(budget)) & rec["n"].isin(list(ns)) & rec["lr"].isin(list(lrs))]
    per = rr.groupby(["lr", "n"])["reward"].mean().unstack("n").reindex(columns=list(ns))
    score = per.mean(axis=1, skipna=False).dropna()
    if score.empty:
        raise ValueError("no lr has tuning runs for every n")
    scores = {float(k): float(v) for k, v in score.items()}
    return max(sorted(scores), key=lambda lr: scores[lr]), scores


def choose_e(rec: pd.DataFrame, n: Any, budget: float, by: str = "n") -> tuple[float, dict[float, float]]:
    """Arm E: the base lr of n (rows with rec[by] == n: an n, or an allocator arm's label) with the best
    tuning-seed mean record reward at `budget`; (lr, {lr: score})."""
    rr = rec.loc[(rec["budget"] == float(budget)) & (rec[by] == n)]
    score = rr.groupby("lr")["reward"].mean().dropna()
    if score.empty:
        raise ValueError(f"no tuning runs of {by} = {n}")
    scores = {float(k): float(v) for k, v in score.items()}
    return max(sorted(scores), key=lambda lr: scores[lr]), scores


@dataclass
class Tuning:
    """Where the tuning stage of a part stands: the (n, lr) pairs it needs (the declared grid plus the edge
    rule's points), the runs still missing, and the choices once none is."""

    needed: set[tuple[int, float]]
    missing: list[tuple[int, int, float]]
    choices: Choices | None


def tuning(runs: Runs) -> Tuning:
    """The tuning stage as a function of the store: run the declared grid on the tuning seeds; while an
    optimum (arm R's lr, or arm E's lr of some n at some readout budget) sits on its grid's edge, add the next
    point outward (`extra_grid_point`, for every n of arm R or for that n of arm E); done when no optimum is
    on an edge it may still extend."""
    if getattr(runs, "tuning_", None) is not None:  # a Runs object is read once: so is its tuning state
        return runs.tuning_
    runs.tuning_ = _tuning(runs)
    return runs.tuning_


def _tuning(runs: Runs) -> Tuning:
    part = runs.part
    ns = sorted(set(part.ns) | set(part.ns_e))
    needed = {(n, lr_point(k)) for n in ns for k in GRID_K}
    while True:
        missing = [
            (n, s, lr) for n, lr in sorted(needed) for s in part.tune_seeds if not runs.done((n, s, lr))
        ]
        if missing:
            return Tuning(needed, missing, None)
        keys = [(n, s, lr) for n, lr in needed for s in part.tune_seeds]
        rec = record_rewards(runs.table(keys), part.readout)
        r_grid = sorted(lr for lr in {lr for _, lr in needed} if all((n, lr) in needed for n in part.ns))
        r_lr, r_scores = choose_r(rec, part.ns, part.budget, r_grid)
        ch = Choices(r_lr, r_scores)
        add: set[tuple[int, float]] = set()
        extra = extra_grid_point(r_grid, r_lr, r_scores, part.d_val)
        if extra is not None:
            if within_cap(extra, runs.plan.max_extra):
                add |= {(n, extra) for n in part.ns}
            else:
                ch.open_edges.append(f"arm R: {r_lr:g} (all n)")
        for n in part.ns_e:
            grid = sorted(lr for m, lr in needed if m == n)
            for c in part.readout:
                if runs.plan.bp * n > c:  # not one step of n fits in C
                    continue
                lr, sc = choose_e(rec, n, c)
                ch.e_lr[(n, float(c))], ch.e_scores[(n, float(c))] = lr, sc
                extra = extra_grid_point(grid, lr, sc, part.d_val)
                if extra is None:
                    continue
                if within_cap(extra, runs.plan.max_extra):
                    add.add((n, extra))
                else:
                    ch.open_edges.append(f"arm E: n = {n} at C = {c:g}: {lr:g}")
        if not add - needed:
            return Tuning(needed, [], ch)
        needed |= add


def chosen_keys(part: Part, ch: Choices, arm: str, seeds: Iterable[int]) -> set[tuple[int, int, float]]:
    """(n, seed, lr) of the runs an arm reads on `seeds`: arm R at its lr, arm E at every lr it chose for some
    (n, C)."""
    seeds = list(seeds)
    if arm == "R":
        return {(n, s, ch.r_lr) for n in part.ns for s in seeds}
    return {(n, s, lr) for (n, _), lr in ch.e_lr.items() for s in seeds}


# ----------------------------------------------------------------------------------------------- stages
@dataclass
class StagePlan:
    """One stage's runs: declared (what it would run with the store as it is), done, and to run now;
    `blocked` says why it cannot start yet (an earlier stage unfinished)."""

    stage: str
    declared: list[RunConfig]
    todo: list[RunConfig]
    blocked: str | None = None

    @property
    def done(self) -> int:
        return len(self.declared) - len(self.todo)

    @property
    def rollouts(self) -> int:
        return int(sum(c.budget for c in self.todo))


def stage_runs(stage: str, runs: Runs, keys: Iterable[tuple], blocked: str | None = None,
               ordered: bool = False) -> StagePlan:
    """The StagePlan of the runs `keys` (of runs.cfgs): all of them declared, those not done to run, in
    sorted order, or in the order given when `ordered` (duplicates dropped)."""
    keys = list(dict.fromkeys(keys)) if ordered else sorted(set(keys))
    declared = [runs.cfgs[k] for k in keys]
    todo = [runs.cfgs[k] for k in keys if not runs.done(k)]
    return StagePlan(stage, declared, todo, blocked)


def stage_plan(plan: Plan, stage: str, root: Path, runs: Runs | None = None) -> StagePlan:
    """The runs of a named stage (STAGES) given what the store holds: the pilot (plan.pilot_ns of the first
    part, its first tuning seed, the centre lr); tune / hard-tune (the tuning stage's runs so far, `tuning`);
    report / hard-report (the reported seeds at the chosen lrs, once tuning is complete). `runs`: the part's
    store, read already."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; choose one of {', '.join(STAGES)}")
    key = "hard" if stage.startswith("hard") else plan.parts[0].key
    part = plan.part(key)
    runs = runs if runs is not None else Runs(root, plan, part)
    if stage == "pilot":
        return stage_runs(stage, runs, [(n, part.tune_seeds[0], LR_CENTRE) for n in plan.pilot_ns])
    tun = tuning(runs)
    if stage.endswith("tune"):
        return stage_runs(
            stage, runs, list(tun.missing) + [(n, s, lr) for n, lr in tun.needed for s in part.tune_seeds]
        )
    if tun.choices is None:
        return stage_runs(
            stage,
            runs,
            [],
            blocked=f"the {part.key} tuning stage is not finished "
            f"({len(tun.missing)} run(s) missing): run stage {'hard-' if key == 'hard' else ''}tune",
        )
    return stage_runs(stage, runs, report_order(part, tun.choices), ordered=True)


def report_order(part: Part, ch: Choices) -> list[tuple[int, int, float]]:
    """The reported runs (n, seed, lr) in the order they run: arm by arm (R, the paper's recipe, first), and
    within an arm seed by seed, each seed's smallest n (the longest run) first. Why: results arrive in the
    order a reader needs them (one arm complete before the next; every n of a seed before the next seed, so
    that a stage cut by a session's end leaves whole seeds), and a 2-worker pool ends with its short runs.
    Results do not depend on the order."""
    out: list[tuple[int, int, float]] = []
    for arm in part.arms:
        out += sorted(chosen_keys(part, ch, arm, part.report_seeds), key=lambda k: (k[1], k[0], k[2]))
    return list(dict.fromkeys(out))


# ------------------------------------------------------------------------------------------ the estimator
@dataclass(frozen=True)
class NStar:
    """n*(C) and its seed-bootstrap 95% interval (None where the data give none)."""

    point: int | None
    lo: int | None = None
    hi: int | None = None


def estimate_n_star(
    table: pd.DataFrame, budgets: Sequence[float], reps: int = 0, metric: str = "val_mean", x: str = "compute"
) -> list[NStar]:
    """n*(C) at `budgets` over the n of `table` (one lr per n): the project's one estimator
    (studies.fit.nstar.n_star_sets): the n of the best seed-mean record reward, and, when `reps` > 0 and
    there are seeds to resample, the interval [smallest, largest] of the set of n whose seed-bootstrap
    interval reaches the best's (the n the seeds cannot tell from it)."""
    from studies.fit.nstar import n_star_sets

    if table.empty:
        return [NStar(None) for _ in budgets]
    C = [float(b) for b in budgets]
    with_interval = bool(reps) and table["seed"].nunique() >= 2
    ns = n_star_sets(table, metric=metric, by="n", computes=C, x=x, reps=reps if with_interval else 1)
    out = []
    for best, members in zip(ns.best, ns.sets, strict=True):
        if best is None:
            out.append(NStar(None))
        elif with_interval:
            out.append(NStar(int(best), int(min(members)), int(max(members))))
        else:
            out.append(NStar(int(best)))
    return out


def extrapolated_crossing(
    table: pd.DataFrame, small: int, large: int, start: float, stop: float = 2.0**30
) -> float | None:
    """The compute beyond `start` where the per-n sigmoid of `large` first exceeds that of `small` (the same
    fits as estimate_n_star's, on the seed-mean curves), or None when the fits do not cross by `stop`."""
    import warnings

    from isocompute.reports.claims.groupstd import PointFrontier

    if table.empty or not {small, large} <= set(table["n"]):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ff = PointFrontier(metric="val_mean", by="n").fit(table)
    fs, fl = ff.curves_.get(small), ff.curves_.get(large)
    if fs is None or fl is None or not (fs.ok_ and fl.ok_):
        return None
    C = np.geomspace(start, stop, 241)
    above = fl.predict(C) > fs.predict(C)
    return float(C[np.argmax(above)]) if above.any() else None


# ----------------------------------------------------------------------------------------------- verdict
@dataclass
class Evidence:
    """What one arm's verdict reads. `rec`: record reward of each n at the arm's lr for each budget, columns
    n, seed, budget, reward, on the reported seeds; `tune_rec` the same on the tuning seeds (S's larger n is
    picked there); n* at the top and low budgets (with the top's bootstrap interval); the extrapolated compute
    where the largest n's fit overtakes the smallest n's; lr optima left on an open grid edge."""

    rec: pd.DataFrame
    tune_rec: pd.DataFrame
    n_star_top: NStar
    n_star_low: NStar
    crossing: float | None = None
    open_edges: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    outcome: str
    why: str
    """The rule's conditions with their numbers."""
    decide: str = ""
    """What would decide it (INCONCLUSIVE only)."""
    numbers: dict = field(default_factory=dict)


def _mean_at(rec: pd.DataFrame, n: int, budget: float) -> float:
    v = rec.loc[(rec["n"] == n) & (rec["budget"] == float(budget)), "reward"]
    return float(v.mean()) if len(v) else float("nan")


def stake(ev: Evidence, part: Part, ns: Sequence[int]) -> dict:
    """S: paired over the reported seeds at the top budget, (the better of part.stake_from on the tuning
    seeds) minus the smallest n; mean, one-sided (alpha ALPHA) bounds lo / hi, seeds, the larger n."""
    from scipy.stats import t

    small = min(ns)
    cands = [n for n in part.stake_from if n in ns]
    tune = {n: _mean_at(ev.tune_rec, n, part.budget) for n in cands}
    tune = {n: v for n, v in tune.items() if np.isfinite(v)}
    out = {
        "n_large": None,
        "n_small": small,
        "mean": float("nan"),
        "lo": float("nan"),
        "hi": float("nan"),
        "seeds": 0,
        "tune": tune,
    }
    if not tune:
        return out
    big = max(sorted(tune), key=lambda n: tune[n])
    top = ev.rec.loc[ev.rec["budget"] == float(part.budget)]
    piv = top.pivot_table(index="seed", columns="n", values="reward")
    if big not in piv.columns or small not in piv.columns:
        return out | {"n_large": big}
    d = (piv[big] - piv[small]).dropna().to_numpy(dtype=float)
    out |= {"n_large": big, "seeds": int(d.size), "mean": float(d.mean()) if d.size else float("nan")}
    if d.size >= 2:
        h = float(t.ppf(1 - ALPHA, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size))
        out |= {"lo": out["mean"] - h, "hi": out["mean"] + h}
    return out


def verdict(ev: Evidence, part: Part, ns: Sequence[int]) -> Verdict:
    """The rule (RULE_TEXT) on one arm whose n grid is `ns`: REPRODUCED, NOT REPRODUCED or INCONCLUSIVE with
    what would decide it."""
    from isocompute.reports.claims.common import budget_text as bt

    small, large = min(ns), max(ns)
    top, prev, low = part.budget, part.prev, part.low
    g_small = _mean_at(ev.rec, small, top) - _mean_at(ev.rec, small, prev)
    g_large = _mean_at(ev.rec, large, top) - _mean_at(ev.rec, large, prev)
    p_small = bool(np.isfinite(g_small) and g_small < PLATEAU_GAIN)
    p_large = bool(np.isfinite(g_large) and g_large < PLATEAU_GAIN)
    s = stake(ev, part, ns)
    st, sl = ev.n_star_top, ev.n_star_low
    grows = st.point is not None and sl.point is not None and st.point >= GROWTH * sl.point
    excludes = st.lo is not None and st.lo > small
    s_up = bool(np.isfinite(s["lo"]) and s["lo"] > 0 and s["mean"] >= STAKE_MIN)
    s_null = bool(np.isfinite(s["hi"]) and s["hi"] < STAKE_NULL)
    iv = f" [{st.lo}, {st.hi}]" if st.lo is not None else " [no interval]"
    s_txt = (
        f"S = n={s['n_large']} − n={small} = {s['mean']:+.4f} [{s['lo']:+.4f}, {s['hi']:+.4f}] over "
        f"{s['seeds']} seeds"
        if s["n_large"] is not None
        else "S: n/a"
    )
    why = (
        f"n*({bt(top)}) = {st.point}{iv}, n*({bt(low)}) = {sl.point}; {s_txt}; n={small} gains "
        f"{g_small:+.4f} and n={large} {g_large:+.4f} from {bt(prev)} to {bt(top)} "
        f"(P_small {'holds' if p_small else 'fails'}, P_large {'holds' if p_large else 'fails'})"
    )
    numbers = {
        "n_star_top": st.point,
        "n_star_top_lo": st.lo,
        "n_star_top_hi": st.hi,
        "n_star_low": sl.point,
        "gain_small": g_small,
        "gain_large": g_large,
        "p_small": p_small,
        "p_large": p_large,
        "stake": s,
        "crossing": ev.crossing,
    }
    if ev.open_edges:
        return Verdict(
            INCONCLUSIVE,
            why,
            "the lr optimum is on an open edge of the grid after the rule's "
            f"added points ({'; '.join(ev.open_edges)}): extend the grid",
            numbers,
        )
    if grows and excludes and s_up:
        return Verdict(REPRODUCED, why, "", numbers)
    if p_small and p_large and s_null:
        return Verdict(NOT_REPRODUCED, why, "", numbers)
    need = []
    if not grows:
        need.append(
            f"n* growth: n*({bt(top)}) = {st.point} is not >= {GROWTH:g} x n*({bt(low)}) = {sl.point}"
        )
    elif not excludes:
        need.append(f"the {bt(top)} n* interval{iv} does not exclude n = {small}: more reported seeds")
    if not s_up and not s_null:
        need.append(
            f"S's bounds [{s['lo']:+.4f}, {s['hi']:+.4f}] clear neither lower > 0 with mean >= "
            f"+{STAKE_MIN:g} nor upper < +{STAKE_NULL:g}: more reported seeds"
        )
    elif not s_up and not (p_small and p_large):
        pass  # S is null, so only the plateau checks stand between it and NOT REPRODUCED (below)
    if not p_small:
        need.append(f"n = {small} still gains {g_small:+.4f} from {bt(prev)} to {bt(top)}: a larger budget")
    if not p_large:
        rising_below = p_small and _mean_at(ev.rec, large, top) < _mean_at(ev.rec, small, top)
        if rising_below:
            cross = (
                f"; the per-n sigmoid fits cross at about 2^{math.log2(ev.crossing):.1f} rollouts"
                if ev.crossing
                else "; the per-n sigmoid fits give no crossing"
            )
            need.append(
                f"n = {large} is still rising ({g_large:+.4f} from {bt(prev)} to {bt(top)}) below the "
                f"plateaued n = {small}: the budget is too small{cross}"
            )
        else:
            need.append(
                f"n = {large} still gains {g_large:+.4f} from {bt(prev)} to {bt(top)}: a larger budget"
            )
    return Verdict(INCONCLUSIVE, why, "; ".join(need) or "nothing in the rule (check the data)", numbers)


def survives(r: Verdict | None, e: Verdict | None) -> bool:
    """ "Survives lr tuning": REPRODUCED in arm R and in arm E."""
    return r is not None and e is not None and r.outcome == REPRODUCED and e.outcome == REPRODUCED


# ----------------------------------------------------------------------------------------------- readouts
SMALL_MAX = 8
"""n <= 8 are the 'small n' of the reward-at-stake readout (best n minus the best small n)."""


def arm_lr(ch: Choices, arm: str, n: int, budget: float) -> float | None:
    """The base lr arm `arm` reads for n at `budget` (None: arm E made no choice there: n has no step)."""
    return ch.r_lr if arm == "R" else ch.e_lr.get((n, float(budget)))


def arm_records(
    runs: Runs, ch: Choices, arm: str, seeds: Iterable[int], metric: str = "val_mean"
) -> pd.DataFrame:
    """Record reward of each n of the arm at each readout budget, at the lr the arm reads there: columns n,
    seed, budget, reward (record_rewards of the arm's chosen runs, filtered by (n, budget) -> lr)."""
    part = runs.part
    rec = record_rewards(runs.table(chosen_keys(part, ch, arm, seeds)), part.readout, metric)
    if rec.empty:
        return rec
    want = [arm_lr(ch, arm, int(n), b) for n, b in zip(rec["n"], rec["budget"], strict=True)]
    keep = np.array([w is not None and lr == w for lr, w in zip(rec["lr"], want, strict=True)], dtype=bool)
    return rec.loc[keep & rec["n"].isin(part.arm_ns(arm))].reset_index(drop=True)


def arm_curves(runs: Runs, ch: Choices, arm: str, budget: float, seeds: Iterable[int]) -> pd.DataFrame:
    """Learning curves of the arm's n at the lrs it reads at `budget`, on `seeds`."""
    keys = []
    for n in runs.part.arm_ns(arm):
        lr = arm_lr(ch, arm, n, budget)
        if lr is not None:
            keys += [(n, s, lr) for s in seeds]
    return runs.table(keys)


def _ci(v) -> tuple[float, float]:
    from isocompute.reports.claims.common import ci

    return ci(v)


def stake_at(rec: pd.DataFrame, trec: pd.DataFrame, budget: float, ns: Sequence[int]) -> dict:
    """The reward at stake at `budget`: the best n minus the best small n (n <= SMALL_MAX), both picked on the
    tuning seeds (`trec`), paired over the reported seeds (`rec`): mean and 95% t half-width."""
    small = [n for n in ns if n <= SMALL_MAX]
    tune = {n: _mean_at(trec, n, budget) for n in ns}
    tune = {n: v for n, v in tune.items() if np.isfinite(v)}
    if not tune or not any(n in tune for n in small):
        return {
            "budget": float(budget),
            "best": None,
            "best_small": None,
            "mean": float("nan"),
            "ci": float("nan"),
        }
    best = max(sorted(tune), key=lambda n: tune[n])
    best_small = max(sorted(n for n in small if n in tune), key=lambda n: tune[n])
    piv = rec.loc[rec["budget"] == float(budget)].pivot_table(index="seed", columns="n", values="reward")
    if best not in piv.columns or best_small not in piv.columns:
        d = np.array([])
    else:
        d = (piv[best] - piv[best_small]).dropna().to_numpy(dtype=float)
    m, h = _ci(d)
    return {"budget": float(budget), "best": best, "best_small": best_small, "mean": m, "ci": h}


def asymptotes(curves: pd.DataFrame) -> dict[int, dict]:
    """Per n, the fitted sigmoid asymptote A (studies.fit's per-n sigmoid on record points): of the seed-mean
    curve, and the mean and 95% t half-width of the per-seed fits (does the ceiling depend on n?)."""
    import warnings

    from isocompute.reports.claims.groupstd import PointFrontier

    out: dict[int, dict] = {}
    if curves.empty:
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pooled = PointFrontier(by="n").fit(curves).curves_
        per_seed: dict[int, list[float]] = {}
        for _, g in curves.groupby("seed"):
            for n, f in PointFrontier(by="n", aggregate="pool").fit(g).curves_.items():
                if f.ok_:
                    per_seed.setdefault(int(n), []).append(float(f.params_["A"]))
    for n, f in pooled.items():
        m, h = _ci(per_seed.get(int(n), []))
        out[int(n)] = {
            "A": float(f.params_["A"]) if f.ok_ else float("nan"),
            "seed_mean": m,
            "ci": h,
            "seeds": len(per_seed.get(int(n), [])),
        }
    return out


def _nearest(curves: pd.DataFrame, compute: float, col: str) -> pd.DataFrame:
    """Per run, the row whose compute is nearest `compute` in log space: columns n, seed, value."""
    df = curves.loc[curves["compute"] > 0, ["run_id", "n", "seed", "compute", col]].copy()
    df["_d"] = np.abs(np.log(df["compute"].to_numpy(dtype=float)) - math.log(compute))
    idx = df.groupby("run_id")["_d"].idxmin()
    return df.loc[idx.to_numpy(), ["n", "seed", col]].rename(columns={col: "value"})


def per_n(frame: pd.DataFrame) -> dict[int, tuple[float, float]]:
    """{n: (mean, 95% t half-width)} of frame's `value` over seeds."""
    return {int(n): _ci(g["value"]) for n, g in frame.groupby("n")}


def plateau_grid(curves: pd.DataFrame, prev: float, top: float) -> dict[int, dict]:
    """Where the plateau checks read each n's evaluation grid (a readout beside the rule, not part of it).

    The record at `prev` is that of the last evaluation at or below it; with 16 log-spaced evaluations per
    run that can lie most of an octave below `prev` (n = 4 at 2^20: 2^18.1, the next one at 2^19.07), so
    the rule's "gain from prev to top" spans more compute than its name says. Per n: `read` the compute of
    that evaluation, `past` the first evaluation above `prev` (at most `top`), and the seed-mean record gains
    to `top` from each, `gain_read` (the rule's, at these curves' lr) and `gain_past` (from the first
    evaluation past `prev`: the sensitivity reading), with their seeds."""
    out: dict[int, dict] = {}
    if curves.empty:
        return out
    for n, g in curves.groupby("n"):
        c = np.sort(pd.to_numeric(g["compute"], errors="coerce").dropna().unique())
        below, above = c[c <= prev * (1 + 1e-9)], c[(c > prev * (1 + 1e-9)) & (c <= top * (1 + 1e-9))]
        if not below.size or not above.size:
            continue
        read, past = float(below[-1]), float(above[0])
        rec = record_rewards(g, [read, past, top], keys=("n", "seed", "lr"))
        piv = rec.pivot_table(index="run_id", columns="budget", values="reward")
        out[int(n)] = {
            "read": read,
            "past": past,
            "gain_read": float((piv[float(top)] - piv[read]).mean()),
            "gain_past": float((piv[float(top)] - piv[past]).mean()),
            "runs": int(len(piv)),
        }
    return out


def pass1_readout(runs: Runs, ch: Choices, arm: str, computes: Sequence[float]) -> dict:
    """Finding 5 from the stored snapshots: per (compute, split, n), the reported-seed means of the pass@1
    distribution's mean, share at 0 (never solved in k samples) and share at 1, at the snapshot nearest each
    compute (studies.fit.distribution)."""
    from studies.fit.distribution import at_matched_compute, pass1_stats

    part = runs.part
    out: dict = {}
    top = float(part.budget)
    keys = [(n, s, arm_lr(ch, arm, n, top)) for n in part.arm_ns(arm) for s in part.report_seeds]
    p1 = runs.pass1([k for k in keys if k[2] is not None])
    if p1.empty:
        return out
    n_of = p1.groupby("run_id")["n"].first()
    stats = pass1_stats(p1.drop(columns=["n", "seed", "lr"]))
    for c in computes:
        m = at_matched_compute(stats, float(c))
        m["n"] = m["run_id"].map(n_of)
        for (split, n), g in m.groupby(["split", "n"]):
            out.setdefault(float(c), {}).setdefault(str(split), {})[int(n)] = {
                "mean": float(g["mean"].mean()),
                "zero": float(g["zero_frac"].mean()),
                "one": float(g["one_frac"].mean()),
                "runs": len(g),
            }
    return out


def wall_readout(runs: Runs, ch: Choices, arm: str, curves: pd.DataFrame, points: int = 5) -> dict:
    """The frontier against wall time: each run's rollouts/s (its budget over its wall time, evaluations
    included), its curve put on a wall-time axis at that rate, and n* over n at `points` log-spaced wall
    times every n reaches."""
    part = runs.part
    top = float(part.budget)
    rate: dict[tuple[int, int], float] = {}
    for n in part.arm_ns(arm):
        lr = arm_lr(ch, arm, n, top)
        for s in part.report_seeds:
            k = (n, s, lr)
            if lr is not None and runs.done(k) and runs.wall(k) > 0:
                rate[(n, s)] = runs.cfgs[k].budget / runs.wall(k)
    out = {
        "rate": {n: _ci([v for (m, _), v in rate.items() if m == n]) for n in part.arm_ns(arm)},
        "times": [],
        "n_star": [],
    }
    if curves.empty or not rate:
        return out
    t = curves.copy()
    t["wall"] = [
        c / rate.get((int(n), int(s)), float("nan"))
        for c, n, s in zip(t["compute"], t["n"], t["seed"], strict=True)
    ]
    t = t.loc[np.isfinite(t["wall"])]
    pos = t.loc[t["wall"] > 0].groupby("n")["wall"].agg(["min", "max"])
    lo, hi = float(pos["min"].max()), float(pos["max"].min())
    if not hi > lo:
        return out
    times = list(np.geomspace(lo, hi, points))
    out["times"] = times
    out["n_star"] = [s.point for s in estimate_n_star(t, times, 0, x="wall")]
    return out


def arm_readouts(runs: Runs, ch: Choices, arm: str, boot: int) -> dict:
    """Every readout of one arm on the reported seeds (module text), and the verdict's evidence."""
    part = runs.part
    ns = part.arm_ns(arm)
    rep, tune = part.report_seeds, part.tune_seeds
    rec = arm_records(runs, ch, arm, rep)
    trec = arm_records(runs, ch, arm, tune)
    budgets = [float(b) for b in part.readout]
    out: dict = {"rec": rec, "budgets": budgets}
    if arm == "R":
        t = arm_curves(runs, ch, arm, budgets[-1], rep)
        stars = estimate_n_star(t, budgets, boot)
        best_k = estimate_n_star(t, budgets, 0, metric="val_best_k")
        worst_k = estimate_n_star(t, budgets, 0, metric="val_worst_k")
    else:
        stars, best_k, worst_k = [], [], []
        for b in budgets:
            t = arm_curves(runs, ch, arm, b, rep)
            stars += estimate_n_star(t, [b], boot)
            best_k += estimate_n_star(t, [b], 0, metric="val_best_k")
            worst_k += estimate_n_star(t, [b], 0, metric="val_worst_k")
    out |= {"stars": stars, "best_k": best_k, "worst_k": worst_k}
    out["stake"] = [stake_at(rec, trec, b, ns) for b in budgets]
    top_curves = arm_curves(runs, ch, arm, budgets[-1], rep)
    out["asymptote"] = asymptotes(top_curves)
    mid = float(part.readout[len(part.readout) // 2])
    out["matched"] = [mid, budgets[-1]]
    out["pass1"] = pass1_readout(runs, ch, arm, out["matched"])
    if top_curves.empty:
        out["zero_var"], out["gap"], out["overfit"] = {}, {}, {}
    else:
        out["zero_var"] = {c: per_n(_nearest(top_curves, c, "zero_var_frac")) for c in out["matched"]}
        last = top_curves.sort_values("compute").groupby("run_id").tail(1)
        out["gap"] = per_n(last.assign(value=last["train_mean"] - last["val_mean"]))
        best = top_curves.groupby("run_id")["val_mean"].max()
        out["overfit"] = per_n(last.assign(value=last["run_id"].map(best) - last["val_mean"]))
    out["wall"] = wall_readout(runs, ch, arm, top_curves)
    if arm == "R":  # arm E's top-budget runs are arm R's whenever its choices agree; its curves mix lrs
        from isocompute.reports.tiny_readings import arm_readings

        out["readings"] = arm_readings(top_curves, budgets, ns, lr_ref_batch=LR_REF_BATCH)
    out["grid"] = plateau_grid(top_curves, float(part.prev), float(part.budget))
    out["top_mean"] = {
        n: _ci(rec.loc[(rec["n"] == n) & (rec["budget"] == budgets[-1]), "reward"]) for n in ns
    }
    low_i = budgets.index(float(part.low))
    crossing = extrapolated_crossing(top_curves, min(ns), max(ns), float(part.budget))
    out["evidence"] = Evidence(
        rec,
        trec,
        stars[-1] if stars else NStar(None),
        stars[low_i] if stars else NStar(None),
        crossing,
        tuple(e for e in ch.open_edges if e.startswith(f"arm {arm}")),
    )
    return out


# ---------------------------------------------------------------------------------------------- pipeline
def pilot_readout(runs: Runs, plan: Plan) -> list[dict]:
    """The pilot's runs (speed, stability): status, reward at the base and at the end, the best val avg@k and
    where, rollouts/s, and the last entropy and KL."""
    out = []
    part = runs.part
    for n in plan.pilot_ns:
        k = (n, part.tune_seeds[0], LR_CENTRE)
        row: dict[str, Any] = {"n": n, "seed": k[1], "lr": k[2], "status": runs.status.get(k, "not run")}
        if runs.done(k):
            t = runs.table([k]).sort_values("compute")
            i = int(t["val_mean"].to_numpy().argmax())
            row |= {
                "val_base": float(t["val_mean"].iloc[0]),
                "val_last": float(t["val_mean"].iloc[-1]),
                "val_best": float(t["val_mean"].iloc[i]),
                "at": float(t["compute"].iloc[i]),
                "train_last": float(t["train_mean"].iloc[-1]),
                "compute": float(t["compute"].iloc[-1]),
                "entropy": float(t["entropy"].iloc[-1]),
                "kl": float(t["kl"].iloc[-1]),
                "wall": runs.wall(k),
                "rate": runs.cfgs[k].budget / runs.wall(k),
            }
        out.append(row)
    return out


def measure(plan: Plan, root: Path) -> dict:
    """Everything the report shows, from the results directory as it stands: each stage's progress, the
    pilot, and per part the tuning state, the choices, every arm's readouts and (once its reported runs are
    all done) its verdict."""
    root = Path(root)
    runs = {p.key: Runs(root, plan, p) for p in plan.parts}
    out: dict[str, Any] = {"plan": plan, "root": str(root), "stages": [], "parts": {}}
    for st in STAGES:
        part = plan.part("hard" if st.startswith("hard") else plan.parts[0].key)
        sp = stage_plan(plan, st, root, runs[part.key])
        out["stages"].append(
            {
                "stage": st,
                "declared": len(sp.declared),
                "done": sp.done,
                "blocked": sp.blocked,
                "rollouts_left": sp.rollouts,
                "rollouts": int(sum(c.budget for c in sp.declared)),
            }
        )
    out["pilot"] = pilot_readout(runs[plan.parts[0].key], plan)
    for part in plan.parts:
        r = runs[part.key]
        tun = tuning(r)
        res: dict[str, Any] = {
            "part": part,
            "tuning_missing": len(tun.missing),
            "choices": tun.choices,
            "needed": sorted(tun.needed),
            "arms": {},
        }
        out["parts"][part.key] = res
        if tun.choices is None:
            continue
        for arm in part.arms:
            keys = chosen_keys(part, tun.choices, arm, part.report_seeds)
            done = sum(r.done(k) for k in keys)
            a: dict[str, Any] = {"declared": len(keys), "done": done, "verdict": None}
            have = {k[0] for k in keys if r.done(k)}
            if have >= set(part.arm_ns(arm)):
                a |= arm_readouts(r, tun.choices, arm, plan.boot)
                if done == len(keys):
                    a["verdict"] = verdict(a["evidence"], part, part.arm_ns(arm))
            res["arms"][arm] = a
        if "R" in res["arms"] and "E" in res["arms"]:
            res["survives"] = survives(res["arms"]["R"]["verdict"], res["arms"]["E"]["verdict"])
    return out


def run_stage(plan: Plan, stage: str, root: Path, jobs: int = 2, progress: bool = True, say=print) -> int:
    """Run a named stage's missing runs into the results directory `root` (resumable: finished runs are
    skipped, a killed stage reruns what it lost) and return how many ran. A tuning stage repeats until the
    edge rule asks for no more points. StudiesError when an earlier stage is unfinished or a run failed."""
    return run_until_done(lambda: stage_plan(plan, stage, root), root, f"tiny-study-{plan.name}", jobs,
                          progress, say)


def run_until_done(next_plan, root: Path, study: str, jobs: int = 2, progress: bool = True, say=print) -> int:
    """Run the missing runs of the StagePlan `next_plan()` gives, again until it gives none (a tuning stage
    grows with what its runs show); the number run. StudiesError when the stage is blocked or a run
    failed."""
    from studies.config import StudiesError
    from studies.executors import run_sweep
    from studies.store import ResultStore

    ran = 0
    while True:
        sp = next_plan()
        stage = sp.stage
        if sp.blocked:
            raise StudiesError(sp.blocked)
        if not sp.todo:
            say(f"stage {stage}: all {len(sp.declared)} run(s) finished in {root}")
            return ran
        say(
            f"stage {stage}: {sp.done} of {len(sp.declared)} run(s) finished; running {len(sp.todo)} "
            f"({sp.rollouts / 1e6:.2f} M rollouts) with {jobs} job(s) into {root}"
        )
        with ResultStore(root, study=study) as store:
            summary = run_sweep(sp.todo, store, jobs=jobs, progress=progress, desc=f"{study} {stage}")
        ran += summary.done
        if summary.failed:
            rid, why = next(iter(summary.failed.items()))
            raise StudiesError(f"stage {stage}: {len(summary.failed)} run(s) failed, e.g. {rid}: {why}")
