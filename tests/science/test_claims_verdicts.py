"""The claims report's verdict rules (studies/claims/), each on hand-made numbers that give each verdict."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from studies.claims import allocation, mechanism, nstar, pass1
from studies.claims.common import noise_scale_from_pieces, paired_contrast, polarisation, robust

NAN = float("nan")


def rows(*ns):
    return [{"budget": 2.0 ** (10 + 2 * i), "n_star": n, "mean": 0.5, "ci": 0.01} for i, n in enumerate(ns)]


def c(diff, z, seeds=8):
    return {
        "n_small": 8,
        "n_large": 128,
        "diff": diff,
        "se": diff / z if z else NAN,
        "z": z,
        "ci": 0.01,
        "wins": seeds,
        "seeds": seeds,
    }


# ---------------------------------------------------------------------------------------------- statistics
def test_paired_contrast_uses_per_seed_differences():
    piv = pd.DataFrame({2: [0.4, 0.3, 0.5, 0.4], 4: [0.5, 0.4, 0.6, 0.5], 64: [0.6, 0.52, 0.69, 0.63]})
    out = paired_contrast(piv, [2, 4], [64])
    d = np.array([0.1, 0.12, 0.09, 0.13])
    assert (out["n_small"], out["n_large"], out["wins"], out["seeds"]) == (4, 64, 4, 4)
    assert out["diff"] == pytest.approx(d.mean()) and out["se"] == pytest.approx(d.std(ddof=1) / 2)


def test_robust_needs_growth_size_significance_and_eight_seeds():
    assert robust([8, 32, 128], c(0.03, 4))
    assert not robust([8, 16, 32], c(0.03, 4))  # 4x growth
    assert not robust([8, 32, 128], c(0.01, 4))  # too small
    assert not robust([8, 32, 128], c(0.03, 2))  # not significant
    assert not robust([8, 32, 128], c(0.03, 4, seeds=3))


def test_polarisation_and_noise_scale():
    st = polarisation(np.array([0.0, 0.0005, 0.2, 0.5, 0.995, 1.0, np.nan]))
    assert st["zero_frac"] == pytest.approx(2 / 6) and st["one_frac"] == pytest.approx(2 / 6)
    rng = np.random.default_rng(0)
    G = np.zeros(20)
    G[0] = 1.0
    est = noise_scale_from_pieces(G + 0.5 * rng.standard_normal((100_000, 20)))  # B = 20 * 0.25 / 1
    assert est["b_simple"] == pytest.approx(5.0, rel=0.03)


# ---------------------------------------------------------------------------------------------- sections
def test_theory_verdict():
    assert nstar.theory_verdict({"rows": rows(2, 4, 2), "two_smallest": [2, 4]})[0] == "reproduced"
    assert nstar.theory_verdict({"rows": rows(2, 8), "two_smallest": [2, 4]})[0] == "not reproduced"


def _f1(pre, env, sq, tab_ok, seeds=8):
    tr = {
        nstar.PRESET: {"rows": rows(8, 32, 256), "robust": pre},
        "sqrt rule, base lr 0.1 at B=256": {"rows": rows(2), "robust": sq},
    }
    if env is not None:
        tr[nstar.ENVELOPE] = {"rows": rows(8), "robust": env}
    return {"treatments": tr, "tabular_ok": tab_ok, "max_n": 512, "seeds": seeds}


def test_f1_verdict():
    assert nstar.f1_verdict(_f1(True, True, True, True))[0] == "reproduced"
    assert nstar.f1_verdict(_f1(True, False, False, True))[0] == "partly"
    assert nstar.f1_verdict(_f1(True, True, True, False))[0] == "not reproduced"  # the control fails
    assert nstar.f1_verdict(_f1(False, False, False, True))[0] == "not reproduced"
    # llm: no tabular control (None) does not block, a missing envelope counts as no
    v, why = nstar.f1_verdict(_f1(True, None, False, None, seeds=1))
    assert v == "partly" and "tabular control: n/a" in why and "needs 8" in why


def test_f2_verdict():
    def x(e, h):
        return {
            "k": 4,
            "datasets": {
                ds: {m: {"n_star": v} for m, v in zip(("best_k", "worst_k"), p, strict=True)}
                for ds, p in (("easy", e), ("hard", h))
            },
        }

    assert allocation.f2_verdict(x((8, 32), (32, 8)))[0] == "reproduced"
    assert allocation.f2_verdict(x((8, 32), (8, 8)))[0] == "partly"
    assert allocation.f2_verdict(x((32, 32), (8, 8)))[0] == "not reproduced"  # ties count as no


def test_f3_verdict():
    def x(ns, rn, rb):
        return {"rows": [{"n_star": n} for n in ns], "range_n": rn, "range_bp": rb}

    assert allocation.f3_verdict(x([4, 8, 16], 0.1, 0.05))[0] == "reproduced"
    assert allocation.f3_verdict(x([4, 4, 4], 0.1, 0.05))[0] == "partly"  # sensitivity only
    assert allocation.f3_verdict(x([4, 8], 0.01, 0.05))[0] == "partly"  # 2x monotone
    assert allocation.f3_verdict(x([8, 4], 0.01, 0.05))[0] == "not reproduced"


def test_f4_verdict():
    def x(grow, best, rn):
        return {
            "rows": {
                str(bp): [{"n_star": 2, "mean": 0.5}, {"n_star": 2 * g, "mean": b}]
                for bp, g, b in zip((8, 32), grow, best, strict=True)
            },
            "range_n": rn,
        }

    assert allocation.f4_verdict(x((4, 8), (0.70, 0.71), 0.05))[0] == "reproduced"
    assert allocation.f4_verdict(x((4, 2), (0.70, 0.71), 0.05))[0] == "partly"
    assert allocation.f4_verdict(x((1, 2), (0.60, 0.80), 0.05))[0] == "not reproduced"


def test_f5_verdict():
    def x(train, val):
        out = []
        for split, d in (("train", train), ("val", val)):
            if d is not None:
                out.append({"C": 1, "split": split, "stat": "zero_frac", "diff": d})
        return {"rows": out, "top": 1}

    assert pass1.f5_verdict(x((0.1, 0.02), (0.1, 0.05)))[0] == "reproduced"
    assert pass1.f5_verdict(x((0.1, 0.02), (0.01, 0.05)))[0] == "partly"
    assert pass1.f5_verdict(x((-0.1, 0.02), (-0.01, 0.05)))[0] == "not reproduced"
    assert pass1.f5_verdict(x(None, (0.1, 0.05)))[0] == "reproduced"  # llm: validation snapshots only


def test_f6_verdict_is_never_a_reproduction():
    v, why = nstar.f6_verdict({"models": {"a": [2, 8], "b": [2, 2]}})
    assert v == "not applicable to a simulator" and "a: 4x" in why and "b: 1x" in why


def test_f7_verdict():
    def x(ns_small, drop, rise):
        return {
            "d": {"big": 1024, "small": 128},
            "by_d": {
                "1024": {"n_star": [8, 128], "drop": (0.0, NAN)},
                "128": {"n_star": ns_small, "drop": (drop, NAN), "rise": (rise, NAN)},
            },
        }

    assert pass1.f7_verdict(x([8, 32], 0.03, 0.02))[0] == "reproduced"
    assert pass1.f7_verdict(x([8, 512], 0.03, 0.02))[0] == "partly"
    assert pass1.f7_verdict(x([8, 512], 0.005, 0.02))[0] == "not reproduced"


def test_f8_verdict_is_at_most_partly():
    def x(hard, easy):
        return {"large_min": 32, "halves": {"hard": {"n_star": hard}, "easy": {"n_star": easy}}}

    assert pass1.f8_verdict(x(128, 32))[0] == "partly"
    assert pass1.f8_verdict(x(8, 128))[0] == "not reproduced"


def test_f9_verdict():
    def x(d1, d2):
        return {"names": ["256/256", "64/256", "64/64"], "d1": (d1, NAN), "d2": (d2, NAN)}

    assert allocation.f9_verdict(x(0.01, 0.01))[0] == "reproduced"
    assert allocation.f9_verdict(x(0.01, -0.01))[0] == "partly"
    assert allocation.f9_verdict(x(-0.01, -0.01))[0] == "not reproduced"


def test_f10_verdict():
    def x(ns):
        return {"rows_tokens": rows(*ns), "n_star_rollouts": ns}

    assert nstar.f10_verdict(x([8, 8, 32]))[0] == "reproduced"
    assert nstar.f10_verdict(x([8, 32, 16]))[0] == "partly"  # 4x but not monotone
    assert nstar.f10_verdict(x([8, 8, 8]))[0] == "not reproduced"


def test_f11_verdict():
    def x(a, b):
        return {
            "objectives": {
                "ppo": {"n_star": [8, 8 * a[0]], "contrast": c(a[1], a[2])},
                "cispo": {"n_star": [8, 8 * b[0]], "contrast": c(b[1], b[2])},
            }
        }

    assert nstar.f11_verdict(x((4, 0.05, 5), (8, 0.03, 3)))[0] == "reproduced"
    assert nstar.f11_verdict(x((4, 0.05, 5), (2, 0.03, 3)))[0] == "partly"
    assert nstar.f11_verdict(x((4, -0.05, 5), (8, 0.03, 2)))[0] == "not reproduced"


def test_mechanism_is_measured_only():
    assert mechanism.mech_verdict({})[0] == "measured"
    assert math.isfinite(1.0)
