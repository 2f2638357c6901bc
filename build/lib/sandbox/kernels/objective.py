"""GRPO's advantages and the logit gradient of its surrogate for one group (docs/PAPER.md "The question";
sandbox/grpo.py, steps 2 and 3 of its docstring)."""

from __future__ import annotations

import numpy as np
from numba import njit

from sandbox.kernels.layout import PG, PPO, SCALE_BATCH, SCALE_GROUP


@njit(cache=True, error_model="numpy")
def reward_std(mean, count, sample):
    """Std of `count` binary rewards with mean `mean`: sample (Bessel, count - 1; 0 for one reward) or
    population (sample=False). The variance of 0/1 rewards is mean (1 - mean) (population)."""
    var = max(mean * (1.0 - mean), 0.0)
    if sample:
        if count < 2:
            return 0.0
        var *= count / (count - 1.0)
    return np.sqrt(var)


@njit(cache=True, error_model="numpy")
def advantages(c, n, mean, std, scale, batch_std, eps=0.0):
    """(A_correct, A_wrong) = ((1 - mean), (0 - mean)) / (std + eps) of a group with c of n correct and
    baseline mean/std (GRPO, docs/PAPER.md; `scale` picks the group std, the batch std or none). Zero when the
    chosen std is zero: every reward agrees with the baseline, and eps alone would give a 1/eps scale."""
    if scale == SCALE_GROUP:
        den = std
    elif scale == SCALE_BATCH:
        den = batch_std
    else:
        return 1.0 - mean, 0.0 - mean
    if den <= 1e-12:
        return 0.0, 0.0
    den += eps
    return (1.0 - mean) / den, (0.0 - mean) / den


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def logit_gradient_row(counts, b, n, corr, a_c, a_w, pi, logp, logp_old, logp0, g0, objective, clip, kl, ent,
                       out, i):
    """`logit_gradient` of group b (counts[b], logp_old[b], reference logp0[g0]) into out[i]: rows of 2-D
    arrays, not views (a compiled caller that passes a view keeps an atomic NRT incref / decref pair per array
    argument per call: the train kernel's `_logit_grads`). pi, logp (K,): the group's current policy."""
    K = pi.shape[0]
    sv = 0.0
    for k in range(K):
        a = a_c if k == corr else a_w
        v = counts[b, k] * a
        if objective != PG and v != 0.0:
            r = np.exp(logp[k] - logp_old[b, k])
            if objective == PPO:
                if (a > 0.0 and r >= 1.0 + clip) or (a < 0.0 and r <= 1.0 - clip):
                    v = 0.0
                else:
                    v *= r
            else:
                v *= min(r, 1.0 + clip)
        out[i, k] = v
        sv += v
    for k in range(K):
        out[i, k] = (out[i, k] - sv * pi[k]) / n
    if kl > 0.0:
        kl_val = 0.0
        for k in range(K):
            kl_val += pi[k] * (logp[k] - logp0[g0, k])
        for k in range(K):
            out[i, k] -= kl * pi[k] * (logp[k] - logp0[g0, k] - kl_val)
    if ent > 0.0:
        h = 0.0
        for k in range(K):
            h -= pi[k] * logp[k]
        for k in range(K):
            out[i, k] -= ent * pi[k] * (logp[k] + h)


@njit(cache=True, error_model="numpy")
def logit_gradient(counts, n, corr, a_c, a_w, pi, logp, logp_old, logp0, objective, clip, kl, ent, out):
    """Ascent direction dJ/dz (K,) of one group (module docstring, step 3), before the 1/groups average."""
    K = pi.shape[0]
    r = np.int64(0)  # not a literal 0: the kernel's row type, one specialisation
    logit_gradient_row(counts.reshape((1, K)), r, n, corr, a_c, a_w, pi, logp, logp_old.reshape((1, K)),
                       logp0.reshape((1, K)), r, objective, clip, kl, ent, out.reshape((1, K)), r)
