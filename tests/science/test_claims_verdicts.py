"""The claims report's verdict rules (isocompute/reports/claims/), each on hand-made intervals that give each
verdict: reproduced only where the key quantity's interval clears the rule's threshold, not reproduced only
where it clears the opposite one, inconclusive otherwise; no rule reads two point estimates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from isocompute.reports.claims import allocation, measurements, nstar, pass1
from isocompute.reports.claims.common import (
    heldout_contrast,
    noise_scale_from_pieces,
    paired_contrast,
    polarisation,
)
from isocompute.reports.claims.judge import (
    EQUIVALENCE_MARGIN,
    NAN_INTERVAL,
    Interval,
    Rule,
    combine,
    judge,
    replicate,
    seed_bootstrap,
    t_interval,
)

R, N, I = "reproduced", "not reproduced", "inconclusive"


def iv(est: float, half: float = 0.005, k: int = 8) -> Interval:
    """An interval est ± half (95%), 0.8 of it at 90%."""
    return Interval(est, est - half, est + half, est - 0.8 * half, est + 0.8 * half, k)


UP, DOWN, FLAT = iv(0.03), iv(-0.03), iv(0.0, 0.02)
"""Intervals wholly above 0, wholly below 0, and across 0."""


def c(interval: Interval) -> dict:
    return {"n_small": 8, "n_large": 128, "diff": interval.estimate, "iv": interval, "wins": 8, "seeds": 8,
            "per_seed": {}}


def rows(*ns):
    return [{"budget": 2.0 ** (10 + 2 * i), "n_star": n, "set": [n], "mean": 0.5, "ci": 0.01,
             "competitors": 3} for i, n in enumerate(ns)]


# ---------------------------------------------------------------------------------------------- the judge
def test_judge_above_below_and_equivalence_give_each_verdict():
    up = Rule("q")
    assert [judge(up, x).verdict for x in (UP, DOWN, FLAT, NAN_INTERVAL)] == [R, N, I, I]
    down = Rule("q", kind="below")
    assert [judge(down, x).verdict for x in (DOWN, UP, FLAT)] == [R, N, I]
    # a threshold other than 0, with the opposite threshold below it: between the two is inconclusive
    drop = Rule("q", threshold=0.01, opposite=0.0, margin_of="OVERFIT_DROP")
    assert [judge(drop, x).verdict for x in (iv(0.02), iv(-0.02), iv(0.005, 0.004))] == [R, N, I]
    eq = Rule("q", kind="equivalent", margin=0.01)
    assert judge(eq, iv(0.002, 0.006)).verdict == R  # 90% interval inside ±0.01
    assert judge(eq, iv(0.03, 0.01)).verdict == N  # 95% interval beyond +0.01
    assert judge(eq, iv(-0.03, 0.01)).verdict == N
    assert judge(eq, iv(0.008, 0.01)).verdict == I  # straddles the margin
    assert EQUIVALENCE_MARGIN > 0


def test_rule_refuses_overlapping_thresholds_and_no_margin():
    with pytest.raises(ValueError):
        Rule("q", threshold=0.0, opposite=0.01)
    with pytest.raises(ValueError):
        Rule("q", kind="below", threshold=0.0, opposite=-0.01)
    with pytest.raises(ValueError):
        Rule("q", kind="equivalent", margin=0.0)
    with pytest.raises(ValueError):
        Rule("q", kind="sideways")


def test_combine_and_replicate():
    assert combine([R, R]) == R and combine([N, N]) == N
    assert combine([R, N]) == "partly" and combine([R, I]) == I and combine([]) == I
    assert replicate(R, R) == R and replicate(R, I) == "does not replicate"


def test_t_interval_is_the_t_interval():
    from scipy import stats

    v = np.array([0.1, 0.12, 0.09, 0.13, 0.11])
    out = t_interval(v)
    lo, hi = stats.t.interval(0.95, v.size - 1, loc=v.mean(), scale=stats.sem(v))
    assert out.estimate == pytest.approx(v.mean()) and (out.lo, out.hi) == pytest.approx((lo, hi))
    lo90, hi90 = stats.t.interval(0.90, v.size - 1, loc=v.mean(), scale=stats.sem(v))
    assert (out.lo90, out.hi90) == pytest.approx((lo90, hi90))
    assert not t_interval([0.3]).finite and judge(Rule("q"), t_interval([0.3])).verdict == I


def test_seed_bootstrap_is_deterministic_and_covers_the_mean():
    rng = np.random.default_rng(1)
    wide = pd.DataFrame({"a": rng.normal(0.5, 0.1, 16), "b": rng.normal(0.4, 0.1, 16)})
    stat = lambda w: float(w["a"].mean() - w["b"].mean())  # noqa: E731
    one, two = seed_bootstrap(wide, stat, reps=500), seed_bootstrap(wide, stat, reps=500)
    assert one == two and one.lo < one.estimate < one.hi and one.lo < one.lo90 < one.hi90 < one.hi
    assert one.method == "bootstrap" and one.k == 16


# ---------------------------------------------------------------------------------------------- statistics
def test_paired_contrast_uses_per_seed_differences():
    piv = pd.DataFrame({2: [0.4, 0.3, 0.5, 0.4], 4: [0.5, 0.4, 0.6, 0.5], 64: [0.6, 0.52, 0.69, 0.63]})
    out = paired_contrast(piv, [2, 4], [64])
    d = np.array([0.1, 0.12, 0.09, 0.13])
    assert (out["n_small"], out["n_large"], out["wins"], out["seeds"]) == (4, 64, 4, 4)
    assert out["diff"] == pytest.approx(d.mean()) and out["se"] == pytest.approx(d.std(ddof=1) / 2)
    assert out["iv"] == t_interval(list(out["per_seed"].values()))
    assert sorted(out["per_seed"]) == [0, 1, 2, 3]


def test_contrast_arms_are_chosen_on_held_out_seeds():
    """Seed 0 makes n = 2 look best among the small n; chosen on the other fold, n = 4 is reported for
    the fold holding seed 0, so seed 0's luck cannot choose the arm it reports."""
    rows_ = []
    for s in range(6):
        for n, v in ((2, 0.40 + (0.5 if s == 0 else 0.0)), (4, 0.45), (64, 0.55 + 0.01 * s)):
            rows_.append({"seed": s, "n": n, "reward": v})
    rr = pd.DataFrame(rows_)
    out = heldout_contrast(rr, [2, 4], [64])
    assert out["n_small"] == "4/2" and out["seeds"] == 6
    d = [0.55 - 0.45, 0.57 - 0.45, 0.59 - 0.45, 0.56 - 0.40, 0.58 - 0.40, 0.60 - 0.40]
    assert out["diff"] == pytest.approx(np.mean(d))
    one = heldout_contrast(rr, [2, 4], [64], tune_seeds=[1, 2])
    assert one["n_small"] == 4 and one["seeds"] == 4
    env = rr.assign(lr=0).pipe(lambda f: pd.concat([f, f.assign(lr=1, reward=f["reward"] - 0.1)]))
    arm = heldout_contrast(env, [2, 4], [64], arm="lr")
    assert arm["arm_small"] == 0 and arm["arm_large"] == 0


def test_polarisation_and_noise_scale():
    st = polarisation(np.array([0.0, 0.0005, 0.2, 0.5, 0.995, 1.0, np.nan]))
    assert st["zero_frac"] == pytest.approx(2 / 6) and st["one_frac"] == pytest.approx(2 / 6)
    rng = np.random.default_rng(0)
    G = np.zeros(20)
    G[0] = 1.0
    est = noise_scale_from_pieces(G + 0.5 * rng.standard_normal((100_000, 20)))  # B = 20 * 0.25 / 1
    assert est["b_simple"] == pytest.approx(5.0, rel=0.03)


def test_f2_tilt_is_the_per_seed_slope_on_log2_n():
    piv = pd.DataFrame({2: [0.1, 0.2], 8: [0.3, 0.2], 32: [0.5, 0.2]})
    assert list(allocation.tilt(piv)) == pytest.approx([0.1, 0.0])


def test_f3_f4_ranges_and_spread_of_a_seed_matrix():
    cols = pd.MultiIndex.from_tuples([(32, 2), (32, 8), (128, 2), (128, 8)], names=["bp", "n"])
    wide = pd.DataFrame([[0.5, 0.6, 0.52, 0.7], [0.5, 0.6, 0.52, 0.7]], columns=cols)
    over_n, over_bp = allocation.ranges(wide)
    assert over_n == pytest.approx((0.1 + 0.18) / 2) and over_bp == pytest.approx((0.02 + 0.1) / 2)
    assert allocation.bp_spread(wide) == pytest.approx(0.1)


# ---------------------------------------------------------------------------------------------- sections
def test_theory_verdict():
    x = {"rows": rows(2, 4, 2), "two_smallest": [2, 4]}
    assert [nstar.theory_verdict(x | {"gain": g})[0] for g in (DOWN, UP, FLAT)] == [R, N, I]


def _f1(recipe: Interval, envelope: Interval = FLAT, preset: Interval = UP) -> dict:
    tr = {
        nstar.RECIPE_ROW: {"rows": rows(2, 8, 32), "record": c(recipe), "final": c(recipe)},
        nstar.constant_label(0.1, 0.1): {"rows": rows(8, 64, 512), "record": c(preset), "final": c(preset),
                                         "sensitivity": True},
        nstar.ENVELOPE: {"rows": rows(2, 4), "record": c(envelope), "final": c(envelope)},
    }
    return {"treatments": tr, "tabular_ok": True, "max_n": 512, "seeds": 8, "main": nstar.RECIPE_ROW}


def test_f1_verdict_reads_the_recipe_only():
    assert nstar.f1_verdict(_f1(UP))[0] == R
    assert nstar.f1_verdict(_f1(DOWN))[0] == N
    assert nstar.f1_verdict(_f1(FLAT))[0] == I
    # the envelope and the preset's constant lr (a sensitivity row) never decide it
    v, why = nstar.f1_verdict(_f1(FLAT, envelope=UP, preset=UP))
    assert v == I and "under the lr envelope reproduced" in why and "sensitivity" in why
    # the llm plans read their backend's own recipe
    x = _f1(UP) | {"main": nstar.BACKEND_ROW}
    x["treatments"] = {nstar.BACKEND_ROW: x["treatments"][nstar.RECIPE_ROW]}
    assert nstar.f1_verdict(x | {"tabular_ok": None})[0] == R


def test_large_n_wins_only_by_at_least_one_point():
    """A gain of large n resolved above 0 but below one point of pass@1 (MIN_GAIN) is not the paper's claim:
    every "large n wins" rule (findings 1, 3, 4, 8, 10, 11) reads the same threshold."""
    from isocompute.reports.claims.judge import MIN_GAIN

    tiny, straddle = iv(0.003, 0.002), iv(0.015, 0.01)  # [0.001, 0.005] and [0.005, 0.025]
    assert MIN_GAIN == EQUIVALENCE_MARGIN == 0.01
    assert nstar.f1_verdict(_f1(tiny))[0] == N
    assert nstar.f1_verdict(_f1(straddle))[0] == I
    for rule in (nstar.F1_RULE, nstar.F10_RULE, nstar.F11_RULE, allocation.F3_GAIN, allocation.F4_GAIN,
                 pass1.F8_RULE):
        assert judge(rule, tiny).verdict == N and judge(rule, UP).verdict == R, rule.quantity
        assert "above +0.01" in rule.text()


def _f2(easy: Interval, hard: Interval) -> dict:
    def ds(t):
        return {m: {"n_star": 8, "set": [8]} for m in ("best_k", "worst_k", "mean")} | {"tilt": t}

    return {"k": 4, "datasets": {"easy": ds(easy), "hard": ds(hard)}}


def test_f2_verdict():
    assert allocation.f2_verdict(_f2(UP, DOWN))[0] == R
    assert allocation.f2_verdict(_f2(DOWN, UP))[0] == N
    assert allocation.f2_verdict(_f2(UP, UP))[0] == "partly"
    assert allocation.f2_verdict(_f2(UP, FLAT))[0] == I


def test_f3_verdict():
    def x(gain, sens):
        return {"rows": rows(4, 8), "gain": c(gain), "sens": sens, "bps": [32, 128, 512]}

    assert allocation.f3_verdict(x(UP, UP))[0] == R
    assert allocation.f3_verdict(x(DOWN, DOWN))[0] == N
    assert allocation.f3_verdict(x(UP, DOWN))[0] == "partly"
    assert allocation.f3_verdict(x(FLAT, UP))[0] == I


def test_f4_verdict_needs_every_b_p_and_an_equivalent_spread():
    def x(gains, spread):
        return {"rows": {str(bp): rows(2, 32) for bp in (32, 128)},
                "gains": {str(bp): c(g) for bp, g in zip((32, 128), gains, strict=True)},
                "spread": spread, "spread_final": spread, "range_n_final": 0.1}

    small, big = iv(0.003, 0.004), iv(0.05, 0.01)
    assert allocation.f4_verdict(x((UP, UP), small))[0] == R
    assert allocation.f4_verdict(x((DOWN, DOWN), big))[0] == N
    assert allocation.f4_verdict(x((UP, UP), big))[0] == "partly"  # n* rises, but B_p matters
    assert allocation.f4_verdict(x((UP, FLAT), small))[0] == I
    assert allocation.f4_verdict(x((UP, UP), iv(0.008, 0.01)))[0] == I  # the spread straddles the margin


def test_f5_verdict():
    def x(train, val):
        out = [{"C": 1, "split": s, "stat": "zero_frac", "diff": d}
               for s, d in (("train", train), ("val", val)) if d is not None]
        return {"rows": out, "top": 1}

    assert pass1.f5_verdict(x(UP, UP))[0] == R
    assert pass1.f5_verdict(x(DOWN, DOWN))[0] == N
    assert pass1.f5_verdict(x(UP, DOWN))[0] == "partly"
    assert pass1.f5_verdict(x(UP, FLAT))[0] == I
    assert pass1.f5_verdict(x(None, UP))[0] == R  # llm: validation snapshots only


def test_f6_verdict_is_never_a_reproduction():
    v, why = nstar.f6_verdict({"models": {"a": {"rows": rows(2, 8)}, "b": {"rows": rows(2, 2)}}})
    assert v == "not applicable to a simulator" and "a: 4x" in why and "b: 1x" in why


def test_f7_verdict():
    def x(gap, drop, rise):
        return {"d": {"big": 1024, "small": 128}, "gap": gap,
                "by_d": {"1024": {"drop": iv(0.0)}, "128": {"drop": drop, "rise": rise}}}

    assert pass1.f7_verdict(x(DOWN, iv(0.03), UP))[0] == R
    assert pass1.f7_verdict(x(UP, iv(0.0), DOWN))[0] == N
    assert pass1.f7_verdict(x(DOWN, iv(0.0), DOWN))[0] == "partly"
    assert pass1.f7_verdict(x(DOWN, iv(0.012, 0.005), UP))[0] == I  # the drop's interval holds 0.01


def test_f8_verdict_is_at_most_partly():
    def x(hard, easy):
        return {"large_min": 32, "halves": {"hard": {"gain": c(hard)}, "easy": {"gain": c(easy)}}}

    assert pass1.f8_verdict(x(UP, UP))[0] == "partly"
    assert pass1.f8_verdict(x(DOWN, DOWN))[0] == N
    assert pass1.f8_verdict(x(UP, FLAT))[0] == I


def test_f9_verdict_is_the_papers_ordering():
    def x(d13, d12, d32):
        r = {"d13": d13, "d12": d12, "d32": d32, "values": {}}
        return {"names": ["256/256", "64/256", "64/64"], "record": r, "final": r}

    same, apart = iv(0.001, 0.004), iv(0.03, 0.01)
    assert allocation.f9_verdict(x(UP, UP, same))[0] == R  # (1) > (3) ~ (2)
    assert allocation.f9_verdict(x(DOWN, DOWN, apart))[0] == N
    assert allocation.f9_verdict(x(UP, UP, apart))[0] == "partly"  # the baseline alone matters
    assert allocation.f9_verdict(x(UP, FLAT, same))[0] == I


def test_f9_charges_the_decoupled_baseline_as_the_paper():
    from isocompute.reports.claims.common import FULL

    specs = allocation._f9(FULL)
    dec = dict(specs["64/256"].base)
    assert dec["n_est"] == 256 and specs["64/256"].bp == (128,) and specs["256/256"].bp == (128,)
    assert allocation.paper_charge(64, 256) == 256
    assert specs["64/256"].budget * 256 // (64 + 256) == specs["256/256"].budget
    tab = pd.DataFrame({"n": [64, 64], "compute": [320.0 * 128, 640.0 * 128]})
    assert list(allocation._charged(tab, 256)["compute"]) == [256.0 * 128, 512.0 * 128]


def test_findings_3_and_4_stay_in_the_papers_b_p_range():
    from isocompute.reports.claims.common import FULL, QUICK

    for plan in (FULL, QUICK):
        assert all(32 <= bp <= 1024 for bp in allocation.bps(plan))
        st = allocation._fixed(plan)
        assert all(32 <= st.batch[0] // n <= 1024 for n in st.n)
    assert allocation.bps(FULL) == (32, 128, 512) and len(allocation._fixed(FULL).n) == 6


def test_f10_verdict():
    def x(g):
        return {"rows_tokens": rows(8, 32), "n_star_rollouts": rows(8, 32), "gain": c(g), "stake": None}

    assert [nstar.f10_verdict(x(g))[0] for g in (UP, DOWN, FLAT)] == [R, N, I]


def test_f11_verdict():
    def x(a, b):
        return {"objectives": {k: {"n_star": rows(8, 32), "contrast": c(v), "final": c(v)}
                               for k, v in (("ppo", a), ("cispo", b))}}

    assert nstar.f11_verdict(x(UP, UP))[0] == R
    assert nstar.f11_verdict(x(DOWN, DOWN))[0] == N
    assert nstar.f11_verdict(x(UP, DOWN))[0] == "partly"
    assert nstar.f11_verdict(x(UP, FLAT))[0] == I


def test_mechanism_is_measured_only():
    assert measurements.mech_verdict({})[0] == "measured"


def test_f11_names_the_n_where_ppo_and_cispo_ran_the_same():
    """Finding 11's two objectives coincide where no ratio leaves the clip range; the report says at which n
    (equal at every seed and compute), and that they differ where one value differs."""
    import pandas as pd

    from isocompute.reports.claims.nstar import coinciding_ns, same_runs_text

    rows = [{"n": n, "seed": s, "compute": c, "val_mean": 0.1 * n + 0.01 * s + c}
            for n in (2, 8, 32) for s in (0, 1) for c in (64.0, 128.0)]
    a = pd.DataFrame(rows)
    b = a.copy()
    b.loc[(b["n"] == 32) & (b["seed"] == 1) & (b["compute"] == 128.0), "val_mean"] += 1e-12
    assert coinciding_ns(a, b) == [2, 8]
    assert "n = 2, 8" in same_runs_text([2, 8])
    assert same_runs_text(coinciding_ns(a, b.assign(val_mean=b["val_mean"] + 1))) == \
        "PPO and CISPO runs differ at every n."
