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
A new kind (e.g. the conflicting skills of `skills`) adds a branch to `_shared_forward` / `_shared_backward`
(batch level: problem indices (nb,) -> logits (nb, K); dL/dlogits (nb, K) -> gradient), a `work_size` rule
and a builder in `build_policy`; the GRPO step (sandbox/grpo.py) only calls `batch_logits` / `batch_backward`.
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
SKILLS = 3
"""Kind code of `skills`: logits = L_g Theta + c, signed skill loadings L_g (S,), Theta (S, K)."""
KIND_CODES["skills"] = SKILLS


@njit(cache=True, inline="always")
def _tanh(x):
    """tanh through one exp (about 3x faster than libm's tanh; relative error ~1e-16 / |x| near 0)."""
    e = np.exp(-2.0 * abs(x))
    t = (1.0 - e) / (1.0 + e)
    return t if x >= 0.0 else -t


# --- vectorisable elementwise math for the shared-parameter paths (benchmarks/sim_throughput.py times them).
# error_model="numpy" drops Numba's zero-division checks, whose branches block LLVM's loop vectoriser;
# "contract" allows fused multiply-adds (rounding only). No nnan/ninf flags: non-finite values still propagate
# to the divergence checks.
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_ROUND = 6755399441055744.0  # 1.5 * 2^52: x + _ROUND - _ROUND rounds x to the nearest integer
_ROUND_BITS = 0x4338000000000000  # bit pattern of _ROUND


@njit(cache=True, inline="always", error_model="numpy", fastmath={"contract"})
def exp_nonpos(y):
    """exp(y) for y in [-708, 0] without a libm call, so loops over it vectorise (SIMD).

    y = k ln2 + r with |r| <= ln2/2, exp(r) by its degree-13 Taylor polynomial (remainder < 2e-16 relative),
    2^k built from exponent bits. Max relative error against np.exp on a 1e6-point grid of [-708, 0]: 2.2e-16
    (1 ulp). Callers clamp y >= -708 (below it the result would be subnormal and 2^k would underflow).
    """
    kd = y * _LOG2E + _ROUND
    k = kd - _ROUND
    r = (y - k * _LN2_HI) - k * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    two_k = np.int64((np.float64(kd).view(np.int64) - _ROUND_BITS + 1023) << 52).view(np.float64)
    return p * two_k


@njit(cache=True, inline="always", error_model="numpy", fastmath={"contract"})
def tanh_fast(x):
    """tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|) through `exp_nonpos` (vectorisable).

    Same formula as `_tanh`; max absolute error against np.tanh 2.2e-16 over [-30, 30] (tests/sandbox/
    test_sim_fastmath.py), relative error ~1e-16 / |x| near 0; tanh(+-inf) = +-1, NaN stays NaN.
    """
    y = -2.0 * abs(x)
    y = y if y > -708.0 else -708.0
    e = exp_nonpos(y)
    t = (1.0 - e) / (1.0 + e)
    t = t if x >= 0.0 else -t
    return t if x == x else x


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _bias_tanh(A, bias):
    """A[b, h] = tanh(A[b, h] + bias[h]) in place (a SIMD loop: error_model numpy, `tanh_fast`)."""
    for b in range(A.shape[0]):
        for h in range(A.shape[1]):
            A[b, h] = tanh_fast(A[b, h] + bias[h])


@njit(cache=True)
def _mlp_forward(theta, X, idx, dim, H, Z, Xb, Hb):
    """mlp logits W2^T tanh(W1^T x_g + c1) + c2 of problems idx into Z (nb, K).

    Keeps the gathered embeddings Xb (nb, dim) and activations Hb (nb, H) for `_mlp_backward`. The products
    use BLAS (np.dot); tanh is the vectorised `tanh_fast` (libm tanh/exp do not vectorise).
    """
    nb = idx.shape[0]
    K = Z.shape[1]
    o_c1 = dim * H
    o_w2 = o_c1 + H
    o_c2 = o_w2 + H * K
    for b in range(nb):
        g = idx[b]
        for j in range(dim):
            Xb[b, j] = X[g, j]
    np.dot(Xb, theta[:o_c1].reshape((dim, H)), Hb)
    _bias_tanh(Hb, theta[o_c1:o_w2])
    np.dot(Hb, theta[o_w2:o_c2].reshape((H, K)), Z)
    for b in range(nb):
        for k in range(K):
            Z[b, k] += theta[o_c2 + k]


@njit(cache=True)
def _mlp_backward(theta, dim, H, GZ, grad, Xb, Hb, Db, Gc):
    """grad += VJP of `_mlp_forward` from its stored Xb, Hb; Db (nb, H) and Gc (nb, K) are scratch.

    Rows of GZ that are exactly zero (zero-variance groups) add exactly nothing: the nonzero rows are packed
    to the front (Xb, Hb rows moved in place) and only those enter the products.
    """
    nb = GZ.shape[0]
    K = GZ.shape[1]
    o_c1 = dim * H
    o_w2 = o_c1 + H
    o_c2 = o_w2 + H * K
    m = 0  # rows kept, packed to the front once a zero row has been seen
    for b in range(nb):
        nz = False
        for k in range(K):
            if GZ[b, k] != 0.0:
                nz = True
        if nz:
            if m != b:
                for j in range(dim):
                    Xb[m, j] = Xb[b, j]
                for h in range(H):
                    Hb[m, h] = Hb[b, h]
            m += 1
    if m == 0:
        return
    Ga = GZ
    if m < nb:
        Ga = Gc[:m]
        i = 0
        for b in range(nb):
            nz = False
            for k in range(K):
                if GZ[b, k] != 0.0:
                    nz = True
            if nz:
                for k in range(K):
                    Ga[i, k] = GZ[b, k]
                i += 1
    Xa = Xb[:m]
    Ha = Hb[:m]
    Da = Db[:m]
    gW2 = np.dot(Ha.T, Ga)  # (H, K)
    np.dot(Ga, theta[o_w2:o_c2].reshape((H, K)).T, Da)  # (m, H) back-propagated into the hidden layer
    for b in range(m):
        for h in range(H):
            a = Ha[b, h]
            Da[b, h] *= 1.0 - a * a
    gW1 = np.dot(Xa.T, Da)  # (dim, H)
    for j in range(dim):
        for h in range(H):
            grad[j * H + h] += gW1[j, h]
    for h in range(H):
        s = 0.0
        for b in range(m):
            s += Da[b, h]
        grad[o_c1 + h] += s
        for k in range(K):
            grad[o_w2 + h * K + k] += gW2[h, k]
    for k in range(K):
        s = 0.0
        for b in range(m):
            s += Ga[b, k]
        grad[o_c2 + k] += s


@njit(cache=True)
def work_size(kind, dims, K, nb):
    """Length of the flat scratch buffer `batch_logits` / `batch_backward` need for a batch of nb problems."""
    if kind == MLP:
        return nb * (dims[0] + 2 * dims[1] + K)
    if kind == SKILLS:
        return nb * dims[0]
    return 1


@njit(cache=True)
def _shared_forward(kind, theta, data, idx, Z, work):
    """Shared logits f(theta; g) of the problems idx (nb,) into Z (nb, K).

    work: flat scratch (see `work_size`); for mlp it keeps the gathered embeddings (nb, dim) and hidden
    activations (nb, H) that `_shared_backward` of the same idx reuses. Matrix products use np.dot (BLAS).
    """
    X, U, F, dims = data
    nb = idx.shape[0]
    K = Z.shape[1]
    if kind == LINEAR:
        dim = U.shape[2]
        for b in range(nb):
            g = idx[b]
            for k in range(K):
                s = 0.0
                for j in range(dim):
                    s += U[g, k, j] * theta[j]
                Z[b, k] = s
    elif kind == MLP:
        dim = dims[0]
        H = dims[1]
        Xb = work[: nb * dim].reshape((nb, dim))
        Hb = work[nb * dim: nb * (dim + H)].reshape((nb, H))
        _mlp_forward(theta, X, idx, dim, H, Z, Xb, Hb)
    elif kind == SKILLS:
        # z_g = L_g Theta + c: gathered loadings Lb (nb, S) in work, Theta (S, K) row-major, then c (K,)
        ns = dims[0]
        o_c = ns * K
        Lb = work[: nb * ns].reshape((nb, ns))
        for b in range(nb):
            g = idx[b]
            for j in range(ns):
                Lb[b, j] = X[g, j]
        np.dot(Lb, theta[:o_c].reshape((ns, K)), Z)
        for b in range(nb):
            for k in range(K):
                Z[b, k] += theta[o_c + k]
    else:
        for b in range(nb):
            for k in range(K):
                Z[b, k] = 0.0


@njit(cache=True)
def _shared_backward(kind, theta, data, idx, GZ, grad, work):
    """grad (S,) += sum_b (df(theta; idx[b]) / d theta)^T GZ[b]; work holds the forward pass of idx."""
    X, U, F, dims = data
    nb = idx.shape[0]
    K = GZ.shape[1]
    if kind == LINEAR:
        dim = U.shape[2]
        for b in range(nb):
            g = idx[b]
            for k in range(K):
                gk = GZ[b, k]
                if gk != 0.0:
                    for j in range(dim):
                        grad[j] += gk * U[g, k, j]
    elif kind == MLP:
        dim = dims[0]
        H = dims[1]
        Xb = work[: nb * dim].reshape((nb, dim))
        Hb = work[nb * dim: nb * (dim + H)].reshape((nb, H))
        Db = work[nb * (dim + H): nb * (dim + 2 * H)].reshape((nb, H))
        Gc = work[nb * (dim + 2 * H): nb * (dim + 2 * H + K)].reshape((nb, K))
        _mlp_backward(theta, dim, H, GZ, grad, Xb, Hb, Db, Gc)
    elif kind == SKILLS:
        ns = dims[0]
        o_c = ns * K
        Lb = work[: nb * ns].reshape((nb, ns))
        gT = np.dot(Lb.T, GZ)  # (S, K): each skill collects the signed pushes of every problem loading on it
        for j in range(ns):
            for k in range(K):
                grad[j * K + k] += gT[j, k]
        for k in range(K):
            s = 0.0
            for b in range(nb):
                s += GZ[b, k]
            grad[o_c + k] += s


@njit(cache=True)
def batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx, Z, work):
    """Full logits Z (nb, K) of problems idx (module docstring formula). False if any is non-finite."""
    nb = idx.shape[0]
    K = Z.shape[1]
    if S > 0 and s_sh != 0.0:
        _shared_forward(kind, theta, data, idx, Z, work)
        if s_sh != 1.0:
            for b in range(nb):
                for k in range(K):
                    Z[b, k] *= s_sh
    else:
        for b in range(nb):
            for k in range(K):
                Z[b, k] = 0.0
    ok = True
    for b in range(nb):
        g = idx[b]
        Z[b, correct[g]] += offset[g]
        if s_pr != 0.0 and g < d:
            base = S + g * K
            for k in range(K):
                Z[b, k] += s_pr * theta[base + k]
        for k in range(K):
            if not np.isfinite(Z[b, k]):
                ok = False
    return ok


@njit(cache=True)
def batch_backward(kind, theta, data, S, s_sh, s_pr, d, idx, DZ, grad_shared, pgrad, work):
    """Backward of `batch_logits` for the same idx: grad_shared (S,) += shared part; pgrad (nb, K) = private.

    pgrad[b] is the gradient of the private block of problem idx[b] (zero for validation problems).
    """
    nb = idx.shape[0]
    K = DZ.shape[1]
    if S > 0 and s_sh != 0.0:
        if s_sh != 1.0:
            GZ = np.empty((nb, K))  # DZ * s_sh as a loop: an array expression is a compile of its own
            for b in range(nb):
                for k in range(K):
                    GZ[b, k] = DZ[b, k] * s_sh
            _shared_backward(kind, theta, data, idx, GZ, grad_shared, work)
        else:
            _shared_backward(kind, theta, data, idx, DZ, grad_shared, work)
    for b in range(nb):
        priv = s_pr != 0.0 and idx[b] < d
        for k in range(K):
            pgrad[b, k] = s_pr * DZ[b, k] if priv else 0.0


@njit(cache=True)
def softmax_row(z, logp, pi):
    """Stable log-softmax and softmax of one row z (K,) into logp and pi (one exp per entry)."""
    K = z.shape[0]
    mx = z[0]
    for k in range(1, K):
        if z[k] > mx:
            mx = z[k]
    s = 0.0
    for k in range(K):
        e = np.exp(z[k] - mx)
        pi[k] = e
        s += e
    lse = mx + np.log(s)
    inv = 1.0 / s
    for k in range(K):
        pi[k] *= inv
        logp[k] = z[k] - lse


@njit(cache=True)
def _forward_all(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx, out, work, chunk):
    for lo in range(0, idx.shape[0], chunk):
        hi = min(lo + chunk, idx.shape[0])
        batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx[lo:hi], out[lo:hi], work)


@njit(cache=True)
def _backward_all(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx, dz, grad, work):
    nb = idx.shape[0]
    K = dz.shape[1]
    Z = np.empty((nb, K))
    pg = np.empty((nb, K))
    batch_logits(kind, theta, data, S, s_sh, s_pr, d, offset, correct, idx, Z, work)
    batch_backward(kind, theta, data, S, s_sh, s_pr, d, idx, dz, grad[:S], pg, work)
    for b in range(nb):
        if idx[b] < d and s_pr != 0.0:
            for k in range(K):
                grad[S + idx[b] * K + k] += pg[b, k]


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
        chunk = max(1, min(idx.size, 256))
        work = np.zeros(work_size(self.kind, self.data[3], self.K, chunk))
        kind, data, S, s_sh, s_pr, d, offset, correct = self.args()
        _forward_all(kind, params, data, S, s_sh, s_pr, d, offset, correct, idx, out, work, chunk)
        return out

    def backward(self, params: np.ndarray, idx: np.ndarray, dlogits: np.ndarray) -> np.ndarray:
        """Gradient over the flat parameters of sum_b dlogits[b] . logits(idx[b]) (a VJP)."""
        params, idx = self._check(params, idx)
        dlogits = np.ascontiguousarray(dlogits, dtype=np.float64)
        if dlogits.shape != (idx.size, self.K):
            raise ValueError(f"dlogits must have shape {(idx.size, self.K)}, got {dlogits.shape}")
        grad = np.zeros(self.n_params)
        work = np.zeros(work_size(self.kind, self.data[3], self.K, max(1, idx.size)))
        kind, data, S, s_sh, s_pr, d, offset, correct = self.args()
        _backward_all(kind, params, data, S, s_sh, s_pr, d, offset, correct, idx, dlogits, grad, work)
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
    """Initial policy of `config.model` on `problems`; shared weights from `problem_seed` (paired over n)."""
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
    elif config.model == "linear":
        kind, S = LINEAR, config.dim
        s_sh, s_pr = float(np.sqrt(config.share)), float(np.sqrt(1.0 - config.share))
        data = (empty_x, problems.U, empty_f, np.array([config.dim, 0, K], dtype=np.int64))
        shared0 = np.zeros(S)
    elif config.model in ("mlp", "interference"):
        kind = MLP
        dim, H = embedding_dim(config), config.hidden
        S = dim * H + H + H * K + K
        s_sh, s_pr = float(np.sqrt(config.share)), float(np.sqrt(1.0 - config.share))
        data = (problems.x, empty_u, empty_f, np.array([dim, H, K], dtype=np.int64))
        # W1 ~ N(0, 1/dim) keeps pre-activations at unit scale; W2 = 0 so the initial logits are exactly b_i.
        shared0 = np.zeros(S)
        shared0[: dim * H] = rng.standard_normal(dim * H) / np.sqrt(dim)
    elif config.model == "skills":
        # S = dim skills; problem g loads on every skill with a signed weight L_g = x_g / sqrt(S)
        # (x_g ~ N(0, I_S) from problems.py), so raising a skill for problems that load on it positively
        # lowers it for the problems that load negatively. The correct answer is a nonlinear (tanh teacher)
        # function of x_g, so a linear skill model cannot satisfy every problem at once: limited capacity
        # means conflict.
        # Knobs: `dim` (number of skills, capacity) and `share` (0 = tabular, 1 = only skills).
        kind, S = SKILLS, config.dim * K + K
        s_sh, s_pr = float(np.sqrt(config.share)), float(np.sqrt(1.0 - config.share))
        loads = np.ascontiguousarray(problems.x / np.sqrt(config.dim))
        data = (loads, empty_u, empty_f, np.array([config.dim, 0, K], dtype=np.int64))
        shared0 = np.zeros(S)  # Theta = 0, c = 0: the initial logits are exactly b_g
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
    )
