"""The finding-1 lr-envelope edge check (isocompute.reports.claims.nstar.lr_edges) on tables with known
optima."""

import pandas as pd

from isocompute.reports.claims.nstar import lr_edges

LRS = {0: 0.001, 1: 0.01, 2: 0.1}


def _env(best: dict[tuple[int, int], int], budgets=(64, 256), ns=(2, 4), seeds=2) -> pd.DataFrame:
    """Runs whose reward at each budget is 1 for the lr index best[(n, budget)] and 0.5 for the others."""
    rows = []
    for n in ns:
        for i in LRS:
            for s in range(seeds):
                rid = f"n{n}-lr{i}-s{s}"
                for b in budgets:
                    rows.append({"run_id": rid, "n": n, "arm_lr": i, "seed": s, "compute": b,
                                 "val_mean": 1.0 if best[(n, b)] == i else 0.5})
    return pd.DataFrame(rows)


def test_interior_optima_give_no_edges():
    env = _env({(2, 64): 1, (2, 256): 1, (4, 64): 1, (4, 256): 1})
    assert lr_edges(env, LRS, [64, 256], bp=8) == []


def test_edges_are_named_by_n_budget_and_lr():
    env = _env({(2, 64): 2, (2, 256): 2, (4, 64): 0, (4, 256): 0})
    want = [(2, 64, 0.1), (4, 64, 0.001), (2, 256, 0.1), (4, 256, 0.001)]
    assert lr_edges(env, LRS, [64, 256], bp=8) == want


def test_an_n_that_has_not_stepped_is_skipped():
    env = _env({(2, 64): 1, (2, 256): 1, (4, 64): 0, (4, 256): 1})
    assert lr_edges(env, LRS, [64], bp=8) == [(4, 64, 0.001)]
    assert lr_edges(env, LRS, [64], bp=32) == []  # bp * 4 = 128 > 64: n = 4 has no reward at 64
