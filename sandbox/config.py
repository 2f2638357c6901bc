"""Configuration of one simulated GRPO run (the simulator's own config; studies.RunConfig maps onto it)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields

from isocompute.contract.allocspec import AllocatorError, parse
from isocompute.contract.config import ConfigError, EngineConfig, check_choice, check_options, check_updates
from isocompute.contract.options import DATASETS, OPTIMIZERS, ZERO_PASS1

__all__ = ["DATASETS", "METRIC_MODES", "MODELS", "OPTIMIZERS", "PRIORS", "SAMPLERS", "ZERO_PASS1",
           "ConfigError", "SimConfig", "memory_estimate", "validate"]

MODELS = ("tabular", "linear", "mlp", "interference", "skills")
METRIC_MODES = ("exact", "sampled")
SAMPLERS = ("auto", "chain")
PRIORS = ("uniform", "zipf")


@dataclass(frozen=True)
class SimConfig(EngineConfig):
    """Hyperparameters of one simulated run. Vocabulary from docs/DESIGN.md: compute C = bp * n * m in
    rollouts."""

    # --- allocation (docs/PAPER.md "The question") ---
    n: int = 8
    """Rollouts per problem (GRPO group size)."""
    bp: int = 32
    """Problems per step (B_p)."""
    budget: int = 2**20
    """Compute cap in rollouts; the run takes m = budget // (bp * (n + n_est)) steps."""
    seed: int = 0
    """Seed of the training randomness (rollout sampling, problem order)."""
    problem_seed: int | None = None
    """Seed of the problem sets and the initial policy; None uses `seed`. Fix it to pair runs across n."""

    # --- problems ---
    dataset: str = "easy"
    """Difficulty preset, one of DATASETS (ranges of avg@16 under the initial policy, docs/DESIGN.md)."""
    d: int = 1024
    """Number of training problems (D)."""
    d_val: int = 1024
    """Number of held-out validation problems (move only through shared parameters)."""
    K: int = 8
    """Candidate answers per problem; exactly one is correct."""
    prior: str = "uniform"
    """Initial pool of the correct answer's pass@1 (sandbox/problems.py): uniform (the
    logit-uniform pool of POOL_LOGIT_RANGE) or zipf (a Zipf(zipf_a) base model over the K answers, the correct
    answer at rank `correct_rank`, so p0 = rank^-a / H_K(a)). The wrong answers share the rest of the mass
    equally in both (the policy kernel offsets the correct logit only)."""
    zipf_a: float = 1.0
    """Exponent a of the zipf prior (mass of rank r proportional to r^-a)."""
    correct_rank: int = 0
    """zipf only: rank of the correct answer (1 = the mode); 0 draws it log-uniformly from 1..K per candidate
    (mostly the tail), then the dataset's measured-avg@16 filter applies; a fixed rank skips the filter."""

    # --- policy ---
    model: str = "tabular"
    """Policy model, one of MODELS (sandbox/policies.py). `interference` is the first `mlp` preset:
    embeddings x_i ~ N(0, I_16) (it ignores `dim`), correct answer = argmax of a random 64-unit tanh teacher,
    `hidden` units (32); with the defaults (Adam, lr 0.1 constant, no decay, no KL) it is the prototype's."""
    dim: int = 64
    """Feature dimension of `linear` (U_i is K x dim) and embedding dimension of `mlp`."""
    hidden: int = 32
    """Hidden units of the `mlp` and `interference` policies."""
    share: float = 1.0
    """Mix of shared and private structure for linear / mlp: logits = b_i + sqrt(share) f(theta; i)
    + sqrt(1 - share) w_i with private logits w_i; 0 = tabular, 1 = fully shared; tabular ignores it."""

    # --- optimiser (docs/PAPER.md "Healthy recipe") ---
    optimizer: str = "adam"
    """sgd, adam, or adamw (decoupled weight decay toward the initial parameters)."""
    lr: float = 0.1
    """Base learning rate at the reference batch `lr_ref_batch`."""
    lr_rule: str = "constant"
    """How lr scales with batch = bp * n: constant, linear (lr * B / B_ref) or sqrt (lr * sqrt(B / B_ref))."""
    lr_ref_batch: int = 256
    """Reference batch for `lr_rule` (the paper: 1024 for the LLM)."""
    weight_decay: float = 0.0
    """Decoupled (AdamW-style) decay toward the initial parameters theta0, not toward zero as torch's AdamW in
    llm_backend: theta <- theta - lr * wd * (theta - theta0) after each update; 0 disables it."""
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8

    # --- objective ---
    scale_rewards: str = "group"
    """Advantage normalisation A = (r - mean) / (std + adv_eps): group (std of the group's rewards), batch
    (std of all bp * n rewards of the step) or none (A = r - mean). Zero whenever that std is 0."""
    adv_std: str = "sample"
    """Std convention of the advantage scale: sample (Bessel, n - 1: TRL's GRPOTrainer, verl's
    compute_grpo_outcome_advantage) or population (divide by n)."""
    adv_eps: float = 1e-4
    """Added to the std in the advantage denominator (TRL: 1e-4; verl: 1e-6)."""
    objective: str = "pg"
    """pg (plain policy gradient), ppo (clipped ratio) or cispo (clipped IS weight, stop-gradient)."""
    clip_eps: float = 0.2
    """Clipping range of ppo / cispo ratios."""
    ppo_epochs: int = 1
    """Passes over each batch for ppo / cispo."""
    minibatches: int = 1
    """Minibatches per pass for ppo / cispo (each an optimiser step)."""
    kl_coef: float = 0.0
    """Coefficient of KL(pi || pi_init) per problem; 0 disables it."""
    entropy_coef: float = 0.0
    """Coefficient of the entropy bonus; 0 disables it."""
    zero_variance_filter: bool = False
    """Drop groups whose n rewards all agree from the update (they carry no signal)."""
    n_est: int = 0
    """Separate rollouts for the baseline mean/std (decoupled baseline, docs/PAPER.md finding 9); 0 = the
    same n
    rollouts. They count toward compute and tokens."""

    allocator: str = "fixed"
    """Rollout allocator spec `name[:args]` (sandbox/allocators.py, docs/DESIGN.md "Allocators"): fixed (every
    problem n, the original step), knapsack, variance, gvm, ada, dynamic-sampling, skip-zero-var,
    schedule:double@F1,F2, schedule:zv@T, pilot-commit, dynamo. Non-fixed allocators take plain pg without
    n_est or zero_variance_filter; compute = rollouts drawn."""

    sampler: str = "auto"
    """How the n rollouts of a group are drawn (both exact): auto = n categorical draws for n <= 16 (the
    number correct first, wrong answers only when they can matter) and a chain of K-1 binomials beyond;
    chain = the binomial chain at every n (the random stream of the simulator's first versions)."""

    # --- metrics ---
    k: int = 4
    """k of best_k (pass@k) and worst_k (all k correct)."""
    metric_mode: str = "exact"
    """exact (from pass@1; zero_frac = share with pass@1 < ZERO_PASS1) or sampled (k draws per problem;
    zero_frac = share with 0 of k correct). Sampled metrics use their own random stream, so training is
    unchanged."""
    n_evals: int = 32
    """Number of log-spaced evaluation points between the first step and the budget."""
    snapshots: bool = True
    """Keep per-problem pass@1 vectors at each evaluation point."""
    response_len: float = 0.0
    """Typical response length in tokens (token-compute model, sandbox/problems.py: log-normal per answer,
    correct answers 1.5x longer, so length drifts up with pass@1); 0 disables `tokens` growth."""

    def __post_init__(self) -> None:
        validate(self)


def memory_estimate(c: SimConfig) -> int:
    """Rough bytes one run allocates (float64 per-problem logits, parameters, Adam moments, lengths and
    work arrays; embeddings x (G, dim); linear's U (G, K, dim); float32 pass@1 snapshots), G = d + d_val."""
    g = c.d + c.d_val
    dim_x = 16 if c.model == "interference" else c.dim
    shared = {"tabular": 0, "linear": c.dim, "skills": c.dim * c.K + c.K}.get(
        c.model, dim_x * c.hidden + c.hidden * c.K)
    floats = 8 * g * c.K + g * dim_x + 4 * shared + (g * c.K * c.dim if c.model == "linear" else 0)
    return 8 * floats + (4 * c.n_evals * g if c.snapshots else 0)


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 2**40


def validate(c: SimConfig) -> None:
    """Check one config; raise ConfigError with a one-line message quoting the bad values."""
    for f in fields(c):  # inf / NaN would pass the range checks below and run as a "divergence"
        v = getattr(c, f.name)
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"{f.name} must be a finite number, got {v}")
    check_choice("dataset", c.dataset, DATASETS)
    check_choice("model", c.model, MODELS)
    check_choice("optimizer", c.optimizer, OPTIMIZERS)
    check_options(c)
    check_choice("metric_mode", c.metric_mode, METRIC_MODES)
    check_choice("sampler", c.sampler, SAMPLERS)
    check_choice("prior", c.prior, PRIORS)
    if c.zipf_a <= 0 or not 0 <= c.correct_rank <= c.K:
        raise ConfigError(f"need zipf_a > 0 and 0 <= correct_rank <= K, got {c.zipf_a}, {c.correct_rank}")
    if c.n < 1:
        raise ConfigError(f"n must be >= 1, got {c.n}")
    if c.allocator != "fixed":
        try:
            parse(c.allocator, c.n)
        except AllocatorError as e:
            raise ConfigError(str(e)) from None
        if c.objective != "pg" or c.n_est != 0 or c.zero_variance_filter:
            raise ConfigError(f"allocator {c.allocator!r} needs objective pg, n_est 0 and no "
                              "zero_variance_filter (the allocator decides which groups train)")
    if c.n < 2 and c.n_est == 0:
        raise ConfigError(f"n = {c.n} < 2 leaves the group baseline without signal; use n >= 2 or set n_est")
    if c.n_est < 0 or c.n_est == 1:
        raise ConfigError(f"n_est must be 0 (use the n rollouts) or >= 2, got {c.n_est}")
    if c.bp < 1:
        raise ConfigError(f"bp must be >= 1, got {c.bp}")
    if c.d < 1 or c.d_val < 1:
        raise ConfigError(f"d and d_val must be >= 1, got d={c.d}, d_val={c.d_val}")
    if c.bp > c.d:
        raise ConfigError(f"bp = {c.bp} exceeds the training set size d = {c.d}")
    if c.budget < c.rollouts_per_step:
        raise ConfigError(f"budget {c.budget} is smaller than one step ({c.rollouts_per_step} rollouts)")
    if c.K < 2:
        raise ConfigError(f"K must be >= 2 candidate answers, got {c.K}")
    if c.dim < 1 or c.hidden < 1:
        raise ConfigError(f"dim and hidden must be >= 1, got dim={c.dim}, hidden={c.hidden}")
    if not 0.0 <= c.share <= 1.0:
        raise ConfigError(f"share must lie in [0, 1], got {c.share}")
    if not 0 < c.lr < float("inf"):
        raise ConfigError(f"lr must be positive and finite, got {c.lr}")
    if c.lr_ref_batch < 1:
        raise ConfigError(f"lr_ref_batch must be >= 1, got {c.lr_ref_batch}")
    for name in ("weight_decay", "kl_coef", "entropy_coef", "response_len", "adv_eps"):
        if getattr(c, name) < 0:
            raise ConfigError(f"{name} must be >= 0, got {getattr(c, name)}")
    if not c.adv_eps < float("inf"):
        raise ConfigError(f"adv_eps must be finite, got {c.adv_eps}")
    if not 0 <= c.beta1 < 1 or not 0 <= c.beta2 < 1 or c.adam_eps <= 0:
        raise ConfigError(f"bad Adam constants beta1={c.beta1}, beta2={c.beta2}, eps={c.adam_eps}")
    if c.clip_eps <= 0:
        raise ConfigError(f"clip_eps must be positive, got {c.clip_eps}")
    check_updates(c)
    if c.optimizer == "adam" and c.weight_decay > 0:
        raise ConfigError(f"weight_decay = {c.weight_decay} needs optimizer adamw or sgd (adam has no decay)")
    if c.k < 1:
        raise ConfigError(f"k must be >= 1, got {c.k}")
    if c.n_evals < 2:
        raise ConfigError(f"n_evals must be >= 2, got {c.n_evals}")
    if c.ppo_epochs > 1024:
        raise ConfigError(f"ppo_epochs must be <= 1024, got {c.ppo_epochs}")
    need, ram = memory_estimate(c), _ram_bytes()
    if need > ram // 2:  # half the machine: the rest is Python, numba and the other workers
        raise ConfigError(f"the run needs ~{need / 2**30:.3g} GiB (d + d_val = {c.d + c.d_val} problems x "
                          f"K = {c.K}, dim = {c.dim}, hidden = {c.hidden}); at most half of this machine's "
                          f"{ram / 2**30:.3g} GiB RAM")
