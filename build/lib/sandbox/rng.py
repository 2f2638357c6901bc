"""Explicit-state random numbers for the kernels: xoshiro256** plus fast exact binomial samplers.

Why not Numba's np.random: its legacy binomial is O(n * p) inversion (a step at n = 4096 would cost 30x one at
n = 256) and its state is a hidden per-thread global. Here the state is a uint64 array (4,) that the caller
seeds (`new_state`) and passes down, so a run is reproducible bit for bit and two runs never share a stream.
Binomial(n, p): a sum of Bernoulli draws for n < 12, BINV inversion (Kachitvichyanukul & Schmeiser 1988)
when n*min(p, 1-p) < 10, otherwise BTRS transformed rejection with squeeze (Hormann 1993); all exact, and
O(1) in n for large n. BTRS's exact test reads log-factorials from a table for n <= 4096 (the Stirling
series beyond), so most draws cost no log at all (benchmarks/sim_throughput.py).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_U11 = np.uint64(11)
_U17 = np.uint64(17)
_U45 = np.uint64(45)
_U19 = np.uint64(64 - 45)
_U7 = np.uint64(7)
_U57 = np.uint64(57)
_U5 = np.uint64(5)
_U9 = np.uint64(9)
_INV53 = 1.0 / 9007199254740992.0
_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                  0.00925546218271273, 0.00833056343336287])
_LOGFACT_N = 4096
_LOGFACT = np.array([math.lgamma(i + 1.0) for i in range(_LOGFACT_N + 1)])
"""log(i!) for i <= 4096: BTRS's exact acceptance test without logs for n <= 4096 (Stirling series above)."""


def new_state(seed: int, stream: int = 0) -> np.ndarray:
    """A fresh generator state (4,) uint64 from (seed, stream) via numpy's SeedSequence (never all zero)."""
    st = np.random.SeedSequence([int(seed) % 2**63, int(stream)]).generate_state(4, np.uint64)
    if not st.any():
        st[0] = np.uint64(1)
    return st


@njit(cache=True, error_model="numpy")
def next_u64(s):
    """xoshiro256** (Blackman & Vigna 2018): next 64-bit output; advances s in place."""
    s0, s1, s2, s3 = s[0], s[1], s[2], s[3]
    x = s1 * _U5
    result = ((x << _U7) | (x >> _U57)) * _U9
    t = s1 << _U17
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = (s3 << _U45) | (s3 >> _U19)
    s[0], s[1], s[2], s[3] = s0, s1, s2, s3
    return result


@njit(cache=True, error_model="numpy")
def uniform(s):
    """Uniform double in [0, 1) with 53 random bits."""
    return (next_u64(s) >> _U11) * _INV53


@njit(cache=True, error_model="numpy")
def shuffle(s, a):
    """In-place Fisher-Yates shuffle of a 1-D array."""
    for i in range(a.shape[0] - 1, 0, -1):
        j = int(uniform(s) * (i + 1))
        if j > i:
            j = i
        a[i], a[j] = a[j], a[i]


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _stirling_tail(k):
    if k <= 9:
        return _TAIL[int(k)]
    kp1sq = (k + 1.0) * (k + 1.0)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1.0)


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _binv(s, n, p):
    q = 1.0 - p
    sr = p / q
    a = (n + 1) * sr
    r0 = q**n
    while True:
        r = r0
        u = uniform(s)
        x = 0
        while u > r:
            u -= r
            x += 1
            if x > n:
                break
            r *= a / x - sr
        if x <= n:
            return x


@njit(cache=True, inline="always", error_model="numpy")
def _btrs(s, n, p):
    return _btrs_impl(s, n, p, n <= _LOGFACT_N)


@njit(cache=True, error_model="numpy")
def _btrs_impl(s, n, p, table):
    """BTRS; table=True takes the exact test from `_LOGFACT` (n <= _LOGFACT_N), False from Stirling series."""
    spq = np.sqrt(n * p * (1.0 - p))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    v_r = 0.92 - 4.2 / b
    r = 0.0
    alpha = 0.0
    m = 0.0
    cm = 0.0
    lr = 0.0
    ready = False  # constants of the exact test, set the first time the squeeze does not decide
    while True:
        u = uniform(s) - 0.5
        v = uniform(s)
        us = 0.5 - abs(u)
        k = np.floor((2.0 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        if us >= 0.07 and v <= v_r:
            return int(k)
        if not ready:
            r = p / (1.0 - p)
            alpha = (2.83 + 5.1 / b) * spq
            m = np.floor((n + 1) * p)
            if table:
                cm = _LOGFACT[int(m)] + _LOGFACT[n - int(m)]
                lr = np.log(r)
            ready = True
        v = np.log(v * alpha / (a / (us * us) + b))
        if table:
            # log(f(k) / f(m)) = log(m! (n-m)! / (k! (n-k)!)) + (k - m) log r, from the log-factorial table:
            # the same bound as the Stirling form below without its 3 logs and 4 series (agree to ~3e-11).
            ki = int(k)
            ub = cm - _LOGFACT[ki] - _LOGFACT[n - ki] + (k - m) * lr
        else:
            ub = ((m + 0.5) * np.log((m + 1) / (r * (n - m + 1)))
                  + (n + 1) * np.log((n - m + 1) / (n - k + 1))
                  + (k + 0.5) * np.log(r * (n - k + 1) / (k + 1))
                  + _stirling_tail(m) + _stirling_tail(n - m) - _stirling_tail(k) - _stirling_tail(n - k))
        if v <= ub:
            return int(k)


@njit(cache=True, error_model="numpy")
def binomial(s, n, p):
    """Exact Binomial(n, p) draw."""
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    if n < 12:  # a few Bernoulli draws are cheaper than any setup
        x = 0
        for _ in range(n):
            if uniform(s) < p:
                x += 1
        return x
    flip = p > 0.5
    pp = 1.0 - p if flip else p
    x = _binv(s, n, pp) if n * pp < 10.0 else _btrs(s, n, pp)
    return n - x if flip else x


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def multinomial_row(s, pis, b, n, first, out):
    """Counts out[b] (K,) of n categorical draws from pis[b] as a chain of K-1 binomials (one multinomial
    draw). Rows of 2-D arrays, not row views: a compiled caller that passes a view keeps an atomic NRT
    incref / decref pair per array argument per call (the train kernel's `_rollouts`).

    Answer `first` (the correct one) is drawn first: once training concentrates pi on it, the remaining count
    is small or zero and the rest of the chain is cheap. Any order gives the same distribution.
    """
    K = pis.shape[1]
    c = binomial(s, n, pis[b, first])
    out[b, first] = c
    rem = n - c
    mass = 1.0 - pis[b, first]
    last = K - 1 if first != K - 1 else K - 2
    for k in range(K):
        if k == first or k == last:
            continue
        if rem == 0:
            out[b, k] = 0
            continue
        q = pis[b, k] / mass if mass > 0.0 else 1.0
        c = binomial(s, rem, q) if q < 1.0 else rem
        out[b, k] = c
        rem -= c
        mass -= pis[b, k]
    out[b, last] = rem


@njit(cache=True, error_model="numpy")
def multinomial(s, pi, n, first, out):
    """`multinomial_row` of one row pi (K,) into out (K,)."""
    r = np.int64(0)  # not a literal 0: the kernel's row type, one specialisation
    multinomial_row(s, pi.reshape((1, pi.shape[0])), r, n, first, out.reshape((1, out.shape[0])))


@njit(cache=True, error_model="numpy")
def _binomial_many(s, n, p, size):
    out = np.empty(size, dtype=np.int64)
    for i in range(size):
        out[i] = binomial(s, n, p)
    return out


def binomial_samples(seed: int, n: int, p: float, size: int) -> np.ndarray:
    """`size` draws of Binomial(n, p) from the kernel sampler (for tests of its distribution)."""
    return _binomial_many(new_state(seed), int(n), float(p), int(size))
