"""The rollouts of a GRPO step (sandbox/grpo.py, step 1 of its docstring): the problem order (epochs over a
shuffled training set) and a group's answer counts, as n categorical draws for small n or one multinomial
(a chain of K-1 binomials, O(1) in n) for large n."""

from __future__ import annotations

import numpy as np
from numba import njit

from sandbox.kernels.layout import ST_POS
from sandbox.rng import shuffle, uniform


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _categorical_row(s, pis, b, n, first, need_rest, out):
    """Counts out[b] (K,) of n categorical draws from pis[b], for small n (`SMALL_N`): the number correct c
    (answer `first`) as n Bernoulli(pi[first]) draws, then each of the n - c wrong rollouts by inverse CDF
    over the wrong answers. need_rest=False leaves the wrong counts at 0 when c = 0 (the caller knows they
    cannot matter: zero advantages, no length model), saving those draws. Exact (up to rounding of the CDF).
    Rows of 2-D arrays, not views (see rng.multinomial_row)."""
    K = pis.shape[1]
    p = pis[b, first]
    c = 0
    for _ in range(n):
        if uniform(s) < p:
            c += 1
    for k in range(K):
        out[b, k] = 0
    out[b, first] = c
    if c == n or (c == 0 and not need_rest):
        return c
    mass = 0.0
    last = first
    for k in range(K):
        if k != first:
            mass += pis[b, k]
            last = k
    for _ in range(n - c):
        u = uniform(s) * mass
        pick = last
        cum = 0.0
        for k in range(K):
            if k == first:
                continue
            cum += pis[b, k]
            if u < cum:
                pick = k
                break
        out[b, pick] += 1
    return c


@njit(cache=True, error_model="numpy")
def _categorical_counts(s, pi, n, first, need_rest, out):
    """`_categorical_row` of one row pi (K,) into out (K,)."""
    K = pi.shape[0]
    r = np.int64(0)  # not a literal 0: the kernel's row type, one specialisation
    return _categorical_row(s, pi.reshape((1, K)), r, n, first, need_rest, out.reshape((1, K)))


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _next_problem(rs, perm, st, d):
    """The next training problem of the epoch order perm (d,), reshuffled when an epoch ends (st[ST_POS])."""
    if st[ST_POS] >= d:
        shuffle(rs, perm)
        st[ST_POS] = 0
    g = perm[st[ST_POS]]
    st[ST_POS] += 1
    return g
