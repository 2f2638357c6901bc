"""isocompute.reports.allocators: budgets, the generated report (tables, decomposition, goal check) and the
figure on a synthetic table."""

from __future__ import annotations

import math

import pandas as pd

from isocompute.reports import allocators as ar


def _table():
    rows = []
    for seed in range(3):
        for alloc, slope in (("fixed-n2", 1.0), ("fixed-n8", 2.0), ("knapsack", 2.2 + 0.01 * seed),
                             ("ada", 1.5)):
            for c in (0, 2**12, 2**14, 2**16):
                v = 0.0 if c == 0 else slope * math.log(c / 2**12) + seed
                rows.append({"run_id": f"{alloc}-{seed}", "allocator": alloc, "seed": seed, "n": 8,
                             "compute": c, "m": c // 256, "val_mean": v, "zero_var_frac": 0.25})
    return pd.DataFrame(rows)


def test_budgets_are_powers_of_four_up_to_the_top():
    assert ar.budgets(2**22) == [2**12, 2**14, 2**16, 2**18, 2**20, 2**22]
    assert ar.budgets(2**13) == [2**13]


def test_report_tables_and_goal(tmp_path):
    res = {("interference", "easy", "val_mean"): _table(), ("interference", "hard", "val_mean"): _table()}
    text = ar.report(res, seeds=3, budget=2**16, fig="figs/allocators.png")
    assert "![allocators vs the fixed-n envelope](figs/allocators.png)" in text
    assert "| knapsack | +0.0000 +- 0.0000 |" in text  # equal at 2^12 (log(1) = 0 for every allocator)
    # knapsack beats fixed-n8 (the envelope at 2^16) on every seed by (0.2 + 0.01 s) log 16, t = 36 on 2 df:
    # flagged on both presets after Holm over each table
    assert "| knapsack | interference/easy, interference/hard | none | +0." in text and "| met |" in text
    assert "Meets the goal: knapsack." in text
    # ada loses to fixed n = 8 by the same amount on every seed: no variance, no test, no flag, no win
    assert "| ada | none | none | -1.386 |" in text and "not met: 0 win(s)" in text
    assert "Power: with 3 seeds and" in text and "Power of the simulator part: 3 seeds" in text
    ar.figure(res, tmp_path / "a.png", 2**16, seeds=3)
    assert (tmp_path / "a.png").stat().st_size > 0 and (tmp_path / "a.pdf").exists()


def _preset(knapsack_slope: float, oracle_slope: float) -> pd.DataFrame:
    """fixed n = 2 and 8, knapsack and its oracle, 4 seeds: each allocator's reward rises as slope x
    log(C / 2^12) plus a small seed term, so its sign against fixed n = 8 (slope 2) is known."""
    rows = []
    for seed in range(4):
        for alloc, slope in (("fixed-n2", 1.0), ("fixed-n8", 2.0), ("knapsack", knapsack_slope),
                             ("knapsack:oracle=1", oracle_slope)):
            for c in (0, 2**12, 2**14, 2**16):
                v = 0.0 if c == 0 else (slope + 0.01 * seed) * math.log(c / 2**12) + seed
                rows.append({"run_id": f"{alloc}-{seed}", "allocator": alloc, "seed": seed, "n": 8,
                             "compute": c, "m": c // 256, "val_mean": v, "zero_var_frac": 0.25})
    return pd.DataFrame(rows)


def test_a_win_does_not_offset_a_loss_and_oracles_are_kept_out():
    """knapsack wins on two presets and loses on a third: not met (it would have been under a rule that only
    counts wins); the oracle wins on all three and is marked, and kept out of the goal."""
    res = {("interference", "easy", "val_mean"): _preset(2.5, 3.0),
           ("interference", "hard", "val_mean"): _preset(2.5, 3.0),
           ("interference", "tri", "val_mean"): _preset(1.5, 3.0)}
    text = ar.report(res, seeds=4, budget=2**16)
    goal = text.split("## The goal, checked")[1].split("\n## ")[0]
    assert "| knapsack | interference/easy, interference/hard | interference/tri -" in goal
    assert "not met: 1 preset(s) with a flagged loss" in goal
    every = "interference/easy, interference/hard, interference/tri"
    assert f"| knapsack:oracle=1 (oracle) | {every} | none |" in goal
    assert "oracle: kept out" in goal and "No allocator meets the goal" in goal
    assert "Oracles, for reference only: knapsack:oracle=1 (3 wins, 0 presets with a loss)." in goal
    rows = {r["allocator"]: r for r in ar.goal_rows(*_summary(res), ar.budgets(2**16, lo=2**12))}
    assert not rows["knapsack"]["met"] and not rows["knapsack:oracle=1"]["met"]
    assert rows["knapsack"]["losses"]["interference/tri"][1] == 2**16


def _summary(res):
    Cs = ar.budgets(2**16, lo=2**12)
    summary, flags = {}, {}
    for (model, dataset, metric), table in res.items():
        comps = {C: ar.compare(table, metric, C) for C in Cs}
        summary[(model, dataset)] = comps
        flags[(model, dataset)] = ar.table_marks(comps, Cs)
    return summary, flags


def test_power_is_the_smallest_difference_the_family_flags():
    from scipy.stats import t

    cells = {i: (0.0, 0.01, 8) for i in range(4)} | {"zero": (0.0, 0.0, 8)}  # a zero SE has no test
    pw = ar.power(cells)
    assert (pw["cells"], pw["seeds"], pw["se"]) == (4, 8, 0.01)
    assert math.isclose(pw["mde"], (t.ppf(1 - 0.05 / 8, 7) + t.ppf(0.8, 7)) * 0.01)
    # 4 seeds and 60 cells (the tiny-LM part's shape): the same SE needs a difference several times larger
    few = ar.power({i: (0.0, 0.01, 4) for i in range(60)})
    assert few["mde"] > 3 * pw["mde"]
    assert "only from about" in ar.power_text(few) and "no test" in ar.power_text(ar.power({}))
