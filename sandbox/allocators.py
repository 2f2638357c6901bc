"""Rollout allocators of the simulator (DESIGN.md "Allocators", issue 13): which problems a step trains on
and how many rollouts n_i each gets, within the step's rollout budget bp * n.

A config names one allocator by a spec string `name[:args]` (SimConfig.allocator); `parse` turns it once into
a numeric code and a parameter vector the kernel reads (grpo.HP_A0..). The rules are small pure njit
functions on arrays, tested on hand-computed cases (tests/sandbox/test_sim_allocators.py); the GRPO step
(`alloc_step.train_kernel_alloc`) only calls them. Every drawn rollout counts as compute, discarded ones too.

History the kernel keeps per training problem g (`hist` (d, 4)): column H_P the last observed group success
rate c / n_i (-1 = never seen; an EMA when `ema` < 1), H_STREAK the number of consecutive zero-variance
groups, H_VAR the last group's reward variance, H_SEEN the step it was last drawn.

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
"""

from __future__ import annotations

import numpy as np
from numba import njit

A_FIXED, A_KNAPSACK, A_DYNAMIC, A_SKIPZV, A_SCHEDULE = 0, 1, 2, 3, 4
NAMES = {"fixed": A_FIXED, "knapsack": A_KNAPSACK, "dynamic-sampling": A_DYNAMIC, "skip-zero-var": A_SKIPZV,
         "schedule": A_SCHEDULE}
N_PARAMS = 6
"""Length of the parameter vector of every allocator (hp[HP_A0: HP_A0 + N_PARAMS])."""
MAX_FRACTIONS = 5
H_P, H_STREAK, H_VAR, H_SEEN = range(4)
N_HIST = 4


class AllocatorError(ValueError):
    """A spec string that names no allocator or gives it bad parameters (one line)."""


def _kv(name: str, args: str, defaults: dict[str, float]) -> dict[str, float]:
    out = dict(defaults)
    if not args:
        return out
    for part in args.split(","):
        key, sep, val = part.partition("=")
        key = key.strip()
        if not sep or key not in defaults:
            raise AllocatorError(f"allocator {name}: bad argument {part!r}; give key=value with keys "
                                 f"{', '.join(defaults)}")
        try:
            out[key] = float(val)
        except ValueError:
            raise AllocatorError(f"allocator {name}: {key} must be a number, got {val!r}") from None
    return out


def parse(spec: str, n: int) -> tuple[int, np.ndarray]:
    """(code, params (N_PARAMS,) float64) of an allocator spec at base group size n; AllocatorError if bad."""
    name, _, args = str(spec).strip().partition(":")
    if name not in NAMES:
        raise AllocatorError(f"unknown allocator {name!r}; choose one of {', '.join(NAMES)}")
    code = NAMES[name]
    p = np.zeros(N_PARAMS)
    if code == A_FIXED:
        if args:
            raise AllocatorError(f"allocator fixed takes no arguments, got {args!r}")
    elif code == A_KNAPSACK:
        kv = _kv(name, args, {"nmin": 2.0, "nmax": 4.0 * n, "prior": 0.5, "oracle": 0.0, "ema": 1.0})
        if not 1 <= kv["nmin"] <= n <= kv["nmax"]:
            raise AllocatorError(f"knapsack needs 1 <= nmin <= n <= nmax, got nmin={kv['nmin']:g}, n={n}, "
                                 f"nmax={kv['nmax']:g}")
        if not 0.0 <= kv["prior"] <= 1.0 or not 0.0 < kv["ema"] <= 1.0:
            raise AllocatorError("knapsack needs prior in [0, 1] and ema in (0, 1]")
        p[:5] = [kv["nmin"], kv["nmax"], kv["prior"], kv["oracle"], kv["ema"]]
    elif code == A_DYNAMIC:
        kv = _kv(name, args, {"rounds": 4.0})
        if not 1 <= kv["rounds"] <= 64:
            raise AllocatorError(f"dynamic-sampling needs 1 <= rounds <= 64, got {kv['rounds']:g}")
        p[0] = kv["rounds"]
    elif code == A_SKIPZV:
        kv = _kv(name, args, {"p": 0.5, "streak": 1.0})
        if not 0.0 <= kv["p"] <= 1.0 or kv["streak"] < 1:
            raise AllocatorError("skip-zero-var needs p in [0, 1] and streak >= 1")
        p[0], p[1] = kv["p"], kv["streak"]
    else:
        kind, at, fr = args.partition("@")
        if kind != "double" or not at:
            raise AllocatorError(f"schedule takes double@F1,F2,... (compute fractions), got {args!r}")
        try:
            fracs = sorted(float(f) for f in fr.split(","))
        except ValueError:
            raise AllocatorError(f"schedule fractions must be numbers, got {fr!r}") from None
        if not fracs or len(fracs) > MAX_FRACTIONS or not all(0.0 < f < 1.0 for f in fracs):
            raise AllocatorError(f"schedule needs 1..{MAX_FRACTIONS} fractions in (0, 1), got {fr!r}")
        p[0] = len(fracs)
        p[1: 1 + len(fracs)] = fracs
    return code, p


def label(spec: str, n: int) -> str:
    """The table's `allocator` value: `fixed-n8` for fixed runs, else the spec string itself."""
    spec = str(spec).strip()
    return f"fixed-n{n}" if spec == "fixed" else spec


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
    """Empty history (d, N_HIST): never seen."""
    h = np.zeros((d, N_HIST))
    h[:, H_P] = -1.0
    h[:, H_SEEN] = -1.0
    return h
