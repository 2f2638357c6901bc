"""The fast kernels behind benchmarks/sim_throughput.py: they change rounding only, never results.

- `tanh_fast` / `exp_nonpos` (vectorisable, no libm call) against numpy's tanh / exp, special values included;
- the kernel softmax (`exp_nonpos` inside) against numpy, extreme logits included;
- the mlp backward that skips zero rows of dL/dlogits against finite differences and the full-row backward;
- the dense shared-block optimiser `_opt_dense` bit-identical to the per-row `_opt_update` arithmetic;
- `_sumsq` (reassociated reduction) against numpy, and non-finite values still reach the divergence check.
- BTRS with the log-factorial table draws exactly what the Stirling-series form draws.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from sandbox import SimConfig
from sandbox.kernels.layout import ADAM, ADAMW, SGD
from sandbox.kernels.optimizer import _opt_dense, _sumsq
from sandbox.kernels.softmax import _softmax_fast
from sandbox.policies import build_policy, exp_nonpos, tanh_fast
from sandbox.problems import make_problems
from sandbox.rng import _btrs_impl, new_state


@njit(cache=True, error_model="numpy")
def _tanh_all(x, out):
    for i in range(x.shape[0]):
        out[i] = tanh_fast(x[i])


@njit(cache=True, error_model="numpy")
def _exp_all(y, out):
    for i in range(y.shape[0]):
        out[i] = exp_nonpos(y[i])


def test_tanh_fast_matches_numpy_to_rounding():
    g = np.geomspace(1e-12, 40.0, 20001)
    x = np.concatenate([np.linspace(-25.0, 25.0, 200001), g, -g, [0.0, -0.0, 1e300, -1e300, 400.0]])
    out = np.empty_like(x)
    _tanh_all(x, out)
    ref = np.tanh(x)
    assert np.abs(out - ref).max() <= 2.3e-16  # the documented max absolute error (1 ulp at |tanh| ~ 1)
    big = np.abs(x) > 0.5
    assert (np.abs(out - ref)[big] / np.abs(ref[big])).max() <= 4.5e-16
    special = np.array([np.inf, -np.inf, np.nan])
    out = np.empty(3)
    _tanh_all(special, out)
    assert out[0] == 1.0 and out[1] == -1.0 and np.isnan(out[2])


def test_exp_nonpos_is_within_one_ulp():
    y = np.concatenate([-np.linspace(0.0, 708.0, 400001), -np.geomspace(1e-15, 708.0, 20001)])
    out = np.empty_like(y)
    _exp_all(y, out)
    ref = np.exp(y)
    assert (np.abs(out - ref) / ref).max() <= 2.3e-16


def _fd(f, x, h=1e-6):
    g = np.empty_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("model,share", [("mlp", 1.0), ("mlp", 0.3), ("interference", 1.0)])
def test_mlp_backward_with_zero_rows_matches_finite_differences(model, share):
    cfg = SimConfig(model=model, share=share, d=12, d_val=5, bp=4, dim=6, hidden=5, K=4, budget=64)
    pol = build_policy(cfg, make_problems(cfg))
    rng = np.random.default_rng(5)
    params = pol.theta0 + 0.3 * rng.normal(size=pol.n_params)
    idx = np.array([0, 3, 3, 11, 13, 16, 7])
    dl = rng.normal(size=(idx.size, cfg.K))
    dl[[0, 2, 5]] = 0.0  # zero-variance groups: rows the backward packs away
    grad = pol.backward(params, idx, dl)
    fd = _fd(lambda th: float((pol.forward(th, idx) * dl).sum()), params)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    keep = np.abs(dl).sum(axis=1) > 0
    np.testing.assert_allclose(grad, pol.backward(params, idx[keep], dl[keep]), rtol=1e-13, atol=1e-15)
    assert np.abs(grad[: pol.n_shared]).max() > 0
    assert not pol.backward(params, idx, np.zeros_like(dl)).any()  # all rows zero: nothing at all


def _opt_reference(theta, theta0, m1, m2, g, opt, lr, b1, b2, eps, wd, bc1, bc2):
    """The per-element arithmetic of optimizer._opt_update, in numpy (same IEEE operations, same order)."""
    if wd > 0.0:
        theta = theta - lr * wd * (theta - theta0)
    if opt == SGD:
        return theta - lr * g, m1, m2
    m1 = b1 * m1 + (1.0 - b1) * g
    m2 = b2 * m2 + (1.0 - b2) * g * g
    return theta - lr * (m1 / bc1) / (np.sqrt(m2 / bc2) + eps), m1, m2


@pytest.mark.parametrize("opt,wd", [(SGD, 0.0), (SGD, 0.1), (ADAM, 0.0), (ADAMW, 0.05)])
def test_dense_optimiser_is_bit_identical_to_the_row_update(opt, wd):
    rng = np.random.default_rng(opt * 10 + int(wd * 100))
    S = 2344
    theta, theta0 = rng.normal(size=S), rng.normal(size=S)
    m1, m2 = 0.1 * rng.normal(size=S), rng.random(S) * 1e-3
    g = rng.normal(size=S)
    args = (opt, 0.01, 0.9, 0.999, 1e-8, wd, 1.0 - 0.9**7, 1.0 - 0.999**7)
    t_ref, m1_ref, m2_ref = _opt_reference(theta, theta0, m1, m2, g, *args)
    th, a, b = theta.copy(), m1.copy(), m2.copy()
    _opt_dense(th, theta0, a, b, g, S, *args)
    np.testing.assert_array_equal(th, t_ref)
    if opt != SGD:
        np.testing.assert_array_equal(a, m1_ref)
        np.testing.assert_array_equal(b, m2_ref)


def test_sumsq_matches_numpy_and_propagates_non_finite():
    x = np.random.default_rng(2).normal(size=2345)
    assert abs(_sumsq(x) - float(np.dot(x, x))) <= 1e-12 * float(np.dot(x, x))
    assert _sumsq(np.zeros(0)) == 0.0
    for bad in (np.inf, np.nan):
        y = x.copy()
        y[1000] = bad
        assert not np.isfinite(_sumsq(y))


@njit(cache=True, error_model="numpy")
def _softmax_rows(Z, logp, pi):
    for i in range(Z.shape[0]):
        _softmax_fast(Z[i], logp[i], pi[i])


def test_kernel_softmax_matches_numpy_to_rounding():
    rng = np.random.default_rng(4)
    Z = np.concatenate([rng.normal(size=(200, 8)) * 5.0, [[0.0, -800.0, 3.0, 1e-9, -1e3, 2.0, 2.0, 700.0]]])
    logp = np.empty_like(Z)
    pi = np.empty_like(Z)
    _softmax_rows(Z, logp, pi)
    ref_logp = Z - Z.max(axis=1, keepdims=True)
    ref_logp -= np.log(np.exp(ref_logp).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(logp, ref_logp, rtol=1e-14, atol=1e-12)
    np.testing.assert_allclose(pi, np.exp(ref_logp), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(pi.sum(axis=1), 1.0, rtol=1e-15)


@njit(cache=True, error_model="numpy")
def _btrs_draws(seed_state, n, p, table, size):
    out = np.empty(size, dtype=np.int64)
    for i in range(size):
        out[i] = _btrs_impl(seed_state, n, p, table)
    return out


@pytest.mark.parametrize("n,p", [(40, 0.3), (256, 0.43), (1000, 0.05), (4096, 0.5)])
def test_btrs_log_factorial_table_gives_the_same_draws_as_stirling(n, p):
    """The table form of BTRS's exact acceptance test decides like the Stirling form (agree to ~3e-11)."""
    a = _btrs_draws(new_state(11, 3), n, p, True, 40000)
    b = _btrs_draws(new_state(11, 3), n, p, False, 40000)
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean() - n * p) < 5 * np.sqrt(n * p * (1 - p) / a.size)
