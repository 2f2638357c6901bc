"""Theory (docs/PAPER.md Section 5.1): closed forms, the 1/t rate of one tabular problem, small n wins at
n*t."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox import SimConfig, run, theory
from sandbox.rng import binomial_samples


def test_closed_forms():
    assert theory.p_signal(0.5, 2) == pytest.approx(0.5)
    assert theory.p_signal(0.1, 8) == pytest.approx(1 - 0.1**8 - 0.9**8)
    assert theory.best_at_k(0.2, 4) == pytest.approx(1 - 0.8**4)
    assert theory.worst_at_k(0.2, 4) == pytest.approx(0.2**4)
    # group-normalised correct-logit update is E[sqrt(m(1-m))]; the mean-baseline one is (1-1/n) p(1-p)
    gc, _ = theory.expected_update(0.3, 4, 8, "none")
    assert gc == pytest.approx(0.75 * 0.3 * 0.7)
    A, B = theory.fit_suboptimality([10, 100, 10, 100], [2, 2, 8, 8],
                                    theory.predicted_suboptimality(np.array([10, 100, 10, 100]),
                                                                   np.array([2, 2, 8, 8]), 3.0, 0.5))
    assert (A, B) == pytest.approx((3.0, 0.5))
    at_c = theory.suboptimality_at_compute
    assert at_c(1000, 2, 3.0, 0.5) < at_c(1000, 8, 3.0, 0.5)


@pytest.mark.parametrize("n,p", [(3, 0.2), (40, 0.1), (256, 0.45), (5000, 0.93)])
def test_kernel_binomial_sampler_is_exact(n, p):
    """The kernel's binomial (Bernoulli / BINV / BTRS) against the exact pmf: mean, variance, chi-square."""
    from scipy import stats

    x = binomial_samples(11, n, p, 100_000)
    assert abs(x.mean() - n * p) < 5 * np.sqrt(n * p * (1 - p) / x.size)
    assert x.var() == pytest.approx(n * p * (1 - p), rel=0.03)
    obs = np.bincount(x, minlength=n + 1).astype(float)
    exp = stats.binom.pmf(np.arange(n + 1), n, p) * x.size
    keep = exp > 5
    chi = stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum())
    assert chi.pvalue > 1e-4


def _one_problem(n, steps, seeds, lr=0.5):
    """Mean suboptimality 1 - pass@1 of one tabular problem under SGD, over seeds, at log-spaced steps."""
    subs = []
    for s in range(seeds):
        cfg = SimConfig(model="tabular", dataset="easy", d=1, d_val=1, bp=1, n=n, budget=n * steps, seed=s,
                        problem_seed=0, optimizer="sgd", lr=lr, n_evals=24, snapshots=False)
        r = run(cfg)
        subs.append(1 - r.table["train_mean"])
    return r.table["m"], np.mean(subs, axis=0)


def test_one_problem_suboptimality_falls_like_one_over_t():
    m, sub = _one_problem(n=4, steps=20_000, seeds=48)
    late = m >= 200
    slope = np.polyfit(np.log(m[late]), np.log(sub[late]), 1)[0]
    assert -1.2 < slope < -0.8, slope


def test_at_fixed_compute_smaller_n_ends_closer_to_optimal():
    C = 2**14
    finals = {}
    for n in (2, 8, 32):
        _, sub = _one_problem(n=n, steps=C // n, seeds=48)
        finals[n] = sub[-1]
    assert finals[2] < finals[8] < finals[32], finals
