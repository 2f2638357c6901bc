"""Rollout allocators of the simulator (docs/DESIGN.md "Allocators"): which problems a step trains on and
how many rollouts n_i each gets, within the step's rollout budget bp * n.

A config names one allocator by a spec string `name[:args]` (SimConfig.allocator; the grammar is
isocompute.contract.allocspec); `encode` turns it once into a numeric code and a parameter vector the kernel
reads (grpo.HP_A0..). The rules are small pure functions compiled with numba in
sandbox/kernels/allocate.py (those the LLM backend shares come from the rule book
isocompute.contract.allocrules), tested on hand-computed cases (tests/sandbox/test_sim_allocators.py); the
train kernel (sandbox/kernels/train.py) only calls them. Every drawn rollout counts as compute, discarded
ones too.

History the kernel keeps per training problem g (`hist` (d + 1, N_HIST)): column H_P the last observed group
success rate c / n_i (-1 = never seen; an EMA when `ema` < 1), H_STREAK the number of consecutive
zero-variance groups, H_VAR the last group's reward variance, H_SEEN the step it was last drawn, H_K and H_G
the correct and drawn rollouts of all its groups so far (DynaMO), H_OUT 1 once evicted (Pilot-Commit). Row d
is the run-level state of the statistic-driven schedule (Z_MULT, Z_ZV, Z_GROUPS, Z_STEPS:
`zv_schedule_update`).

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
- `schedule:zv@T[,window=8,nmax=32n]` (ours: a schedule driven by a measured statistic): n doubles
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
- `pilot-commit[:pilot=max(2,n/4),lower=0.125,upper=0.25,evict=1,rounds=30]`: Pilot-Commit (Kim et al.,
  arXiv 2605.26606; databricks/pilot-commit, recipe/pc): each candidate gets `pilot` rollouts; a candidate
  with lower <= c / pilot <= 1 - upper (`pilot_keep`; the repository's diversity thresholds, its scripts'
  0.125 and 0.25) is committed n - pilot more rollouts and trains on all n (pilot + commit, one group, its
  advantages over all n); the others are dropped (too hard: deferred to their next epoch; too easy with
  c / pilot >= evict, `pilot_evict`: never drawn again, exclude_threshold_upper 1 in its scripts). Rounds
  of bp candidates are piloted until bp are committed or `rounds` rounds (max_num_gen_batches 10 of
  gen_batch_size 3 bp there) or the budget has no room for a round and its commits (bp n). Every pilot and
  commit rollout counts. Choices where the engines lack the repository's machinery: (1) its commit rollouts
  are generated one generation round later, batched with the next pilot round, and survivors wait in a
  replay buffer up to buffer_max_off_steps = 4 steps (sampled by max pilot variance), so pilot rollouts
  reach the update one or more policy versions stale; neither engine corrects for stale rollouts, so here
  the commit follows the pilot within the step, from the same policy (an on-policy idealisation, which
  favours Pilot-Commit), and no survivor is carried to a later step; (2) the repository pilots 3 bp prompts
  at once, here rounds of bp stop once bp survivors are committed (surplus survivors of a round are
  dropped, there banked), so a step's pilot cost is what it needs; (3) training uses every pilot rollout
  (its n_explore_effective default) and no max-variance down-sampling.
- `dynamo[:nmin=n/2,nmax=3n/2,prior=0.5,oracle=0,floor=0.01,master=0.85]`: DynaMO's sequence-level
  allocation (Fang et al., arXiv 2602.19208; GithubX-F/DynaMO-RL): n_i proportional to the problem's
  weight within [nmin, nmax], sum n_i = bp * n (`dynamo_alloc`, the water level of `proportional_alloc`);
  the weight is 4 P_i, P_i = k_i (g_i - k_i) / (g_i (g_i - 1)) the unbiased Bernoulli variance of its k_i
  correct of g_i rollouts so far (all its groups, H_K / H_G), at least `floor`, and `floor` once
  k_i / g_i >= master (the code's mastery rule); prior 0.5 (weight 1, the largest) below 2 rollouts;
  oracle=1 uses the true pass@1 p (weight 4 p (1 - p)). Note n_i ~ P_i, the variance, as the paper's
  n_i* ~ sigma_i with P_i standing in for sigma_i, where VIP's `variance` gives n_i ~ sqrt(p_i (1 - p_i)).
  Defaults: the repository's example script runs n 16 with n_low 8, n_high 24. Choices: the weights are
  read from every drawn group up to the previous one (the repository refreshes them once per epoch, from
  the trained groups, and its `get_rollout_n_per_prompt` adds to n_low in proportion to the weight rather
  than clipping lam w_i; the paper's formula is the clip); DynaMO's token-level advantage modulation is not
  part of an allocator and is not run.
"""

from __future__ import annotations

import numpy as np

from isocompute.contract.allocspec import parse

(A_FIXED, A_KNAPSACK, A_DYNAMIC, A_SKIPZV, A_SCHEDULE, A_VARIANCE, A_GVM, A_ADA, A_SCHED_ZV, A_PILOT,
 A_DYNAMO) = range(11)
CODES = {"fixed": A_FIXED, "knapsack": A_KNAPSACK, "dynamic-sampling": A_DYNAMIC, "skip-zero-var": A_SKIPZV,
         "schedule:double": A_SCHEDULE, "variance": A_VARIANCE, "gvm": A_GVM, "ada": A_ADA,
         "schedule:zv": A_SCHED_ZV, "pilot-commit": A_PILOT, "dynamo": A_DYNAMO}
"""Kernel code of every AllocSpec.kind (isocompute.contract.allocspec)."""
LAYOUT = {"knapsack": ("nmin", "nmax", "prior", "oracle", "ema"), "dynamic-sampling": ("rounds",),
          "skip-zero-var": ("p", "streak"), "variance": ("nmin", "nmax", "prior", "oracle", "ema"),
          "gvm": ("nmin", "nmax", "prior", "oracle", "ema", "alpha", "beta"), "ada": ("rounds", "chunk"),
          "schedule:zv": ("threshold", "window", "nmax"),
          "pilot-commit": ("rounds", "pilot", "lower", "upper", "evict"),
          "dynamo": ("nmin", "nmax", "prior", "oracle", "floor", "master")}
"""Which AllocSpec.params fill the kernel's parameter vector, in order (schedule:double: the count of
fractions, then the fractions). Rounds come first wherever a step draws rounds (dynamic-sampling,
pilot-commit, ada): the kernel's round loop reads par[0]."""
PER_PROBLEM = (A_KNAPSACK, A_VARIANCE, A_GVM, A_DYNAMO)
"""Allocators that split the step's bp * n rollouts over its bp problems from a predicted p_i. Their
parameters share one layout: nmin, nmax, prior, oracle, then ema, alpha, beta (gvm) or floor, master
(dynamo, whose counts are cumulative: no ema)."""
N_PARAMS = 8
"""Length of the parameter vector of every allocator (hp[HP_A0: HP_A0 + N_PARAMS])."""
H_P, H_STREAK, H_VAR, H_SEEN, H_K, H_G, H_OUT = range(7)
Z_MULT, Z_ZV, Z_GROUPS, Z_STEPS = range(4)
"""Columns of the run-level row d of hist (schedule:zv): n multiplier, zero-variance groups, groups and
steps counted since the last change."""
N_HIST = 7


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
