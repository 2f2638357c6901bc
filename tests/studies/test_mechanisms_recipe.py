"""isocompute.reports.claims.mechanisms: the coverage pair's declaration and the paper's recipe read off an lr
grid."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from isocompute.reports.claims.common import MODES
from isocompute.reports.claims.mechanisms import (
    COV_LRS,
    COV_NS,
    INGREDIENTS,
    SIZES,
    Ingredient,
    ing_size,
    measure_recipe,
    recipe_arms,
    spec,
)


def test_recipe_arms_are_sqrt_rule_grid_points():
    arms = recipe_arms(COV_LRS, COV_NS, 32)
    assert len(arms) == len(COV_LRS) - 2  # x2 grid, n 4x apart: lr0, 2 lr0, 4 lr0 must all be on it
    for base, arm in arms.items():
        for n, lr in arm.items():
            assert lr == pytest.approx(base * np.sqrt(32 * n / 256))
            assert lr in COV_LRS
    assert recipe_arms((0.01, 0.03, 0.1), (4, 16), 32) == {}  # a half-decade grid holds no x2 pair


def test_coverage_pair_declared_with_the_knob():
    full = MODES[("sim", False)]
    on = next(i for i in INGREDIENTS if i.key == "cov-on")
    sp = spec(full, on)
    base = dict(sp.base)
    assert base["prior"] == "zipf" and base["K"] == 1024 and sp.dataset == "hard"
    assert sp.n == COV_NS and sp.seeds - SIZES["full"].tune >= 8
    assert on.vs == "cov-off"
    assert ing_size(on, SIZES["quick"]) == SIZES["quick"]  # quick mode keeps the quick size


def _table(gain: dict[int, float], lrs, ns, seeds=6, tune=2):
    """Synthetic n-vs-m table: reward rises with compute; the lr closest to 0.064 * sqrt(n / 4) is best."""
    rows = []
    for n in ns:
        for lr in lrs:
            best = 0.064 * np.sqrt(n / 4)
            pen = 0.05 * abs(np.log2(lr / best))
            for s in range(seeds):
                for c in (2.0**9, 2.0**11, 2.0**13, 2.0**15):
                    if 32 * n > c:
                        continue
                    r = 0.1 + gain[n] * np.log2(c) / 15 - pen + 0.001 * s
                    rows.append({"run_id": f"{n}-{lr}-{s}", "n": n, "variant": f"lr={lr:g}", "seed": s,
                                 "compute": c, "val_mean": r, "val_best_k": r + 0.1 * n / 64,
                                 "val_worst_k": r - 0.1 * n / 64, "bp": 32})
    return pd.DataFrame(rows)


def test_measure_recipe_picks_the_base_and_reads_the_contrast():
    ing = Ingredient("x", "x", "x", lrs=COV_LRS, ns=COV_NS, budget=2**15, recipe=True)
    s = ing_size(ing, SIZES["full"])
    t = _table({4: 0.2, 16: 0.3, 64: 0.5}, COV_LRS, COV_NS, seeds=s.seeds)
    r = measure_recipe(t, ing, s, 32)
    assert r["arm"] == {4: 0.064, 16: 0.128, 64: 0.256}
    assert r["contrast"]["n_large"] == 64 and r["contrast"]["diff"] > 0
    assert r["contrast"]["seeds"] == s.seeds - s.tune
