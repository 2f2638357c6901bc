"""Stage 2 of the tiny-LM study (isocompute.reports.tiny_stage2): every outcome of its rule fires on synthetic
learning curves shaped like the expected data, at the declared budgets and seed counts, through the same
record and train readers the report uses; the extra-seed rule; the frozen recipe against stage 1's store;
and the quick plan end to end (the machinery CI runs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from isocompute.contract.schedule import grid_points
from isocompute.reports import tiny_stage2 as s2
from isocompute.reports.tiny_study import record_rewards


def synth(arm: s2.Arm, shape: dict[int, tuple[float, float]], seeds, noise: float, width: float = 1.5,
          train_gap: float = 0.08, rng_seed: int = 0) -> pd.DataFrame:
    """Learning curves of `arm` at its declared grid: val_mean(n, C) = A_n / (1 + exp(-(log2 C - x0_n) /
    width)) plus a per-(n, seed) offset of SD `noise` (seeds differ by a constant, as paired runs do);
    train_mean = val + train_gap (capped at 1)."""
    rng = np.random.default_rng(rng_seed)
    budgets = [0, *grid_points(s2.EVAL_FROM, s2.EVALS_PER_OCTAVE, arm.budget), arm.budget]
    rows = []
    for n, (a, x0) in shape.items():
        for s in seeds:
            off = rng.normal(0, noise)
            for c in budgets:
                x = np.log2(max(c, 1))
                v = a / (1 + np.exp(-(x - x0) / width)) + off if c else 0.40 + off
                rows.append({"run_id": f"n{n}-s{s}", "n": n, "seed": s, "compute": float(c),
                             "val_mean": float(v), "train_mean": float(min(1.0, v + train_gap)),
                             "_diverged": False})
    return pd.DataFrame(rows)


def judge(arm: s2.Arm, curves: pd.DataFrame, seeds) -> s2.Verdict:
    budgets = s2.grid_budgets(s2.FULL, arm)
    rec = record_rewards(curves, budgets, keys=("n", "seed"))
    return s2.verdict(rec, s2.train_at(curves, budgets), arm, list(seeds), s2.D_VAL)


EASY = s2.FULL.arm("easy")
COVERAGE = s2.FULL.arm("coverage")
MEMO = s2.FULL.arm("memo")


@pytest.mark.parametrize("arm", [EASY, COVERAGE, MEMO], ids=lambda a: a.key)
def test_rises_fires_on_a_true_crossing(arm):
    """A larger n with a higher ceiling crosses the smallest n before the top budget: RISES, on 4 seeds."""
    x_top = np.log2(arm.budget)
    ns = arm.ns
    shape = {ns[0]: (0.80, x_top - 8), ns[1]: (0.82, x_top - 7), ns[2]: (0.86, x_top - 6)}
    v = judge(arm, synth(arm, shape, arm.seeds, noise=0.004), arm.seeds)
    assert v.outcome == s2.RISES
    assert v.contrasts[-1].lo > 0 and v.contrasts[-1].p_holm < s2.ALPHA


@pytest.mark.parametrize("arm", [EASY, COVERAGE, MEMO], ids=lambda a: a.key)
def test_no_rise_fires_on_a_constant_lag(arm):
    """Every n reaches the same ceiling, the larger ones delayed by a constant factor of compute (stage 1's
    shape) and saturated at the top budget: NO RISE THROUGH C, on 4 seeds."""
    x0 = np.log2(arm.budget) - 9
    lag = {arm.ns[0]: 0.0, arm.ns[1]: 0.5, arm.ns[2]: 1.0}
    shape = {n: (0.90, x0 + lag[n]) for n in arm.ns}
    v = judge(arm, synth(arm, shape, arm.seeds, noise=0.002, width=1.2), arm.seeds)
    assert v.outcome == s2.NO_RISE, v
    assert all(c.hi < s2.NULL_MARGIN for c in v.contrasts)
    assert v.small_gain < s2.PLATEAU_GAIN and not v.nothing_learned


def test_no_rise_fires_through_a_saturated_train_reward():
    """The smallest n still gains on validation but its train reward is >= 0.98 (memorised): NO RISE when
    every contrast is below the margin."""
    arm = MEMO
    x0 = np.log2(arm.budget) - 3
    shape = {n: (0.85 - 0.05 * i, x0) for i, n in enumerate(arm.ns)}
    v = judge(arm, synth(arm, shape, arm.seeds, noise=0.002, train_gap=0.35), arm.seeds)
    assert v.small_gain >= s2.PLATEAU_GAIN and v.small_train >= s2.SATURATED_TRAIN
    assert v.outcome == s2.NO_RISE


@pytest.mark.parametrize("arm", [EASY, COVERAGE, MEMO], ids=lambda a: a.key)
def test_inconclusive_when_still_rising_and_noisy(arm):
    """Curves still rising steeply at the top budget, contrasts buried in seed noise: INCONCLUSIVE, with
    what would decide it (more seeds, a larger budget)."""
    x0 = np.log2(arm.budget)
    shape = {n: (0.9, x0 + 0.2 * i) for i, n in enumerate(arm.ns)}
    v = judge(arm, synth(arm, shape, arm.seeds, noise=0.03, rng_seed=3), arm.seeds)
    assert v.outcome == s2.INCONCLUSIVE
    assert any("larger budget" in d for d in v.decide)


def test_nothing_learned_is_flagged():
    """Flat curves at the start value (xhard with no success): NO RISE, flagged as nothing learned."""
    arm = COVERAGE
    rows = []
    for n in arm.ns:
        for s in arm.seeds:
            for c in s2.grid_budgets(s2.FULL, arm):
                rows.append({"run_id": f"{n}-{s}", "n": n, "seed": s, "compute": float(c), "val_mean": 0.0,
                             "train_mean": 0.0, "_diverged": False})
    v = judge(arm, pd.DataFrame(rows), arm.seeds)
    assert v.outcome == s2.NO_RISE and v.nothing_learned


def test_holm_keeps_a_lone_marginal_contrast_from_rising():
    """Two contrasts, one just significant alone (one-sided p ~ 0.015) and one null: Holm doubles the
    smaller p past 0.025, so the rule does not say RISES."""
    arm = COVERAGE
    rec = pd.DataFrame(
        [{"n": 4, "seed": s, "budget": float(b), "reward": 0.5}
         for s in range(4) for b in (arm.prev, arm.budget)]
        + [{"n": 16, "seed": s, "budget": float(b), "reward": 0.5 + d}
           for s, d in enumerate([0.008, 0.032, 0.014, 0.026]) for b in (arm.prev, arm.budget)]
        + [{"n": 64, "seed": s, "budget": float(b), "reward": 0.5 + d}
           for s, d in enumerate([0.01, -0.01, 0.02, -0.02]) for b in (arm.prev, arm.budget)])
    rec = pd.concat([rec, rec.assign(budget=0.0, reward=0.1).drop_duplicates()], ignore_index=True)
    train = pd.DataFrame([{"n": 4, "seed": s, "budget": float(arm.budget), "train": 0.6} for s in range(4)])
    v = s2.verdict(rec, train, arm, [0, 1, 2, 3], s2.D_VAL)
    c16 = next(c for c in v.contrasts if c.n == 16)
    assert c16.lo > 0  # significant alone ...
    assert c16.p_holm > s2.ALPHA and v.outcome != s2.RISES  # ... not after Holm


def test_extra_seed_rule():
    """Called for when an interval straddles 0 or +0.005 in an INCONCLUSIVE reading; not when only the
    smallest n's gain stands in the way, nor for a decided reading."""
    straddle = s2.Verdict("easy", s2.INCONCLUSIVE, 1, (2,), [s2.Contrast(8, -0.001, -0.01, 0.008, 4, 0.6)],
                          0.9, 0.0, 0.9, False)
    gain_only = s2.Verdict("easy", s2.INCONCLUSIVE, 1, (2,), [s2.Contrast(8, -0.03, -0.04, -0.02, 4, 1.0)],
                           0.9, 0.05, 0.9, False)
    decided = s2.Verdict("easy", s2.NO_RISE, 1, (2,), [s2.Contrast(8, -0.001, -0.01, 0.004, 4, 0.6)],
                         0.9, 0.0, 0.99, False)
    assert s2.needs_extra_seeds(straddle)
    assert not s2.needs_extra_seeds(gain_only)
    assert not s2.needs_extra_seeds(decided)


def test_grid_points_are_absolute():
    """The same points below any budget: a longer run's grid extends a shorter one's."""
    short, long = grid_points(4096, 2, 2**20), grid_points(4096, 2, 2**22)
    assert long[: len(short)] == short and len(long) == len(short) + 4
    assert short[0] == 4096 and short[2] == 8192 and short[1] == round(4096 * 2**0.5)
    assert max(short) < 2**20


def test_frozen_recipe_matches_stage1_store():
    """The base lr frozen in stage 2 is what stage 1's tuning seeds chose for arm R, on Easy and Hard, read
    from the committed stage-1 store; the runs differ from stage 1's only in the evaluation options."""
    from isocompute.reports import tiny_study as ts

    root = Path("docs/tiny_study/store")
    for key in ("easy", "hard"):
        runs = ts.Runs(root, ts.FULL, ts.FULL.part(key))
        assert ts.tuning(runs).choices.r_lr == s2.STAGE1_LR
    new = s2.configs(s2.FULL, EASY)[(4, 2)].to_dict()
    old = ts.configs(ts.FULL, ts.FULL.part("easy"), [s2.STAGE1_LR])[(4, 2, s2.STAGE1_LR)].to_dict()
    for d in (new, old):
        d.pop("budget"), d.pop("n_evals")
        d["options"] = {k: v for k, v in d["options"].items()
                        if k not in ("eval_from", "evals_per_octave", "keep_final")}
    assert new == old


def test_quick_plan_end_to_end(tmp_path):
    """`isocompute report tiny-stage2 --quick`: every stage of the quick plan runs into a store, the report
    and JSON say each arm's runs and verdict; each run keeps its final state with digests; a rerun runs
    nothing (resumable)."""
    import hashlib

    from click.testing import CliRunner

    from isocompute.cli import main
    from studies.store import ResultStore

    store, out = tmp_path / "store", tmp_path / "S2.md"
    args = ["report", "tiny-stage2", "--quick", "--store", str(store), "--out", str(out), "--no-progress",
            "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    js = json.loads(res.stdout)
    assert set(js["arms"]) == {"easy", "coverage", "memo"}
    for a in js["arms"].values():
        assert a["done"] == a["declared"] > 0
        assert a["verdict"]["outcome"] in s2.OUTCOMES
    text = out.read_text()
    assert "## Outcomes" in text and s2.RULE_TEXT in text and "## Speed or ceiling" in text
    st = ResultStore(store)
    runs = s2.ArmRuns(store, s2.QUICK, s2.QUICK.arm("easy"))
    cfg = runs.cfgs[(2, 1)]
    rec = st.record(cfg.run_id)
    for name, meta in rec["final"].items():
        data = (st.final_dir(cfg.run_id) / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == meta["sha256"]
    table = st.read_run(cfg.run_id)
    grid = grid_points(s2.QUICK.eval_from, s2.QUICK.evals_per_octave, cfg.budget)
    batch = cfg.bp * cfg.n
    expect = sorted({0, *(-(-g // batch) * batch for g in grid), cfg.budget})
    assert table["compute"].tolist() == expect
    res2 = CliRunner().invoke(main, args)
    assert res2.exit_code == 0 and "running" not in res2.stderr
