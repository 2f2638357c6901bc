"""Simulated problem sets with the paper's difficulty presets (docs/PAPER.md "Healthy recipe", docs/DESIGN.md
datasets).

Every problem has K candidate answers, exactly one correct, and an initial pass@1 p_i set by a prior offset
b_i on the correct logit of the initial policy. Problems are selected the way the paper selects them: a broad
pool of candidates is drawn, avg@16 (16 sampled rollouts under the initial policy) is *measured*, and the
candidates whose measured avg@16 falls in the preset's range are kept. True pass rates therefore straddle the
range edges, as they do for the paper's Easy / Hard splits. Everything is drawn from one numpy Generator
seeded with `problem_seed`, so runs with different n see identical problems (pairing across n).

Heavy-tailed prior (`prior = "zipf"`, docs/PAPER.md finding 2): the base model is a Zipf(a)
distribution over the K answers (mass of rank r proportional to r^-a) and the correct answer sits at rank
`correct_rank`, or at a rank drawn log-uniformly from 1..K per candidate (equal odds per decade of rank, so
with K = 10^3-10^4 most problems have their correct answer deep in the tail, p0 ~ 1e-4..1e-2); its initial
pass@1 is that rank's mass, p0 = r^-a / H_K(a). The candidates then pass the same measured-avg@16 filter
(skipped for a fixed rank). Only the correct answer's mass is placed: the policy kernel (sandbox/policies.py
`batch_logits`) offsets the correct logit alone, so the other K - 1 answers share 1 - p0 equally, not in a
Zipf shape; `zipf_logits` gives the full distribution the knob describes, for a kernel that takes per-answer
offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sandbox.config import ConfigError, SimConfig

# Ranges of measured avg@16 (inclusive). xhard is "0 correct of 128 samples" (docs/PAPER.md: pass@128 = 0).
RANGES: dict[str, tuple[float, float]] = {
    "easy": (0.3, 0.6),
    "hard": (0.0, 0.0625),
    "veasy": (0.6, 0.9),
}
MIXES: dict[str, tuple[tuple[str, float], ...]] = {
    "easy": (("easy", 1.0),),
    "hard": (("hard", 1.0),),
    "xhard": (("xhard", 1.0),),
    "veasy": (("veasy", 1.0),),
    "dual": (("hard", 0.5), ("easy", 0.5)),
    "tri": (("hard", 0.5), ("easy", 0.25), ("veasy", 0.25)),
}
POOL_LOGIT_RANGE = (float(np.log(1e-4 / (1 - 1e-4))), float(np.log(0.995 / 0.005)))
"""The broad candidate pool: true pass@1 logit-uniform between 1e-4 and 0.995 (a base model that solves some
problems almost never and some almost always)."""
MEASURE_SAMPLES = 16
XHARD_SAMPLES = 128
INTERFERENCE_DIM = 16
"""Embedding dimension of the `interference` preset (x_i ~ N(0, I_16))."""
TEACHER_HIDDEN = 64
"""tanh units of the random teacher whose argmax defines the correct answer of embedded problems."""
LINEAR_SHARED_WEIGHT = 0.2
"""Weight of the shared direction on the correct answer in the `linear` features."""
CORRECT_LEN_FACTOR = 1.5
"""Response-length model: correct answers are this much longer than wrong ones on average, so the mean length
drifts upward as training raises pass@1 (as reasoning length grows in RL runs)."""
LEN_SIGMA = 0.25
"""Log-normal spread of per-answer response lengths."""


@dataclass(frozen=True)
class ProblemSet:
    """Train problems are rows 0..d-1, validation problems rows d..d+d_val-1 of every array.

    Shapes: G = d + d_val; `correct` (G,), `p0` (G,) true initial pass@1, `avg16` (G,) the measured avg@16
    that selected the problem, `offset` (G,) prior offset b_i on the correct logit, `x` (G, dim_x) embeddings,
    `U` (G, K, dim) linear features (empty unless model == linear), `lens` (G, K) tokens per answer.
    """

    d: int
    d_val: int
    K: int
    correct: np.ndarray
    p0: np.ndarray
    avg16: np.ndarray
    offset: np.ndarray
    source: np.ndarray
    x: np.ndarray
    U: np.ndarray
    lens: np.ndarray
    rank: np.ndarray | None = None
    """(G,) rank of the correct answer under the zipf prior (1 = the mode); None under the uniform prior."""


def offset_for_pass_rate(p: np.ndarray, K: int) -> np.ndarray:
    """Prior offset b on the correct logit (others 0) so that softmax gives the correct answer pass@1 p."""
    p = np.asarray(p, dtype=np.float64)
    return np.log(p * (K - 1) / (1.0 - p))


def zipf_masses(K: int, a: float) -> np.ndarray:
    """(K,) Zipf(a) masses of ranks 1..K: r^-a / H_K(a) (sums to 1, log-log rank-frequency slope -a)."""
    w = np.arange(1, K + 1, dtype=np.float64) ** -float(a)
    return w / w.sum()


def draw_ranks(rng: np.random.Generator, K: int, size: int) -> np.ndarray:
    """Ranks in 1..K, log-uniform: floor(exp(u)), u ~ U(0, ln(K + 1)), so P(r) = ln((r + 1) / r) / ln(K + 1)
    (equal odds per decade of rank)."""
    r = np.floor(np.exp(rng.uniform(0.0, np.log(K + 1.0), size=size))).astype(np.int64)
    return np.clip(r, 1, K)


def zipf_logits(rank: np.ndarray, correct: np.ndarray, K: int, a: float,
                rng: np.random.Generator) -> np.ndarray:
    """(G, K) log-probabilities of the full Zipf prior: the correct answer at its rank, the wrong answers on
    the other ranks in a random order per problem. Reference for tests and for a kernel with per-answer
    offsets; the simulator runs the collapsed form (correct mass exact, wrong mass uniform)."""
    logm = np.log(zipf_masses(K, a))
    out = np.empty((rank.size, K))
    for g in range(rank.size):
        others = np.delete(np.arange(K), rank[g] - 1)
        wrong = np.delete(np.arange(K), correct[g])
        out[g, wrong] = logm[others[rng.permutation(K - 1)]]
        out[g, correct[g]] = logm[rank[g] - 1]
    return out


def _zipf_check(config: SimConfig, preset: str) -> None:
    """Refuse a zipf prior whose pool cannot reach the preset's avg@16 range (the filter would never end or
    keep only measurement-noise outliers)."""
    m = zipf_masses(config.K, config.zipf_a)
    top = m[config.correct_rank - 1] if config.correct_rank else m[0]
    if preset in RANGES and not config.correct_rank and top < RANGES[preset][0]:
        raise ConfigError(f"prior zipf (a = {config.zipf_a}, K = {config.K}) puts at most {top:.3g} on the "
                          f"correct answer, below dataset {preset}'s avg@16 floor {RANGES[preset][0]}; "
                          "raise zipf_a or lower K")


def _select(rng: np.random.Generator, preset: str, count: int,
            config: SimConfig | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw candidates from the broad pool until `count` pass the measured-difficulty filter of `preset`.

    Returns true pass@1, measured avg@16 (avg@128 for xhard) and the zipf rank (0 under the uniform pool)."""
    kept_p: list[np.ndarray] = []
    kept_m: list[np.ndarray] = []
    kept_r: list[np.ndarray] = []
    zipf = config is not None and config.prior == "zipf"
    masses = zipf_masses(config.K, config.zipf_a) if zipf else None
    have = 0
    while have < count:
        chunk = max(4 * count, 1024)
        if zipf:
            r = (np.full(chunk, config.correct_rank, dtype=np.int64) if config.correct_rank
                 else draw_ranks(rng, config.K, chunk))
            p = masses[r - 1]
        else:
            u = rng.uniform(POOL_LOGIT_RANGE[0], POOL_LOGIT_RANGE[1], size=chunk)
            p = 1.0 / (1.0 + np.exp(-u))
            r = np.zeros(chunk, dtype=np.int64)
        if zipf and config.correct_rank:
            measured = rng.binomial(XHARD_SAMPLES if preset == "xhard" else MEASURE_SAMPLES, p)
            measured = measured / (XHARD_SAMPLES if preset == "xhard" else MEASURE_SAMPLES)
            keep = np.ones(chunk, dtype=bool)
        elif preset == "xhard":
            measured = rng.binomial(XHARD_SAMPLES, p) / XHARD_SAMPLES
            keep = measured == 0.0
        else:
            lo, hi = RANGES[preset]
            measured = rng.binomial(MEASURE_SAMPLES, p) / MEASURE_SAMPLES
            keep = (measured >= lo - 1e-12) & (measured <= hi + 1e-12)
        kept_p.append(p[keep])
        kept_m.append(measured[keep])
        kept_r.append(r[keep])
        have += int(keep.sum())
    return np.concatenate(kept_p)[:count], np.concatenate(kept_m)[:count], np.concatenate(kept_r)[:count]


def _split_counts(total: int, mix: tuple[tuple[str, float], ...]) -> list[int]:
    counts = [int(round(total * w)) for _, w in mix]
    counts[0] += total - sum(counts)
    return counts


def embedding_dim(config: SimConfig) -> int:
    """Embedding dimension of the problems: 16 for the `interference` preset, `dim` otherwise."""
    return INTERFERENCE_DIM if config.model == "interference" else config.dim


def make_problems(config: SimConfig) -> ProblemSet:
    """Build the train and validation sets of `config.dataset` from `problem_seed` (or `seed`)."""
    pseed = config.seed if config.problem_seed is None else config.problem_seed
    rng = np.random.default_rng([int(pseed), 0x150C0])
    K = config.K
    parts_p, parts_m, parts_s, parts_r = [], [], [], []
    mix = MIXES[config.dataset]
    if config.prior == "zipf":
        for preset, _ in mix:
            _zipf_check(config, preset)
    for size in (config.d, config.d_val):
        ps, ms, ss, rs = [], [], [], []
        for (preset, _), cnt in zip(mix, _split_counts(size, mix), strict=True):
            if cnt == 0:
                continue
            p, m, r = _select(rng, preset, cnt, config)
            ps.append(p)
            ms.append(m)
            ss.append(np.full(cnt, preset))
            rs.append(r)
        order = rng.permutation(size)
        parts_p.append(np.concatenate(ps)[order])
        parts_m.append(np.concatenate(ms)[order])
        parts_s.append(np.concatenate(ss)[order])
        parts_r.append(np.concatenate(rs)[order])
    p0 = np.concatenate(parts_p)
    avg16 = np.concatenate(parts_m)
    source = np.concatenate(parts_s)
    G = p0.size

    # Embeddings and a random teacher network: the correct answer is a smooth function of the embedding, so a
    # shared policy can generalise to held-out problems.
    dim_x = embedding_dim(config)
    x = rng.standard_normal((G, dim_x))
    v1 = rng.standard_normal((dim_x, TEACHER_HIDDEN)) / np.sqrt(dim_x)
    v2 = rng.standard_normal((TEACHER_HIDDEN, K))
    correct = np.argmax(np.tanh(x @ v1) @ v2, axis=1).astype(np.int64)

    if config.model == "linear":
        # U_i = G_i / sqrt(dim) + 0.2 * e_{c_i} u^T: random problem-specific features plus one shared unit
        # direction u on the correct answer. Correct answers uniform at random.
        correct = rng.integers(0, K, size=G).astype(np.int64)
        u = rng.standard_normal(config.dim)
        u /= np.linalg.norm(u)
        U = rng.standard_normal((G, K, config.dim)) / np.sqrt(config.dim)
        U[np.arange(G), correct, :] += LINEAR_SHARED_WEIGHT * u
    else:
        U = np.zeros((0, 0, 0))

    lens = np.zeros((G, K))
    if config.response_len > 0:
        lens = config.response_len * np.exp(LEN_SIGMA * rng.standard_normal((G, K)) - 0.5 * LEN_SIGMA**2)
        lens[np.arange(G), correct] *= CORRECT_LEN_FACTOR

    return ProblemSet(
        d=config.d,
        d_val=config.d_val,
        K=K,
        correct=correct,
        p0=p0,
        avg16=avg16,
        offset=offset_for_pass_rate(p0, K),
        source=source,
        x=np.ascontiguousarray(x),
        U=np.ascontiguousarray(U),
        lens=lens,
        rank=np.concatenate(parts_r) if config.prior == "zipf" else None,
    )
