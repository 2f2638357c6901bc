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
    assert "knapsack | interference/easy, interference/hard | interference/easy, interference/hard" in text
    assert "Met by: knapsack." in text
    ar.figure(res, tmp_path / "a.png", 2**16, seeds=3)
    assert (tmp_path / "a.png").stat().st_size > 0 and (tmp_path / "a.pdf").exists()
