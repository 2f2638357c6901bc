"""The `skills` policy kind: backward pass against central finite differences, its sharing knob."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox import SimConfig
from sandbox.policies import build_policy
from sandbox.problems import make_problems


def _policy(**kw):
    cfg = SimConfig(model="skills", d=20, d_val=10, bp=4, dim=6, budget=2**12, **kw)
    return cfg, build_policy(cfg, make_problems(cfg))


@pytest.mark.parametrize("share", [1.0, 0.5])
def test_skills_backward_matches_finite_differences(share):
    cfg, pol = _policy(share=share)
    rng = np.random.default_rng(3)
    theta = rng.normal(size=pol.n_params)
    idx = np.array([0, 3, 3, 25, 19, 29])  # a repeated problem and validation rows (>= d)
    dl = rng.normal(size=(idx.size, cfg.K))

    def f(t):
        return float((pol.forward(t, idx) * dl).sum())

    grad = pol.backward(theta, idx, dl)
    h = 1e-6
    fd = np.array([(f(theta + h * e) - f(theta - h * e)) / (2 * h) for e in np.eye(pol.n_params)])
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)


def test_skills_initial_logits_are_the_prior_and_share_zero_is_tabular():
    cfg, pol = _policy(share=1.0)
    z = pol.forward(pol.theta0, np.arange(30))
    expect = np.zeros((30, cfg.K))
    expect[np.arange(30), pol.correct] = pol.offset
    np.testing.assert_allclose(z, expect, atol=1e-12)
    # share = 0: the skill block gets weight 0, so a validation problem never moves whatever theta is
    cfg0, pol0 = _policy(share=0.0)
    theta = np.random.default_rng(0).normal(size=pol0.n_params)
    zv = pol0.forward(theta, np.arange(20, 30))
    np.testing.assert_allclose(zv, expect[20:], atol=1e-12)


def test_skills_conflict_a_step_for_one_problem_lowers_others():
    """Signed loadings: a gradient step that raises one problem's pass@1 lowers it for some other problems."""
    cfg, pol = _policy(share=1.0)
    z0 = pol.forward(pol.theta0, np.arange(30))
    p0 = np.exp(z0) / np.exp(z0).sum(1, keepdims=True)
    g = 0
    dl = np.zeros((1, cfg.K))
    dl[0] = -p0[g] * p0[g, pol.correct[g]]
    dl[0, pol.correct[g]] += p0[g, pol.correct[g]]  # d pass@1 / d logits
    step = 0.5 * pol.backward(pol.theta0, np.array([g]), dl)
    z1 = pol.forward(pol.theta0 + step, np.arange(30))
    p1 = np.exp(z1) / np.exp(z1).sum(1, keepdims=True)
    dp = p1[np.arange(30), pol.correct] - p0[np.arange(30), pol.correct]
    assert dp[g] > 0
    assert (dp[np.arange(30) != g] < -1e-4).sum() >= 3
