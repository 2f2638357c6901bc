"""No subnormal arithmetic in long runs (grpo.TINY), and the flush leaves results as they were.

A subnormal operand or an underflowing result raises the DE / UE flag of the CPU's MXCSR register
(sandbox/fpflags.py): the test reads those flags around a training stretch, deterministically, instead of
timing it (per-step cost against run length is measured by benchmarks/sim_profile.py --length). The
unflushed arithmetic (hp[HP_TINY] = 0) of the same run must raise them, so the detector and the run length
are checked too.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from sandbox import SimConfig, grpo, run, runner
from sandbox.fpflags import DAZ, DE, FTZ, UE, flush_to_zero, mxcsr, subnormal_events
from sandbox.kernels import optimizer
from sandbox.runner import prepare

SMALLEST_NORMAL = np.finfo(np.float64).tiny
# d = bp: every row is updated at every step, so 2^14 steps are 2^14 updates per row, well past the ~6,700
# after which beta1^t and a solved row's first moment (beta1 = 0.9) are subnormal without the flush.
LONG_TAB = dict(model="tabular", n=2, bp=32, d=32, d_val=32, budget=2**20, n_evals=8)
LONG_MLP = dict(model="interference", n=2, bp=32, d=64, d_val=64, budget=2**20, n_evals=8)


def _subnormal_count(*arrays) -> int:
    return sum(int(np.sum((a != 0) & (np.abs(a) < SMALLEST_NORMAL))) for a in arrays)


def _train(kw, tiny):
    cfg = SimConfig(**kw)
    st = prepare(cfg)
    st.hp[grpo.HP_TINY] = tiny
    code, flags = subnormal_events(st.train_to, cfg.steps)
    assert code == grpo.OK
    return st, flags


@pytest.mark.parametrize("kw", [LONG_TAB, LONG_MLP], ids=["tabular", "interference"])
def test_a_long_run_does_no_subnormal_arithmetic(kw):
    st, flags = _train(kw, grpo.TINY)
    assert flags & (DE | UE) == 0
    assert _subnormal_count(st.m1, st.m2, st.pw, st.theta) == 0
    # beta1^t of every updated block (tabular: the rows; interference: the shared block, row d) is below
    # TINY: exactly 0 (1 - beta1^t is 1 either way); blocks that do not exist stay at 1
    pw = st.pw[:, 0]
    assert np.any(pw == 0.0) and np.all((pw == 0.0) | (pw == 1.0))
    assert np.any(st.m1 == 0.0) and np.all((st.m1 == 0.0) | (np.abs(st.m1) >= grpo.TINY * 0.9))


def test_the_unflushed_arithmetic_of_the_same_run_goes_subnormal():
    """The negative control: without the flush the state decays to a subnormal fixed point (0.9 x of a
    few subnormal ulps rounds back to itself) and the flags are raised."""
    st, flags = _train(LONG_TAB, 0.0)
    assert flags & (DE | UE)
    assert _subnormal_count(st.pw[:, 0]) > 0 and _subnormal_count(st.m1) > 0


def _unflushed(monkeypatch):
    orig = runner.hyperparameters

    def hyperparameters(config):
        hp, ip = orig(config)
        hp[grpo.HP_TINY] = 0.0
        return hp, ip

    monkeypatch.setattr(runner, "hyperparameters", hyperparameters)


@pytest.mark.parametrize("kw", [
    dict(model="tabular", n=2, d=200, d_val=120, bp=8, budget=2**13),  # nothing comes near TINY
    LONG_TAB,
    dict(LONG_TAB, optimizer="adamw", weight_decay=0.1),
    dict(LONG_TAB, optimizer="sgd", lr=1.0, n=4),
    dict(LONG_TAB, objective="ppo", kl_coef=0.01, entropy_coef=0.01, budget=2**19),
    dict(LONG_TAB, allocator="knapsack", budget=2**19),
    LONG_MLP,
], ids=["short", "tabular", "adamw", "sgd", "ppo-kl-ent", "knapsack", "interference"])
def test_the_flush_leaves_every_table_bit_identical(kw, monkeypatch):
    """The flushed values move theta by less than half an ulp (grpo.TINY's docstring), so the tables and
    pass@1 snapshots equal those of the unflushed arithmetic bit for bit, also on runs long enough for the
    unflushed state to go subnormal."""
    cfg = SimConfig(**kw)
    a = run(cfg)
    _unflushed(monkeypatch)
    b = run(cfg)
    assert a.status == b.status == "done"
    for k in a.table:
        np.testing.assert_array_equal(a.table[k], b.table[k], err_msg=k)
    for k in a.pass1:
        np.testing.assert_array_equal(a.pass1[k], b.pass1[k], err_msg=k)


@pytest.mark.parametrize("opt,wd", [(grpo.SGD, 0.1), (grpo.ADAM, 0.0), (grpo.ADAMW, 0.1)])
def test_optimiser_flush_thresholds(opt, wd):
    """Moments below TINY (m1) and TINY^2 (m2), gradients and decayed displacements below TINY become 0;
    values above stay as the plain update gives them; NaN stays NaN; tiny = 0 is the plain update."""
    t = grpo.TINY
    theta0 = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    theta = np.array([0.5, 0.3 * t, 1.0 + 2**-40, -2.0, 0.0, 1.0, 0.2, np.nan])
    m1 = np.array([1e-3, 0.0, 1.05 * t, 0.5 * t, 2 * t, -0.5 * t, np.nan, 0.0])
    m2 = np.array([1e-6, 0.0, 1.05 * t * t, 0.5 * t * t, 4 * t * t, 1e-70, 1e-6, 0.0])
    grad = np.zeros(8)
    args = (opt, 0.1, 0.9, 0.999, 1e-8, wd, 1.0, 1.0)
    got = [x.copy() for x in (theta, m1, m2)]
    optimizer._opt_row(got[0], theta0, got[1], got[2], grad, 0, 0, 8, *args, t)
    ref = [x.copy() for x in (theta, m1, m2)]
    optimizer._opt_update(ref[0], theta0, ref[1], ref[2], grad, 0, 0, 8, *args, t)
    plain = [x.copy() for x in (theta, m1, m2)]
    optimizer._opt_update(plain[0], theta0, plain[1], plain[2], grad, 0, 0, 8, *args, 0.0)
    for x, y in zip(got, ref, strict=True):
        np.testing.assert_array_equal(x, y)
    if opt != grpo.SGD:
        np.testing.assert_array_equal(got[1], np.where(np.abs(plain[1]) < t, 0.0, plain[1]))
        np.testing.assert_array_equal(got[2], np.where(plain[2] < t * t, 0.0, plain[2]))
        assert np.isnan(got[1][6])
    else:
        np.testing.assert_array_equal(got[1], m1)  # SGD keeps no moments
    if wd > 0.0:
        assert got[0][1] == 0.0 and plain[0][1] != 0.0  # displacement 0.3 TINY from theta0 = 0: flushed
        assert got[0][2] == plain[0][2] != 1.0  # 2^-40 from theta0 = 1: decays as before
    assert np.isnan(got[0][7])


def test_gradient_flush_keeps_nan_and_normal_values():
    x = np.array([1e-31, -1e-31, 1e-29, -2.0, np.nan, np.inf, 0.0, 5e-324])
    optimizer._flush_range(x, 0, 8, grpo.TINY)
    np.testing.assert_array_equal(x[[0, 1, 2, 3, 5, 6, 7]], [0.0, 0.0, 1e-29, -2.0, np.inf, 0.0, 0.0])
    assert np.isnan(x[4])


@njit
def _mul(x, y, out):
    out[0] = x * y


def test_subnormal_events_sees_subnormal_arithmetic_in_numba_code():
    out = np.zeros(1)
    _mul(1.0, 1.0, out)
    assert subnormal_events(_mul, 1.0, 3.0, out)[1] == 0
    assert subnormal_events(_mul, 1e-160, 1e-160, out)[1] & UE  # 1e-320: a subnormal result
    assert subnormal_events(_mul, 5e-324, 1.0, out)[1] & DE  # a subnormal operand
    before = mxcsr()
    with flush_to_zero():
        assert mxcsr() & (FTZ | DAZ) == FTZ | DAZ
        _mul(1e-160, 1e-160, out)
        assert out[0] == 0.0
    assert mxcsr() & (FTZ | DAZ) == before & (FTZ | DAZ)
