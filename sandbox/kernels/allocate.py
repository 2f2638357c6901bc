"""The rollout allocators' rules as Numba kernels (docs/DESIGN.md "Allocators"; the specs, their parameters
and the papers they follow are in sandbox/allocators.py). The rules both engines share are the rule book's
(`isocompute.contract.allocrules`), compiled here; the rules after them are the simulator's own (the LLM
backend refuses those allocators). Small pure functions on arrays, tested on hand-computed cases
(tests/sandbox/test_sim_allocators.py); the train kernel (sandbox/kernels/train.py) calls them through
`step_group_size`, `candidates`, `group_sizes` and `update_history`. None of them is compiled for a fixed run:
its hist is None, and each call sits in a branch pruned at compile time then."""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.extending import register_jitable

from isocompute.contract import allocrules
from sandbox.allocators import (
    A_ADA,
    A_DYNAMO,
    A_GVM,
    A_KNAPSACK,
    A_PILOT,
    A_SCHED_ZV,
    A_SCHEDULE,
    A_SKIPZV,
    A_VARIANCE,
    H_G,
    H_K,
    H_OUT,
    H_P,
    H_SEEN,
    H_STREAK,
    H_VAR,
    Z_GROUPS,
    Z_MULT,
    Z_STEPS,
    Z_ZV,
)
from sandbox.kernels.rollouts import _next_problem
from sandbox.rng import uniform

_JIT = {"error_model": "numpy"}
"""Numba options of every allocator kernel (numpy's float semantics: 0/0 is NaN, not an exception)."""


for _rule in allocrules.RULES:  # compiled rules call one another by the plain functions of the rule book
    register_jitable(**_JIT)(_rule)

knapsack_value = njit(cache=True, **_JIT)(allocrules.knapsack_value)
knapsack_alloc = njit(cache=True, **_JIT)(allocrules.knapsack_alloc)
variance_alloc = njit(cache=True, **_JIT)(allocrules.variance_alloc)
has_signal = njit(cache=True, **_JIT)(allocrules.has_signal)
tracked_rate = njit(cache=True, **_JIT)(allocrules.tracked_rate)
next_streak = njit(cache=True, **_JIT)(allocrules.next_streak)
skip_probability = njit(cache=True, **_JIT)(allocrules.skip_probability)
schedule_n = njit(cache=True, **_JIT)(allocrules.schedule_n)
proportional_alloc = njit(cache=True, **_JIT)(allocrules.proportional_alloc)
bernoulli_variance = njit(cache=True, **_JIT)(allocrules.bernoulli_variance)
dynamo_priority = njit(cache=True, **_JIT)(allocrules.dynamo_priority)
dynamo_alloc = njit(cache=True, **_JIT)(allocrules.dynamo_alloc)
pilot_keep = njit(cache=True, **_JIT)(allocrules.pilot_keep)
pilot_evict = njit(cache=True, **_JIT)(allocrules.pilot_evict)


def knapsack_dp(p, budget: int, nmin: int, nmax: int) -> tuple[float, np.ndarray]:
    """Reference dynamic programme over (task, budget) of the same problem (the paper's solver), pure Python:
    (best total value, one optimal allocation)."""
    m = len(p)
    neg = -1.0
    best = np.full((m + 1, budget + 1), neg)
    choice = np.zeros((m + 1, budget + 1), dtype=np.int64)
    best[0, 0] = 0.0
    for i in range(m):
        for b in range(budget + 1):
            if best[i, b] < 0:
                continue
            for k in range(nmin, nmax + 1):
                if b + k > budget:
                    break
                v = best[i, b] + float(knapsack_value(k, p[i]))
                if v > best[i + 1, b + k] + 1e-15:
                    best[i + 1, b + k] = v
                    choice[i + 1, b + k] = k
    alloc = np.zeros(m, dtype=np.int64)
    b = budget
    for i in range(m, 0, -1):
        alloc[i - 1] = choice[i, b]
        b -= choice[i, b]
    return float(best[m, budget]), alloc


@njit(cache=True, error_model="numpy")
def update_history(hist, g, c, k, step, ema):
    """Record a drawn group of k rollouts with c correct for training problem g (module docstring)."""
    r = c / k
    hist[g, H_P] = tracked_rate(hist[g, H_P], r, ema)
    hist[g, H_STREAK] = next_streak(hist[g, H_STREAK], c, k)
    hist[g, H_VAR] = r * (1.0 - r)
    hist[g, H_SEEN] = step
    hist[g, H_K] += c
    hist[g, H_G] += k


@njit(cache=True, error_model="numpy")
def gvm_weight(p, G, alpha, beta):
    """GVM-RAFT's sample-size weight G / sqrt(p + alpha / p^(beta - 1)); 0 when p or G is 0 (RLHFlow/GVM)."""
    if p <= 0.0 or G <= 0.0:
        return 0.0
    return G / np.sqrt(p + alpha / p ** (beta - 1.0))


@njit(cache=True, error_model="numpy")
def gvm_gradient_norm(p, K):
    """G_i of the gvm allocator from a predicted p: ||e_c - pi|| with the wrong mass 1 - p spread evenly over
    the K - 1 wrong answers, (1 - p) sqrt(K / (K - 1))."""
    return (1.0 - p) * np.sqrt(K / (K - 1.0))


@njit(cache=True, error_model="numpy")
def ada_continue(c, k, rounds_done, rounds):
    """Reinforce-Ada's stopping rule: sample another round for a prompt with c correct of its k rollouts so
    far unless it has signal (0 < c < k) or has had its `rounds` rounds."""
    return rounds_done < rounds and not (0 < c < k)


@njit(cache=True, error_model="numpy")
def zv_schedule_update(state, zv, groups, thr, window, nmax, n):
    """schedule:zv@T after one step with `zv` zero-variance groups out of `groups`: add them to the counters
    of state (row d of hist); once `window` steps are counted, double the multiplier if the zero-variance
    share exceeds thr and n x 2 x multiplier <= nmax, and restart the counters either way. Returns the
    multiplier."""
    state[Z_ZV] += zv
    state[Z_GROUPS] += groups
    state[Z_STEPS] += 1.0
    if state[Z_STEPS] >= window:
        if state[Z_GROUPS] > 0.0 and state[Z_ZV] / state[Z_GROUPS] > thr and n * 2.0 * state[Z_MULT] <= nmax:
            state[Z_MULT] *= 2.0
        state[Z_ZV] = 0.0
        state[Z_GROUPS] = 0.0
        state[Z_STEPS] = 0.0
    return state[Z_MULT]


@njit(cache=True, no_cpython_wrapper=True, error_model="numpy")
def step_group_size(alloc, n, bp, spent, budget, par, hist, d):
    """The group size of the next step under a non-fixed allocator: n, ada's first round (`chunk`),
    pilot-commit's pilot, or the schedules' n (capped by the budget's room), given `spent` rollouts of the
    budget; 0 when the step does not fit in the budget (the run ends there; pilot-commit needs room for a
    round and its commits, bp n)."""
    n_step = n
    if alloc == A_ADA:
        n_step = int(par[1])
    if alloc == A_PILOT:
        return int(par[1]) if spent + bp * n <= budget else 0
    if alloc == A_SCHEDULE or alloc == A_SCHED_ZV:
        if alloc == A_SCHEDULE:
            n_step = schedule_n(n, spent / budget, par[1:1 + int(par[0])])
        else:
            n_step = n * int(hist[d, Z_MULT])
        room = int((budget - spent) // bp)
        if room < n_step:
            n_step = room
    if n_step < 2 or spent + bp * n_step > budget:
        return 0
    return n_step


@njit(cache=True, error_model="numpy")
def candidates(rs, perm, st, d, hist, alloc, par, out):
    """The next problems of the epoch order into out (bp,). Under skip-zero-var (GRESO) a drawn problem is
    skipped with `skip_probability` of its zero-variance streak, before any rollout (at most d skips a
    step); under pilot-commit an evicted problem is skipped (at most d skips a round)."""
    tries = 0
    nc = 0
    while nc < out.shape[0]:
        g = _next_problem(rs, perm, st, d)
        if hist is not None and alloc == A_SKIPZV and tries < d:
            q = skip_probability(hist[g, H_STREAK], par[1], par[0])
            if q > 0.0 and uniform(rs) < q:
                tries += 1
                continue
        if hist is not None and alloc == A_PILOT and tries < d and hist[g, H_OUT] != 0.0:
            tries += 1
            continue
        out[nc] = g
        nc += 1


@njit(cache=True, error_model="numpy")
def group_sizes(alloc, par, hist, cand, pis, correct, n_step, budget, phat, wbuf, out):
    """n_i (into out (bp,)) of the candidate problems cand (bp,) with policies pis (bp, K): n_step each, or
    the per-problem split of `budget` rollouts (knapsack, variance, gvm, dynamo) from the predicted p_i (the
    history, or the true pass@1 under oracle=1). phat, wbuf (bp,): scratch."""
    bp = cand.shape[0]
    K = pis.shape[1]
    if hist is not None and alloc == A_DYNAMO:
        if par[3] != 0.0:  # oracle: the true pass@1's weight
            for b in range(bp):
                p = pis[b, correct[cand[b]]]
                wbuf[b] = dynamo_priority(p, p * (1.0 - p), par[4], par[5])
            proportional_alloc(wbuf, budget, int(par[0]), int(par[1]), out)
        else:
            for b in range(bp):
                phat[b] = hist[cand[b], H_K]
                wbuf[b] = hist[cand[b], H_G]
            w = np.empty(bp)
            dynamo_alloc(phat, wbuf, par[2], par[4], par[5], budget, int(par[0]), int(par[1]), w, out)
        return
    if hist is not None and (alloc == A_KNAPSACK or alloc == A_VARIANCE or alloc == A_GVM):
        for b in range(bp):
            g = cand[b]
            if par[3] != 0.0:
                phat[b] = pis[b, correct[g]]
            else:
                phat[b] = hist[g, H_P] if hist[g, H_P] >= 0.0 else par[2]
        if alloc == A_KNAPSACK:
            knapsack_alloc(phat, budget, int(par[0]), int(par[1]), out)
        elif alloc == A_VARIANCE:
            variance_alloc(phat, budget, int(par[0]), int(par[1]), out)
        else:
            for b in range(bp):
                if par[3] != 0.0:  # oracle: the exact ||e_c - pi||
                    G = 0.0
                    for kk in range(K):
                        e = (1.0 if kk == correct[cand[b]] else 0.0) - pis[b, kk]
                        G += e * e
                    G = np.sqrt(G)
                else:
                    G = gvm_gradient_norm(phat[b], K)
                wbuf[b] = gvm_weight(phat[b], G, par[5], par[6])
            proportional_alloc(wbuf, budget, int(par[0]), int(par[1]), out)
        return
    for b in range(bp):
        out[b] = n_step
