"""Softmax of logit rows (K,) as the GRPO step and the evaluation use it: log-softmax and softmax of one row,
softmax alone, and many rows at once (vectorised, the same bits)."""

from __future__ import annotations

import numpy as np
from numba import njit

from sandbox.policies import exp_nonpos


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _softmax_row(Z, i, logp, pi):
    """Stable log-softmax and softmax of row Z[i] (K,) into logp and pi (as policies.softmax_row); a row
    index, not a view Z[i] (a view passed to a compiled call costs the caller an atomic NRT incref / decref
    pair per array argument per call).

    The exponentials go through `exp_nonpos` (<= 1 ulp from np.exp, no libm call) so the K of them vectorise;
    arguments below -708 are clamped there (exp(-708) ~ 3e-308 instead of a smaller number: rounding).
    """
    K = Z.shape[1]
    mx = Z[i, 0]
    for k in range(1, K):
        if Z[i, k] > mx:
            mx = Z[i, k]
    for k in range(K):
        y = Z[i, k] - mx
        pi[k] = exp_nonpos(y if y > -708.0 else -708.0)
    s = 0.0
    for k in range(K):
        s += pi[k]
    lse = mx + np.log(s)
    inv = 1.0 / s
    for k in range(K):
        pi[k] *= inv
        logp[k] = Z[i, k] - lse


@njit(cache=True, error_model="numpy")
def _softmax_fast(z, logp, pi):
    """`_softmax_row` of one row z (K,)."""
    _softmax_row(z.reshape((1, z.shape[0])), np.int64(0), logp, pi)  # not a literal 0: one specialisation


@njit(cache=True, error_model="numpy")
def _softmax_pi(z, pi):
    """`_softmax_fast` without the log-probabilities (plain PG without KL / entropy needs only pi): the same
    operations for pi, so bit-identical pi, and no log call."""
    K = z.shape[0]
    mx = z[0]
    for k in range(1, K):
        if z[k] > mx:
            mx = z[k]
    for k in range(K):
        y = z[k] - mx
        pi[k] = exp_nonpos(y if y > -708.0 else -708.0)
    s = 0.0
    for k in range(K):
        s += pi[k]
    inv = 1.0 / s
    for k in range(K):
        pi[k] *= inv


@njit(cache=True, error_model="numpy")
def _softmax_rows(Z, nb, pis, logp, need_logp, mx, mxe):
    """`_softmax_fast` (need_logp) or `_softmax_pi` of rows 0..nb-1 of Z (rows, K) into pis / logp, all rows
    at once: the K = 8 exponentials of one row are too few for LLVM's loop vectoriser (a K-long loop stays
    scalar), so they run as one flat loop over nb * K entries, which vectorises. Per entry and per row the
    same IEEE operations in the same order as the one-row functions (same max, exp_nonpos argument, serial
    row sum, log, 1/s): bit-identical results (tests/sandbox/test_sim_speed.py). mx (rows,) and mxe
    (rows * K,) are scratch."""
    K = Z.shape[1]
    E = nb * K
    zf = Z.reshape(Z.shape[0] * K)
    pf = pis.reshape(pis.shape[0] * K)
    for b in range(nb):
        m = Z[b, 0]
        for k in range(1, K):
            if Z[b, k] > m:
                m = Z[b, k]
        mx[b] = m
        for k in range(K):
            mxe[b * K + k] = m
    for e in range(E):
        y = zf[e] - mxe[e]
        pf[e] = exp_nonpos(y if y > -708.0 else -708.0)
    for b in range(nb):
        s = 0.0
        for k in range(K):
            s += pis[b, k]
        if need_logp:
            lse = mx[b] + np.log(s)
            for k in range(K):
                logp[b, k] = Z[b, k] - lse
        inv = 1.0 / s
        for k in range(K):
            mxe[b * K + k] = inv
    for e in range(E):
        pf[e] *= mxe[e]
