"""Compute to reach a target (studies/fit/target.py) on synthetic curves with known answers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from studies.fit.target import compute_to_target, crossing, run_curve

GRID = [0.0] + [2.0**j for j in range(4, 17)]
SEEDS = range(5)


def base(c: float, s: int) -> float:
    """A rising sigmoid in log2 C, a seed offset of 0.01 s."""
    if c == 0:
        return 0.2 + 0.01 * s
    return 0.2 + 0.6 / (1 + math.exp(-(math.log2(c) - 10) / 1.5)) + 0.01 * s


def table(arms: dict) -> pd.DataFrame:
    """{arm: f(c, seed)} evaluated at GRID for each seed, as a store table."""
    rows = []
    for a, f in arms.items():
        for s in SEEDS:
            rows += [{"run_id": f"{a}-{s}", "allocator": a, "seed": s, "compute": c, "val_mean": f(c, s)}
                     for c in GRID]
    return pd.DataFrame(rows)


def test_run_curve_and_crossing_by_hand():
    # records 0.1, 0.3, 0.3; before the first positive evaluation the compute-0 value, none past the last
    y = run_curve([0, 2, 8], [0.1, 0.3, 0.2], [1, 2, 4, 8, 16])
    assert y[:4].tolist() == [0.1, 0.3, 0.3, 0.3] and np.isnan(y[4])
    # 0.3 lies halfway between 0.2 at C = 2 and 0.4 at C = 4: in log C, 2 sqrt(2)
    assert crossing([1, 2, 4, 8], [0.1, 0.2, 0.4, 0.8], 0.3) == pytest.approx(2 * math.sqrt(2))
    assert crossing([1, 2, 4, 8], [0.1, 0.2, 0.4, 0.8], 0.9) == math.inf
    assert crossing([1, 2, 4, 8], [0.1, 0.2, 0.4, 0.8], 0.05, start=0.05) == 0.0
    assert crossing([1, 2, 4, 8], [0.1, 0.2, 0.4, 0.8], 0.05) == 1.0  # reached by the first grid point


def test_an_arm_shifted_by_2x_in_compute_needs_half_the_rollouts():
    """arm(C) = base(2 C) on every seed: it reaches the base's reward at any C with C / 2 rollouts, so the
    ratio is 2 at budgets on and between evaluation points, and every bootstrap replicate says the same."""
    t = table({"fixed-n8": base, "shift": lambda c, s: base(2 * c, s) if c > 0 else base(0, s)})
    budgets = [2.0**8, 2.0**9.5, 2.0**12]
    out = compute_to_target(t, "shift", budgets, ["fixed-n8"], reps=50)
    assert out["ratio"].tolist() == pytest.approx([2.0] * 3, rel=1e-9)
    assert out["c_versus"].tolist() == pytest.approx(budgets, rel=1e-9)  # the base reaches its own at C
    assert out["c_arm"].tolist() == pytest.approx([b / 2 for b in budgets], rel=1e-9)
    assert out["lo"].tolist() == pytest.approx([2.0] * 3, rel=1e-9)
    assert out["hi"].tolist() == pytest.approx([2.0] * 3, rel=1e-9)
    assert out["reached"].tolist() == [1.0] * 3 and out["seeds"].tolist() == [5] * 3


def test_a_target_never_reached_gives_ratio_0_and_the_reverse_inf():
    t = table({"fixed-n8": base, "flat": lambda c, s: 0.1})
    out = compute_to_target(t, "flat", [2.0**10], ["fixed-n8"], reps=20)
    assert out["c_arm"].iloc[0] == math.inf and out["ratio"].iloc[0] == 0.0 and out["reached"].iloc[0] == 0.0
    # the flat arm's own curve as the target: the base starts above it, the arm needs 0 only at its start
    out = compute_to_target(t, "fixed-n8", [2.0**10], ["flat"], reps=0)
    assert out["c_arm"].iloc[0] == 0.0 and out["c_versus"].iloc[0] == 0.0 and out["ratio"].iloc[0] == 1.0


def test_targets_from_an_envelope_and_the_ratio_to_a_base_n():
    """Two fixed n: n4 leads below 2^10, n16 above (their envelope switches there). A copy of n4 matches the
    envelope where n4 leads (ratio 1) and never reaches the envelope's reward above; against its base n4 it
    is 1 everywhere, while n16 vs the envelope is 1 only where n16 leads."""
    def n4(c, s):
        return min(base(4 * c, s), 0.55 + 0.01 * s) if c > 0 else base(0, s)

    def n16(c, s):
        return base(c / 2, s) if c > 0 else base(0, s)

    t = table({"fixed-n4": n4, "fixed-n16": n16, "copy": n4})
    budgets = [2.0**7, 2.0**14]
    env = compute_to_target(t, "copy", budgets, ["fixed-n4", "fixed-n16"], reps=0)
    assert env["ratio"].iloc[0] == pytest.approx(1.0) and env["ratio"].iloc[1] == 0.0
    own = compute_to_target(t, "copy", budgets, ["fixed-n4"], reps=0)
    assert own["ratio"].tolist() == pytest.approx([1.0, 1.0])
    big = compute_to_target(t, "fixed-n16", budgets, ["fixed-n4", "fixed-n16"], reps=0)
    assert big["ratio"].iloc[1] == pytest.approx(1.0) and big["ratio"].iloc[0] < 1.0
    # targets from the envelope, compute compared with the base n: n4 never reaches the top target
    vs = compute_to_target(t, "fixed-n16", [2.0**14], ["fixed-n4", "fixed-n16"], versus=["fixed-n4"], reps=0)
    assert vs["c_versus"].iloc[0] == math.inf and vs["ratio"].iloc[0] == math.inf


def test_the_interval_covers_noise_and_pairs_seeds():
    """A noisy 2x shift (per-seed noise on the arm only): the interval holds 2 and is not degenerate."""
    rng = np.random.default_rng(0)
    noise = {s: rng.normal(0, 0.02) for s in SEEDS}
    t = table({"fixed-n8": base, "shift": lambda c, s: (base(2 * c, s) if c > 0 else base(0, s)) + noise[s]})
    out = compute_to_target(t, "shift", [2.0**10], ["fixed-n8"], reps=200)
    r = out.iloc[0]
    assert r["lo"] < r["hi"] and r["lo"] <= 2.0 <= r["hi"] * 1.5


def test_errors_name_the_missing_arm_and_extra_runs():
    t = table({"fixed-n8": base})
    with pytest.raises(ValueError, match="nope"):
        compute_to_target(t, "nope", [2.0**10], ["fixed-n8"])
    twice = pd.concat([t, t.assign(run_id=t["run_id"] + "b")])
    with pytest.raises(ValueError, match="runs at seed"):
        compute_to_target(twice, "fixed-n8", [2.0**10], ["fixed-n8"])
