"""The mechanism section (isocompute/reports/claims/mechanisms.py): its pure rule and its
measurement on a synthetic sweep whose answer is known (lr optimum inside the grid, chosen on the tuning
seeds; a large n that overtakes the small ones), plus the section's declaration."""

import numpy as np
import pandas as pd

from isocompute.reports.claims.common import FULL, QUICK
from isocompute.reports.claims.mechanisms import (
    INGREDIENTS,
    SIZES,
    Ingredient,
    Size,
    measure_one,
    rises,
    spec,
)
from studies.fit.sigmoid import sigmoid

LRS = (1e-3, 1e-2, 1e-1)
SIZE = Size(ns=(2, 8, 32, 128), budget=2**16, seeds=6, tune=2, d=64)


def _table(best_lr: float = 1e-2, tune_lr: float | None = None, large_wins: bool = True) -> pd.DataFrame:
    """n-vs-m sweep: sigmoid per n (larger n slower and higher when large_wins), minus a penalty for the lr's
    distance from best_lr (tune_lr on the tuning seeds if given), small seed noise."""
    rng = np.random.default_rng(0)
    parts = []
    for n in SIZE.ns:
        C = np.geomspace(32 * n, SIZE.budget, 20)
        A = 0.6 + (0.05 * np.log2(n) / 7 if large_wins else -0.05 * np.log2(n) / 7)
        base = sigmoid(C, 0.3, A, 10.0 * n, 1.2)
        for lr in LRS:
            for s in range(SIZE.seeds):
                opt = tune_lr if (tune_lr is not None and s < SIZE.tune) else best_lr
                pen = 0.05 * abs(np.log10(lr) - np.log10(opt))
                parts.append(pd.DataFrame({"run_id": f"n{n}-lr{lr}-s{s}", "compute": C, "n": n, "seed": s,
                                           "variant": f"lr={lr:g}",
                                           "val_mean": base - pen + rng.normal(0, 0.001, C.size)}))
    return pd.concat(parts, ignore_index=True)


ING = Ingredient("x", "synthetic", "-", lrs=LRS)


def test_measure_recovers_the_tuned_lr_and_the_rise():
    x = measure_one(_table(), ING, SIZE, 32)
    assert set(x["lr_top"].values()) == {1e-2} and x["edges"] == []
    assert x["stars"][-1] >= 32 and x["stars"][-1] >= 4 * x["stars"][0]
    c = x["contrast"]
    assert c["n_large"] >= 32 and c["diff"] > 0 and c["seeds"] == SIZE.seeds - SIZE.tune
    assert rises(x)


def test_lr_is_chosen_on_the_tuning_seeds_and_edges_are_flagged():
    x = measure_one(_table(best_lr=1e-2, tune_lr=1e-1), ING, SIZE, 32)
    assert set(x["lr_top"].values()) == {1e-1}  # the reported seeds do not choose their own lr
    assert x["edges"] and all(v == 1e-1 for _, _, v in x["edges"])


def test_small_n_winning_does_not_rise():
    x = measure_one(_table(large_wins=False), ING, SIZE, 32)
    assert not rises(x) and x["contrast"]["diff"] < 0


def test_rule_needs_growth_and_a_significant_contrast():
    base = {"stars": [2, 8, 32, 128], "contrast": {"diff": 0.02, "se": 0.004, "seeds": 8}}
    assert rises(base)
    assert not rises(base | {"stars": [2, 2, 2, 4]})
    assert not rises(base | {"stars": [128, 32, 8, 2]})  # falling: max / min was 64x, last / first 1/64
    assert not rises(base | {"contrast": {"diff": 0.02, "se": 0.015, "seeds": 8}})


def test_holm_over_the_ingredients_decides_rises():
    """One ingredient with raw p ~ 0.02 rises alone, not in a family of 7 where Holm multiplies its p by 7;
    a strong one (p ~ 1e-5) rises either way."""
    from isocompute.reports.claims.mechanisms import holm_rises

    weak = {"stars": [2, 8, 32, 128], "contrast": {"diff": 0.02, "se": 0.0068, "seeds": 8}}
    strong = {"stars": [2, 8, 32, 128], "contrast": {"diff": 0.05, "se": 0.004, "seeds": 8}}
    null = {"stars": [2, 2, 2, 2], "contrast": {"diff": 0.0, "se": 0.01, "seeds": 8}}
    assert rises(weak) and rises(strong)
    fam = [dict(weak), dict(strong)] + [dict(null) for _ in range(5)]
    holm_rises(fam)
    assert 0.01 < fam[0]["p"] < 0.05 and fam[0]["p_holm"] > 0.05 and not fam[0]["rises"]
    assert fam[1]["rises"] and fam[1]["p_holm"] < 0.001
    assert not any(f["rises"] for f in fam[2:])


def test_declared_studies():
    for plan in (FULL, QUICK):
        for ing in INGREDIENTS:
            st = spec(plan, ing)
            assert st.name.startswith(f"{plan.name}/mech12-") and st.variants
            assert dict(st.base)["d"] == SIZES["full" if plan is FULL else "quick"].d
    assert SIZES["full"].seeds - SIZES["full"].tune >= 8


def test_an_edge_whose_reward_has_stopped_moving_is_saturated():
    """Edge = optimum on the grid's top lr; saturated when the next lr inward is within half a validation
    problem (0.5 / d); an edge still rising is not."""
    t = _table(best_lr=1e-1)  # optimum on the top edge, 0.05 per decade of penalty below it: rising
    x = measure_one(t, ING, SIZE, 32)
    assert x["edge_detail"] and not any(e["saturated"] for e in x["edge_detail"])
    flat = t.copy()
    top = flat["variant"] == "lr=0.1"
    inner = flat.loc[flat["variant"] == "lr=0.01"]  # same (n, seed, compute) order as the lr=0.1 rows
    # make lr=0.1 equal lr=0.01 plus less than 0.5 / d (d = 64 here): a plateau at the edge
    flat.loc[top, "val_mean"] = (inner["val_mean"].to_numpy() + 0.2 / SIZE.d)
    y = measure_one(flat, ING, SIZE, 32)
    assert y["edge_detail"] and all(e["saturated"] for e in y["edge_detail"])
    e = y["edge_detail"][0]
    assert e["lr"] == 1e-1 and e["inner_lr"] == 1e-2 and abs(e["reward"] - e["inner"]) < 0.5 / SIZE.d


def test_regeneration_keeps_other_generators_marked_blocks(tmp_path):
    """docs/MECHANISMS.md carries the group-std study's block (isocompute report groupstd --link); rewriting
    the mechanisms report must keep it, and keep nothing else of the old text."""
    from isocompute.reports.claims.report import kept_blocks

    out = tmp_path / "M.md"
    assert kept_blocks(out) == ""
    out.write_text("old report\n<!-- groupstd:begin (isocompute report groupstd) -->\nverdict\n"
                   "<!-- groupstd:end -->\ntail\n")
    kept = kept_blocks(out)
    assert "verdict" in kept and "old report" not in kept and "tail" not in kept
