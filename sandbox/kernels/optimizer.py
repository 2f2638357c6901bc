"""The optimiser of the simulator: SGD, Adam and AdamW (decoupled decay toward the initial parameters), dense
on the shared block and lazy per private row (sandbox/grpo.py, step 4 of its docstring), with the flush of
tiny values (`TINY`). `grad_norm` and `step` are the tail of every update of the train kernel
(sandbox/kernels/train.py) and of its profiled copy (benchmarks/sim_profile.py)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from sandbox.kernels.layout import SGD, ST_T

TINY = 1e-30
"""Flush threshold of the optimiser state. Adam's first moment of a parameter that stops receiving
gradient (a solved problem's row: its groups have no variance) decays as beta1^t, the bias-correction powers
beta1^t, beta2^t likewise, and AdamW's pull toward theta0 = 0 shrinks a displacement geometrically. In IEEE
doubles such a decay enters the subnormal range (beta1 = 0.9: ~6,700 updates) and then never reaches zero
(0.9 x of a few subnormal ulps rounds back to itself), and x86 arithmetic on subnormals takes a slow path
(a microcode assist on Intel): a step got slower the longer a run lasted (2^26-rollout runs 4.6x slower per
step than 2^22 on an Intel Xeon). So the kernels set to exactly 0, after each update: |m1| < TINY,
m2 < TINY^2 (m2 is a squared gradient), the powers below TINY, gradient entries |g| < TINY (before the norm
and the moments, so g * g cannot underflow) and a decayed displacement |theta - theta0| < TINY.
The same explicit arithmetic on every CPU (no FTZ/DAZ mode, which threads need not inherit). Effect: a
power below TINY leaves 1 - power = 1 exactly; a moment below TINY moves theta by at most
lr * TINY / ((1 - beta1) * adam_eps) = 1e-22 lr per update (adam_eps 1e-8), below half an ulp of any
|theta| > 1e-6 lr, and m2 < TINY^2 changes sqrt(m2 / bc2) + eps by less than half an ulp of eps
(adam_eps >= 1e-20). So tables are equal bit for bit to the unflushed arithmetic (hp[HP_TINY] = 0) on the
runs tests/sandbox/test_sim_subnormal.py compares, including runs long enough to reach subnormals."""


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def _any_nonzero(x, lo, hi):
    """Whether x[lo:hi] has a nonzero entry."""
    for j in range(lo, hi):
        if x[j] != 0.0:
            return True
    return False


@njit(cache=True, error_model="numpy")
def _flush(x, tiny):
    """x, or exactly 0 where |x| < tiny (`TINY`); NaN stays NaN (the comparison is false), so divergence
    checks still see it. A select, so the loops it is in still vectorise."""
    return 0.0 if abs(x) < tiny else x


@njit(cache=True, error_model="numpy")
def _decay(t, t0, lr, wd, tiny):
    """Decoupled decay t - lr wd (t - t0) toward t0; a displacement |t - t0| < tiny is set to 0 (t0), since
    its geometric shrinking toward t0 = 0 would enter the subnormal range (`TINY`)."""
    dlt = t - t0
    return t0 if abs(dlt) < tiny else t - lr * wd * dlt


@njit(cache=True, error_model="numpy")
def _flush_range(x, lo, hi, tiny):
    """`_flush` of x[lo:hi] in place (gradient entries, before the norm and the optimiser)."""
    for j in range(lo, hi):
        x[j] = _flush(x[j], tiny)


@intrinsic
def _llvm_sqrt(typingctx, x):
    """sqrt(x) as the llvm.sqrt.f64 intrinsic: one (v)sqrtsd instruction, vectorisable by LLVM. Numba lowers
    np.sqrt of a scalar to a call of libm's sqrt through a pointer (no SIMD across such calls); both are the
    correctly rounded IEEE square root, so the results are the same bit for bit (NaN for x < 0)."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.DoubleType(), [ir.DoubleType()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.sqrt.f64")
        return builder.call(fn, args)
    return types.float64(types.float64), codegen


ROW8 = 8
_U1 = np.uint64(1)
"""Rows of this length (the default K) under Adam take two `_adam4` blocks (SIMD)."""


@njit(cache=True, inline="always", error_model="numpy")
def _adam4(theta, m1, m2, grad, j, i, lr, b1, b2, eps, bc1, bc2, tiny):
    """Adam (no decay) on theta[j:j+4] with gradient grad[i:i+4]: one basic block, every load before any
    store, unsigned indices, so that LLVM's SLP vectoriser packs the four lanes into one AVX2 vector (a loop
    over 8 stays scalar). The IEEE operations per element are those of `_opt_update`, the moments stored
    flushed (`_flush`) as there (bit-identical)."""
    i0, j0 = np.uint64(i), np.uint64(j)  # unsigned indices: no negative-index wraparound selects, so the
    i1, j1 = i0 + _U1, j0 + _U1  # four addresses are provably adjacent
    i2, j2 = i1 + _U1, j1 + _U1
    i3, j3 = i2 + _U1, j2 + _U1
    g0, g1, g2, g3 = grad[i0], grad[i1], grad[i2], grad[i3]
    a0, a1, a2, a3 = m1[j0], m1[j1], m1[j2], m1[j3]
    v0, v1, v2, v3 = m2[j0], m2[j1], m2[j2], m2[j3]
    t0, t1, t2, t3 = theta[j0], theta[j1], theta[j2], theta[j3]
    a0 = b1 * a0 + (1.0 - b1) * g0
    a1 = b1 * a1 + (1.0 - b1) * g1
    a2 = b1 * a2 + (1.0 - b1) * g2
    a3 = b1 * a3 + (1.0 - b1) * g3
    v0 = b2 * v0 + (1.0 - b2) * g0 * g0
    v1 = b2 * v1 + (1.0 - b2) * g1 * g1
    v2 = b2 * v2 + (1.0 - b2) * g2 * g2
    v3 = b2 * v3 + (1.0 - b2) * g3 * g3
    t0 = t0 - lr * (a0 / bc1) / (_llvm_sqrt(v0 / bc2) + eps)
    t1 = t1 - lr * (a1 / bc1) / (_llvm_sqrt(v1 / bc2) + eps)
    t2 = t2 - lr * (a2 / bc1) / (_llvm_sqrt(v2 / bc2) + eps)
    t3 = t3 - lr * (a3 / bc1) / (_llvm_sqrt(v3 / bc2) + eps)
    tiny2 = tiny * tiny
    a0, a1, a2, a3 = _flush(a0, tiny), _flush(a1, tiny), _flush(a2, tiny), _flush(a3, tiny)
    v0, v1, v2, v3 = _flush(v0, tiny2), _flush(v1, tiny2), _flush(v2, tiny2), _flush(v3, tiny2)
    m1[j0], m1[j1], m1[j2], m1[j3] = a0, a1, a2, a3
    m2[j0], m2[j1], m2[j2], m2[j3] = v0, v1, v2, v3
    theta[j0], theta[j1], theta[j2], theta[j3] = t0, t1, t2, t3


@njit(cache=True, error_model="numpy")
def _opt_row(theta, theta0, m1, m2, grad, off, goff, size, opt, lr, b1, b2, eps, wd, bc1, bc2, tiny=TINY):
    """`_opt_update` on theta[off:off+size] with gradient grad[goff:goff+size], one branch-free loop per case
    so the K-long row vectorises; the same arithmetic per element (bit-identical). Adam rows of 8 use
    `_adam4`. An offset, not a view grad[g]: a view passed to a compiled call costs `step` an atomic NRT
    incref / decref pair per array argument per call."""
    if size == ROW8 and opt != SGD and wd == 0.0:  # Adam on a row of 8: two SIMD blocks, same IEEE ops
        _adam4(theta, m1, m2, grad, off, goff, lr, b1, b2, eps, bc1, bc2, tiny)
        _adam4(theta, m1, m2, grad, off + 4, goff + 4, lr, b1, b2, eps, bc1, bc2, tiny)
        return
    tiny2 = tiny * tiny
    if opt == SGD:
        for i in range(size):
            j = off + i
            if wd > 0.0:
                theta[j] = _decay(theta[j], theta0[j], lr, wd, tiny)
            theta[j] -= lr * grad[goff + i]
    elif wd > 0.0:
        for i in range(size):
            j = off + i
            theta[j] = _decay(theta[j], theta0[j], lr, wd, tiny)
            gj = grad[goff + i]
            a = b1 * m1[j] + (1.0 - b1) * gj
            v = b2 * m2[j] + (1.0 - b2) * gj * gj
            theta[j] -= lr * (a / bc1) / (np.sqrt(v / bc2) + eps)
            m1[j] = _flush(a, tiny)
            m2[j] = _flush(v, tiny2)
    else:
        for i in range(size):
            j = off + i
            gj = grad[goff + i]
            a = b1 * m1[j] + (1.0 - b1) * gj
            v = b2 * m2[j] + (1.0 - b2) * gj * gj
            theta[j] -= lr * (a / bc1) / (np.sqrt(v / bc2) + eps)
            m1[j] = _flush(a, tiny)
            m2[j] = _flush(v, tiny2)


@njit(cache=True, inline="always", error_model="numpy")
def _opt_update(theta, theta0, m1, m2, grad, off, goff, size, opt, lr, b1, b2, eps, wd, bc1, bc2, tiny=TINY):
    """SGD / Adam(W) on theta[off:off+size] with gradient grad[goff:goff+size]; decay pulls toward theta0.

    The straightforward update, with the flushes of `TINY` (tiny = 0: none): the moments are stored as 0
    below tiny (m1) and tiny^2 (m2) after theta's update, a decayed displacement below tiny becomes 0."""
    for i in range(size):
        j = off + i
        if wd > 0.0:
            theta[j] = _decay(theta[j], theta0[j], lr, wd, tiny)
        gj = grad[goff + i]
        if opt == SGD:
            theta[j] -= lr * gj
        else:
            m1[j] = b1 * m1[j] + (1.0 - b1) * gj
            m2[j] = b2 * m2[j] + (1.0 - b2) * gj * gj
            theta[j] -= lr * (m1[j] / bc1) / (np.sqrt(m2[j] / bc2) + eps)
            m1[j] = _flush(m1[j], tiny)
            m2[j] = _flush(m2[j], tiny * tiny)


@njit(cache=True, error_model="numpy")
def _opt_dense(theta, theta0, m1, m2, grad, size, opt, lr, b1, b2, eps, wd, bc1, bc2, tiny=TINY):
    """`_opt_update` on theta[:size] (the shared block), compiled so that the loop vectorises.

    Same arithmetic per element as `_opt_update` (bit-identical results); error_model="numpy" only drops
    Numba's zero-division checks, whose branches kept LLVM from vectorising (the dense Adam step over the
    2,344 mlp parameters at dim 64 was the largest single cost of a step).
    """
    tiny2 = tiny * tiny
    if opt == SGD:
        for j in range(size):
            if wd > 0.0:
                theta[j] = _decay(theta[j], theta0[j], lr, wd, tiny)
            theta[j] -= lr * grad[j]
    elif wd > 0.0:
        for j in range(size):
            theta[j] = _decay(theta[j], theta0[j], lr, wd, tiny)
            gj = grad[j]
            a = b1 * m1[j] + (1.0 - b1) * gj
            v = b2 * m2[j] + (1.0 - b2) * gj * gj
            theta[j] -= lr * (a / bc1) / (np.sqrt(v / bc2) + eps)
            m1[j] = _flush(a, tiny)
            m2[j] = _flush(v, tiny2)
    else:
        for j in range(size):
            gj = grad[j]
            a = b1 * m1[j] + (1.0 - b1) * gj
            v = b2 * m2[j] + (1.0 - b2) * gj * gj
            theta[j] -= lr * (a / bc1) / (np.sqrt(v / bc2) + eps)
            m1[j] = _flush(a, tiny)
            m2[j] = _flush(v, tiny2)


@njit(cache=True, fastmath={"reassoc", "contract"})
def _sumsq(x):
    """Sum of squares with a reassociated (SIMD) reduction: rounding differs from a serial sum, NaN/inf
    handling does not (no nnan/ninf flags), so the divergence check on the gradient norm still sees them."""
    s = 0.0
    for j in range(x.shape[0]):
        s += x[j] * x[j]
    return s


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def grad_norm(gshared, pgrad, touched, n_touched, tiny):
    """Squared norm of an update's gradient: the shared block gshared (S,) and the private rows pgrad[g] (K,)
    of the touched problems touched[:n_touched]; entries below tiny are set to 0 first (`TINY`: their squares
    would underflow). Non-finite when the gradient is (the caller's divergence check)."""
    K = pgrad.shape[1]
    _flush_range(gshared, 0, gshared.shape[0], tiny)
    for t in range(n_touched):
        _flush_range(pgrad[touched[t]], 0, K, tiny)
    gn = _sumsq(gshared)
    for t in range(n_touched):
        g = touched[t]
        for k in range(K):
            gn += pgrad[g, k] * pgrad[g, k]
    return gn


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def step(theta, theta0, m1, m2, pw, row_t, moved, st, gshared, pflat, K, touched, n_touched, opt, lr, b1, b2,
         eps, wd, tiny):
    """One optimiser update: dense on the shared block theta[:S] (S = gshared.shape[0]), lazy on the private
    rows theta[S + g K: S + (g + 1) K] of the touched problems (their moments and bias-correction powers pw[g]
    advance only now, row d of pw for the shared block). A block whose gradient is zero is skipped when its
    update is the identity (never moved, or plain SGD without decay); its counters still advance (exact
    skips). moved (d + 1,): whether a block has ever had a nonzero gradient. pflat: the private
    rows' gradients (d, K) flat, row g at g K."""
    S = gshared.shape[0]
    d = row_t.shape[0]
    identity_if_zero = opt == SGD and wd == 0.0  # a zero gradient leaves every parameter as it is
    if S > 0:
        st[ST_T] += 1
        pw[d, 0] = _flush(pw[d, 0] * b1, tiny)  # 1 - power is 1 exactly long before TINY
        pw[d, 1] = _flush(pw[d, 1] * b2, tiny)
        nz = _any_nonzero(gshared, np.int64(0), S)  # not a literal 0: one type, as the rows' call
        if nz:
            moved[d] = True
        if nz or not (identity_if_zero or not moved[d]):
            _opt_dense(theta, theta0, m1, m2, gshared, S, opt, lr, b1, b2, eps, wd,
                       1.0 - pw[d, 0], 1.0 - pw[d, 1], tiny)
    for t_i in range(n_touched):
        g = touched[t_i]
        row_t[g] += 1
        pw[g, 0] = _flush(pw[g, 0] * b1, tiny)
        pw[g, 1] = _flush(pw[g, 1] * b2, tiny)
        nz = _any_nonzero(pflat, g * K, g * K + K)
        if nz:
            moved[g] = True
        if nz or not (identity_if_zero or not moved[g]):
            _opt_row(theta, theta0, m1, m2, pflat, S + g * K, g * K, K, opt, lr, b1, b2, eps, wd,
                     1.0 - pw[g, 0], 1.0 - pw[g, 1], tiny)
