"""Stage 2 of the tiny-LM study: does the group size n change the *ceiling* a real transformer reaches, or
only the *speed* at which it gets there? Declared here before its first run, run in stages into its own
store, judged by a rule fixed before the runs (docs/TINY_STAGE2.md is generated from this module and the
store).

Why a stage 2: the preregistered study (isocompute.reports.tiny_study) found n* = 4 at every budget to 2^20
on Easy and to 2^19 on Hard, and its verdicts read INCONCLUSIVE because its "no" could not fire below about
2^24 (the lr is chosen at the top budget, so every curve still rises there). Its store also shows that the
curve of a large n is the small n's delayed by a roughly constant factor of compute: n may change the speed of
learning and not the ceiling. Three arms ask where a ceiling could differ:

- **easy** (`EASY`): stage 1's arm R frozen (base lr 5.62e-05 at B_ref 64 under the sqrt rule, warm-up 10,
  KL 0.01, entropy 0.001, bp 16, avg@16 on all 317 validation problems), n in {4, 8, 16}, two octaves more
  compute (to 2^22). Seeds 2-5 first; seeds 6-7 only under `EXTRA_SEEDS_RULE`.
- **coverage** (`COVERAGE`): the xhard split (pass@16 = 0 under the base model: a problem teaches only once a
  rollout solves it, the regime where the paper has large n winning by coverage), Hard's arm-R base lr from
  stage 1's tuning (5.62e-05), no KL or entropy (the paper's Hard recipe), n in {4, 16, 64}, to 2^20.
- **memo** (`MEMO`): Easy's recipe on a quarter of Easy's training problems (the first 555 of the split's
  fixed order, `d` = 555), n in {4, 16, 64}, to 2^20: at 2^20 rollouts n = 4 sees each problem ~470 times,
  n = 64 ~30 times; does a small training set lower small n's ceiling (train reward near 1, validation
  stalling) so that large n overtakes?

Every run evaluates on one absolute compute grid (every half-octave from 2^12, plus the end:
LLMConfig.eval_from), the same points for every budget, and keeps its final state (weights, AdamW state,
the allocator's stream and history: LLMConfig.keep_final) in the store, so that a later stage can extend a
run to 2^24 instead of restarting it.

The rule (`verdict`, RULE_TEXT) has three outcomes per arm, each shown able to fire at the declared budget
and seed count on synthetic tables (tests/science/test_tiny_stage2.py): RISES, NO RISE THROUGH C,
INCONCLUSIVE. Predictions (PREDICTIONS) are committed with it and reported against the outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studies.config import RunConfig
from studies.declared import StudySpec, study_configs
from studies.presets import presets_for

# ------------------------------------------------------------------------------------------ frozen recipe
STAGE1_LR = 5.62e-05
"""Base lr at B_ref 64 under the sqrt rule that stage 1's tuning seeds chose for arm R, on Easy and on Hard
alike (docs/TINY_STUDY.md "Chosen base lrs"; a test reads it back from the committed stage-1 store)."""
LR_REF_BATCH = 64
WARMUP_STEPS = 10
EASY_KL, EASY_ENTROPY = 0.01, 0.001
"""Stage 1's Easy coefficients (isocompute.reports.tiny_study.KL_COEF, ENTROPY_COEF)."""
EVAL_FROM = 2**12
"""The absolute evaluation grid starts at 2^12 rollouts ..."""
EVALS_PER_OCTAVE = 2
"""... with a point every half-octave (21 points to 2^22, plus step 0)."""
D_VAL = 317
"""Validation problems: all of Easy's; xhard validates on the first 317 of its 498, as stage 1's Hard did."""
MEMO_D = 555
"""The memorisation arm's training problems: the first quarter of Easy's 2,219 (ceil(2219 / 4))."""

# --------------------------------------------------------------------------------------------- the rule
ALPHA = 0.025
"""One-sided level: a 95% two-sided t-interval's bound, over the reported seeds (paired by seed)."""
NULL_MARGIN = 0.005
"""NO RISE THROUGH C needs every contrast's upper bound below +0.005 (a sixth of one validation problem's
worth of avg@16 on 317 problems is 0.0002; +0.005 is about 1.6 problems)."""
PLATEAU_GAIN = 0.01
"""... and the smallest n's seed-mean record reward gaining less than this over the last octave ..."""
SATURATED_TRAIN = 0.98
"""... or the smallest n's seed-mean train reward at the top budget at least this (it has nothing left to
learn on its training problems, so more compute cannot lift it)."""
RISES, NO_RISE, INCONCLUSIVE = "RISES", "NO RISE THROUGH C", "INCONCLUSIVE"
OUTCOMES = (RISES, NO_RISE, INCONCLUSIVE)

RULE_TEXT = (
    "Per arm, on the reported seeds at the arm's top budget C (record reward: best validation avg@16 so far; "
    "each contrast paired by seed: record of a larger n minus record of the smallest n, with a 95% "
    "t-interval). RISES if some larger n beats the smallest n: a contrast's one-sided t-test rejects "
    "'contrast <= 0' at 0.025 after Holm's correction over the arm's contrasts (its 95% lower bound > 0, "
    "Holm-adjusted). Else NO RISE THROUGH C if every contrast's upper bound is below +0.005 and the smallest "
    "n has stopped rising: its seed-mean record gains less than 0.01 over the last octave (C/2 to C), or its "
    "seed-mean train reward at C is at least 0.98. Else INCONCLUSIVE, saying what would decide it."
)
EXTRA_SEEDS_RULE = (
    "Easy arm only: its first 4 seeds (2-5) are judged when they finish; if that reading is INCONCLUSIVE "
    "and some contrast's interval contains 0 or +0.005 (an interval, not the smallest n's gain, stands in "
    "the way), seeds 6 and 7 run and the arm is judged on all 6 seeds; otherwise on the 4."
)


@dataclass(frozen=True)
class Arm:
    """One arm of stage 2: its split, grid, seeds, budget and recipe."""

    key: str
    dataset: str
    ns: tuple[int, ...]
    budget: int
    seeds: tuple[int, ...]
    """Seeds run first and judged."""
    extra_seeds: tuple[int, ...] = ()
    """Seeds added under EXTRA_SEEDS_RULE (empty: the rule does not apply)."""
    lr: float = STAGE1_LR
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    d: int = 0
    """Training problems (0: the whole split; else the first d of its fixed order)."""
    what: str = ""
    """One line for the report."""

    @property
    def small(self) -> int:
        return min(self.ns)

    @property
    def prev(self) -> int:
        return self.budget // 2


@dataclass(frozen=True)
class Plan:
    """Stage 2's arms and what every run shares."""

    name: str
    arms: tuple[Arm, ...]
    bp: int = 16
    k: int = 16
    d_val: int = D_VAL
    eval_from: int = EVAL_FROM
    evals_per_octave: int = EVALS_PER_OCTAVE

    def arm(self, key: str) -> Arm:
        for a in self.arms:
            if a.key == key:
                return a
        raise KeyError(key)

    def overrides(self, arm: Arm) -> dict[str, Any]:
        """RunConfig fields and llm options every run of `arm` shares."""
        opts = [("eval_from", self.eval_from), ("evals_per_octave", self.evals_per_octave),
                ("keep_final", True), ("lr_ref_batch", LR_REF_BATCH), ("temperature", 1.0),
                ("warmup_steps", WARMUP_STEPS)]
        return {
            "lr": arm.lr,
            "lr_rule": "sqrt",
            "scale_rewards": "group",
            "adv_std": "sample",
            "kl_coef": arm.kl_coef,
            "entropy_coef": arm.entropy_coef,
            "d_val": self.d_val,
            "k": self.k,
            **({"d": arm.d} if arm.d else {}),
            "options": tuple(opts),
        }


FULL = Plan(
    "full",
    arms=(
        Arm("easy", "easy", ns=(4, 8, 16), budget=2**22, seeds=(2, 3, 4, 5), extra_seeds=(6, 7),
            kl_coef=EASY_KL, entropy_coef=EASY_ENTROPY,
            what="Easy to 2^22: does the smallest n stop while a larger n keeps rising?"),
        Arm("coverage", "xhard", ns=(4, 16, 64), budget=2**20, seeds=(2, 3, 4, 5),
            what="xhard (pass@16 = 0 under the base model) to 2^20: does coverage make large n win?"),
        Arm("memo", "easy", ns=(4, 16, 64), budget=2**20, seeds=(2, 3, 4, 5), d=MEMO_D,
            kl_coef=EASY_KL, entropy_coef=EASY_ENTROPY,
            what="Easy on 555 training problems to 2^20: does memorisation cap small n so that large n "
                 "overtakes?"),
    ),
)
"""The declaration of record."""

QUICK = Plan(
    "quick",
    arms=(
        Arm("easy", "easy", ns=(2, 4), budget=2**7, seeds=(1, 2), extra_seeds=(3,), kl_coef=EASY_KL,
            entropy_coef=EASY_ENTROPY, what="the machinery on Easy"),
        Arm("coverage", "xhard", ns=(2, 4), budget=2**6, seeds=(1, 2), what="the machinery on xhard"),
        Arm("memo", "easy", ns=(2, 4), budget=2**6, seeds=(1, 2), d=8, kl_coef=EASY_KL,
            entropy_coef=EASY_ENTROPY, what="the machinery on 8 training problems"),
    ),
    bp=2,
    k=2,
    d_val=8,
    eval_from=8,
)
"""The same machinery in seconds (CI: `isocompute report tiny-stage2 --quick`): the science is not in it."""

PLANS = {"full": FULL, "quick": QUICK}

STAGES = ("easy", "coverage", "memo", "easy-extra")
"""The stages in the order they run; easy-extra runs seeds only where EXTRA_SEEDS_RULE asks for them."""

PREDICTIONS: dict[str, dict[str, Any]] = {
    "easy": {
        "record_small": (0.885, 0.91),
        "contrasts": {8: (-0.012, 0.0), 16: (-0.02, 0.0)},
        "outcome": {NO_RISE: 0.45, INCONCLUSIVE: 0.45, RISES: 0.10},
        "why": "stage 1's n = 4 gained +0.068, +0.052, +0.039, +0.025 per octave from 2^16 to 2^20 "
               "(interpolated); extrapolated, it gains 0.00-0.015 more per octave and ends near 0.885-0.91 "
               "at 2^22, its train reward near 0.98; n = 8 and 16 trail by their constant lag (0.3 and 0.75 "
               "octave) times a flattening slope, so their contrasts shrink toward 0 from below.",
    },
    "coverage": {
        "record_small": (0.02, 0.2),
        "contrasts": {16: (0.0, 0.08), 64: (0.0, 0.12)},
        "outcome": {RISES: 0.5, INCONCLUSIVE: 0.3, NO_RISE: 0.2},
        "why": "at pass@16 = 0 a group of 4 almost never holds a correct rollout, so n = 4 learns only from "
               "rare successes; a group of 64 sees one 16x more often per problem. If the model cannot "
               "solve xhard problems at all within 2^20 rollouts, every n stays near 0 and the rule reads "
               "NO RISE (nothing to win).",
    },
    "memo": {
        "record_small": (0.8, 0.87),
        "contrasts": {16: (-0.03, 0.01), 64: (-0.06, 0.0)},
        "outcome": {NO_RISE: 0.45, INCONCLUSIVE: 0.35, RISES: 0.20},
        "why": "n = 4 reaches train reward >= 0.98 on 555 problems well before 2^20 and its validation "
               "record stops below full Easy's 0.873; n = 64, 16x fewer steps, may not reach that ceiling "
               "by 2^20 (stage 1's lag: 2.3 octaves), so its contrast stays negative.",
    },
}
"""What we expect, committed with the rule before the first run: n = smallest's seed-mean record at the top
budget (a range), each contrast's expected range, and the chance we give each outcome."""


def spec(plan: Plan, arm: Arm, seeds: Iterable[int]) -> StudySpec:
    """The declared study of one arm on `seeds` (consecutive), through studies.declared."""
    seeds = sorted(seeds)
    over = plan.overrides(arm)
    opts = over.pop("options")
    return StudySpec(
        f"tiny-stage2-{plan.name}/{arm.key}",
        kind="n-vs-m",
        preset="interference",
        dataset=arm.dataset,
        n=arm.ns,
        bp=(plan.bp,),
        budget=arm.budget,
        seeds=len(seeds),
        seed0=seeds[0],
        base=tuple(sorted({**over, "options": opts}.items())),
    )


def configs(plan: Plan, arm: Arm) -> dict[tuple[int, int], RunConfig]:
    """{(n, seed): RunConfig} of every declared run of `arm` (first and extra seeds)."""
    out = {}
    seeds = sorted(set(arm.seeds) | set(arm.extra_seeds))
    groups = [list(g) for g in _consecutive(seeds)]
    for g in groups:
        for _, cfg in study_configs(spec(plan, arm, g), presets_for("llm", "tiny"), "llm"):
            out[(int(cfg.n), int(cfg.seed))] = cfg
    return out


def _consecutive(seeds: Sequence[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for s in seeds:
        if out and s == out[-1][-1] + 1:
            out[-1].append(s)
        else:
            out.append([s])
    return out


# ------------------------------------------------------------------------------------------ the verdict
@dataclass
class Contrast:
    """One paired contrast at the top budget: record of n minus record of the smallest n, per seed."""

    n: int
    mean: float
    lo: float
    hi: float
    k: int
    p_holm: float
    """Holm-adjusted one-sided p of 'contrast <= 0'."""


@dataclass
class Verdict:
    arm: str
    outcome: str
    budget: int
    seeds: tuple[int, ...]
    contrasts: list[Contrast]
    small_record: float
    small_gain: float
    """The smallest n's seed-mean record gain from C/2 to C."""
    small_train: float
    """The smallest n's seed-mean train reward at C (last evaluation at or below C)."""
    nothing_learned: bool
    """Every n's record at C within half a validation problem of its start (a NO RISE with nothing to win)."""
    decide: list[str] = field(default_factory=list)
    """What would decide an INCONCLUSIVE reading."""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["seeds"] = list(self.seeds)
        return d


def _pivot(rec: pd.DataFrame, budget: float) -> pd.DataFrame:
    """seed x n table of the record reward at `budget`."""
    at = rec.loc[np.isclose(rec["budget"], float(budget))]
    return at.pivot_table(index="seed", columns="n", values="reward", aggfunc="first")


def _contrasts(piv: pd.DataFrame, small: int, ns: Sequence[int]) -> list[Contrast]:
    from scipy.stats import t

    from isocompute.reports.claims.selection import holm

    rows, ps = [], []
    for n in ns:
        if n == small or n not in piv.columns or small not in piv.columns:
            continue
        d = (piv[n] - piv[small]).dropna().to_numpy(dtype=float)
        k = d.size
        m = float(d.mean()) if k else float("nan")
        se = float(d.std(ddof=1) / np.sqrt(k)) if k >= 2 else float("nan")
        if k >= 2 and se > 0:
            h = float(t.ppf(1 - ALPHA, k - 1)) * se
            p = float(t.sf(m / se, k - 1))
        elif k >= 2:  # every seed gives the same difference
            h, p = 0.0, (0.0 if m > 0 else 1.0)
        else:
            h, p = float("nan"), float("nan")
        rows.append(Contrast(int(n), m, m - h, m + h, k, float("nan")))
        ps.append(p)
    for c, p in zip(rows, holm(ps) if ps else [], strict=True):
        c.p_holm = float(p)
    return rows


def verdict(rec: pd.DataFrame, train: pd.DataFrame, arm: Arm, seeds: Sequence[int], d_val: int) -> Verdict:
    """The rule (RULE_TEXT) on record rewards `rec` (columns n, seed, budget, reward; budgets including the
    arm's top and prev) and train rewards `train` (columns n, seed, budget, train: the train reward of the
    last evaluation at or below each budget), over `seeds`."""
    rec = rec.loc[rec["seed"].isin(seeds)]
    train = train.loc[train["seed"].isin(seeds)]
    top, prev, small = arm.budget, arm.prev, arm.small
    piv = _pivot(rec, top)
    cons = _contrasts(piv, small, arm.ns)
    small_top = float(piv[small].mean()) if small in piv.columns else float("nan")
    pprev = _pivot(rec, prev)
    gain = small_top - float(pprev[small].mean()) if small in pprev.columns else float("nan")
    tr = train.loc[np.isclose(train["budget"], float(top)) & (train["n"] == small), "train"]
    small_train = float(tr.mean()) if len(tr) else float("nan")
    start = rec.loc[rec["budget"] == rec["budget"].min()].groupby("n")["reward"].mean()
    nothing = bool(len(piv.columns)) and all(
        abs(float(piv[n].mean()) - float(start.get(n, np.nan))) < 0.5 / d_val for n in piv.columns)
    if any(c.p_holm < ALPHA and c.lo > 0 for c in cons):
        outcome = RISES
    elif cons and all(c.hi < NULL_MARGIN for c in cons) and (gain < PLATEAU_GAIN
                                                             or small_train >= SATURATED_TRAIN):
        outcome = NO_RISE
    else:
        outcome = INCONCLUSIVE
    v = Verdict(arm.key, outcome, top, tuple(seeds), cons, small_top, gain, small_train, nothing)
    if outcome == INCONCLUSIVE:
        v.decide = decide_lines(v)
    return v


def decide_lines(v: Verdict) -> list[str]:
    """What would decide an INCONCLUSIVE reading: an interval straddling a threshold (more seeds), or the
    smallest n still rising (a larger budget)."""
    out = []
    for c in v.contrasts:
        if c.lo <= 0 < c.hi:
            out.append(f"n = {c.n}'s contrast {c.mean:+.4f} [{c.lo:+.4f}, {c.hi:+.4f}] contains 0: "
                       "more seeds")
        elif c.hi >= NULL_MARGIN and c.lo < NULL_MARGIN:
            out.append(f"n = {c.n}'s contrast {c.mean:+.4f} [{c.lo:+.4f}, {c.hi:+.4f}] contains "
                       f"{NULL_MARGIN:+.3f}: more seeds")
        elif c.lo > 0:
            out.append(f"n = {c.n}'s contrast is above 0 before Holm's correction but not after "
                       f"(adjusted p {c.p_holm:.3f}): more seeds")
    if not (v.small_gain < PLATEAU_GAIN or v.small_train >= SATURATED_TRAIN):
        out.append(f"the smallest n still gains {v.small_gain:+.4f} over the last octave with train reward "
                   f"{v.small_train:.3f} < {SATURATED_TRAIN}: a larger budget")
    return out or ["no single interval or gain stands in the way: more seeds and a larger budget"]


def needs_extra_seeds(v: Verdict) -> bool:
    """EXTRA_SEEDS_RULE on the first seeds' reading: INCONCLUSIVE with a contrast's interval containing 0 or
    +0.005."""
    return v.outcome == INCONCLUSIVE and any(
        c.lo <= 0 < c.hi or c.lo < NULL_MARGIN <= c.hi for c in v.contrasts)


# ------------------------------------------------------------------------------------- reading the store
def grid_budgets(plan: Plan, arm: Arm) -> list[int]:
    """The budgets every readout of `arm` is read at: 0, the absolute evaluation grid, the top budget."""
    from isocompute.contract.schedule import grid_points

    return [0, *grid_points(plan.eval_from, plan.evals_per_octave, arm.budget), arm.budget]


class ArmRuns:
    """The finished runs of one arm in a results directory, by (n, seed): `status`, `table(keys)` (the
    learning curves with columns n, seed and `_diverged`)."""

    def __init__(self, root: Path, plan: Plan, arm: Arm):
        from isocompute.contract.status import DIVERGED, DONE
        from studies.store import ResultStore

        self.root, self.plan, self.arm = Path(root), plan, arm
        self.store = ResultStore(self.root)
        self.cfgs = configs(plan, arm)
        self.status: dict[tuple[int, int], str] = {}
        self.records: dict[tuple[int, int], dict] = {}
        self._diverged = DIVERGED
        if self.store.runs_dir.is_dir():
            for key, cfg in self.cfgs.items():
                rec = self.store.record(cfg.run_id)
                if rec is not None and rec.get("status") in (DONE, DIVERGED):
                    self.status[key] = rec["status"]
                    self.records[key] = rec

    def done(self, key) -> bool:
        return key in self.status

    def table(self, keys: Iterable[tuple[int, int]]) -> pd.DataFrame:
        frames = []
        for k in keys:
            if self.done(k):
                t = self.store.read_run(self.cfgs[k].run_id, "table")
                frames.append(t.assign(seed=k[1], _diverged=self.status[k] == self._diverged))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def keys(self, seeds: Iterable[int]) -> list[tuple[int, int]]:
        """(n, seed) in run order: seed by seed, each seed's smallest n (the longest run) first."""
        return [(n, s) for s in seeds for n in self.arm.ns]


def read(runs: ArmRuns, seeds: Sequence[int]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(curves, record rewards, train rewards) of the finished runs on `seeds`, read at grid_budgets."""
    from isocompute.reports.tiny_study import record_rewards

    curves = runs.table(runs.keys(seeds))
    budgets = grid_budgets(runs.plan, runs.arm)
    rec = record_rewards(curves, budgets, keys=("n", "seed")) if len(curves) else pd.DataFrame(
        columns=["run_id", "n", "seed", "budget", "reward"])
    return curves, rec, train_at(curves, budgets)


def train_at(curves: pd.DataFrame, budgets: Iterable[float]) -> pd.DataFrame:
    """The train reward (train_mean) of each run's last evaluation at or below each budget: columns n, seed,
    budget, train."""
    rows = []
    if len(curves):
        for (n, s), g in curves.sort_values("compute").groupby(["n", "seed"]):
            c = g["compute"].to_numpy(dtype=float)
            v = g["train_mean"].to_numpy(dtype=float)
            for b in budgets:
                i = np.searchsorted(c, float(b) * (1 + 1e-9), side="right") - 1
                if i >= 0:
                    rows.append({"n": int(n), "seed": int(s), "budget": float(b), "train": float(v[i])})
    return pd.DataFrame(rows, columns=["n", "seed", "budget", "train"])


def judged_seeds(runs: ArmRuns) -> tuple[tuple[int, ...], Verdict | None, bool | None]:
    """(the seeds the arm is judged on, the first seeds' verdict once they finished, whether the extra seeds
    are called for: None until the first seeds finished)."""
    arm = runs.arm
    first = tuple(arm.seeds)
    if not all(runs.done(k) for k in runs.keys(first)):
        return first, None, None
    _, rec, tr = read(runs, first)
    v = verdict(rec, tr, arm, first, runs.plan.d_val)
    extra = bool(arm.extra_seeds) and needs_extra_seeds(v)
    return (first + tuple(arm.extra_seeds) if extra else first), v, extra


# ----------------------------------------------------------------------------------------------- stages
def stage_plan(plan: Plan, stage: str, root: Path):
    """The runs of a named stage (STAGES) given what the store holds (isocompute.reports.tiny_study's
    StagePlan): an arm's first seeds; easy-extra: Easy's extra seeds when EXTRA_SEEDS_RULE calls for them
    (none when it does not; blocked until Easy's first seeds finished)."""
    from isocompute.reports.tiny_study import StagePlan

    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; choose one of {', '.join(STAGES)}")
    key = "easy" if stage == "easy-extra" else stage
    runs = ArmRuns(root, plan, plan.arm(key))
    if stage == "easy-extra":
        seeds, first, extra = judged_seeds(runs)
        if extra is None:
            return StagePlan(stage, [], [], blocked="the easy stage is not finished: run stage easy first")
        keys = runs.keys(runs.arm.extra_seeds) if extra else []
    else:
        keys = runs.keys(runs.arm.seeds)
    declared = [runs.cfgs[k] for k in keys]
    return StagePlan(stage, declared, [runs.cfgs[k] for k in keys if not runs.done(k)])


def run_stage(plan: Plan, stage: str, root: Path, jobs: int = 2, progress: bool = True, say=print) -> int:
    """Run a stage's missing runs into `root` (resumable) and return how many ran."""
    from isocompute.reports.tiny_study import run_until_done

    return run_until_done(lambda: stage_plan(plan, stage, root), root, f"tiny-stage2-{plan.name}", jobs,
                          progress, say)


# ------------------------------------------------------------------------------------------- the readout
def arm_readout(runs: ArmRuns) -> dict:
    """What one arm's store shows: runs done / declared, the judged seeds, the verdict once they finished,
    the seed-mean record and train reward per n at every grid budget, and the first seeds' reading."""
    arm = runs.arm
    seeds, first, extra = judged_seeds(runs)
    declared = runs.keys(seeds)
    done = [k for k in declared if runs.done(k)]
    out: dict[str, Any] = {"arm": arm.key, "declared": len(declared), "done": len(done), "seeds": list(seeds),
                           "first": first, "extra": extra, "verdict": None}
    have_seeds = sorted({s for _, s in done})
    curves, rec, tr = read(runs, have_seeds)
    out["curves"], out["rec"], out["train"] = curves, rec, tr
    if len(rec):
        out["mean"] = rec.groupby(["n", "budget"])["reward"].agg(["mean", "count"]).reset_index()
    if first is not None and len(done) == len(declared):
        _, rec_j, tr_j = read(runs, seeds)
        out["verdict"] = verdict(rec_j, tr_j, arm, seeds, runs.plan.d_val)
    per_n = {n: sum(1 for m, _ in done if m == n) for n in arm.ns}
    if len(curves) and min(per_n.values()) >= 2:  # the lag needs every n on >= 2 seeds
        from isocompute.reports.tiny_readings import arm_readings

        octaves = [float(b) for b in grid_budgets(runs.plan, arm) if b > 0 and float(np.log2(b)).is_integer()]
        out["readings"] = arm_readings(curves, octaves, arm.ns)
    out["wall_s"] = float(sum(float(runs.records[k].get("wall_s") or 0.0) for k in done))
    out["rollouts"] = int(sum(runs.cfgs[k].budget for k in done))
    return out


def drift(runs: ArmRuns, stage1_root: Path) -> dict | None:
    """Engine drift since stage 1: for every (n, seed) that both stage 1's arm R (same recipe, base lr, seeds)
    and this arm ran, the validation reward of the evaluation at exactly 2^20 rollouts (both schedules have
    one) here minus there, paired (mean, 95% t-interval), beside the seed-to-seed SD of stage 1's values
    there (its reported seeds, per n, averaged). Not the record: a record is a maximum over evaluation
    points, and stage 2 evaluates more often, which alone lifts it. None without a common run."""
    from isocompute.reports import tiny_study as ts
    from isocompute.reports.claims.judge import t_interval

    if not (Path(stage1_root) / "runs").is_dir():
        return None
    part = ts.FULL.part("easy")
    old = ts.Runs(stage1_root, ts.FULL, part)
    keys_new = [k for k in runs.keys(runs.arm.seeds + runs.arm.extra_seeds) if runs.done(k)]
    common = [(n, s) for n, s in keys_new if old.done((n, s, STAGE1_LR))]
    if not common:
        return None
    at = 2**20

    def val_at(t: pd.DataFrame) -> pd.DataFrame:
        return t.loc[t["compute"] == at, ["n", "seed", "val_mean"]]

    new = val_at(runs.table(common))
    was_all = val_at(old.table([(n, s, STAGE1_LR) for n in runs.arm.ns for s in part.report_seeds]))
    m = new.merge(was_all, on=["n", "seed"], suffixes=("_new", "_old"))
    diff = (m["val_mean_new"] - m["val_mean_old"]).to_numpy(dtype=float)
    sd = float(was_all.groupby("n")["val_mean"].std(ddof=1).mean()) if len(was_all) > 1 else float("nan")
    iv = t_interval(diff)
    return {"pairs": len(diff), "mean": iv.estimate, "lo": iv.lo, "hi": iv.hi,
            "max_abs": float(np.max(np.abs(diff))) if len(diff) else float("nan"), "seed_sd": sd,
            "identical": int(np.sum(np.abs(diff) < 1e-12)), "at": at}


def measure(plan: Plan, root: Path, stage1_root: Path | None = None) -> dict:
    """Every arm's readout (arm_readout) and Easy's drift check against the stage-1 store."""
    out = {"plan": plan, "root": str(root), "arms": {}}
    for arm in plan.arms:
        out["arms"][arm.key] = arm_readout(ArmRuns(root, plan, arm))
    if stage1_root is not None:
        out["drift"] = drift(ArmRuns(root, plan, plan.arm("easy")), stage1_root)
    return out
