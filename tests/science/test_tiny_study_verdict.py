"""The tiny-LM study's preregistered rule (isocompute/reports/tiny_study.py) on synthetic tables: every
outcome (REPRODUCED, NOT REPRODUCED, each way of being INCONCLUSIVE), the choice of S's larger n on the tuning
seeds, "survives lr tuning", the lr grid's edge rule and arm R's choice. Each test asserts the outcome and the
number that decides it, so a changed threshold or a swapped condition fails it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from isocompute.reports import tiny_study as ts
from isocompute.reports.tiny_study import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Evidence,
    NStar,
    verdict,
)

EASY = ts.FULL.part("easy")
NS = EASY.ns
TOP, PREV, LOW = float(EASY.budget), float(EASY.prev), float(EASY.low)
REPORT = EASY.report_seeds


def rec_table(
    level: dict[int, tuple[float, float]], seeds=REPORT, diffs: dict[int, list[float]] | None = None
) -> pd.DataFrame:
    """Record rewards: n -> (reward at PREV, reward at TOP), the same on every seed, except that `diffs`
    adds a per-seed offset to n's TOP reward (paired differences against n = 4 are then exactly these)."""
    rows = []
    for n, (r_prev, r_top) in level.items():
        for i, s in enumerate(seeds):
            off = diffs.get(n, [0.0] * len(seeds))[i] if diffs else 0.0
            rows += [
                {"n": n, "seed": s, "budget": PREV, "reward": r_prev},
                {"n": n, "seed": s, "budget": TOP, "reward": r_top + off},
                {"n": n, "seed": s, "budget": LOW, "reward": 0.45},
            ]
    return pd.DataFrame(rows)


FLAT = {n: (0.80, 0.805) for n in NS}
"""Every n plateaued (gain 0.005 < 0.01 from 2^19 to 2^20)."""


def tune_prefer(n_best: int) -> pd.DataFrame:
    """Tuning-seed records where `n_best` is the better of 16 and 64 at the top budget."""
    lv = {n: (0.7, 0.8) for n in NS} | {n_best: (0.7, 0.9)}
    return rec_table(lv, seeds=EASY.tune_seeds)


def test_reproduced_needs_growth_interval_and_a_positive_stake():
    up = [0.05, 0.04, 0.06, 0.05, 0.045, 0.055]
    ev = Evidence(rec_table(FLAT, diffs={64: up}), tune_prefer(64), NStar(64, 16, 64), NStar(4))
    v = verdict(ev, EASY, NS)
    assert v.outcome == REPRODUCED
    s = v.numbers["stake"]
    assert s["n_large"] == 64 and s["mean"] == pytest.approx(0.05) and s["lo"] > 0 and s["seeds"] == 6


LEVEL64 = dict(FLAT) | {64: (0.82, 0.805)}
"""n = 64 plateaued too once a per-seed stake of about +0.017 is added to its top-budget reward."""


def test_a_stake_below_two_points_is_not_reproduced_even_with_growth():
    small = [0.018, 0.016, 0.017, 0.019, 0.015, 0.017]  # lower bound > 0, mean 0.017 < 0.02, upper > 0.015
    ev = Evidence(rec_table(LEVEL64, diffs={64: small}), tune_prefer(64), NStar(64, 16, 64), NStar(4))
    v = verdict(ev, EASY, NS)
    s = v.numbers["stake"]
    assert v.outcome == INCONCLUSIVE and s["lo"] > 0 and s["mean"] < 0.02 and s["hi"] > 0.015
    assert "clear neither" in v.decide and "more reported seeds" in v.decide


def test_a_significant_stake_under_one_and_a_half_points_is_not_reproduced():
    """The rule's two thresholds: S's upper bound below +0.015 decides against the claim even when its lower
    bound is above 0 (a real but negligible gain of large n)."""
    tiny = [0.011, 0.01, 0.012, 0.011, 0.013, 0.009]
    ev = Evidence(rec_table(LEVEL64, diffs={64: tiny}), tune_prefer(64), NStar(64, 16, 64), NStar(4))
    v = verdict(ev, EASY, NS)
    assert v.outcome == NOT_REPRODUCED and 0 < v.numbers["stake"]["lo"] < v.numbers["stake"]["hi"] < 0.015


def test_interval_containing_the_smallest_n_is_inconclusive():
    up = [0.05, 0.04, 0.06, 0.05, 0.045, 0.055]
    ev = Evidence(rec_table(FLAT, diffs={64: up}), tune_prefer(64), NStar(64, 4, 64), NStar(4))
    v = verdict(ev, EASY, NS)
    assert v.outcome == INCONCLUSIVE and "does not exclude n = 4" in v.decide


def test_n_star_growing_less_than_4x_is_inconclusive():
    up = [0.05, 0.04, 0.06, 0.05, 0.045, 0.055]
    ev = Evidence(rec_table(FLAT, diffs={64: up}), tune_prefer(64), NStar(8, 8, 8), NStar(4))
    v = verdict(ev, EASY, NS)
    assert v.outcome == INCONCLUSIVE and "n* growth" in v.decide and "8 is not >= 4 x" in v.decide


def test_not_reproduced_needs_both_plateaus_and_a_stake_upper_bound_below_one_and_a_half_points():
    down = [-0.05, -0.04, -0.06, -0.05, -0.045, -0.055]
    ev = Evidence(rec_table(FLAT, diffs={64: down}), tune_prefer(64), NStar(4, 4, 4), NStar(4))
    v = verdict(ev, EASY, NS)
    assert v.outcome == NOT_REPRODUCED
    assert v.numbers["p_small"] and v.numbers["p_large"] and v.numbers["stake"]["hi"] < 0.015


def test_large_n_rising_below_a_plateaued_small_n_means_the_budget_is_too_small():
    lv = dict(FLAT) | {64: (0.70, 0.75)}  # n = 64 gains 0.05 and stays below n = 4's 0.805
    ev = Evidence(rec_table(lv), tune_prefer(64), NStar(4, 4, 4), NStar(4), crossing=2.0**22)
    v = verdict(ev, EASY, NS)
    assert v.outcome == INCONCLUSIVE  # S's upper bound is < 0.015, but P_large fails
    assert v.numbers["stake"]["hi"] < 0.015 and not v.numbers["p_large"] and v.numbers["p_small"]
    assert "budget is too small" in v.decide and "cross at about 2^22.0 rollouts" in v.decide
    v2 = verdict(Evidence(rec_table(lv), tune_prefer(64), NStar(4, 4, 4), NStar(4)), EASY, NS)
    assert "give no crossing" in v2.decide


def test_small_n_still_rising_is_inconclusive():
    lv = dict(FLAT) | {4: (0.70, 0.80)}
    down = [-0.05, -0.04, -0.06, -0.05, -0.045, -0.055]
    v = verdict(
        Evidence(rec_table(lv, diffs={64: down}), tune_prefer(64), NStar(4, 4, 4), NStar(4)), EASY, NS
    )
    assert v.outcome == INCONCLUSIVE and "n = 4 still gains +0.1000" in v.decide


def test_a_straddling_stake_is_inconclusive():
    wide = [0.08, -0.06, 0.05, -0.04, 0.07, -0.03]
    v = verdict(
        Evidence(rec_table(FLAT, diffs={64: wide}), tune_prefer(64), NStar(4, 4, 64), NStar(4)), EASY, NS
    )
    s = v.numbers["stake"]
    assert v.outcome == INCONCLUSIVE and s["lo"] < 0 < 0.015 < s["hi"]
    assert "clear neither" in v.decide


def test_an_open_lr_edge_is_inconclusive_whatever_the_numbers():
    up = [0.05, 0.04, 0.06, 0.05, 0.045, 0.055]
    ev = Evidence(
        rec_table(FLAT, diffs={64: up}),
        tune_prefer(64),
        NStar(64, 16, 64),
        NStar(4),
        open_edges=("arm R: 0.000562 (all n)",),
    )
    v = verdict(ev, EASY, NS)
    assert v.outcome == INCONCLUSIVE and "open edge" in v.decide


def test_the_larger_n_of_s_is_picked_on_the_tuning_seeds():
    """On the reported seeds n = 64 beats n = 4 and n = 16 does not; the tuning seeds prefer 16: S is 16's."""
    up = [0.05, 0.04, 0.06, 0.05, 0.045, 0.055]
    ev = Evidence(rec_table(FLAT, diffs={64: up}), tune_prefer(16), NStar(64, 16, 64), NStar(4))
    v = verdict(ev, EASY, NS)
    assert v.numbers["stake"]["n_large"] == 16 and v.numbers["stake"]["mean"] == pytest.approx(0.0)
    assert v.outcome != REPRODUCED


def test_survives_lr_tuning_only_when_both_arms_reproduce():
    r = ts.Verdict(REPRODUCED, "")
    assert ts.survives(r, ts.Verdict(REPRODUCED, ""))
    assert not ts.survives(r, ts.Verdict(INCONCLUSIVE, ""))
    assert not ts.survives(ts.Verdict(NOT_REPRODUCED, ""), r)
    assert not ts.survives(r, None)


# ----------------------------------------------------------------------------------------- the lr grid
def test_grid_is_three_points_1_78x_apart_centred_on_1e_4():
    grid = [ts.lr_point(k) for k in ts.GRID_K]
    assert grid == [5.62e-05, 1e-04, 1.78e-04]
    assert grid[2] / grid[1] == pytest.approx(10**0.25, rel=1e-3)
    assert all(ts.lr_index(ts.lr_point(k)) == k for k in range(-6, 7))


def test_an_optimum_on_an_edge_adds_the_next_point_outward():
    grid = [ts.lr_point(k) for k in ts.GRID_K]
    assert ts.extra_grid_point(grid, 1e-4) is None
    assert ts.extra_grid_point(grid, 1.78e-4) == 3.16e-4
    assert ts.extra_grid_point(grid, 5.62e-5) == 3.16e-5
    assert ts.extra_grid_point([*grid, 3.16e-4], 3.16e-4) == 5.62e-4
    assert ts.extra_grid_point([*grid, 3.16e-4], 1.78e-4) is None  # no longer an edge
    with pytest.raises(ValueError, match="not on the grid"):
        ts.extra_grid_point(grid, 3e-4)
    assert ts.within_cap(1e-3) and not ts.within_cap(1.78e-3)  # MAX_EXTRA = 3 points each way
    assert ts.within_cap(1e-5) and not ts.within_cap(5.62e-6)
    assert ts.within_cap(3.16e-4, max_extra=1) and not ts.within_cap(5.62e-4, max_extra=1)


def test_an_edge_optimum_on_a_plateau_along_lr_adds_nothing():
    """Within half a validation problem (0.5 / d_val) of the next lr inward: the grid already brackets it."""
    grid = [ts.lr_point(k) for k in ts.GRID_K]
    d_val = 317
    plateau = {5.62e-5: 0.70, 1e-4: 0.80, 1.78e-4: 0.80 + 0.4 / d_val}
    assert ts.extra_grid_point(grid, 1.78e-4, plateau, d_val) is None
    rising = {5.62e-5: 0.70, 1e-4: 0.80, 1.78e-4: 0.80 + 0.6 / d_val}
    assert ts.extra_grid_point(grid, 1.78e-4, rising, d_val) == 3.16e-4
    low = {5.62e-5: 0.82, 1e-4: 0.80, 1.78e-4: 0.70}
    assert ts.extra_grid_point(grid, 5.62e-5, low, d_val) == 3.16e-5


def test_arm_r_maximises_the_mean_over_n_not_any_one_n():
    rows = []
    # lr a is best for n = 4 alone; lr b is best on average over n
    for lr, r4, r64 in ((5.62e-5, 0.90, 0.50), (1e-4, 0.85, 0.70), (1.78e-4, 0.60, 0.72)):
        for s in (0, 1):
            rows += [
                {"n": 4, "seed": s, "lr": lr, "budget": TOP, "reward": r4},
                {"n": 64, "seed": s, "lr": lr, "budget": TOP, "reward": r64},
            ]
    rec = pd.DataFrame(rows)
    lr, scores = ts.choose_r(rec, (4, 64), TOP, [5.62e-5, 1e-4, 1.78e-4])
    assert lr == 1e-4 and scores[1e-4] == pytest.approx(0.775)
    lr_e, _ = ts.choose_e(rec, 4, TOP)
    assert lr_e == 5.62e-5


def test_extrapolated_crossing_of_per_n_sigmoids():
    from synthetic_curves import synthetic_table

    # n = 64 reaches n = 4's plateau 0.8 at 4e5 / 0.25^(2/3) = 1.0e6 rollouts, the end of the data; the
    # sigmoid's asymptote may exceed the data's largest value by 5% of its span only (studies.fit.sigmoid), so
    # the fit extrapolates a later crossing (2^20.55), and none for a curve that ends further below
    t = synthetic_table(
        {4: (0.4, 0.80, 2e4, 1.5), 64: (0.4, 0.90, 4e5, 1.5)},
        seeds=3,
        points=40,
        c_max=2**20,
        bp=16,
        noise=0.002,
    )
    c = ts.extrapolated_crossing(t, 4, 64, start=2**12)
    assert c is not None and 2**19.9 < c < 2**21
    flat = synthetic_table(
        {4: (0.4, 0.80, 2e4, 1.5), 64: (0.4, 0.70, 5e5, 1.5)},
        seeds=3,
        points=40,
        c_max=2**20,
        bp=16,
        noise=0.002,
    )
    assert ts.extrapolated_crossing(flat, 4, 64, start=2**12) is None


def test_estimate_n_star_finds_the_known_optimum_with_an_interval():
    from synthetic_curves import synthetic_table

    t = synthetic_table(
        {4: (0.4, 0.80, 2e3, 1.5), 64: (0.4, 0.95, 1e5, 1.5)},
        seeds=4,
        points=30,
        c_max=2**20,
        bp=16,
        noise=0.002,
    )
    early, late = ts.estimate_n_star(t, [2**12, 2**20], reps=20)
    assert early.point == 4 and late.point == 64 and late.lo == 64 and late.hi == 64
    assert ts.estimate_n_star(t.loc[t["seed"] == 0], [2**20], reps=20)[0].lo is None  # one seed: no interval
    assert np.isfinite(late.point)


def test_plateau_grid_reads_the_last_evaluation_below_prev_and_the_first_past_it():
    """Two seeds of one n on a grid whose evaluations straddle prev = 16: the record at prev is read at 12,
    the first evaluation past it is 20; known gains to top = 32 from each."""
    rows = []
    for seed, vals in ((0, [0.1, 0.5, 0.6, 0.7, 0.9]), (1, [0.1, 0.4, 0.6, 0.8, 0.8])):
        for c, v in zip([0, 6, 12, 20, 32], vals, strict=True):
            rows.append({"run_id": f"r{seed}", "n": 4, "seed": seed, "lr": 1e-4, "compute": c, "val_mean": v,
                         "_diverged": False})
    grid = ts.plateau_grid(pd.DataFrame(rows), prev=16, top=32)
    g = grid[4]
    assert (g["read"], g["past"], g["runs"]) == (12.0, 20.0, 2)
    assert g["gain_read"] == pytest.approx(((0.9 - 0.6) + (0.8 - 0.6)) / 2)
    assert g["gain_past"] == pytest.approx(((0.9 - 0.7) + (0.8 - 0.8)) / 2)
    assert ts.plateau_grid(pd.DataFrame(rows), prev=32, top=32) == {}  # no evaluation past prev


def test_the_report_says_when_arm_e_reads_arm_rs_runs_at_the_top_budget():
    from isocompute.reports.tiny_study_report import same_top_lrs

    part = ts.FULL.part("easy")
    top = float(part.budget)
    same = {(n, top): 5.62e-05 for n in part.arm_ns("E")}
    assert same_top_lrs(ts.Choices(5.62e-05, {}, same), part)
    other = {**same, (part.arm_ns("E")[-1], top): 1e-4}
    assert not same_top_lrs(ts.Choices(5.62e-05, {}, other), part)
    assert not same_top_lrs(None, part)
    assert not same_top_lrs(ts.Choices(5.62e-05, {}, same), ts.FULL.part("hard"))  # no arm E there


def test_readmes_gist_of_a_verdict_carries_its_numbers():
    from isocompute.reports.tiny_study_report import verdict_gist

    part = ts.FULL.part("easy")
    stake = {"n_large": 16, "n_small": 4, "mean": -0.0162, "lo": -0.0297, "hi": -0.0027, "seeds": 6}
    nums = {"n_star_top": 4, "n_star_top_lo": 4, "n_star_top_hi": 16, "p_small": False, "p_large": True,
            "stake": stake}
    v = ts.Verdict(ts.INCONCLUSIVE, "", "", nums)
    text = verdict_gist(v, part, [ts.NStar(4, 4, 4), ts.NStar(4, 4, 16)])
    assert "n*(2^20) = 4 [4, 16]" in text and "-0.016 [-0.030, -0.003]" in text
    assert "n* = 4 at every readout budget" in text and "the smallest n still rising" in text
    assert "largest" not in text
    moved = verdict_gist(v, part, [ts.NStar(4), ts.NStar(16)])
    assert "every readout budget" not in moved
