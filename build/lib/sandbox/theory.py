"""Closed forms for one tabular softmax problem (docs/PAPER.md "Theory"; no numba needed).

Model: one problem, K answers, one correct with probability p under a softmax policy. GRPO draws n rollouts,
rewards are 0/1, advantages are group-normalised as in sandbox/grpo.py (sample std + eps by default).
`expected_update` is exact: it enumerates the binomial number c of correct answers. It assumes the K-1 wrong
answers are symmetric (equal probability (1-p)/(K-1) each), so that given c the wrong counts have mean
(n-c)/(K-1) each; the expected update is linear in the counts, so no finer enumeration is needed under that
assumption.
"""

from __future__ import annotations

import math

import numpy as np


def p_signal(p, n):
    """P(a group of n rollouts has non-zero reward variance) = 1 - p^n - (1-p)^n."""
    p = np.asarray(p, dtype=np.float64)
    return 1.0 - p**n - (1.0 - p) ** n


def best_at_k(p, k):
    """pass@k (at least one of k samples correct) from pass@1: 1 - (1-p)^k."""
    return 1.0 - (1.0 - np.asarray(p, dtype=np.float64)) ** k


def worst_at_k(p, k):
    """All k samples correct: p^k."""
    return np.asarray(p, dtype=np.float64) ** k


def expected_update(p: float, n: int, K: int, scale_rewards: str = "group", adv_std: str = "sample",
                    adv_eps: float = 1e-4) -> tuple[float, float]:
    """Expected ascent direction on the logits, (g_correct, g_each_wrong), of one GRPO step.

    Per-group surrogate J = (1/n) sum_j A_j log pi(a_j), A_j = (r_j - mean) / (std + adv_eps) (group, std
    the sample std of the n rewards, or the population std: SimConfig.adv_std; A = 0 when std = 0) or
    r_j - mean (none). With c correct: g_correct = (c A_c - S p) / n and g_wrong = ((n-c)/(K-1) A_w
    - S (1-p)/(K-1)) / n, with S = c A_c + (n-c) A_w (= 0 under group normalisation), averaged over
    c ~ Binomial(n, p). Known cases: scale "group" with adv_eps = 0 gives g_correct = E[sqrt(m (1-m))] with
    m = c/n (population std) or sqrt((n-1)/n) times that (sample std); "none" gives (1 - 1/n) p (1-p), i.e.
    (1 - 1/n) times the true gradient of pass@1.
    """
    if scale_rewards not in ("group", "none"):
        raise ValueError(f"scale_rewards must be 'group' or 'none' for one problem, got {scale_rewards!r}")
    if adv_std not in ("sample", "population") or not adv_eps >= 0:
        raise ValueError(f"adv_std must be 'sample' or 'population' and adv_eps >= 0, got {adv_std!r}, "
                         f"{adv_eps}")
    if not 0.0 <= p <= 1.0 or n < 2 or K < 2:
        raise ValueError(f"need 0 <= p <= 1, n >= 2, K >= 2; got p={p}, n={n}, K={K}")
    bessel = n / (n - 1.0) if adv_std == "sample" else 1.0
    gc = gw = 0.0
    for c in range(n + 1):
        w = math.comb(n, c) * p**c * (1.0 - p) ** (n - c)
        m = c / n
        if scale_rewards == "group":
            std = math.sqrt(m * (1.0 - m) * bessel)
            if std == 0.0:
                continue
            a_c, a_w = (1.0 - m) / (std + adv_eps), -m / (std + adv_eps)
        else:
            a_c, a_w = 1.0 - m, -m
        s = c * a_c + (n - c) * a_w
        gc += w * (c * a_c - s * p) / n
        gw += w * ((n - c) / (K - 1) * a_w - s * (1.0 - p) / (K - 1)) / n
    return gc, gw


def pass1_gradient(p: float, K: int) -> tuple[float, float]:
    """Gradient of pass@1 w.r.t. (correct logit, each wrong logit): (p(1-p), -p(1-p)/(K-1))."""
    return p * (1.0 - p), -p * (1.0 - p) / (K - 1)


def predicted_suboptimality(t, n, A: float, B: float):
    """E[1 - pass@1 after t steps with n rollouts] ~ A / (n t) + B / t (docs/PAPER.md theory; Mei et al.
    2024)."""
    t = np.asarray(t, dtype=np.float64)
    return A / (n * t) + B / t


def suboptimality_at_compute(C, n, A: float, B: float):
    """The prediction at fixed compute C = n t: A / C + B n / C, increasing in n (tabular favours small n)."""
    C = np.asarray(C, dtype=np.float64)
    return A / C + B * n / C


def fit_suboptimality(t, n, subopt) -> tuple[float, float]:
    """Least-squares (A, B) of subopt ~ A / (n t) + B / t over observations (t, n, subopt)."""
    t = np.asarray(t, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    X = np.stack([1.0 / (n * t), 1.0 / t], axis=1)
    coef, *_ = np.linalg.lstsq(X, np.asarray(subopt, dtype=np.float64), rcond=None)
    return float(coef[0]), float(coef[1])
