"""The allocators study's declaration and staging (isocompute/reports/alloc_study.py): the design of the
simulator and tiny-LM plans, the per-arm lr tuning on synthetic curves whose best lr is known, and the quick
plans end to end (`isocompute report allocators --quick`)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from click.testing import CliRunner

from isocompute.cli import main
from isocompute.reports import alloc_study as a
from isocompute.reports import tiny_study as ts


def test_tiny_plan_is_the_declared_design():
    """Easy and Hard, bp 16, to >= 2^18 rollouts, fixed n {4, 8, 16, 32} and every allocator the llm backend
    has at base n 8, >= 4 reported seeds apart from the tuning seeds, the sqrt rule with an explicit lr."""
    from llm_backend import allocators as la

    assert [p.key for p in a.TINY.parts] == ["tiny/easy", "tiny/hard"]
    for part in a.TINY.parts:
        assert part.backend == "llm" and part.bp == 16 and part.budget >= 2**18 and part.base_n == 8
        assert part.ns == (4, 8, 16, 32) and len(part.report_seeds) >= 4
        assert not set(part.tune_seeds) & set(part.report_seeds)
        kinds = {la.parse(s, 8).kind for s in part.allocators}
        assert kinds == {"knapsack", "dynamic-sampling", "skip-zero-var", "schedule:double", "pilot-commit",
                         "dynamo"}
        cfgs = a.configs(a.TINY, part)
        assert {c.lr_rule for c in cfgs.values()} == {"sqrt"} and all(c.lr for c in cfgs.values())
        assert {k[0] for k in cfgs} == set(part.arms) and {c.lm for c in cfgs.values()} == {"tiny"}
        assert {c.option("lr_ref_batch") for c in cfgs.values()} == {ts.LR_REF_BATCH}
    assert a.TINY.part("tiny/hard").base == a._tiny_base(0.0, 0.0)  # the paper's Hard: no KL, no entropy


def test_sim_plan_tunes_every_arm_of_every_preset():
    from isocompute.reports.allocators import PRESETS

    assert [(p.model, p.dataset, p.metric) for p in a.SIM.parts] == list(PRESETS)
    part = a.SIM.parts[0]
    assert len(part.report_seeds) == 8 and not set(part.tune_seeds) & set(part.report_seeds)
    assert part.bp * part.base_n == part.lr_ref_batch  # the base n keeps the preset's lr at the centre
    assert "pilot-commit" in part.allocators and "dynamo" in part.allocators
    cfgs = a.configs(a.SIM, part, [a.SIM_LR])
    assert {c.lr_rule for c in cfgs.values()} == {"sqrt"} and {c.lr for c in cfgs.values()} == {0.1}
    assert all(c.problem_seed == c.seed for c in cfgs.values())  # arms paired by seed


class FakeRuns:
    """What `alloc_study.tuning` reads from a store, with curves whose best lr index per arm is peak[arm]."""

    def __init__(self, peak, plan=a.QUICK_SIM):
        self.plan, self.part, self.peak = plan, plan.parts[0], peak
        self.cfgs = a.configs(plan, self.part)

    def done(self, key) -> bool:
        return True

    def table(self, keys) -> pd.DataFrame:
        rows = []
        for arm, s, lr in keys:
            k = ts.lr_index(lr, self.part.lr_centre)
            for c in (0.0, self.part.budget / 4, float(self.part.budget)):
                h = 0.3 * math.exp(-((k - self.peak[arm]) ** 2) / 4) * c / self.part.budget
                rows.append({"run_id": f"{arm}-{s}-{lr}", "compute": c, self.part.metric: 0.5 + h,
                             "allocator": arm, "seed": s, "lr": lr, "_diverged": False})
        return pd.DataFrame(rows)


def test_tuning_chooses_each_arms_own_lr_and_walks_an_edge():
    """Peaks at grid index 0 for the fixed n, -1 and +1 for two allocators, +2 (beyond the declared grid, on
    the cap of the quick plan's one extra point) for the third: each arm gets its own lr; the +2 arm walks one
    point up and is reported as an open edge there."""
    peak = {"fixed-n4": 0, "fixed-n8": 0, "knapsack": -1, "pilot-commit": 1, "dynamo": 2}
    tun = a.tuning(FakeRuns(peak))
    ch, c = tun.choices, a.QUICK_SIM.parts[0].lr_centre
    assert tun.missing == [] and ch is not None
    want = {"fixed-n4": 0, "fixed-n8": 0, "knapsack": -1, "pilot-commit": 1, "dynamo": 2}
    assert ch.lr == {arm: ts.lr_point(k, c) for arm, k in want.items()}
    assert {lr for arm, lr in tun.needed if arm == "knapsack"} == {ts.lr_point(k, c) for k in (-2, -1, 0, 1)}
    assert ch.open_edges == [f"dynamo: {ts.lr_point(2, c):g}"]
    keys = a.reported_keys(a.QUICK_SIM.parts[0], ch)
    assert {k[1] for k in keys} == set(a.QUICK_SIM.parts[0].report_seeds) and len(keys) == 5 * 2


def test_report_stage_waits_for_tuning(tmp_path):
    part = a.QUICK_SIM.parts[0]
    sp = a.stage_plan(a.QUICK_SIM, part, "report", tmp_path / "empty")
    assert sp.blocked and "tuning stage is not finished" in sp.blocked and not sp.todo
    tune = a.stage_plan(a.QUICK_SIM, part, "tune", tmp_path / "empty")
    assert len(tune.todo) == len(part.arms) * len(a.QUICK_SIM.grid_k) * len(part.tune_seeds)


@pytest.mark.slow  # the quick plans: ~30 simulator runs and ~30 tiny-LM runs
def test_quick_plans_end_to_end(tmp_path):
    pytest.importorskip("torch")
    args = ["report", "allocators", "--quick", "--jobs", "1", "--no-progress", "--store", tmp_path / "sim",
            "--tiny-store", tmp_path / "tiny", "--doc", tmp_path / "A.md", "--fig", tmp_path / "a.png",
            "--tiny-fig", tmp_path / "t.png"]
    r = CliRunner().invoke(main, [str(x) for x in args])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "A.md").read_text()
    assert "Generated by `isocompute report allocators --quick`" in md
    assert "- tabular/easy: tune 20/20, report 10/10" in md
    for title in ("## tabular / easy (train_mean)", "## On the tiny LM", "### tiny/easy (val_mean)"):
        assert title in md
    assert md.count("Compute to reach a target") == 2 and md.count("Which claims hold on") == 2
    assert "| pilot-commit |" in md and "| dynamo |" in md and "Pilot-Commit (2605.26606)" in md
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "t.png").is_file()
    states = a.measure(a.QUICK_TINY, tmp_path / "tiny")
    table = states[0].table
    assert set(table["seed"]) == set(a.QUICK_TINY.parts[0].report_seeds)
    assert table.groupby("allocator")["lr"].nunique().max() == 1  # one base lr per arm
    again = CliRunner().invoke(main, [str(x) for x in args])  # every run done: it only regenerates
    assert again.exit_code == 0, again.output
    assert "running" not in again.output and (tmp_path / "A.md").read_text() == md
