"""Studies shared by several figures, sized so `make figs` fits in 20 minutes on 2 cores (quick default).

One joint (bp, n) grid per dataset feeds Fig 5, 6, 7, 8, 10, 11, 15, 16-17, 21-22 and 27, so most figures cost
nothing extra once it is cached. Budgets are in rollouts; the paper's grids (n up to 2048, C up to 1e8) are
scaled down to the simulator's problem sets (d = 1024 problems).
"""

from __future__ import annotations

from paper_figs.specs import POW2, StudySpec
from studies.presets import DEMO_BASE

BUDGET = 2**18
"""Quick default budget in rollouts per run (about 2.6e5)."""
SEEDS = 3


def joint(dataset: str) -> StudySpec:
    """(bp, n) grid with bp * n <= 8192 on one dataset, interference preset (paper Fig 8, 10, 16-17,
    21-22)."""
    return StudySpec(
        f"joint-{dataset}",
        kind="joint",
        preset="interference",
        dataset=dataset,
        n=POW2,
        bp=(8, 32, 128),
        bmax=8192,
        budget=BUDGET,
        seeds=SEEDS,
    )


def n_vs_m(name: str, dataset: str = "easy", preset: str = "interference", **kw) -> StudySpec:
    """Fixed bp = 32, n = 2..256 (paper Fig 6-7), one budget."""
    kw.setdefault("n", POW2)
    kw.setdefault("budget", BUDGET)
    kw.setdefault("seeds", SEEDS)
    return StudySpec(name, kind="n-vs-m", preset=preset, dataset=dataset, bp=(32,), **kw)


def fixed_batch(dataset: str) -> StudySpec:
    """bp * n = B for B in {256, 2048} (paper Fig 9, 18-19)."""
    return StudySpec(
        f"fixed-batch-{dataset}",
        kind="fixed-batch",
        preset="interference",
        dataset=dataset,
        n=POW2,
        batch=(256, 2048),
        budget=BUDGET,
        seeds=SEEDS,
    )


JOINT_EASY = joint("easy")
JOINT_HARD = joint("hard")
FIXED_EASY = fixed_batch("easy")
FIXED_HARD = fixed_batch("hard")
HEADLINE_BASE = tuple(sorted(DEMO_BASE.items()))
"""The configs of `isocompute demo` (studies/cli.py, studies.presets.DEMO_BASE), so `isocompute figs --only
headline --reuse` finds the demo's runs and the figure shows the same numbers as the demo's n*(C) tables."""
HEADLINE_TABULAR = n_vs_m("headline-tabular", preset="tabular", seeds=8, base=HEADLINE_BASE)
HEADLINE_INTERFERENCE = n_vs_m("headline-interference", preset="interference", seeds=8, base=HEADLINE_BASE)


def subset(table, **eq):
    """Rows of a table whose columns equal the given values (e.g. bp=32)."""
    mask = None
    for k, v in eq.items():
        m = table[k] == v
        mask = m if mask is None else mask & m
    return table if mask is None else table[mask]


def pass1_of(tables: dict, name: str, table, split: str = "train"):
    """The pass@1 snapshots of the runs in `table` (a subset of study `name`), one split."""
    p1 = tables.get(name + ".pass1")
    if p1 is None or p1.empty:
        return p1
    return p1[(p1["split"] == split) & p1["run_id"].isin(table["run_id"].unique())]
