"""Public diagnostics from inside a simulated run: what mechanism studies need beyond the table.

- `train_snapshots(config, stops)`: the flat parameters after given step counts of the very run `run(config)`
  makes (same set-up, `runner.prepare`, and the same GRPO kernel, so they are bit-identical to it);
- `pass1_of(config, theta)` / `metrics_of(config, theta)`: per-problem pass@1 and the table's metrics at
  given parameters (the runner's evaluation kernel);
- `gradient_pieces(config, theta, ...)`: per-problem GRPO gradients at given parameters, for the gradient
  noise scale B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sandbox import grpo
from sandbox.blas import one_blas_thread
from sandbox.config import SimConfig
from sandbox.runner import prepare

_SCALE_CODES = {"group": grpo.SCALE_GROUP, "batch": grpo.SCALE_BATCH, "none": grpo.SCALE_NONE}


@one_blas_thread
def train_snapshots(config: SimConfig, stops: Sequence[int]) -> list[np.ndarray]:
    """Flat parameters (P,) after each step count in `stops` (ascending, 0 <= m <= config.steps) of the run
    `sandbox.run(config)` makes; RuntimeError if the run diverges before a stop."""
    stops = [int(m) for m in stops]
    if any(b < a for a, b in zip(stops, stops[1:], strict=False)) or (stops and not 0 <= stops[0]):
        raise ValueError(f"stops must be ascending step counts >= 0, got {stops}")
    if stops and stops[-1] > config.steps:
        raise ValueError(f"stop {stops[-1]} exceeds the run's {config.steps} steps")
    state = prepare(config)
    out = []
    for m in stops:
        code = state.train_to(m)
        if code != grpo.OK:
            raise RuntimeError(f"run diverged before step {m}: {grpo.REASONS[code]}")
        out.append(state.theta.copy())
    return out


def _evaluate(config: SimConfig, theta: np.ndarray):
    state = prepare(config)
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    if theta.shape != state.theta.shape:
        raise ValueError(f"theta must have shape {state.theta.shape}, got {theta.shape}")
    p_train, p_val, out = np.empty(config.d), np.empty(config.d_val), np.empty(12)
    ok = state.evaluate(theta, p_train, p_val, out)
    return ok, p_train, p_val, out


@one_blas_thread
def pass1_of(config: SimConfig, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact pass@1 (float64) of the training (d,) and validation (d_val,) problems under flat parameters
    theta (the runner's evaluation kernel: its float32 snapshots are these values rounded)."""
    _, p_train, p_val, _ = _evaluate(config, theta)
    return p_train, p_val


@one_blas_thread
def metrics_of(config: SimConfig, theta: np.ndarray) -> dict[str, float]:
    """The table's metric columns at flat parameters theta, computed as the runner computes a row
    (train/val mean, best_k, worst_k, zero_frac, entropy, kl); sampled metrics use the run's eval stream."""
    ok, _, _, out = _evaluate(config, theta)
    names = ("train_mean", "train_best_k", "train_worst_k", "train_zero_frac", "val_mean", "val_best_k",
             "val_worst_k", "val_zero_frac", "entropy", "kl")
    if not ok:
        return dict.fromkeys(names, float("nan"))
    return {k: float(v) for k, v in zip(names, out[: len(names)], strict=True)}


@one_blas_thread
def gradient_pieces(config: SimConfig, theta: np.ndarray, n: int | None = None, problems: int = 512,
                    seed: int = 0) -> np.ndarray:
    """Per-problem GRPO policy-gradient pieces g_i (N, P) at flat parameters theta.

    One piece = one training problem (N = min(problems, d) drawn without replacement by
    np.random.default_rng(seed)) with one group of n rollouts (default config.n, a multinomial draw from the
    same generator): g_i = d J_i / d theta, J_i = (1/n) sum_j A_j log pi(a_j), the ascent direction of
    the plain PG surrogate (no KL / entropy terms), with the config's advantage convention (scale_rewards,
    adv_std, adv_eps; "batch" takes the std over all N * n rewards). Rows of groups whose rewards all agree
    are exactly zero. The mean of the rows is the batch gradient, their covariance the per-group noise.
    """
    state = prepare(config)
    policy = state.policy
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    if theta.shape != state.theta.shape:
        raise ValueError(f"theta must have shape {state.theta.shape}, got {theta.shape}")
    n = config.n if n is None else int(n)
    if n < 2 or problems < 2:
        raise ValueError(f"need n >= 2 and problems >= 2, got n={n}, problems={problems}")
    rng = np.random.default_rng(seed)
    idx = rng.choice(config.d, size=min(int(problems), config.d), replace=False)
    Z = policy.forward(theta, idx)
    K = config.K
    sample = config.adv_std == "sample"
    scale = _SCALE_CODES[config.scale_rewards]
    pis, counts = [], np.empty((idx.size, K), dtype=np.int64)
    for b in range(idx.size):
        z = Z[b] - Z[b].max()
        pi = np.exp(z) / np.exp(z).sum()
        pis.append(pi)
        counts[b] = rng.multinomial(n, pi)
    corr = policy.correct[idx]
    c_all = counts[np.arange(idx.size), corr]
    bmean = c_all.sum() / (idx.size * n)
    batch_std = grpo.reward_std(bmean, idx.size * n, sample)
    pieces = np.zeros((idx.size, policy.n_params))
    dz = np.empty(K)
    for b in range(idx.size):
        c = int(c_all[b])
        if c in (0, n):
            continue
        mean = c / n
        a_c, a_w = grpo.advantages(c, n, mean, grpo.reward_std(mean, n, sample), scale, batch_std,
                                   config.adv_eps)
        logp = np.log(np.maximum(pis[b], 1e-300))
        grpo.logit_gradient(counts[b], n, int(corr[b]), a_c, a_w, pis[b], logp, logp, logp, grpo.PG, 0.2,
                            0.0, 0.0, dz)
        pieces[b] = policy.backward(theta, idx[b: b + 1], dz[None, :])
    return pieces
