"""The paper's recipe as the claims report runs it, and the tuning stage that chooses its base lr.

The recipe (docs/PAPER.md "Healthy recipe", Section 3 and Table 1), as far as the simulator supports it:
- the sqrt(B) lr rule: lr = base * sqrt(bp * n / 256) (SimConfig.lr_ref_batch = 256), Adam;
- the base lr chosen on tuning seeds (`choose_base_lr`): the grid point with the best mean, over the study's
  n and the tuning seeds, of the top-budget record reward (the rule of finding 1's sqrt row and of the
  mechanism study's recipe, selection.select_on_heldout), never on the seeds it reports;
- KL + entropy on Easy (and Very Easy), neither on Hard and the mixes (`regularisation`: KL_COEF,
  ENTROPY_COEF);
- no warm-up: the simulator has none (a softmax over K answers has no early-training instability to damp).

A claims study declared with the recipe (ClaimsMode.study, the default) carries `lr_rule = "sqrt"` and no lr
until the tuning stage has chosen one: `needs_tuning` finds it, `tuning_spec` declares its tuning study (the
same grid and budget on the tuning seeds, one variant per base lr), and the report declares it again with
the chosen lr (ClaimsMode.tuned). Each study is its own arm, so where a section compares arms (datasets,
B_p, objectives, training-set sizes, baselines) every arm gets its own tuned base lr.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd

from isocompute.reports.claims.selection import select_on_heldout
from studies.declared import StudySpec
from studies.fit.analyses import run_rewards

KL_COEF = 0.01
"""The simulator's KL(pi || pi_init) coefficient on Easy: weak enough that the policy gradient of an
informative group (|A| ~ 1 per rollout) dominates it, strong enough to anchor problems whose groups have gone
silent; the value the tiny-LM study chose for the same reason (isocompute/reports/tiny_study.py), so both
backends run one recipe. The confound rows of the mechanism measurements try 0.1 and 1."""
ENTROPY_COEF = 0.001
"""The simulator's entropy-bonus coefficient on Easy (paired with KL, as the paper requires): verl's default,
under 0.1% of an informative group's policy gradient at the simulator's entropies (ln K nats at most)."""
RECIPE = "recipe"
"""The `lr` of ClaimsMode.study that asks for the recipe (the default); a number asks for that constant lr,
"preset" for the preset's own (a labelled sensitivity row)."""
PRESET_LR = "preset"
REGULARISED = ("easy", "veasy")
"""Datasets trained with KL + entropy (the paper: Easy; Very Easy is easier still). Hard, xhard and the mixes
(dual, tri) use neither: they destabilise there (docs/PAPER.md)."""
TUNE_SEED0 = 1000
"""Tuning seeds start here (plus the report's seed offset), far from any reported seed set."""
VARIANT = "base="
"""Prefix of the tuning study's variant labels: 'base=0.001'."""


def regularisation(dataset: str) -> dict[str, float]:
    """The recipe's KL and entropy coefficients for a dataset (module text)."""
    return {"kl_coef": KL_COEF, "entropy_coef": ENTROPY_COEF} if dataset in REGULARISED else {}


def needs_tuning(st: StudySpec) -> bool:
    """Whether a study follows the recipe and still lacks its base lr (sqrt rule, no lr given)."""
    base = dict(st.base)
    return base.get("lr_rule") == "sqrt" and "lr" not in base


def tune_metric(st: StudySpec) -> str:
    """The reward the base lr is chosen on: train_mean for the tabular policy (its validation problems never
    move), else val_mean."""
    return "train_mean" if st.preset == "tabular" else "val_mean"


def tuning_spec(st: StudySpec, grid: tuple[float, ...], seeds: int, seed0: int) -> StudySpec:
    """The tuning study of a recipe study: its grid and budget on `seeds` tuning seeds from `seed0`, one
    variant per base lr of `grid`, without pass@1 snapshots (tuning reads rewards only)."""
    if st.variants:
        raise ValueError(f"study {st.name} has variants; a recipe study is tuned as a whole")
    base = tuple((k, False if k == "snapshots" else v) for k, v in st.base)
    return replace(st, name=f"{st.name}/tune", seeds=seeds, seed0=seed0, base=base,
                   variants=tuple((f"{VARIANT}{lr:g}", (("lr", lr),)) for lr in grid))


@dataclass(frozen=True)
class Choice:
    """The tuning stage's choice for one study: the base lr, every grid point's tuning score, whether the
    choice sits on an edge of the grid, and the grid points left out because a tuning run of theirs failed
    or diverged (a recipe that diverges is not the paper's healthy recipe)."""

    lr: float
    scores: tuple[tuple[float, float], ...]
    edge: bool
    excluded: tuple[float, ...] = ()
    tune_seeds: tuple[int, ...] = ()

    def text(self) -> str:
        edge = " (grid edge)" if self.edge else ""
        exc = f"; left out (a run diverged or failed): {', '.join(f'{v:g}' for v in self.excluded)}" \
            if self.excluded else ""
        return f"{self.lr:g}{edge}{exc}"


def choose_base_lr(table: pd.DataFrame, st: StudySpec, grid: tuple[float, ...], tune_seeds: list[int],
                   report_seeds: list[int], expected: Mapping[str, int]) -> Choice:
    """The base lr of a recipe study, chosen on its tuning study's `table` (`choose_on`, at the study's
    budget and its tuning metric)."""
    return choose_on(table, tune_metric(st), float(st.budget), grid, tune_seeds, report_seeds, expected)


def choose_on(table: pd.DataFrame, metric: str, budget: float, grid: tuple[float, ...], tune_seeds: list[int],
              report_seeds: list[int], expected: Mapping[str, int]) -> Choice:
    """The recipe's base-lr rule on a tuning table (variant column 'base=...'): the grid point with the best
    mean over n and tuning seeds of the record `metric` at `budget` (selection.select_on_heldout, which
    refuses tuning seeds that are also reported). A grid point with fewer finished runs than
    `expected[label]` (a run diverged or failed) is not eligible."""
    rr = run_rewards(table, metric, keys=("variant", "n", "seed"), budget=budget, stat="best")
    counts = rr.groupby("variant")["reward"].count()
    ok = [lab for lab in counts.index if counts[lab] >= expected.get(lab, 0)]
    excluded = tuple(sorted(float(lab[len(VARIANT):]) for lab in expected if lab not in ok))
    rr = rr.loc[rr["variant"].isin(ok)]
    if rr.empty:
        raise RuntimeError("no base lr of the grid finished all its tuning runs")
    pick = select_on_heldout(rr, tune_seeds=tune_seeds, report_seeds=report_seeds, group_cols=[],
                             choice_col="variant", score_col="reward")
    lab = pick["variant"].iloc[0]
    lr = float(lab[len(VARIANT):])
    scores = rr.groupby("variant")["reward"].mean()
    sc = tuple(sorted((float(k[len(VARIANT):]), float(v)) for k, v in scores.items()))
    return Choice(lr=lr, scores=sc, edge=lr in (min(grid), max(grid)), excluded=excluded,
                  tune_seeds=tuple(tune_seeds))


__all__ = ["ENTROPY_COEF", "KL_COEF", "PRESET_LR", "RECIPE", "REGULARISED", "TUNE_SEED0", "Choice",
           "choose_base_lr", "choose_on", "needs_tuning",
           "regularisation", "tune_metric", "tuning_spec"]
