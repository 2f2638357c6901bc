"""The allocators study as declared for docs/ALLOCATORS.md: every arm (each fixed n of the grid and each
allocator at its base n) runs under the paper's recipe, the sqrt(B) lr rule (lr * sqrt(bp n / B_ref)), with
its own base lr chosen on tuning seeds, and is reported on other seeds. Two declarations:
- SIM: the simulator presets of the report (SIM_PRESETS), bp 32, fixed n 2..256,
  every simulator allocator at base n 8, to 2^22 rollouts; base lrs on a grid of 1.78x steps centred on the
  preset's 0.1 at B_ref = 256 (= bp x base n, so the base n keeps the preset's lr at the centre), which the
  edge rule extends by up to 12 points each way (SIM.max_extra).
- TINY: the tiny LM, Easy and Hard (the tiny-LM study's recipes, isocompute.reports.tiny_study), bp 16, fixed
  n {4, 8, 16, 32} and every allocator of the llm backend at base n 8, to 2^18 rollouts, 4 reported seeds;
  base lrs centred on 1e-4 at B_ref 64.
QUICK_SIM and QUICK_TINY are the same machinery on plans of seconds (CI); not the science.

The tuning rule, per part and arm: run the declared lr grid on the tuning seeds; the arm's base lr is the
argmax of the tuning seeds' mean record reward at the part's top budget (`tiny_study.choose_e`, by arm);
while an arm's optimum sits on its grid's edge, the next point outward is added for that arm
(`tiny_study.extra_grid_point`, at most `max_extra` points each way, unless it is a plateau along lr: within
half a validation problem of the next lr inward); then the reported seeds run each arm at its lr. One base
lr per arm (not per budget), so each arm has one learning curve, which compute-to-target needs
(studies.fit.target). The machinery is the tiny-LM study's (its lr grid and edge rule, record rewards,
held-out choice, `Runs` over a store, stage plans and their runner), keyed by (arm, seed, lr) instead of
(n, seed, lr); arms are the store tables' `allocator` labels (fixed-n8, knapsack, ...). Every lr is written
into each run's config (run ids are config hashes), so a store never depends on a backend default.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from isocompute.contract.allocspec import label
from isocompute.contract.status import DONE
from isocompute.reports import tiny_study as ts
from studies.config import RunConfig, StudiesError
from studies.declared import StudySpec, study_configs
from studies.presets import presets_for

STAGES = ("tune", "report")
"""The stages of every part, in order."""


@dataclass(frozen=True)
class Part:
    """One preset of the study: its backend and policy, arms, seeds, budget and recipe."""

    key: str
    """The part's name in the store and the report (e.g. tabular/easy, tiny/easy)."""
    backend: str
    dataset: str
    metric: str
    """What the report compares (and the tuning scores): train_mean or val_mean."""
    ns: tuple[int, ...]
    """The fixed-n grid."""
    allocators: tuple[str, ...]
    """Allocator specs, each at base_n."""
    base_n: int
    bp: int
    budget: int
    """Every run's compute cap in rollouts; the tuning rule reads the record reward there."""
    tune_seeds: tuple[int, ...]
    report_seeds: tuple[int, ...]
    lr_centre: float
    """Centre of the base-lr grid (at B_ref = lr_ref_batch under the sqrt rule)."""
    lr_ref_batch: int
    model: str | None = None
    """The simulator's policy role (backend sim): a role of studies.presets' simulator table."""
    lm: str | None = None
    """The language model (backend llm)."""
    d_val: int | None = None
    """Validation problems: the edge rule's plateau test (None: no plateau test)."""
    base: tuple[tuple[str, Any], ...] = ()
    """Other RunConfig fields and backend options every run shares."""

    @property
    def arms(self) -> tuple[str, ...]:
        """Arm labels: fixed-n<n> for the grid, then the allocator specs (the tables' `allocator`)."""
        return tuple(label("fixed", n) for n in self.ns) + tuple(self.allocators)

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.tune_seeds) | set(self.report_seeds)))

    @property
    def base_arm(self) -> str:
        return label("fixed", self.base_n)


@dataclass(frozen=True)
class Plan:
    name: str
    parts: tuple[Part, ...]
    store: Path
    """The plan's default results directory."""
    grid_k: tuple[int, ...] = ts.GRID_K
    """Declared grid points as powers of tiny_study.LR_STEP around each part's centre."""
    max_extra: int = ts.MAX_EXTRA
    reps: int = 200
    """Seed-bootstrap replicates of the compute-to-target intervals."""

    def part(self, key: str) -> Part:
        for p in self.parts:
            if p.key == key:
                return p
        raise StudiesError(f"plan {self.name} has no part {key!r}; choose one of "
                           f"{', '.join(p.key for p in self.parts)}")


SIM_PRESETS = (("tabular", "easy", "train_mean"), ("tabular", "hard", "train_mean"),
               ("interference", "easy", "val_mean"), ("interference", "hard", "val_mean"),
               ("tabular", "dual", "train_mean"), ("interference", "dual", "val_mean"),
               ("interference", "tri", "val_mean"))
"""(model, dataset, metric) of the simulator parts, the model a simulator role of studies.presets (its fields
come from there: `role_fields`): tabular's validation problems never move (no shared parameters), so its
metric is the training pass@1; interference generalises, so held-out pass@1."""
SIM_ALLOCATORS = ("knapsack", "knapsack:oracle=1", "variance", "variance:oracle=1", "gvm", "ada",
                  "dynamic-sampling", "skip-zero-var", "schedule:double@0.25,0.5", "schedule:zv@0.5",
                  "pilot-commit", "dynamo")
LLM_ALLOCATORS = ("knapsack", "dynamic-sampling", "skip-zero-var", "schedule:double@0.25,0.5", "pilot-commit",
                  "dynamo")
"""Every allocator the llm backend has, at its defaults (a schedule: BroRL's doubling at 25% and 50%)."""
SIM_LR = 0.1
"""The simulator presets' lr (Adam, constant before; studies.presets.preset_lr of every simulator role, which
leave it to the simulator's default: tests/studies/test_presets.py checks): the centre of the simulator's
base-lr grid. Written out so that declaring the study does not import the simulator."""


def _tiny_base(kl: float, entropy: float) -> tuple[tuple[str, Any], ...]:
    """The tiny-LM study's recipe (isocompute.reports.tiny_study: Plan.overrides) with these coefficients."""
    return (("lr_rule", "sqrt"), ("scale_rewards", "group"), ("adv_std", "sample"), ("kl_coef", kl),
            ("entropy_coef", entropy), ("d_val", ts.EASY_VAL), ("k", 16), ("n_evals", 16),
            ("options", (("lr_ref_batch", ts.LR_REF_BATCH), ("temperature", 1.0),
                         ("warmup_steps", ts.WARMUP_STEPS))))


SIM = Plan(
    "sim",
    parts=tuple(
        Part(f"{model}/{dataset}", "sim", dataset, metric, ns=(2, 4, 8, 16, 32, 64, 128, 256),
             allocators=SIM_ALLOCATORS, base_n=8, bp=32, budget=2**22, tune_seeds=(0, 1),
             report_seeds=tuple(range(2, 10)), lr_centre=SIM_LR, lr_ref_batch=256, model=model,
             base=(("lr_rule", "sqrt"), ("options", (("lr_ref_batch", 256),))))
        for model, dataset, metric in SIM_PRESETS),
    store=Path("results/allocators-tuned"),
    max_extra=12,
)
"""The simulator study of record (module text). Its edge rule may add 12 points each way (the lr range
5.6e-5 .. 178): with the tiny-LM study's 3 every interference arm's optimum sat on the grid's lower edge,
0.01, and with 8 several still sat on 5.6e-4 (interference/easy); simulator runs cost a fraction of a
second each."""

TINY = Plan(
    "tiny",
    parts=tuple(
        Part(f"tiny/{dataset}", "llm", dataset, "val_mean", ns=(4, 8, 16, 32), allocators=LLM_ALLOCATORS,
             base_n=8, bp=16, budget=2**18, tune_seeds=(0, 1), report_seeds=(2, 3, 4, 5),
             lr_centre=ts.LR_CENTRE, lr_ref_batch=ts.LR_REF_BATCH, lm="tiny", d_val=ts.EASY_VAL,
             base=_tiny_base(kl, ent))
        for dataset, kl, ent in (("easy", ts.KL_COEF, ts.ENTROPY_COEF), ("hard", 0.0, 0.0))),
    store=Path("docs/allocators/tiny_store"),
)
"""The tiny-LM study of record (module text); its store is committed."""

QUICK_SIM = Plan(
    "quick-sim",
    parts=(Part("tabular/easy", "sim", "easy", "train_mean", ns=(4, 8),
                allocators=("knapsack", "pilot-commit", "dynamo"), base_n=8, bp=8, budget=2**11,
                tune_seeds=(0,), report_seeds=(1, 2), lr_centre=SIM_LR, lr_ref_batch=64, model="tabular",
                base=(("lr_rule", "sqrt"), ("d", 32), ("d_val", 16), ("n_evals", 6),
                      ("options", (("lr_ref_batch", 64),)))),),
    store=Path("results/allocators-quick/sim"),
    max_extra=1,
    reps=20,
)
QUICK_TINY = Plan(
    "quick-tiny",
    parts=(Part("tiny/easy", "llm", "easy", "val_mean", ns=(2, 4), allocators=LLM_ALLOCATORS, base_n=4, bp=2,
                budget=2**6, tune_seeds=(0,), report_seeds=(1, 2), lr_centre=ts.LR_CENTRE,
                lr_ref_batch=ts.LR_REF_BATCH, lm="tiny", d_val=8,
                base=(("lr_rule", "sqrt"), ("d_val", 8), ("k", 2), ("n_evals", 4),
                      ("options", (("lr_ref_batch", ts.LR_REF_BATCH), ("temperature", 1.0))))),),
    store=Path("results/allocators-quick/tiny"),
    grid_k=(0, 1),
    max_extra=0,
    reps=20,
)
"""The machinery in seconds (CI: `isocompute report allocators --quick`)."""

PLANS = {"sim": SIM, "tiny": TINY}
QUICK = {"sim": QUICK_SIM, "tiny": QUICK_TINY}


# ----------------------------------------------------------------------------------------- the declaration
def lr_grid(plan: Plan, part: Part) -> list[float]:
    """Every base lr the edge rule may ever reach for `part`."""
    lo, hi = min(plan.grid_k) - plan.max_extra, max(plan.grid_k) + plan.max_extra
    return [ts.lr_point(k, part.lr_centre) for k in range(lo, hi + 1)]


def spec(part: Part, lrs: Iterable[float]) -> StudySpec:
    """The declared study of one part over base lrs `lrs` (one variant per lr), through studies.declared."""
    return StudySpec(f"allocators/{part.key}", kind="allocators", preset=part.key, dataset=part.dataset,
                     n=part.ns, bp=(part.bp,), budget=part.budget, seeds=max(part.seeds) + 1,
                     base=tuple(sorted(part.base)), allocators=part.allocators, base_n=part.base_n,
                     variants=tuple((ts.lr_label(lr), (("lr", lr),)) for lr in sorted(lrs)))


def role_fields(part: Part) -> dict[str, Any]:
    """The RunConfig fields of the part's policy role, from the one preset table (studies.presets): the
    simulator's role `model`, or the interference role of the part's LM (the tiny LM's own table for
    lm "tiny"), its `lm` named."""
    if part.backend == "sim":
        return presets_for("sim")[part.model]
    return presets_for(part.backend, part.lm)["interference"] | ({"lm": part.lm} if part.lm else {})


def configs(plan: Plan, part: Part, lrs: Iterable[float] | None = None
            ) -> dict[tuple[str, int, float], RunConfig]:
    """{(arm, seed, lr): RunConfig} of every declared run of `part` at base lrs `lrs` (default lr_grid)."""
    lrs = lr_grid(plan, part) if lrs is None else lrs
    out = {}
    for _, cfg in study_configs(spec(part, lrs), {part.key: role_fields(part)}, part.backend):
        out[(label(cfg.allocator, cfg.n), int(cfg.seed), float(cfg.lr))] = cfg
    return out


def runs_of(plan: Plan, part: Part, root: Path) -> ts.Runs:
    """The part's finished runs in `root`, keyed (arm, seed, lr) (tiny_study.Runs over this declaration)."""
    return ts.Runs(root, plan, part, cfgs=configs(plan, part))


# ------------------------------------------------------------------------------------------------ tuning
@dataclass
class Choices:
    """Each arm's base lr (and every lr's tuning score), and the edges still open after max_extra points."""

    lr: dict[str, float] = field(default_factory=dict)
    scores: dict[str, dict[float, float]] = field(default_factory=dict)
    open_edges: list[str] = field(default_factory=list)


def tuning(runs: ts.Runs) -> ts.Tuning:
    """The tuning stage as a function of the store (module text): the (arm, lr) pairs needed so far, the
    tuning runs missing, and the choices once none is."""
    plan, part = runs.plan, runs.part
    needed = {(a, ts.lr_point(k, part.lr_centre)) for a in part.arms for k in plan.grid_k}
    while True:
        missing = [(a, s, lr) for a, lr in sorted(needed) for s in part.tune_seeds
                   if not runs.done((a, s, lr))]
        if missing:
            return ts.Tuning(needed, missing, None)
        keys = [(a, s, lr) for a, lr in needed for s in part.tune_seeds]
        rec = ts.record_rewards(runs.table(keys), [part.budget], part.metric,
                                keys=("allocator", "seed", "lr"))
        ch = Choices()
        add = set()
        for a in part.arms:
            grid = sorted(lr for b, lr in needed if b == a)
            lr, sc = ts.choose_e(rec, a, part.budget, by="allocator")
            ch.lr[a], ch.scores[a] = lr, sc
            extra = ts.extra_grid_point(grid, lr, sc, part.d_val, centre=part.lr_centre)
            if extra is None:
                continue
            if ts.within_cap(extra, plan.max_extra, centre=part.lr_centre, grid_k=plan.grid_k):
                add.add((a, extra))
            else:
                ch.open_edges.append(f"{a}: {lr:g}")
        if not add - needed:
            return ts.Tuning(needed, [], ch)
        needed |= add


def reported_keys(part: Part, ch: Choices, seeds: Iterable[int] | None = None) -> set[tuple[str, int, float]]:
    """(arm, seed, lr) of the reported runs: every arm at its chosen lr on the reported seeds."""
    seeds = part.report_seeds if seeds is None else seeds
    return {(a, s, ch.lr[a]) for a in part.arms for s in seeds}


def stage_plan(plan: Plan, part: Part, stage: str, root: Path, runs: ts.Runs | None = None) -> ts.StagePlan:
    """The runs of stage `stage` (STAGES) of `part` given what the store holds: tune (the tuning runs so
    far), report (every arm at its chosen lr on the reported seeds, once tuning is complete)."""
    if stage not in STAGES:
        raise StudiesError(f"unknown stage {stage!r}; choose one of {', '.join(STAGES)}")
    runs = runs if runs is not None else runs_of(plan, part, root)
    tun = tuning(runs)
    if stage == "tune":
        return ts.stage_runs(stage, runs, list(tun.missing) + [(a, s, lr) for a, lr in tun.needed
                                                               for s in part.tune_seeds])
    if tun.choices is None:
        return ts.stage_runs(stage, runs, [], blocked=f"the {part.key} tuning stage is not finished "
                             f"({len(tun.missing)} run(s) missing): run stage tune")
    return ts.stage_runs(stage, runs, reported_keys(part, tun.choices))


def run_stage(plan: Plan, part: Part, stage: str, root: Path, jobs: int = 2, progress: bool = True,
              say=print) -> int:
    """Run a stage's missing runs of `part` into `root` (resumable; a tuning stage repeats until the edge
    rule asks for no more points); how many ran. StudiesError when tuning is unfinished or a run failed."""
    return ts.run_until_done(lambda: stage_plan(plan, part, stage, root), root,
                             f"allocators-{plan.name}", jobs, progress, say)


# ------------------------------------------------------------------------------------------- measurement
@dataclass
class PartState:
    """What the report reads of one part: stage progress, the choices, and the reported table (every arm at
    its chosen lr on the reported seeds, the store's columns plus seed and lr; empty until all are done)."""

    part: Part
    stages: list[dict]
    choices: Choices | None
    table: pd.DataFrame
    diverged: list[str]


def measure(plan: Plan, root: Path) -> list[PartState]:
    """Every part's state in the results directory `root` as it stands."""
    out = []
    for part in plan.parts:
        runs = runs_of(plan, part, root)
        stages = []
        for st in STAGES:
            sp = stage_plan(plan, part, st, root, runs)
            stages.append({"stage": st, "declared": len(sp.declared), "done": sp.done, "blocked": sp.blocked,
                           "rollouts": int(sum(c.budget for c in sp.declared))})
        ch = tuning(runs).choices
        table, diverged = pd.DataFrame(), []
        if ch is not None:
            keys = reported_keys(part, ch)
            if all(runs.done(k) for k in keys):
                table = runs.table(sorted(keys))
                diverged = sorted(runs.cfgs[k].run_id for k in keys if runs.status[k] != DONE)
        out.append(PartState(part, stages, ch, table, diverged))
    return out
