"""isocompute.reports.claims.selection on constructed data with known answers."""

import numpy as np
import pandas as pd
import pytest

from isocompute.reports.claims.selection import (
    cross_fit,
    directional_growth,
    holm,
    log_slope,
    seed_folds,
    select_on_heldout,
    t_pvalue,
)


def test_a_falling_sequence_is_not_growth():
    assert directional_growth([32, 8, 8, 2]) == pytest.approx(1 / 16)
    assert directional_growth([2, 8, 8, 32]) == pytest.approx(16)
    assert directional_growth([None, 4, 16]) == pytest.approx(4)
    assert np.isnan(directional_growth([]))
    s = log_slope([2**10, 2**12, 2**14, 2**16], [32, 16, 8, 4])
    assert s["slope"] == pytest.approx(-0.5) and s["ci"] == pytest.approx(0.0, abs=1e-12)
    noisy = log_slope([2**10, 2**12, 2**14, 2**16], [2, 8, 4, 16])
    assert noisy["slope"] > 0 and noisy["ci"] > 0


def _frame(rng, seeds=range(8)):
    # group g: choice "b" is better by 0.1 in expectation; seed 0 makes "a" look great (a lucky seed)
    rows = []
    for s in seeds:
        for g in (1, 2):
            for c, mu in (("a", 0.0), ("b", 0.1)):
                v = mu + 0.01 * rng.standard_normal() + (1.0 if (s == 0 and c == "a") else 0.0)
                rows.append({"seed": s, "g": g, "c": c, "r": v})
    return pd.DataFrame(rows)


def test_selection_on_reported_seeds_is_refused():
    df = _frame(np.random.default_rng(0))
    with pytest.raises(ValueError, match="refused"):
        select_on_heldout(df, tune_seeds=[0, 1], report_seeds=[1, 2], group_cols=["g"], choice_col="c",
                          score_col="r")
    with pytest.raises(ValueError):
        select_on_heldout(df, tune_seeds=[], report_seeds=[1], group_cols=["g"], choice_col="c",
                          score_col="r")


def test_selection_uses_only_the_tuning_seeds():
    df = _frame(np.random.default_rng(1))
    lucky = select_on_heldout(df, tune_seeds=[0], report_seeds=[1, 2], group_cols=["g"], choice_col="c",
                              score_col="r")
    assert list(lucky["c"]) == ["a", "a"]  # seed 0 alone is fooled by its luck
    fair = select_on_heldout(df, tune_seeds=[1, 2, 3], report_seeds=[0], group_cols=["g"], choice_col="c",
                             score_col="r")
    assert list(fair["c"]) == ["b", "b"]
    one = select_on_heldout(df.loc[df["g"] == 1], tune_seeds=[4, 5], report_seeds=[6], group_cols=[],
                            choice_col="c", score_col="r")
    assert list(one["c"]) == ["b"]


def test_cross_fit_reports_every_seed_at_a_choice_made_elsewhere():
    df = _frame(np.random.default_rng(2))
    folds = seed_folds(range(8), 2)
    assert [sorted(r) for _, r in folds] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert all(not set(t) & set(r) for t, r in folds)
    out = cross_fit(df, group_cols=["g"], choice_col="c", score_col="r")
    assert sorted(out["seed"].unique()) == list(range(8))
    assert len(out) == 16  # one row per (seed, group)
    # fold 0 (seeds 0, 2, 4, 6) is tuned on the odd seeds: "b"; fold 1 on seeds with the lucky seed 0: "a"
    assert set(out.loc[out["fold"] == 0, "chosen"]) == {"b"}
    assert set(out.loc[out["fold"] == 1, "chosen"]) == {"a"}


def test_holm_matches_the_step_down_rule():
    adj = holm([0.01, 0.04, 0.03, float("nan"), 0.5])
    # sorted 0.01, 0.03, 0.04, 0.5 -> 4*0.01, 3*0.03, max(0.09, 2*0.04), max(.., 1*0.5)
    assert adj[0] == pytest.approx(0.04)
    assert adj[2] == pytest.approx(0.09)
    assert adj[1] == pytest.approx(0.09)
    assert adj[4] == pytest.approx(0.5)
    assert np.isnan(adj[3])
    assert t_pvalue(0.0, 1.0, 8) == pytest.approx(1.0)
    assert t_pvalue(3.0, 1.0, 8) < 0.05 < t_pvalue(1.0, 1.0, 8)
