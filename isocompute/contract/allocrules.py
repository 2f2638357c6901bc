"""The allocators' per-problem rules, defined once for both engines: what a rollout is worth to Knapsack RL,
the knapsack and variance splits of a step's rollouts, DAPO's keep rule, GRESO's skip probability, the
doubling schedule's group size, and how a problem's success rate and zero-variance streak are tracked (the
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


RULES = (knapsack_value, marginal_gain, goes_first, greedy_alloc, knapsack_alloc, variance_alloc, has_signal,
         next_streak, tracked_rate, skip_probability, schedule_n)
"""Every rule of the book (tests/test_allocator_parity.py checks none is missing)."""
