"""Categorical policies over K candidate answers: one interface for tabular and shared-parameter models.

Logits of problem g (row of the ProblemSet; train rows 0..d-1, validation rows d..d+d_val-1), shape (K,):

    z_g = b_g + s_sh * f(theta_shared; g) + s_pr * w_g

- b_g: fixed prior offset on the correct answer (sets the initial pass@1, sandbox/problems.py);
- f: the shared part of the model kind (linear: U_g theta; mlp: W2^T tanh(W1^T x_g + c1) + c2);
- w_g: private per-problem logits (a tabular block), present only for training problems, so validation
  problems move only through shared parameters (and never move under `tabular`).
- s_sh = sqrt(share), s_pr = sqrt(1 - share): the `share` knob of SimConfig mixes problem-specific and shared
  structure (share = 1: fully shared, no private block; share = 0: exactly tabular). `tabular` is s_sh = 0.

Flat parameter vector: [theta_shared (S,), w (d, K) row-major if a private block exists].
A new kind (e.g. issue 4's conflicting skills) adds a branch to `_shared_forward` / `_shared_backward` and a
builder in `build_policy`; the GRPO step (sandbox/grpo.py) only calls `problem_logits` / `problem_backward`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from sandbox.config import ConfigError, SimConfig
from sandbox.problems import ProblemSet, embedding_dim

TABULAR = 0
LINEAR = 1
MLP = 2
KIND_CODES = {"tabular": TABULAR, "linear": LINEAR, "mlp": MLP, "interference": MLP}


@njit(cache=True)
def _shared_forward(kind, theta, data, g, z, work):
    """Shared logits f(theta; g) into z (K,). work (W,) keeps activations for `_shared_backward` of the same g."""
    X, U, F, dims = data
    K = z.shape[0]
    if kind == LINEAR:
        dim = U.shape[2]
        for k in range(K):
            s = 0.0
            for j in range(dim):
                s += U[g, k, j] * theta[j]
            z[k] = s
    elif kind == MLP:
        dim = dims[0]
        H = dims[1]
        o_c1 = dim * H
        o_w2 = o_c1 + H
        o_c2 = o_w2 + H * K
        for h in range(H):
            work[h] = theta[o_c1 + h]
        for j in range(dim):
            xj = X[g, j]
            base = j * H
            for h in range(H):
                work[h] += xj * theta[base + h]
        for k in range(K):
            z[k] = theta[o_c2 + k]
        for h in range(H):
            a = np.tanh(work[h])
            work[h] = a
            base = o_w2 + h * K
            for k in range(K):
                z[k] += a * theta[base + k]
    else:
        for k in range(K):
            z[k] = 0.0


@njit(cache=True)
def _shared_backward(kind, theta, data, g, gz, grad, work):
    """Accumulate d(gz . f(theta; g))/d theta_shared into grad (S,); work holds the forward activations of g."""
    X, U, F, dims = data
    K = gz.shape[0]
    if kind == LINEAR:
        dim = U.shape[2]
        for k in range(K):
            gk = gz[k]
            for j in range(dim):
                grad[j] += gk * U[g, k, j]
    elif kind == MLP:
        dim = dims[0]
        H = dims[1]
        o_c1 = dim * H
        o_w2 = o_c1 + H
        o_c2 = o_w2 + H * K
        for k in range(K):
            grad[o_c2 + k] += gz[k]
        delta = work[H:2 * H]
        for h in range(H):
            a = work[h]
            base = o_w2 + h * K
            s = 0.0
            for k in range(K):
                grad[base + k] += a * gz[k]
                s += theta[base + k] * gz[k]
            delta[h] = s * (1.0 - a * a)
            grad[o_c1 + h] += delta[h]
        for j in range(dim):
            xj = X[g, j]
            base = j * H
            for h in range(H):
                grad[base + h] += xj * delta[h]


@njit(cache=True)
def problem_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, g, z, work):
    """Full logits of problem g into z (K,) (module docstring formula). Returns False if any is non-finite."""
    K = z.shape[0]
    if S > 0 and s_sh != 0.0:
        _shared_forward(kind, theta, data, g, z, work)
        for k in range(K):
            z[k] *= s_sh
    else:
        for k in range(K):
            z[k] = 0.0
    z[correct[g]] += offset[g]
    if s_pr != 0.0 and g < d:
        base = S + g * K
        for k in range(K):
            z[k] += s_pr * theta[base + k]
    ok = True
    for k in range(K):
        if not np.isfinite(z[k]):
            ok = False
    return ok


@njit(cache=True)
def log_softmax(z, out):
    """Stable log-softmax of z (K,) into out (K,)."""
    mx = z[0]
    for k in range(1, z.shape[0]):
        if z[k] > mx:
            mx = z[k]
    s = 0.0
    for k in range(z.shape[0]):
        s += np.exp(z[k] - mx)
    lse = mx + np.log(s)
    for k in range(z.shape[0]):
        out[k] = z[k] - lse


@njit(cache=True)
def problem_backward_shared(kind, theta, data, S, s_sh, g, dz, grad_shared, gz, work):
    """Shared-parameter part of the backward pass of problem g: grad_shared += s_sh * (df/dtheta)^T dz."""
    if S == 0 or s_sh == 0.0:
        return
    for k in range(dz.shape[0]):
        gz[k] = s_sh * dz[k]
    _shared_backward(kind, theta, data, g, gz, grad_shared, work)


@njit(cache=True)
def _forward_batch(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx, out, work):
    for b in range(idx.shape[0]):
        problem_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx[b], out[b], work)


@njit(cache=True)
def _backward_batch(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx, dz, grad, work):
    K = dz.shape[1]
    z = np.empty(K)
    gz = np.empty(K)
    for b in range(idx.shape[0]):
        g = idx[b]
        problem_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, g, z, work)
        problem_backward_shared(kind, theta, data, S, s_sh, g, dz[b], grad[:S], gz, work)
        if s_pr != 0.0 and g < d:
            for k in range(K):
                grad[S + g * K + k] += s_pr * dz[b, k]


@dataclass
class Policy:
    """A built policy: kind code, layout and fixed data. `theta0` is the initial flat parameter vector."""

    name: str
    kind: int
    K: int
    d: int
    n_shared: int
    s_sh: float
    s_pr: float
    data: tuple
    offset: np.ndarray
    correct: np.ndarray
    theta0: np.ndarray
    work_size: int

    @property
    def n_params(self) -> int:
        return self.theta0.size

    def args(self) -> tuple:
        """The leading arguments of every kernel that evaluates this policy."""
        return (self.kind, self.data, self.n_shared, self.s_sh, self.s_pr, self.d, self.offset, self.correct)

    def forward(self, params: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Logits (len(idx), K) of problems idx (rows of the ProblemSet) under the flat parameters."""
        params, idx = self._check(params, idx)
        out = np.empty((idx.size, self.K))
        work = np.zeros(self.work_size)
        kind, data, S, s_sh, s_pr, d, offset, correct = self.args()
        _forward_batch(kind, params, data, S, s_sh, s_pr, d, offset, correct, idx, out, work)
        return out

    def backward(self, params: np.ndarray, idx: np.ndarray, dlogits: np.ndarray) -> np.ndarray:
        """Gradient over the flat parameter vector of sum_b dlogits[b] . logits(idx[b]) (a vector-Jacobian product)."""
        params, idx = self._check(params, idx)
        dlogits = np.ascontiguousarray(dlogits, dtype=np.float64)
        if dlogits.shape != (idx.size, self.K):
            raise ValueError(f"dlogits must have shape {(idx.size, self.K)}, got {dlogits.shape}")
        grad = np.zeros(self.n_params)
        work = np.zeros(self.work_size)
        kind, data, S, s_sh, s_pr, d, offset, correct = self.args()
        _backward_batch(kind, params, data, S, s_sh, s_pr, d, offset, correct, idx, dlogits, grad, work)
        return grad

    def _check(self, params, idx):
        params = np.ascontiguousarray(params, dtype=np.float64)
        if params.shape != (self.n_params,):
            raise ValueError(f"params must have shape ({self.n_params},), got {params.shape}")
        idx = np.ascontiguousarray(idx, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.offset.size):
            raise ValueError(f"problem indices must lie in [0, {self.offset.size})")
        return params, idx


def build_policy(config: SimConfig, problems: ProblemSet) -> Policy:
    """Initial policy of `config.model` on `problems`; shared weights drawn from `problem_seed` (paired across n)."""
    pseed = config.seed if config.problem_seed is None else config.problem_seed
    rng = np.random.default_rng([int(pseed), 0x9011C7])
    K, d = config.K, problems.d
    empty_x = np.zeros((0, 0))
    empty_u = np.zeros((0, 0, 0))
    empty_f = np.zeros(0)
    if config.model == "tabular":
        kind, S, s_sh, s_pr = TABULAR, 0, 0.0, 1.0
        data = (empty_x, empty_u, empty_f, np.zeros(3, dtype=np.int64))
        shared0 = np.zeros(0)
        work = 1
    elif config.model == "linear":
        kind, S = LINEAR, config.dim
        s_sh, s_pr = float(np.sqrt(config.share)), float(np.sqrt(1.0 - config.share))
        data = (empty_x, problems.U, empty_f, np.array([config.dim, 0, K], dtype=np.int64))
        shared0 = np.zeros(S)
        work = 1
    elif config.model in ("mlp", "interference"):
        kind = MLP
        dim, H = embedding_dim(config), config.hidden
        S = dim * H + H + H * K + K
        s_sh, s_pr = float(np.sqrt(config.share)), float(np.sqrt(1.0 - config.share))
        data = (problems.x, empty_u, empty_f, np.array([dim, H, K], dtype=np.int64))
        # W1 ~ N(0, 1/dim) keeps pre-activations at unit scale; W2 = 0 so the initial logits are exactly b_i.
        shared0 = np.zeros(S)
        shared0[: dim * H] = rng.standard_normal(dim * H) / np.sqrt(dim)
        work = 2 * H
    else:
        raise ConfigError(f"model {config.model!r} has no policy implementation yet")
    has_priv = s_pr != 0.0
    theta0 = np.concatenate([shared0, np.zeros(d * K if has_priv else 0)])
    return Policy(
        name=config.model,
        kind=kind,
        K=K,
        d=d,
        n_shared=S,
        s_sh=s_sh,
        s_pr=s_pr,
        data=data,
        offset=problems.offset,
        correct=problems.correct,
        theta0=theta0,
        work_size=work,
    )
