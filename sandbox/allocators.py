"""Rollout allocators of the simulator (docs/DESIGN.md "Allocators"): which problems a step trains on and
how many rollouts n_i each gets, within the step's rollout budget bp * n.

A config names one allocator by a spec string `name[:args]` (SimConfig.allocator; the grammar is
isocompute.contract.allocspec); `encode` turns it once into a numeric code and a parameter vector the kernel
reads (grpo.HP_A0..). The rules are small pure functions compiled with numba in
sandbox/kernels/allocate.py (those the LLM backend shares come from the rule book
isocompute.contract.allocrules), tested on hand-computed cases (tests/sandbox/test_sim_allocators.py); the
train kernel (sandbox/kernels/train.py) only calls them. Every drawn rollout counts as compute, discarded
ones too.

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


def new_history(d: int) -> np.ndarray:
    """Empty history (d + 1, N_HIST): problems 0..d-1 never seen; row d the run-level schedule state
    (multiplier 1, counters 0)."""
    h = np.zeros((d + 1, N_HIST))
    h[:d, H_P] = -1.0
    h[:d, H_SEEN] = -1.0
    h[d, Z_MULT] = 1.0
    return h
