"""The paper's other analyses on hand-made tables with known answers: best@k vs worst@k optimal n
(Fig 8), sensitivity to n vs B_p (Fig 10), n*(M) and B_p*(M) at fixed batch (Fig 9), pass@1 distribution
statistics (Fig 11/27)."""

import numpy as np
import pandas as pd
import pytest

from studies.fit.analyses import (
    final_reward,
    fixed_batch_optimum,
    optimal_by_metric,
    sensitivity,
    sensitivity_summary,
)
from studies.fit.distribution import at_matched_compute, pass1_stats
from studies.fit.sigmoid import sigmoid


def _runs(final_of, bps, ns, seeds=2, points=5, budget=1e6, cols=("val_mean",)):
    """Runs whose metrics climb linearly to final_of(bp, n, col, seed) at `budget` (points log-spaced)."""
    rows = []
    for bp in bps:
        for n in ns:
            for s in range(seeds):
                C = np.geomspace(budget / 100, budget, points)
                frac = np.linspace(0.5, 1.0, points)
                d = {"run_id": f"bp{bp}-n{n}-s{s}", "compute": C, "bp": bp, "n": n, "seed": s}
                for c in cols:
                    d[c] = final_of(bp, n, c, s) * frac
                rows.append(pd.DataFrame(d))
    return pd.concat(rows, ignore_index=True)


def test_final_reward_at_common_budget_with_tail_and_best():
    t = _runs(lambda bp, n, c, s: 0.5 + 0.1 * s, [32], [4], seeds=2)
    # a third run goes further: the common budget stays 1e6 and its extra point is ignored
    extra = t[t.run_id == "bp32-n4-s0"].assign(run_id="bp32-n4-s2", seed=2)
    extra = pd.concat([extra, extra.tail(1).assign(compute=1e7, val_mean=0.99)])
    fr = final_reward(pd.concat([t, extra]), keys=("bp", "n"))
    assert fr.attrs["budget"] == pytest.approx(1e6)
    assert fr["reward"].item() == pytest.approx((0.5 + 0.6 + 0.5) / 3)
    assert fr["n_runs"].item() == 3
    # tail = 2: mean of the last two points; values at frac 0.875 and 1.0 of the final
    fr2 = final_reward(t, keys=("n",), tail=2)
    assert fr2["reward"].item() == pytest.approx(np.mean([0.5, 0.6]) * (0.875 + 1.0) / 2)
    # "best" = plateau: a run that falls at the end keeps its maximum
    fall = t.copy()
    fall.loc[fall.groupby("run_id").tail(1).index, "val_mean"] = 0.0
    assert final_reward(fall, keys=("n",), stat="best")["reward"].item() == pytest.approx(
        np.mean([0.5, 0.6]) * 0.875
    )


def test_optimal_n_for_best_k_and_worst_k_per_bp_fig8():
    # bp = 32: best@k peaks at n = 16, worst@k at n = 64; bp = 128: best@k peaks at n = 4, worst@k at n = 16
    peak = {(32, "val_best_k"): 16, (32, "val_worst_k"): 64, (128, "val_best_k"): 4, (128, "val_worst_k"): 16}

    def final(bp, n, c, s):
        return 0.6 - 0.05 * abs(np.log2(n) - np.log2(peak[(bp, c)])) + 0.001 * s

    t = _runs(final, [32, 128], [4, 16, 64], cols=("val_best_k", "val_worst_k"))
    out = optimal_by_metric(t, metrics=("val_best_k", "val_worst_k", "not_a_column"), by="n", per="bp")
    got = {(r.bp, r.metric): r.n_star for r in out.itertuples()}
    assert got == peak
    assert out["reward"].to_numpy() == pytest.approx(0.6005)
    with pytest.raises(ValueError, match="none of the metric"):
        optimal_by_metric(t, metrics=("nope",))


def test_optimal_by_metric_ties_go_to_smaller_n():
    t = _runs(lambda bp, n, c, s: 0.5, [32], [4, 16, 64], cols=("val_best_k",))
    assert optimal_by_metric(t, metrics=("val_best_k",))["n_star"].item() == 4


def test_sensitivity_ranges_fig10():
    # final reward = 0.5 + 0.02 * log2 n + 0.001 * bp / 32: over n in {4, 16, 64} the range is 0.08 at
    # every bp, over bp in {32, 64, 128} it is 0.003 at every n.
    t = _runs(lambda bp, n, c, s: 0.5 + 0.02 * np.log2(n) + 0.001 * bp / 32, [32, 64, 128], [4, 16, 64])
    sens = sensitivity(t, "val_mean", factors=("n", "bp"))
    assert len(sens) == 6
    np.testing.assert_allclose(sens.loc[sens.varied == "n", "range"], 0.08)
    np.testing.assert_allclose(sens.loc[sens.varied == "bp", "range"], 0.003)
    assert set(sens.loc[sens.varied == "n", "argmax"]) == {64}
    summ = sensitivity_summary(sens)
    assert summ["n"] == pytest.approx(0.08) and summ["bp"] == pytest.approx(0.003)


def test_sensitivity_skips_single_level_groups():
    t = _runs(lambda bp, n, c, s: 0.5 + 0.01 * n, [32], [4, 8])
    sens = sensitivity(t, "val_mean")
    assert sens["varied"].tolist() == ["n"] and sens["range"].item() == pytest.approx(0.04)


def test_fixed_batch_n_star_and_bp_star_fig9():
    # B = 256 split as (bp, n) = (64, 4), (16, 16), (4, 64); small n learns fastest, large n plateaus highest,
    # so n*(M) rises with M and bp*(M) = 256 / n*(M) falls (paper Fig 9, Easy).
    specs = {4: (0.3, 0.55, 30.0, 1.5), 16: (0.3, 0.65, 100.0, 1.3), 64: (0.3, 0.72, 300.0, 1.2)}
    rows = []
    for n, p in specs.items():
        m = np.unique(np.round(np.geomspace(1, 3000, 80)))  # log-spaced evaluation, as sweeps do
        rows.append(
            pd.DataFrame(
                {"run_id": f"n{n}", "bp": 256 // n, "n": n, "compute": 256 * m, "val_mean": sigmoid(m, *p)}
            )
        )
    t = pd.concat(rows, ignore_index=True)
    out = fixed_batch_optimum(t, "val_mean", grid_points=30)
    assert set(out["batch"]) == {256} and 20 <= len(out) <= 30  # frontier rows at <= 30 evaluation computes
    keys = list(specs)
    T = np.array([sigmoid(out["m"].to_numpy(), *specs[k]) for k in keys])
    true = np.array(keys)[T.argmax(0)]
    got = out["n_star"].to_numpy()
    assert np.mean(got == true) >= 0.9
    # where the best split beats the runner-up by more than one record bin (0.005) the answer must be exact;
    # below that (M ~ 1, every split near R0) record-breaking points cannot resolve the order by design
    srt = np.sort(T, axis=0)
    clear = srt[-1] - srt[-2] > 0.005
    assert clear.sum() >= 20 and np.all(got[clear] == true[clear])
    np.testing.assert_allclose(out["bp_star"] * out["n_star"], 256)
    assert got[-1] == 64 and np.all(np.diff(got[clear]) >= 0)
    assert set(out.attrs["n_star_fit"][256]["params"]) == {"R0", "A", "C_mid", "b"}


# ---- pass@1 distribution statistics (Fig 11 / 27) --------------------------------------------------


def _snap(run, compute, values, split="train"):
    return pd.DataFrame(
        {
            "run_id": run,
            "compute": compute,
            "split": split,
            "problem": np.arange(len(values)),
            "pass1": values,
        }
    )


def _w1_numeric(x, grid=200_001):
    t = np.linspace(0, 1, grid)
    F = np.searchsorted(np.sort(x), t, side="right") / len(x)
    return np.trapezoid(np.abs(F - t), t)


def test_pass1_stats_known_snapshots():
    N = 10
    uniform = (np.arange(N) + 0.5) / N
    tidy = pd.concat(
        [
            _snap("a", 100.0, np.zeros(8)),
            _snap("a", 200.0, np.r_[np.zeros(4), np.ones(4)]),
            _snap("a", 300.0, np.r_[uniform, np.nan]),
            _snap("a", 300.0, np.ones(5), split="val"),
        ]
    )
    st = pass1_stats(tidy, one_thresh=0.99).set_index(["compute", "split"])
    z = st.loc[(100.0, "train")]
    assert (z.zero_frac, z.one_frac, z.spread, z.w1_uniform, z.n_problems) == (1.0, 0.0, 0.0, 0.5, 8)
    p = st.loc[(200.0, "train")]
    assert (p.zero_frac, p.one_frac, p.polar_frac) == (0.5, 0.5, 1.0)
    assert p.spread == pytest.approx(0.5) and p.w1_uniform == pytest.approx(0.25)
    u = st.loc[(300.0, "train")]
    assert u.n_problems == N and u.zero_frac == 0 and u.one_frac == 0
    assert u.w1_uniform == pytest.approx(1 / (4 * N)) and u.spread == pytest.approx(np.std(uniform))
    assert u["mean"] == pytest.approx(0.5)
    v = st.loc[(300.0, "val")]
    assert v.one_frac == 1.0 and v.w1_uniform == pytest.approx(0.5)


def test_pass1_w1_matches_numeric_integral_and_polarisation_orders():
    rng = np.random.default_rng(0)
    x = rng.beta(0.5, 0.5, 300)  # polarised: mass near 0 and 1
    y = rng.uniform(0, 1, 300)
    st = pass1_stats(pd.concat([_snap("small_n", 1e4, x), _snap("large_n", 1e4, y)])).set_index("run_id")
    assert st.loc["small_n", "w1_uniform"] == pytest.approx(_w1_numeric(x), abs=1e-5)
    assert st.loc["large_n", "w1_uniform"] == pytest.approx(_w1_numeric(y), abs=1e-5)
    assert st.loc["small_n", "w1_uniform"] > st.loc["large_n", "w1_uniform"]
    assert st.loc["small_n", "spread"] > st.loc["large_n", "spread"]


def test_at_matched_compute_picks_nearest_in_log_space():
    tidy = pd.concat(
        [_snap("a", c, np.full(3, 0.1 * i)) for i, c in enumerate([1e3, 1e4, 1e5])]
        + [_snap("b", c, np.full(3, 0.2)) for c in [2e3, 4e4]]
    )
    st = pass1_stats(tidy)
    got = at_matched_compute(st, 2e4).set_index("run_id")["compute"].to_dict()
    assert got == {"a": 1e4, "b": 4e4}
    with pytest.raises(ValueError):
        at_matched_compute(st, 0.0)
    with pytest.raises(ValueError, match="lacks column"):
        pass1_stats(tidy.drop(columns="pass1"))
