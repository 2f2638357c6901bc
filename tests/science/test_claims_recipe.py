"""The claims report's recipe and seed sets: every section's default is the paper's recipe (sqrt rule, base lr
chosen on tuning seeds, KL + entropy on Easy only), constant lrs are explicit; the tuning stage chooses on
seeds no section reports; a seed offset moves reported and tuning seeds; two seed sets give a verdict only
where they agree; the stake beside n* is what n* gains over the best small n on held-out seeds."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from synthetic_curves import synthetic_table

from isocompute.reports.claims import recipe
from isocompute.reports.claims.common import FULL, LLM_QUICK, QUICK, stakes
from isocompute.reports.claims.report import Outcome, SeedSet, replicated
from studies.declared import study_configs
from studies.presets import PRESETS, preset_lr


def test_the_recipe_is_every_study_default():
    st = FULL.study("x")
    base = dict(st.base)
    assert base["lr_rule"] == "sqrt" and base["kl_coef"] == recipe.KL_COEF
    assert base["entropy_coef"] == recipe.ENTROPY_COEF
    assert "lr" not in base and recipe.needs_tuning(st)
    hard = dict(FULL.study("y", dataset="hard").base)
    assert hard["lr_rule"] == "sqrt" and "kl_coef" not in hard and "entropy_coef" not in hard
    assert "kl_coef" not in dict(FULL.study("z", dataset="dual").base)
    tuned = replace(FULL, tuned=(("full/x", 0.003),))
    assert dict(tuned.study("x").base)["lr"] == 0.003 and not recipe.needs_tuning(tuned.study("x"))
    # explicit kw win over the recipe's regularisation
    assert dict(FULL.study("x", kl_coef=0.0).base)["kl_coef"] == 0.0
    # a constant lr and the preset's lr are explicit, labelled choices
    const = dict(FULL.study("c", lr=0.01).base)
    assert const["lr"] == 0.01 and "lr_rule" not in const
    assert not recipe.needs_tuning(FULL.study("c", lr=0.01))
    assert "lr" not in dict(FULL.study("p", lr=recipe.PRESET_LR).base)
    # the llm plans run their backend's own recipe
    assert "lr_rule" not in dict(LLM_QUICK.study("x").base)


def test_the_preset_lr_is_the_simulators_default():
    from sandbox.config import SimConfig

    assert preset_lr("sim", "interference") == preset_lr("sim", "tabular") == SimConfig().lr
    # a constant lr at the preset's is the preset's spelling (one run id); any other is written out
    assert "lr" not in dict(QUICK.study("c", lr=SimConfig().lr).base)
    assert dict(QUICK.study("c", lr=0.03).base)["lr"] == 0.03


def test_a_seed_offset_moves_reported_and_tuning_seeds():
    plan = replace(QUICK, seed_offset=3)
    assert plan.reported_seeds == [3, 4, 5] and plan.tuning_seeds == [recipe.TUNE_SEED0 + 3]
    st = plan.study("x", lr=0.1)
    cfgs = [c for _, c in study_configs(st, PRESETS["sim"], "sim")]
    assert sorted({c.seed for c in cfgs}) == [3, 4, 5] and all(c.problem_seed == c.seed for c in cfgs)
    assert set(QUICK.reported_seeds).isdisjoint(plan.reported_seeds)
    assert set(QUICK.tuning_seeds).isdisjoint(plan.tuning_seeds)
    assert not set(plan.tuning_seeds) & set(plan.reported_seeds)


def test_tuning_spec_runs_the_grid_on_tuning_seeds_without_snapshots():
    st = QUICK.study("x", snapshots=True)
    sp = recipe.tuning_spec(st, (0.003, 0.03), seeds=2, seed0=1000)
    assert sp.name == "quick/x/tune" and sp.seeds == 2 and sp.seed0 == 1000
    assert [lab for lab, _ in sp.variants] == ["base=0.003", "base=0.03"]
    assert dict(sp.base)["snapshots"] is False
    cfgs = study_configs(sp, PRESETS["sim"], "sim")
    assert sorted({c.seed for _, c in cfgs}) == [1000, 1001] and {c.lr for _, c in cfgs} == {0.003, 0.03}


def _tuning_table(rewards: dict[str, float], seeds=(1000, 1001), ns=(2, 8), drop: tuple = ()) -> pd.DataFrame:
    rows = []
    for lab, r in rewards.items():
        for n in ns:
            for s in seeds:
                if (lab, n, s) in drop:
                    continue
                for c, v in ((64.0, 0.1), (1024.0, r + 0.001 * n)):
                    rows.append({"run_id": f"{lab}-{n}-{s}", "compute": c, "val_mean": v, "n": n, "seed": s,
                                 "variant": lab})
    return pd.DataFrame(rows)


def test_choose_base_lr_takes_the_best_mean_over_n_and_leaves_out_diverged_points():
    st = replace(QUICK.study("x"), budget=1024)
    grid = (0.001, 0.01, 0.1)
    want = {f"base={g:g}": 4 for g in grid}
    tab = _tuning_table({"base=0.001": 0.5, "base=0.01": 0.7, "base=0.1": 0.6})
    ch = recipe.choose_base_lr(tab, st, grid, [1000, 1001], [0, 1, 2], want)
    assert ch.lr == 0.01 and not ch.edge and ch.excluded == ()
    # the best point lost a run (diverged): it is not eligible, and the choice says so
    tab = _tuning_table({"base=0.001": 0.5, "base=0.01": 0.7, "base=0.1": 0.9}, drop=(("base=0.1", 8, 1001),))
    ch = recipe.choose_base_lr(tab, st, grid, [1000, 1001], [0, 1, 2], want)
    assert ch.lr == 0.01 and ch.excluded == (0.1,) and "left out" in ch.text()
    assert recipe.choose_base_lr(_tuning_table({"base=0.001": 0.9, "base=0.01": 0.1}), st, grid, [1000, 1001],
                                 [0], want).edge
    with pytest.raises(ValueError, match="both tune and report"):
        recipe.choose_base_lr(tab, st, grid, [1000, 1001], [1001], want)


def test_the_stake_is_what_n_star_gains_over_the_best_small_n():
    # large n ends higher: at the top budget n* = 64 beats the best small n by ~0.1
    specs = {2: (0.2, 0.6, 1e4, 1.0), 8: (0.2, 0.65, 3e4, 1.0), 64: (0.2, 0.75, 3e5, 1.0)}
    tab = synthetic_table(specs, seeds=6, points=30, c_max=1e7, noise=0.002)
    top, low = stakes(tab, [1e7, 3e3], small=[2, 8])
    assert top.lo > 0.05 and top.k == 6
    assert low.estimate == 0 and low.lo == 0  # at 3e3 n* is the best small n itself


def _outcomes(verdicts):
    from isocompute.reports.claims.nstar import THEORY

    return [Outcome(THEORY, "setup", {"x": 1}, v, "why", ((seeds, v, "why"),)) for seeds, v in verdicts]


def test_a_verdict_stands_only_where_both_seed_sets_agree():
    a = SeedSet(QUICK, _outcomes([("0..2", "reproduced")]))
    b = SeedSet(replace(QUICK, seed_offset=3), _outcomes([("3..5", "inconclusive")]))
    (o,) = replicated([a, b])
    assert o.verdict == "does not replicate" and [s[:2] for s in o.by_set] == [("0..2", "reproduced"),
                                                                               ("3..5", "inconclusive")]
    (o,) = replicated([a, SeedSet(QUICK, _outcomes([("3..5", "reproduced")]))])
    assert o.verdict == "reproduced"


@pytest.mark.slow
def test_quick_report_on_two_seed_sets(tmp_path):
    """The quick plan, two sections, both seed sets: verdicts per set, the replication, and the runs of each
    set on its own reported and tuning seeds in one store."""
    from isocompute.reports.claims.allocation import F4
    from isocompute.reports.claims.nstar import THEORY
    from isocompute.reports.claims.report import build_report
    from studies.store import ResultStore

    md, outcomes = build_report(QUICK, tmp_path / "r", jobs=2, sections=(THEORY, F4), replicate_on=True)
    assert "| claim | seeds 0..2 | seeds 3..5 | verdict |" in md
    for o in outcomes:
        assert [b[0] for b in o.by_set] == ["0..2", "3..5"]
        v = {b[1] for b in o.by_set}
        assert o.verdict == (v.pop() if len(v) == 1 else "does not replicate")
        assert re.search(rf"\*\*Verdict: {o.verdict}\.\*\* (At margin 0: [a-z ]+\. )?Seeds 0\.\.2: ", md)
    store = ResultStore(tmp_path / "r")
    seeds = {store.record(rid)["config"]["seed"] for rid in store.finished_runs()}
    assert {0, 1, 2, 3, 4, 5, recipe.TUNE_SEED0, recipe.TUNE_SEED0 + 3} <= seeds
    assert f"base lr (tuning seeds {recipe.TUNE_SEED0}..{recipe.TUNE_SEED0})" in md
    assert f"base lr (tuning seeds {recipe.TUNE_SEED0 + 3}..{recipe.TUNE_SEED0 + 3})" in md
    assert np.isfinite(outcomes[1].numbers["spread"].estimate)
