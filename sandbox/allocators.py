"""Rollout allocators of the simulator (docs/DESIGN.md "Allocators", issue 13): which problems a step trains
on
and how many rollouts n_i each gets, within the step's rollout budget bp * n.

A config names one allocator by a spec string `name[:args]` (SimConfig.allocator; the grammar is
isocompute.contract.allocspec); `encode` turns it once into a numeric code and a parameter vector the kernel
reads (grpo.HP_A0..). The rules are small pure njit
functions on arrays, tested on hand-computed cases (tests/sandbox/test_sim_allocators.py); the GRPO step
(`alloc_step.train_kernel_alloc`) only calls them. Every drawn rollout counts as compute, discarded ones too.

History the kernel keeps per training problem g (`hist` (d + 1, 4)): column H_P the last observed group
success rate c / n_i (-1 = never seen; an EMA when `ema` < 1), H_STREAK the number of consecutive
zero-variance groups, H_VAR the last group's reward variance, H_SEEN the step it was last drawn. Row d is the
run-level state of the statistic-driven schedule (Z_MULT, Z_ZV, Z_GROUPS, Z_STEPS: `zv_schedule_update`).

Where a paper's predictor of p needs extra machinery (VIP's Gaussian process, GVM's pre-sampling stage),
the simulator's allocators use the same estimate as knapsack: the problem's last observed group rate c / n_i
(`ema` < 1 for an exponential average; `prior` for never-seen problems), free of compute; `oracle=1` uses
the true pass@1 instead (an upper bound on any estimator, no real system has it).

Allocators (codes A_*):
- `fixed`: every problem n (today's behaviour; the original kernel path, bit for bit).
- `knapsack[:nmin=2,nmax=4n,prior=0.5,oracle=0]`: Knapsack RL (Li et al., arXiv 2509.25849): maximise
  sum_i v(n_i, p_i) with v(k, p) = (1 - p^k - (1 - p)^k) p (1 - p)^2 subject to sum n_i = bp * n,
  nmin <= n_i <= nmax; p_i from the history (prior for unseen problems; oracle=1 uses the true pass@1, an
  upper bound no real system has). Budget left once every marginal value is zero goes to the hardest
  (lowest p) problems, as the paper sends leftovers to p = 0 tasks. Defaults follow liziniu/KnapsackRL
  `sampling_budget_by_knapsack(reward_states, n, min_n=2, max_n=None, ...)`.
- `dynamic-sampling[:rounds=4]`: DAPO dynamic sampling (Yu et al., arXiv 2503.14476): draw batches of bp
  problems x n rollouts, drop groups whose rewards all agree, refill until bp groups with signal or `rounds`
  batches (verl's max_num_gen_batches) or the run's budget; train on the first bp kept groups. All drawn
  rollouts count, so a step costs 1..rounds x bp * n.
- `skip-zero-var[:p=0.5,streak=1]`: GRESO (Zheng et al., arXiv 2506.02177): before any rollout, skip a drawn
  problem with probability p when its last `streak` groups were all zero-variance, drawing the next one
  instead; skipped problems cost nothing (GRESO adapts p toward a target zero-variance share; fixed here).
- `schedule:double@F1,F2,...`: BroRL-style (Hu et al., arXiv 2510.01180) schedule: n doubles each time the
  spent share of the budget passes F_j (bp fixed, so later steps cost more and there are fewer of them).
- `schedule:zv@T[,window=8,nmax=32n]` (ours; the issue's "schedule driven by a measured statistic"): n doubles
  when the share of zero-variance groups measured over the last window of `window` steps (windows do not
  overlap) exceeds T, up to nmax. Zero-variance groups are the signal GRPO loses to saturation (docs/PAPER.md:
  the zero-variance rule of docs/PREDICT.md), and a larger n turns part of them into groups with signal.
- `variance[:nmin=4,nmax=32,prior=0.5,oracle=0,ema=1]`: VIP (Nguyen et al., arXiv 2602.01601): per-prompt
  n_i minimising the predicted gradient variance sum_i s_i / n_i with s_i = p_i (1 - p_i) (the per-rollout
  reward variance, to which VIP's Dr.GRPO / RLOO gradient variance is proportional), subject to
  sum n_i = bp * n and nmin <= n_i <= nmax (VIP's default range [4, 32]); a separable convex integer
  programme solved exactly by greedy marginal decrease (its continuous optimum is Neyman's
  n_i ~ sqrt(s_i)). Our choices: the 1/n_i form drops VIP's finite-n corrections, and p_i comes from the
  history, not VIP's Gaussian process. nmin is lowered to n (nmax raised to n) when n lies outside [4, 32].
- `gvm[:nmin=2,nmax=4n,alpha=0.001,beta=2,prior=0.5,oracle=0,ema=1]`: GVM-RAFT (Yao et al., arXiv
  2505.02391): n_i proportional to G_i / sqrt(p_i + alpha / p_i^(beta - 1)) (RLHFlow/GVM
  `calc_sample_ratio`, alpha 1e-3, beta 2; weight 0 at p_i = 0 as there), normalised to sum n_i = bp * n
  within [nmin, nmax] (`proportional_alloc`). G_i, the norm of the prompt's gradient, is measured by backward
  passes in the paper; here it is the logit-space norm of grad log pi(correct) = e_c - pi with the wrong mass
  spread evenly, (1 - p_i) sqrt(K / (K - 1)) (oracle=1: the exact ||e_c - pi_i||). The paper spends a
  pre-sampling stage on estimating p_i and G_i; here that estimate is free (the history).
- `ada[:rounds=4,chunk=n]`: Reinforce-Ada (Xiong et al., arXiv 2510.04996; RLHFlow/Reinforce-Ada
  `multi_round_adaptive_downsampling`): each of the bp problems is sampled in rounds of `chunk` rollouts and
  stops once it has signal (a correct and a wrong answer among all its rollouts) or after `rounds` rounds.
  All drawn rollouts count and all of them train (the group is the prompt's whole pool, so its baseline is
  the pool's mean, Reinforce-Ada's "global statistics"); our choice: no down-sampling to a fixed balanced
  group (the paper's "balanced" variant keeps final_samples_per_prompt of them).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from isocompute.contract.allocspec import parse

A_FIXED, A_KNAPSACK, A_DYNAMIC, A_SKIPZV, A_SCHEDULE, A_VARIANCE, A_GVM, A_ADA, A_SCHED_ZV = range(9)
CODES = {"fixed": A_FIXED, "knapsack": A_KNAPSACK, "dynamic-sampling": A_DYNAMIC, "skip-zero-var": A_SKIPZV,
         "schedule:double": A_SCHEDULE, "variance": A_VARIANCE, "gvm": A_GVM, "ada": A_ADA,
         "schedule:zv": A_SCHED_ZV}
"""Kernel code of every AllocSpec.kind (isocompute.contract.allocspec)."""
LAYOUT = {"knapsack": ("nmin", "nmax", "prior", "oracle", "ema"), "dynamic-sampling": ("rounds",),
          "skip-zero-var": ("p", "streak"), "variance": ("nmin", "nmax", "prior", "oracle", "ema"),
          "gvm": ("nmin", "nmax", "prior", "oracle", "ema", "alpha", "beta"), "ada": ("rounds", "chunk"),
          "schedule:zv": ("threshold", "window", "nmax")}
"""Which AllocSpec.params fill the kernel's parameter vector, in order (schedule:double: the count of
fractions, then the fractions)."""
PER_PROBLEM = (A_KNAPSACK, A_VARIANCE, A_GVM)
"""Allocators that split the step's bp * n rollouts over its bp problems from a predicted p_i. Their
parameters share one layout: nmin, nmax, prior, oracle, ema, then alpha, beta (gvm)."""
N_PARAMS = 8
"""Length of the parameter vector of every allocator (hp[HP_A0: HP_A0 + N_PARAMS])."""
H_P, H_STREAK, H_VAR, H_SEEN = range(4)
Z_MULT, Z_ZV, Z_GROUPS, Z_STEPS = range(4)
"""Columns of the run-level row d of hist (schedule:zv): n multiplier, zero-variance groups, groups and
steps counted since the last change."""
N_HIST = 4


def encode(spec: str, n: int) -> tuple[int, np.ndarray]:
    """(code, params (N_PARAMS,) float64) the kernel reads for an allocator spec at base group size n
    (isocompute.contract.allocspec.parse; AllocatorError if the spec is bad)."""
    s = parse(spec, n)
    p = np.zeros(N_PARAMS)
    if s.kind == "schedule:double":
        p[0] = len(s.fractions)
        p[1: 1 + len(s.fractions)] = s.fractions
    else:
        keys = LAYOUT.get(s.kind, ())
        p[:len(keys)] = [s.params[k] for k in keys]
    return CODES[s.kind], p


# ---------------------------------------------------------------- the rules (pure, njit, tested directly)

@njit(cache=True, error_model="numpy")
def knapsack_value(k, p):
    """Knapsack RL's value of k rollouts on a task of success rate p: P(the group has both rewards) x the
    expected gradient magnitude p (1 - p)^2 (arXiv 2509.25849, eq. for Value(N, p))."""
    if k <= 0:
        return 0.0
    return (1.0 - p**k - (1.0 - p) ** k) * p * (1.0 - p) ** 2


@njit(cache=True, error_model="numpy")
def knapsack_alloc(p, budget, nmin, nmax, out):
    """n_i (into out, int64) maximising sum_i knapsack_value(n_i, p_i), sum n_i = budget, nmin <= n_i <= nmax.

    Greedy on marginal values: v(k, p) is concave in k (its increments p^k (1-p) + (1-p)^k p, times a
    constant, decrease), so adding one rollout at a time to the largest marginal value solves this separable
    knapsack exactly (the DP of the paper gives the same optimum; `knapsack_dp` checks it in the tests).
    Ties (and the zero-value leftovers) go to the lowest p, then the lowest index. Returns the rollouts
    placed (< budget only when every n_i is at nmax)."""
    m = p.shape[0]
    used = 0
    for i in range(m):
        out[i] = nmin
        used += nmin
    while used < budget:
        best = -1
        best_gain = -1.0
        for i in range(m):
            if out[i] >= nmax:
                continue
            gain = knapsack_value(out[i] + 1, p[i]) - knapsack_value(out[i], p[i])
            if gain > best_gain + 1e-15 or (abs(gain - best_gain) <= 1e-15 and best >= 0 and p[i] < p[best]):
                best = i
                best_gain = gain
        if best < 0:
            break
        out[best] += 1
        used += 1
    return used


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
def has_signal(c, k):
    """DAPO's keep rule: a group of k rewards with c correct carries a gradient iff 0 < c < k."""
    return 0 < c < k


@njit(cache=True, error_model="numpy")
def skip_probability(streak, min_streak, p_skip):
    """GRESO's pre-rollout filter: probability of skipping a problem whose last `streak` groups all had zero
    reward variance (p_skip once streak >= min_streak, else 0)."""
    return p_skip if streak >= min_streak else 0.0


@njit(cache=True, error_model="numpy")
def schedule_n(n, frac_spent, params):
    """Group size of the `schedule:double@F...` allocator: n x 2^(number of fractions F_j <= frac_spent);
    params[0] = count of fractions, params[1:] the fractions."""
    out = n
    for j in range(int(params[0])):
        if frac_spent >= params[1 + j]:
            out *= 2
    return out


@njit(cache=True, error_model="numpy")
def update_history(hist, g, c, k, step, ema):
    """Record a drawn group of k rollouts with c correct for training problem g (module docstring)."""
    r = c / k
    if hist[g, H_P] < 0.0 or ema >= 1.0:
        hist[g, H_P] = r
    else:
        hist[g, H_P] = (1.0 - ema) * hist[g, H_P] + ema * r
    if c == 0 or c == k:
        hist[g, H_STREAK] += 1.0
    else:
        hist[g, H_STREAK] = 0.0
    hist[g, H_VAR] = r * (1.0 - r)
    hist[g, H_SEEN] = step


def new_history(d: int) -> np.ndarray:
    """Empty history (d + 1, N_HIST): problems 0..d-1 never seen; row d the run-level schedule state
    (multiplier 1, counters 0)."""
    h = np.zeros((d + 1, N_HIST))
    h[:d, H_P] = -1.0
    h[:d, H_SEEN] = -1.0
    h[d, Z_MULT] = 1.0
    return h


@njit(cache=True, error_model="numpy")
def variance_alloc(p, budget, nmin, nmax, out):
    """VIP: n_i (into out, int64) minimising sum_i p_i (1 - p_i) / n_i, sum n_i = budget, nmin <= n_i <= nmax.

    The objective is separable and convex in each n_i, so adding one rollout at a time where it lowers the
    variance most (s_i / n_i - s_i / (n_i + 1) = s_i / (n_i (n_i + 1))) is exact. Ties, including the
    zero-gain leftovers once every s_i > 0 problem is at nmax, go to the smallest n_i, then the lowest index.
    Returns the rollouts placed (< budget only when every n_i is at nmax)."""
    m = p.shape[0]
    used = 0
    for i in range(m):
        out[i] = nmin
        used += nmin
    while used < budget:
        best = -1
        best_gain = -1.0
        for i in range(m):
            if out[i] >= nmax:
                continue
            s = p[i] * (1.0 - p[i])
            gain = s / (out[i] * (out[i] + 1.0))
            tie = abs(gain - best_gain) <= 1e-15 and best >= 0 and out[i] < out[best]
            if gain > best_gain + 1e-15 or tie:
                best = i
                best_gain = gain
        if best < 0:
            break
        out[best] += 1
        used += 1
    return used


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
def proportional_alloc(w, budget, nmin, nmax, out):
    """Integers n_i (into out) proportional to w_i within [nmin, nmax] with sum n_i = budget: the real
    allocation clip(lam w_i, nmin, nmax) whose sum is the budget (lam by bisection), floored, and the
    rollouts left by flooring given one each to the largest fractional parts (ties: the smallest n_i, then the
    lowest index; so budget the clipping leaves over is spread evenly). All-zero
    weights split evenly. Returns the rollouts placed (< budget only when every n_i is at nmax)."""
    m = w.shape[0]
    tot = 0.0
    for i in range(m):
        tot += w[i]
    if m * nmax <= budget:
        for i in range(m):
            out[i] = nmax
        return m * nmax
    ww = np.empty(m)
    for i in range(m):
        ww[i] = w[i] if tot > 0.0 else 1.0
    lo, hi = 0.0, 1.0
    while True:  # grow hi until the clipped sum reaches the budget
        s = 0.0
        for i in range(m):
            s += min(max(hi * ww[i], nmin), nmax)
        if s >= budget or hi > 1e300:
            break
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        s = 0.0
        for i in range(m):
            s += min(max(mid * ww[i], nmin), nmax)
        if s < budget:
            lo = mid
        else:
            hi = mid
    x = np.empty(m)
    used = 0
    for i in range(m):
        x[i] = min(max(hi * ww[i], nmin), nmax)
        out[i] = int(np.floor(x[i] + 1e-9))
        used += out[i]
    while used > budget:  # rounding noise of the bisection: take back from the smallest remainders
        worst = -1
        for i in range(m):
            if out[i] > nmin and (worst < 0 or x[i] - out[i] < x[worst] - out[worst]):
                worst = i
        out[worst] -= 1
        used -= 1
    while used < budget:
        best = -1
        for i in range(m):
            if out[i] >= nmax:
                continue
            if best < 0:
                best = i
                continue
            r, rb = x[i] - out[i], x[best] - out[best]
            if r > rb + 1e-12 or (abs(r - rb) <= 1e-12 and out[i] < out[best]):
                best = i
        if best < 0:
            break
        out[best] += 1
        x[best] = out[best]  # its remainder is spent
        used += 1
    return used


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
