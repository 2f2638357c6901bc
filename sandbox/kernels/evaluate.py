"""Evaluation of a run's policy (docs/DESIGN.md "Metrics"): pass@1 of every training and validation problem
and the metric aggregates of a table row, in full (`_evaluate`) or recomputing only the problems whose logits
may have changed (`_evaluate_cached`, split in `_eval_problems` and `_eval_reduce` so that evaluation chunks
can run on threads of their own); and the KL reference `initial_log_probs`."""

from __future__ import annotations

import numpy as np
from numba import njit

from sandbox.config import ZERO_PASS1
from sandbox.kernels.softmax import _softmax_row, _softmax_rows
from sandbox.policies import batch_logits, work_size
from sandbox.rng import binomial

EVAL_CHUNK = 256


@njit(cache=True, error_model="numpy")
def _evaluate(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, n, k_metric, sampled, rs,
              pass1_train, pass1_val, out):
    """pass@1 of every problem and the metric aggregates (see runner.py). Returns False if non-finite.

    out: [train_mean, train_best_k, train_worst_k, train_zero_frac, val_mean, val_best_k, val_worst_k,
    val_zero_frac, entropy, kl, expected response length, expected zero-variance share at group size n]
    (entropy, kl, lengths and zero-variance share over the training problems).
    """
    K = logp0.shape[1]
    G = offset.shape[0]
    Z = np.empty((EVAL_CHUNK, K))
    logp = np.empty(K)
    pi = np.empty(K)
    idx = np.empty(EVAL_CHUNK, dtype=np.int64)
    work = np.zeros(work_size(kind, data[3], K, EVAL_CHUNK))
    for j in range(out.shape[0]):
        out[j] = 0.0
    for lo in range(0, G, EVAL_CHUNK):
        nb = min(EVAL_CHUNK, G - lo)
        for i in range(nb):
            idx[i] = lo + i
        if not batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx[:nb], Z[:nb], work):
            return False
        for i in range(nb):
            g = lo + i
            _softmax_row(Z, i, logp, pi)
            p = pi[correct[g]]
            if sampled:
                c = binomial(rs, k_metric, p)
                mean = c / k_metric
                best = 1.0 if c > 0 else 0.0
                worst = 1.0 if c == k_metric else 0.0
                zero = 1.0 if c == 0 else 0.0
            else:
                mean = p
                best = 1.0 - (1.0 - p) ** k_metric
                worst = p**k_metric
                zero = 1.0 if p < ZERO_PASS1 else 0.0  # sandbox.config.ZERO_PASS1
            o = 0 if g < d else 4
            out[o] += mean
            out[o + 1] += best
            out[o + 2] += worst
            out[o + 3] += zero
            if g < d:
                pass1_train[g] = p
                h = 0.0
                klv = 0.0
                ln = 0.0
                for k in range(K):
                    h -= pi[k] * logp[k]
                    klv += pi[k] * (logp[k] - logp0[g, k])
                    ln += pi[k] * lens[g, k]
                out[8] += h
                out[9] += klv
                out[10] += ln
                out[11] += p**n + (1.0 - p) ** n
            else:
                pass1_val[g - d] = p
    for j in range(4):
        out[j] /= d
        out[4 + j] /= G - d
    for j in range(8, 12):
        out[j] /= d
    for j in range(out.shape[0]):
        if not np.isfinite(out[j]):
            return False
    return True


# per-problem values kept by `_evaluate_cached` (cache[g, :]): pass@1, exact best@k, worst@k, entropy, KL,
# expected length, expected zero-variance share
C_P, C_BEST, C_WORST, C_H, C_KL, C_LEN, C_ZV = range(7)
N_CACHE = 7


def _evaluate_cached(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, n, k_metric, sampled,
                     rs, pass1_train, pass1_val, out, cache, cstamp, row_t, use_cache):
    """`_evaluate` that recomputes only the problems whose logits may have changed, bit-identical.

    With use_cache and no shared part in the logits (S == 0 or s_sh == 0: tabular, or share = 0), problem
    g's logits are b_g + s_pr w_g, and w_g changes only on an optimiser update of row g, which advances
    row_t[g]; so a training problem with row_t[g] == cstamp[g] has the pass@1, metrics, entropy, KL and
    length it had at the last evaluation, and a validation problem (no private row) never changes. Those are
    read from cache (G, N_CACHE); the others are computed as `_evaluate` computes them (same chunking of
    batch_logits, same operations) and stored. The sums run over g in the same order as `_evaluate`, and
    sampled metrics draw from rs for every problem as there, so `out` and the pass@1 vectors are equal bit
    for bit (tests/sandbox/test_sim_speed.py). use_cache=False (or a shared part) recomputes every problem.

    Two kernels: `_eval_problems` fills the cache chunk by chunk (chunks of EVAL_CHUNK problems,
    independent of each other, so `_run_full` may split them over threads) and `_eval_reduce` sums it.
    """
    if not _eval_problems(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, n, k_metric,
                          cache, cstamp, row_t, use_cache, 0, 1):
        return False
    return _eval_reduce(d, sampled, k_metric, rs, pass1_train, pass1_val, out, cache)


@njit(cache=True, nogil=True, error_model="numpy")
def _eval_problems(kind, data, S, s_sh, s_pr, d, offset, correct, lens, logp0, theta, n, k_metric, cache,
                   cstamp, row_t, use_cache, c_first, c_step):
    """The per-problem part of `_evaluate_cached`: chunks c_first, c_first + c_step, ... of EVAL_CHUNK
    problems (chunk c: problems c * EVAL_CHUNK ...) into cache / cstamp. A chunk reads and writes only its
    own problems' rows, so the chunks can run in any order or on any thread with the same result. False if
    some logits are non-finite."""
    K = logp0.shape[1]
    G = offset.shape[0]
    reuse = use_cache and (S == 0 or s_sh == 0.0)
    idx = np.empty(EVAL_CHUNK, dtype=np.int64)
    Z = np.empty((EVAL_CHUNK, K))
    PI = np.empty((EVAL_CHUNK, K))
    LP = np.empty((EVAL_CHUNK, K))
    smx = np.empty(EVAL_CHUNK)
    smxe = np.empty(EVAL_CHUNK * K)
    # int64 / bool values, not the literals 256, 0, True: Numba compiles a callee once per argument type, and
    # a literal is a type of its own (with `nb = 0` it compiled `_softmax_rows` for nb = Literal[int](0) on
    # top of int64: each extra specialisation of a kernel costs its compile)
    work = np.zeros(work_size(kind, data[3], K, np.int64(EVAL_CHUNK)))
    need_logp = K > 0
    for lo in range(c_first * EVAL_CHUNK, G, c_step * EVAL_CHUNK):
        hi = min(EVAL_CHUNK, G - lo) + lo
        nb = np.int64(0)
        for g in range(lo, hi):
            stamp = row_t[g] if g < d else 0
            if reuse and cstamp[g] == stamp:
                continue
            idx[nb] = g
            nb += 1
            cstamp[g] = stamp
        if nb == 0:
            continue
        if not batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx[:nb], Z[:nb], work):
            return False
        _softmax_rows(Z, nb, PI, LP, need_logp, smx, smxe)
        for i in range(nb):
            g = idx[i]
            pi = PI[i]
            logp = LP[i]
            p = pi[correct[g]]
            c = cache[g]
            c[C_P] = p
            c[C_BEST] = 1.0 - (1.0 - p) ** k_metric
            c[C_WORST] = p**k_metric
            if g < d:
                h = 0.0
                klv = 0.0
                ln = 0.0
                for k in range(K):
                    h -= pi[k] * logp[k]
                    klv += pi[k] * (logp[k] - logp0[g, k])
                    ln += pi[k] * lens[g, k]
                c[C_H] = h
                c[C_KL] = klv
                c[C_LEN] = ln
                c[C_ZV] = p**n + (1.0 - p) ** n
    return True


@njit(cache=True, nogil=True, error_model="numpy")
def _eval_reduce(d, sampled, k_metric, rs, pass1_train, pass1_val, out, cache):
    """The sums of `_evaluate_cached` over the cache (G, N_CACHE), in the order of g (sampled metrics draw
    from rs problem by problem). False if a metric is non-finite."""
    G = cache.shape[0]
    for j in range(out.shape[0]):
        out[j] = 0.0
    for g in range(G):
        c = cache[g]
        p = c[C_P]
        if sampled:
            cnt = binomial(rs, k_metric, p)
            mean = cnt / k_metric
            best = 1.0 if cnt > 0 else 0.0
            worst = 1.0 if cnt == k_metric else 0.0
            zero = 1.0 if cnt == 0 else 0.0
        else:
            mean = p
            best = c[C_BEST]
            worst = c[C_WORST]
            zero = 1.0 if p < ZERO_PASS1 else 0.0
        o = 0 if g < d else 4
        out[o] += mean
        out[o + 1] += best
        out[o + 2] += worst
        out[o + 3] += zero
        if g < d:
            pass1_train[g] = p
            out[8] += c[C_H]
            out[9] += c[C_KL]
            out[10] += c[C_LEN]
            out[11] += c[C_ZV]
        else:
            pass1_val[g - d] = p
    for j in range(4):
        out[j] /= d
        out[4 + j] /= G - d
    for j in range(8, 12):
        out[j] /= d
    for j in range(out.shape[0]):
        if not np.isfinite(out[j]):
            return False
    return True


@njit(cache=True, error_model="numpy")
def initial_log_probs(kind, data, S, s_sh, s_pr, d, offset, correct, theta, K):
    """Log-softmax (d, K) of the training problems under theta (the KL reference pi_init)."""
    out = np.empty((d, K))
    Z = np.empty((EVAL_CHUNK, K))
    pi, logp = np.empty(K), np.empty(K)
    idx = np.empty(EVAL_CHUNK, dtype=np.int64)
    work = np.zeros(work_size(kind, data[3], K, np.int64(EVAL_CHUNK)))  # int64, as `_evaluate_cached`
    for lo in range(0, d, EVAL_CHUNK):
        nb = min(EVAL_CHUNK, d - lo)
        for i in range(nb):
            idx[i] = lo + i
        batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx[:nb], Z[:nb], work)
        for i in range(nb):
            _softmax_row(Z, i, logp, pi)  # the kernels' specialisation (no `_softmax_fast` to compile)
            for k in range(K):
                out[lo + i, k] = logp[k]
    return out

