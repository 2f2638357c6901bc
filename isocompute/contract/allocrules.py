"""The allocators' per-problem rules, defined once for both engines: what a rollout is worth to Knapsack RL,
the knapsack and variance splits of a step's rollouts, the proportional (water-level) split and DynaMO's
weights, DAPO's keep rule, Pilot-Commit's pilot filter and eviction, GRESO's skip probability, the doubling
schedule's group size, and how a problem's success rate and zero-variance streak are tracked (the
allocators, their parameters and papers: sandbox/allocators.py, llm_backend/allocators.py).

Plain Python on numbers and 1-d sequences (lists or numpy arrays), written in the subset of Python that numba
compiles: the simulator compiles each rule with numba and calls it from its train kernel
(sandbox/kernels/allocate.py), the LLM backend calls the same functions as they are. With one definition the
two engines cannot drift apart; tests/test_allocator_parity.py runs both on a grid of inputs. A rule here
calls only other rules here, all listed in RULES (the simulator registers each with numba before compiling
any)."""

from __future__ import annotations


def knapsack_value(k, p):
    """Knapsack RL's value of k rollouts on a task of success rate p: P(the group has both rewards) x the
    expected gradient magnitude p (1 - p)^2 (Li et al., arXiv 2509.25849, eq. for Value(N, p))."""
    if k <= 0:
        return 0.0
    return (1.0 - p**k - (1.0 - p) ** k) * p * (1.0 - p) ** 2


KNAPSACK, VARIANCE = 0, 1
"""The objectives `greedy_alloc` maximises: Knapsack RL's summed value, or minus VIP's summed gradient
variance sum_i p_i (1 - p_i) / n_i (Nguyen et al., arXiv 2602.01601)."""


def marginal_gain(rule, k, p):
    """What one more rollout, the (k+1)-th, of a problem with success rate p adds to the objective `rule`:
    knapsack_value(k + 1, p) - knapsack_value(k, p), or the variance it removes,
    s / k - s / (k + 1) = s / (k (k + 1)) with s = p (1 - p)."""
    if rule == VARIANCE:
        s = p * (1.0 - p)
        return s / (k * (k + 1.0))
    return knapsack_value(k + 1, p) - knapsack_value(k, p)


def goes_first(rule, p, out, i, j):
    """Tie rule between problems i and j of equal gain: the lowest p under knapsack (the paper sends leftovers
    to the hardest tasks), the smallest n_i under variance (leftovers spread evenly)."""
    if rule == VARIANCE:
        return out[i] < out[j]
    return p[i] < p[j]


def greedy_alloc(rule, p, budget, nmin, nmax, out):
    """n_i (into out) maximising the objective `rule` (KNAPSACK or VARIANCE), sum n_i = budget,
    nmin <= n_i <= nmax.

    Both objectives are separable and concave in each n_i (knapsack: v(k, p)'s increments
    p^k (1-p) + (1-p)^k p, times a constant, decrease; variance: s / (k (k + 1)) decreases), so adding one
    rollout at a time where the marginal gain is largest is exact (for knapsack the paper's dynamic programme
    gives the same optimum; sandbox.kernels.allocate.knapsack_dp checks it in the tests). Ties, and the
    zero-gain leftovers, go by `goes_first`, then to the lowest index. Returns the rollouts placed (< budget
    only when every n_i is at nmax)."""
    m = len(p)
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
            gain = marginal_gain(rule, out[i], p[i])
            tie = abs(gain - best_gain) <= 1e-15 and best >= 0 and goes_first(rule, p, out, i, best)
            if gain > best_gain + 1e-15 or tie:
                best = i
                best_gain = gain
        if best < 0:
            break
        out[best] += 1
        used += 1
    return used


def knapsack_alloc(p, budget, nmin, nmax, out):
    """Knapsack RL's split (arXiv 2509.25849): n_i (into out) maximising sum_i knapsack_value(n_i, p_i),
    sum n_i = budget, nmin <= n_i <= nmax; the rollouts placed."""
    return greedy_alloc(KNAPSACK, p, budget, nmin, nmax, out)


def variance_alloc(p, budget, nmin, nmax, out):
    """VIP's split: n_i (into out) minimising sum_i p_i (1 - p_i) / n_i, sum n_i = budget,
    nmin <= n_i <= nmax; the rollouts placed."""
    return greedy_alloc(VARIANCE, p, budget, nmin, nmax, out)


def proportional_alloc(w, budget, nmin, nmax, out):
    """Integers n_i (into out) proportional to w_i within [nmin, nmax] with sum n_i = budget: the real
    allocation clip(lam w_i, nmin, nmax) whose sum is the budget (lam by bisection; the water level of
    min sum_i w_i^2 / n_i under the box, so n_i ~ w_i wherever the box does not bind), floored, and the
    rollouts left by flooring given one each to the largest fractional parts (ties: the smallest n_i, then the
    lowest index; so budget the clipping leaves over is spread evenly). All-zero weights split evenly. Returns
    the rollouts placed (< budget only when every n_i is at nmax). GVM-RAFT's and DynaMO's split."""
    m = len(w)
    tot = 0.0
    for i in range(m):
        tot += w[i]
    if m * nmax <= budget:
        for i in range(m):
            out[i] = nmax
        return m * nmax
    ww = [0.0] * m
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
    x = [0.0] * m
    used = 0
    for i in range(m):
        x[i] = min(max(hi * ww[i], nmin), nmax)
        out[i] = int(x[i] + 1e-9)  # the floor: x >= nmin >= 1
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


def bernoulli_variance(k, g, prior):
    """DynaMO's proxy of a problem's gradient informativeness (Fang et al., arXiv 2602.19208, the
    sequence-level "dynamic rollout allocation"; the formula as the README of its code, GithubX-F/DynaMO-RL,
    states it; the paper's text itself was not available here): the unbiased Bernoulli variance
    P = k (g - k) / (g (g - 1)) of its history, k correct of the g rollouts drawn so far; prior (1 - prior)
    for a problem with fewer than 2 rollouts (P undefined; the repository gives unseen prompts the largest
    priority, which prior 0.5 reproduces)."""
    if g < 2:
        return prior * (1.0 - prior)
    return k * (g - k) / (g * (g - 1.0))


def dynamo_priority(rate, var, floor, master):
    """DynaMO's weight of a problem with success rate `rate` and Bernoulli variance `var`, on the scale of
    GithubX-F/DynaMO-RL recipe/dynamo/rl_dataset.py `update_rank`: 4 var in [0, 1], at least `floor`
    (min_priority 0.01 there), and `floor` once the problem is mastered, rate >= master (mastery_threshold
    0.85 there)."""
    if rate >= master:
        return floor
    return max(4.0 * var, floor)


def dynamo_alloc(k, g, prior, floor, master, budget, nmin, nmax, w, out):
    """DynaMO's split (arXiv 2602.19208: n_i* = B sigma_i / sum_j sigma_j, the variance-minimising
    allocation, with the Bernoulli variance P_i standing in for sigma_i, kept in [n_low, n_high] by a water
    level): n_i (into out) proportional to dynamo_priority(k_i / g_i, bernoulli_variance(k_i, g_i, prior))
    within [nmin, nmax], sum n_i = budget (`proportional_alloc`); k, g: each problem's correct and drawn
    rollouts so far; w: scratch of the weights. Returns the rollouts placed."""
    for i in range(len(k)):
        rate = k[i] / g[i] if g[i] >= 2 else prior
        w[i] = dynamo_priority(rate, bernoulli_variance(k[i], g[i], prior), floor, master)
    return proportional_alloc(w, budget, nmin, nmax, out)


def pilot_keep(c, k, lower, upper):
    """Pilot-Commit's filter (Kim et al., arXiv 2605.26606; databricks/pilot-commit
    recipe/pc/pc_ray_trainer.py `filter_batch`): a prompt whose pilot group has c correct of k is committed
    to iff lower <= c / k <= 1 - upper (diversity_threshold_lower / _upper); below it is too hard (deferred:
    it comes back with its epoch), above it too easy."""
    r = c / k
    return lower <= r and r <= 1.0 - upper


def pilot_evict(c, k, evict):
    """Pilot-Commit's eviction (recipe/pc/pc_ray_trainer.py `exclude_batch`, exclude_threshold_upper): a
    prompt whose pilot success rate c / k is >= evict is never drawn again (evict > 1: none is)."""
    return c / k >= evict


def has_signal(c, k):
    """DAPO's keep rule (Yu et al., arXiv 2503.14476): a group of k 0/1 rewards with c correct carries a
    gradient iff its rewards do not all agree, 0 < c < k."""
    return 0 < c < k


def next_streak(streak, c, k):
    """A problem's count of consecutive zero-variance groups after a group of k rewards with c correct: one
    more when the group has no signal, else 0 (GRESO's statistic)."""
    return streak + 1 if not has_signal(c, k) else 0


def tracked_rate(prev, rate, ema):
    """A problem's predicted success rate after a group with success rate `rate`: the rate itself for a
    problem never drawn before (prev < 0) or with ema >= 1, else the exponential average
    (1 - ema) prev + ema rate. The knapsack allocator's p_i."""
    if prev < 0.0 or ema >= 1.0:
        return rate
    return (1.0 - ema) * prev + ema * rate


def skip_probability(streak, min_streak, p_skip):
    """GRESO's pre-rollout filter (Zheng et al., arXiv 2506.02177): the probability of skipping a problem
    whose last `streak` groups all had zero reward variance: p_skip once streak >= min_streak, else 0."""
    return p_skip if streak >= min_streak else 0.0


def schedule_n(n, frac_spent, fractions):
    """Group size of the `schedule:double@F1,F2,...` allocator (BroRL-style, Hu et al., arXiv 2510.01180):
    n x 2^(number of fractions F_j <= frac_spent), the share of the budget spent so far."""
    out = n
    for f in fractions:
        if frac_spent >= f:
            out *= 2
    return out


RULES = (knapsack_value, marginal_gain, goes_first, greedy_alloc, knapsack_alloc, variance_alloc,
         proportional_alloc, bernoulli_variance, dynamo_priority, dynamo_alloc, pilot_keep, pilot_evict,
         has_signal, next_streak, tracked_rate, skip_probability, schedule_n)
"""Every rule of the book (tests/test_allocator_parity.py checks none is missing)."""
