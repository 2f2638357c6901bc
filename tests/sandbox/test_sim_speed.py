"""Step cost: each fast path against the straightforward computation, bit for bit."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest
from sim_helpers import assert_close_across_cpus  # noqa: E402  (pytest puts this folder on sys.path)

from sandbox import SimConfig, grpo, run
from sandbox.kernels import optimizer, softmax
from sandbox.runner import eval_steps, prepare

SMALL = dict(d=200, d_val=120, bp=8, budget=2**13, n_evals=8)


REFERENCE = Path(__file__).parent / "data" / "fast_path_reference.npz"
CFGS = runpy.run_path(str(REFERENCE.with_name("make_fast_path_reference.py")))["CFGS"]


@pytest.mark.parametrize("key", list(CFGS))
def test_fast_paths_reproduce_the_simulator_before_them(key):
    """Tables and pass@1 snapshots of tabular runs against the simulator of commit 5c37e9c (before the cached
    evaluation, the batched softmax and the 8-wide Adam row; data/make_fast_path_reference.py), within the
    cross-CPU tolerance: the reference was made on another machine (sim_helpers.XCPU_RTOL says why)."""
    ref = np.load(REFERENCE)
    r = run(SimConfig(model="tabular", **CFGS[key]))
    assert sorted(r.table) == sorted(f.split("/", 2)[2] for f in ref.files if f.startswith(f"{key}/table/"))
    for c, v in r.table.items():
        assert_close_across_cpus(v, ref[f"{key}/table/{c}"], err_msg=f"{key}/{c}")
    for c, v in r.pass1.items():
        assert_close_across_cpus(v, ref[f"{key}/pass1/{c}"], err_msg=f"{key}/pass1/{c}")
    # made when a finished run said "ok" (the one status vocabulary says DONE, "done")
    assert repr((r.status, r.diverged_step, r.reason)) == str(ref[f"{key}/status"]).replace("'ok'", "'done'")


def test_same_seed_same_machine_is_bit_for_bit():
    """The same-machine contract, exactly: one config run twice in this process gives identical bits."""
    a, b = (run(SimConfig(model="tabular", **CFGS["n8"])) for _ in range(2))
    for c in a.table:
        np.testing.assert_array_equal(a.table[c], b.table[c], err_msg=c)
    for c in a.pass1:
        np.testing.assert_array_equal(a.pass1[c], b.pass1[c], err_msg=c)


@pytest.mark.parametrize("opt,wd", [(grpo.SGD, 0.0), (grpo.SGD, 0.1), (grpo.ADAM, 0.0), (grpo.ADAMW, 0.1)])
def test_row_of_eight_update_equals_the_generic_update(opt, wd):
    rng = np.random.default_rng(opt * 10 + int(wd * 10))
    P, off = 40, 13
    theta, theta0 = rng.standard_normal(P), rng.standard_normal(P)
    m1, m2 = rng.standard_normal(P) * 1e-2, rng.random(P) * 1e-4
    grad = rng.standard_normal(8) * np.array([1, 0, 1e-9, 1e9, 1, 0, -1, 3])
    a = [x.copy() for x in (theta, m1, m2)]
    b = [x.copy() for x in (theta, m1, m2)]
    for _ in range(3):
        optimizer._opt_row(a[0], theta0, a[1], a[2], grad, off, 0, 8, opt, 0.1, 0.9, 0.999, 1e-8, wd, 0.3,
                           0.05)
        optimizer._opt_update(b[0], theta0, b[1], b[2], grad, off, 0, 8, opt, 0.1, 0.9, 0.999, 1e-8, wd, 0.3,
                              0.05)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_inlined_sqrt_is_numpys():
    from numba import njit

    f = njit(lambda x: optimizer._llvm_sqrt(x))
    xs = np.concatenate([np.random.default_rng(0).random(1000) * 10.0 ** np.arange(-300, 300, 0.6),
                         [0.0, -0.0, 1.0, np.inf, 5e-324]])
    got = np.array([f(x) for x in xs])
    np.testing.assert_array_equal(got, np.sqrt(xs))
    assert np.isnan(f(-1.0)) and np.isnan(f(np.nan))


@pytest.mark.parametrize("K", [2, 8, 13])
def test_softmax_of_all_rows_equals_the_one_row_functions(K):
    rng = np.random.default_rng(K)
    nb = 37
    Z = rng.standard_normal((nb + 3, K)) * 5.0
    Z[0] = 0.0
    Z[1, 0] = -2000.0  # the -708 clamp
    Z[2] = 700.0 * rng.standard_normal(K)
    pis, lp = np.empty_like(Z), np.empty_like(Z)
    for need in (True, False):
        softmax._softmax_rows(Z, nb, pis, lp, need, np.empty(nb + 3), np.empty((nb + 3) * K))
        for b in range(nb):
            pi, logp = np.empty(K), np.empty(K)
            if need:
                softmax._softmax_fast(Z[b], logp, pi)
                np.testing.assert_array_equal(lp[b], logp)
            else:
                softmax._softmax_pi(Z[b], pi)
            np.testing.assert_array_equal(pis[b], pi)


@pytest.mark.parametrize("kw", [dict(model="tabular"), dict(model="tabular", metric_mode="sampled", k=4),
                                dict(model="tabular", d=300, d_val=280, optimizer="sgd", lr=1.0),
                                dict(model="linear", share=0.0, dim=4), dict(model="interference"),
                                dict(model="linear", share=0.5, dim=4)])
def test_cached_evaluation_equals_the_plain_one_along_a_run(kw):
    base = dict(SMALL, **{k: v for k, v in kw.items() if k in ("d", "d_val")})
    cfg = SimConfig(n=2, **{**base, **kw})
    st = prepare(cfg)
    args = st.policy.args()
    G = cfg.d + cfg.d_val
    cache, cstamp = np.zeros((G, grpo.N_CACHE)), np.full(G, -1, dtype=np.int64)
    sampled = cfg.metric_mode == "sampled"
    common = (st.problems.lens, st.logp0, st.theta, cfg.n, cfg.k, sampled)
    for m in eval_steps(cfg.steps, 12):
        st.train_to(int(m))
        outs = []
        for cached in (False, True):
            rs = st.rs_eval.copy()
            buf = (np.empty(cfg.d), np.empty(cfg.d_val), np.empty(12))
            if cached:
                ok = grpo._evaluate_cached(*args, *common, rs, *buf, cache, cstamp, st.row_t, True)
            else:
                ok = grpo._evaluate(*args, *common, rs, *buf)
            assert ok
            outs.append((buf, rs))
        for x, y in zip(outs[0][0], outs[1][0], strict=True):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(outs[0][1], outs[1][1])  # the same draws from the metric stream
        st.rs_eval[:] = outs[0][1]
    # reuse happens exactly where the logits cannot have moved: poisoned validation entries show through
    cache[cfg.d:, grpo.C_P] = 0.25
    buf = (np.empty(cfg.d), np.empty(cfg.d_val), np.empty(12))
    grpo._evaluate_cached(*args, *common, st.rs_eval.copy(), *buf, cache, cstamp, st.row_t, True)
    no_shared = cfg.model == "tabular" or cfg.share == 0.0
    assert np.all(buf[1] == 0.25) == no_shared
