"""The tiny-LM study's staging as a function of the store (isocompute/reports/tiny_study.py), on synthetic
learning curves whose best lr is known: the edge rule walks the grid to the optimum and stops, caps at
MAX_EXTRA (an open edge), stops on a plateau along lr; the reported stage runs only the chosen lrs; a diverged
run scores 0 after its divergence; the declaration is the study's design."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from isocompute.reports import tiny_study as ts

EASY = ts.FULL.part("easy")


class FakeRuns:
    """What `tuning` reads from a store (`ts.Runs`), with curves reward(n, lr, compute) given by `peak`: every
    run rises to 0.5 + 0.3 * exp(-(k - k*)^2 / 4) at the top budget (k: the lr's grid index, k* = peak(n,
    C))."""

    def __init__(self, peak, have=None, plan=ts.FULL, part=EASY):
        self.plan, self.part, self.peak = plan, part, peak
        self.have = have  # None: every run "finished"
        self.cfgs = ts.configs(plan, part, ts.all_lrs())

    def done(self, key) -> bool:
        return self.have is None or key in self.have

    def table(self, keys) -> pd.DataFrame:
        rows = []
        for n, s, lr in keys:
            k = ts.lr_index(lr)
            for c in [0.0] + [float(b) for b in self.part.readout]:
                height = 0.3 * math.exp(-((k - self.peak(n, c)) ** 2) / 4) * min(c / self.part.budget * 4, 1)
                rows.append(
                    {
                        "run_id": f"{n}-{s}-{lr}",
                        "compute": c,
                        "val_mean": 0.5 + height,
                        "n": n,
                        "seed": s,
                        "lr": lr,
                        "_diverged": False,
                    }
                )
        return pd.DataFrame(rows)


def lrs_of(tun) -> list[float]:
    return sorted({lr for _, lr in tun.needed})


def test_the_edge_rule_walks_up_to_an_interior_optimum_and_stops():
    tun = ts.tuning(FakeRuns(lambda n, c: 2))  # best at k = 2 (3.16e-4) for every n and budget
    assert tun.choices is not None and tun.missing == []
    assert lrs_of(tun) == [ts.lr_point(k) for k in (-1, 0, 1, 2, 3)]
    assert tun.choices.r_lr == ts.lr_point(2) and tun.choices.open_edges == []
    assert set(tun.choices.e_lr.values()) == {ts.lr_point(2)}


def test_the_edge_rule_walks_down_for_one_n_of_arm_e_only():
    tun = ts.tuning(FakeRuns(lambda n, c: -2 if n == 4 else 0))
    # arm R (mean over n) stays at the centre; arm E's n = 4 wants 3.16e-5 and gets it (and 1.78e-5 beyond)
    assert tun.choices.r_lr == 1e-4
    assert {lr for n, lr in tun.needed if n == 4} == {ts.lr_point(k) for k in (-3, -2, -1, 0, 1)}
    assert {lr for n, lr in tun.needed if n == 16} == {ts.lr_point(k) for k in ts.GRID_K}
    assert tun.choices.e_lr[(4, float(EASY.budget))] == ts.lr_point(-2)


def test_an_optimum_beyond_the_cap_is_an_open_edge():
    class Rising(FakeRuns):
        def table(self, keys):
            t = super().table(keys)
            t["val_mean"] = 0.5 + 0.02 * np.log2(t["lr"] / 1e-5)  # +0.015 per grid step, without end
            return t

    tun = ts.tuning(Rising(lambda n, c: 0))
    assert max(lrs_of(tun)) == ts.lr_point(max(ts.GRID_K) + ts.MAX_EXTRA)
    assert any(e.startswith("arm R") for e in tun.choices.open_edges)
    assert any(e.startswith("arm E: n = 64") for e in tun.choices.open_edges)


def test_a_plateau_along_lr_at_the_edge_adds_nothing():
    class Flat(FakeRuns):
        def table(self, keys):
            t = super().table(keys)
            t["val_mean"] = 0.6 + 1e-4 * t["lr"] / 1e-4  # rises with lr by far less than 0.5 / d_val
            return t

    tun = ts.tuning(Flat(lambda n, c: 0))
    assert lrs_of(tun) == [ts.lr_point(k) for k in ts.GRID_K] and tun.choices.r_lr == ts.lr_point(1)


def test_missing_tuning_runs_block_the_choice_and_the_reported_stage(tmp_path):
    have = {(4, 0, 1e-4)}
    tun = ts.tuning(FakeRuns(lambda n, c: 0, have=have))
    assert tun.choices is None and len(tun.missing) == 29
    sp = ts.stage_plan(ts.FULL, "report", tmp_path)
    assert sp.blocked and "run stage tune" in sp.blocked and sp.todo == []
    assert ts.stage_plan(ts.FULL, "hard-report", tmp_path).blocked.endswith("run stage hard-tune")


def test_the_reported_stage_runs_the_chosen_lrs_on_the_reported_seeds():
    # best lr depends on the budget for n = 64 (arm E then runs two lrs for it); arm R picks the centre
    fake = FakeRuns(lambda n, c: 1 if (n == 64 and c <= 2**16) else 0)
    ch = ts.tuning(fake).choices
    r = ts.chosen_keys(EASY, ch, "R", EASY.report_seeds)
    e = ts.chosen_keys(EASY, ch, "E", EASY.report_seeds)
    assert r == {(n, s, 1e-4) for n in EASY.ns for s in EASY.report_seeds}
    assert {(n, lr) for n, _, lr in e} == {(4, 1e-4), (16, 1e-4), (64, 1e-4), (64, ts.lr_point(1))}
    assert {s for _, s, _ in r | e} == set(EASY.report_seeds)


def test_the_reported_runs_come_arm_r_first_seed_by_seed_longest_first():
    fake = FakeRuns(lambda n, c: 1 if (n == 64 and c <= 2**16) else 0)
    ch = ts.tuning(fake).choices
    order = ts.report_order(EASY, ch)
    r = ts.chosen_keys(EASY, ch, "R", EASY.report_seeds)
    e = ts.chosen_keys(EASY, ch, "E", EASY.report_seeds)
    assert len(order) == len(set(order)) and set(order) == r | e
    assert set(order[: len(r)]) == r  # arm R complete before arm E's own runs
    seeds = [s for _, s, _ in order[: len(r)]]
    assert seeds == sorted(seeds)  # whole seeds, in turn
    first = [n for n, s, _ in order if s == EASY.report_seeds[0]][: len(EASY.ns)]
    assert first == sorted(EASY.ns)  # the longest run (smallest n) of a seed first
    assert order[len(r):] == sorted(set(e) - r, key=lambda k: (k[1], k[0], k[2]))


def test_a_diverged_run_scores_zero_after_its_divergence():
    t = pd.DataFrame(
        {
            "run_id": ["a"] * 3 + ["b"] * 3,
            "compute": [0.0, 16.0, 32.0] * 2,
            "val_mean": [0.4, 0.6, 0.7, 0.4, 0.65, 0.66],
            "n": 2,
            "seed": 0,
            "lr": [1e-4] * 3 + [2e-4] * 3,
            "_diverged": [False] * 3 + [True] * 3,
        }
    )
    t = t.loc[~((t["run_id"] == "b") & (t["compute"] == 32.0))]  # b diverged after compute 16
    rec = ts.record_rewards(t, [16, 32, 64])
    b = rec.loc[rec["run_id"] == "b"].set_index("budget")["reward"]
    a = rec.loc[rec["run_id"] == "a"].set_index("budget")["reward"]
    assert b[16.0] == 0.65 and b[32.0] == 0.0 and b[64.0] == 0.0
    assert a[16.0] == 0.6 and a[64.0] == 0.7


# ------------------------------------------------------------------------------------- the declaration
def test_the_declared_easy_study_is_the_issues_design():
    cfgs = ts.configs(ts.FULL, EASY, [1e-4])
    assert len(cfgs) == 5 * 8
    c = cfgs[(64, 2, 1e-4)]
    assert (c.backend, c.lm, c.dataset, c.bp, c.budget, c.k, c.n_evals, c.d_val) == (
        "llm",
        "tiny",
        "easy",
        16,
        2**20,
        16,
        16,
        317,
    )
    assert (c.lr, c.lr_rule, c.kl_coef, c.entropy_coef, c.scale_rewards, c.adv_std) == (
        1e-4,
        "sqrt",
        ts.KL_COEF,
        ts.ENTROPY_COEF,
        "group",
        "sample",
    )
    assert dict(c.options) == {"lr_ref_batch": 64, "temperature": 1.0, "warmup_steps": 10}
    assert c.budget // (c.bp * c.n) == 1024 and c.budget // (c.bp * 4) == 16384
    assert EASY.ns_e == (4, 16, 64) and EASY.tune_seeds == (0, 1) and EASY.report_seeds == tuple(range(2, 8))
    hard = ts.FULL.part("hard")
    h = ts.configs(ts.FULL, hard, [1e-4])[(16, 0, 1e-4)]
    assert (h.dataset, h.budget, h.kl_coef, h.entropy_coef) == ("hard", 2**19, 0.0, 0.0)
    assert hard.arms == ("R",) and len(hard.report_seeds) >= 4


def test_easy_validates_on_every_problem_of_its_split():
    from studies.backends import get_backend

    llm_cfg = get_backend("llm").llm_config(ts.configs(ts.FULL, EASY, [1e-4])[(4, 0, 1e-4)])
    from llm_backend.problems import load_problems

    _, val = load_problems(llm_cfg)
    assert len(val) == ts.EASY_VAL
    assert llm_cfg.warmup_steps == 10 and llm_cfg.step_lr(1) == pytest.approx(1e-5)


def test_the_declared_run_ids_are_stable():
    """Run ids are config hashes: the committed store resolves only while the declaration stays the same."""
    c = ts.configs(ts.FULL, EASY, [1e-4])[(4, 0, 1e-4)]
    assert c.run_id == "llm-tiny-easy-bp16-n4-s0-" + c.run_id.rsplit("-", 1)[1]
    assert np.all([len(k.run_id) < 80 for k in ts.configs(ts.FULL, EASY, ts.all_lrs()).values()])


def test_the_committed_document_states_the_declared_design():
    """docs/TINY_STUDY.md is the preregistration: its design section is the declaration's, line for line, so
    a change of the declaration without regenerating (and committing) the document fails here."""
    from pathlib import Path

    from isocompute.reports.tiny_study_report import design_lines

    doc = (Path(__file__).resolve().parents[2] / "docs" / "TINY_STUDY.md").read_text()
    missing = [ln for ln in design_lines(ts.FULL) if ln and ln not in doc]
    assert not missing, missing[:2]
