"""The group-std gain w_n(p): how GRPO's advantage normalisation re-weights a problem of pass rate p.

Why it matters: with 0/1 rewards and group-normalised advantages the expected update of one problem is
w_n(p) times the plain gradient of its pass rate p. If w_n depended on n only through a constant, a tuned lr
would absorb it; it does not: at large n it grows toward the extremes of p, so a larger group changes the
objective (which problems the update serves), not just the step size.

Derivation (the project's convention, sandbox/grpo.py `advantages` and `reward_std`; docs/CONTRACTS.md):
a group of n rollouts has c ~ Binomial(n, p) correct, mean m = c / n, and advantages
A_correct = (1 - m) / den, A_wrong = -m / den, with den = sigma + adv_eps under `scale_rewards=group`
(sigma = sqrt(m (1 - m)) population, or sqrt(m (1 - m) n / (n - 1)) sample, Bessel) and den = 1 under
`none`; A = 0 when sigma = 0 (all rewards agree: the group carries no signal, and eps alone would give a
1/eps scale). The surrogate J = (1/n) sum_j A_j log pi(a_j) of a softmax over answers has, on the correct
logit, dJ/dz_correct = (c A_correct - S p) / n with S = c A_correct + (n - c) A_wrong = 0 (both scales), so

    E[dJ/dz_correct | p] = E_c[ m (1 - m) / den(m) ],

while the plain gradient of p on that logit is p (1 - p). The gain is their ratio:

    w_n(p) = E_c[ m (1 - m) / den(m) ] / (p (1 - p)).

Closed cases: `none` gives E[m (1 - m)] / (p (1 - p)) = (n - 1) / n exactly; `group` with adv_eps = 0 gives
E[sqrt(m (1 - m))] / (p (1 - p)) (population std) and sqrt((n - 1) / n) times that (sample std, the default
of TRL's GRPOTrainer and verl, and the project's `adv_std=sample`). At n = 2 the sample form is 1 / sqrt(2)
= 0.707 for every p (only c = 1 has signal: E[sqrt(m (1 - m))] = 2 p (1 - p) / 2) and the population form
is 1. As n grows m -> p and both tend to w_inf(p) = 1 / sqrt(p (1 - p)): 2 at p = 1/2, 10.05 at p = 0.01.
adv_eps > 0 only lowers w: the smallest non-zero sigma is that of c = 1, about 1 / sqrt(n), so the relative
change is at most adv_eps * sqrt(n) (2.3e-3 at n = 512 with the default 1e-4).

This module is the study side's definition (studies never import the engine, tests/test_arrows.py);
tests/science/test_wgain.py checks it against the engine's exact `sandbox.theory.expected_update` and against
a Monte-Carlo average of the simulator's own advantage and logit-gradient kernels.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

SCALES = ("group", "none")
STDS = ("sample", "population")
SIGMA_ZERO = 1e-12
"""A std at or below this is zero: the group's rewards all agree (the threshold of sandbox/grpo.py)."""


def w_gain(p, n: int, scale: str = "group", std: str = "sample", eps: float = 0.0) -> np.ndarray:
    """w_n(p) by exact enumeration over c ~ Binomial(n, p) (module text); p scalar or array in (0, 1)."""
    if scale not in SCALES or std not in STDS:
        raise ValueError(f"scale must be one of {SCALES} and std one of {STDS}, got {scale!r}, {std!r}")
    if int(n) != n or n < 2 or not eps >= 0:
        raise ValueError(f"need an integer n >= 2 and eps >= 0, got n={n!r}, eps={eps!r}")
    n = int(n)
    p = np.asarray(p, dtype=np.float64)
    if np.any((p <= 0) | (p >= 1)):
        raise ValueError("w_n(p) needs 0 < p < 1 (the plain gradient p (1 - p) is 0 at the ends)")
    c = np.arange(n + 1, dtype=np.float64)
    m = c / n
    var = m * (1.0 - m)
    if scale == "none":
        per_c = var
    else:
        sigma = np.sqrt(var * (n / (n - 1.0) if std == "sample" else 1.0))
        per_c = np.where(sigma > SIGMA_ZERO, var / np.where(sigma > SIGMA_ZERO, sigma + eps, 1.0), 0.0)
    pmf = binom.pmf(c[:, None], n, p.reshape(1, -1))
    out = (per_c[:, None] * pmf).sum(axis=0) / (p.reshape(-1) * (1.0 - p.reshape(-1)))
    return out.reshape(p.shape)


def w_limit(p) -> np.ndarray:
    """w_inf(p) = 1 / sqrt(p (1 - p)): the group-std gain as n -> infinity (m -> p; any std convention)."""
    p = np.asarray(p, dtype=np.float64)
    return 1.0 / np.sqrt(p * (1.0 - p))


def saturation_n(p, frac: float = 0.9, std: str = "sample", n_max: int = 2**16) -> int:
    """Smallest n (powers of two) at which w_n(p) reaches `frac` of w_inf(p): where a larger group stops
    re-weighting a problem of pass rate p (the rule of thumb 'n ~ 1 / min(p, 1 - p)')."""
    target = frac * float(w_limit(p))
    n = 2
    while n <= n_max:
        if float(w_gain(p, n, "group", std)) >= target:
            return n
        n *= 2
    raise ValueError(f"w_n({p}) does not reach {frac} of its limit by n = {n_max}")


__all__ = ["SCALES", "STDS", "saturation_n", "w_gain", "w_limit"]
