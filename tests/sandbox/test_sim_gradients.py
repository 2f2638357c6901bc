"""Gradient correctness: exact enumeration, finite differences, the (1 - 1/n) factor."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import compositions

from sandbox import SimConfig, theory
from sandbox.grpo import CISPO, PG, PPO, SCALE_GROUP, SCALE_NONE, advantages, logit_gradient, reward_std
from sandbox.policies import build_policy
from sandbox.problems import make_problems
from sandbox.rng import multinomial, new_state


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def _group_grad(counts, n, corr, pi, scale, objective=PG, logp_old=None, logp=None, clip=0.2, kl=0.0, ent=0.0,
                logp0=None, sample=True, eps=1e-4):
    """The kernel's per-group ascent direction dJ/dz for given counts (no 1/groups average); advantages with
    the sample std + eps (SimConfig defaults) unless sample=False (population std)."""
    c = counts[corr]
    m = c / n
    a_c, a_w = advantages(c, n, m, reward_std(m, n, sample), scale, 0.0, eps)
    logp = np.log(pi) if logp is None else logp
    logp_old = logp if logp_old is None else logp_old
    logp0 = logp if logp0 is None else logp0
    out = np.empty(pi.size)
    logit_gradient(counts, n, corr, a_c, a_w, pi, logp, logp_old, logp0, objective, clip, kl, ent, out)
    return out


def _enumerate(pi, n, corr, scale, sample=True, eps=1e-4):
    """E[dJ/dz] by exact enumeration over all multinomial outcomes."""
    tot = np.zeros(pi.size)
    for counts, coef in compositions(n, pi.size):
        prob = coef * np.prod(pi**counts)
        tot += prob * _group_grad(counts, n, corr, pi, scale, sample=sample, eps=eps)
    return tot


@pytest.mark.parametrize("n,K,p", [(2, 3, 0.3), (4, 3, 0.6), (5, 4, 0.1), (8, 2, 0.45)])
@pytest.mark.parametrize("scale", ["group", "none"])
@pytest.mark.parametrize("adv_std,eps", [("sample", 1e-4), ("population", 0.0), ("population", 1e-2)])
def test_enumeration_matches_theory(n, K, p, scale, adv_std, eps):
    pi = np.array([p] + [(1 - p) / (K - 1)] * (K - 1))
    code = SCALE_GROUP if scale == "group" else SCALE_NONE
    g = _enumerate(pi, n, 0, code, sample=adv_std == "sample", eps=eps)
    gc, gw = theory.expected_update(p, n, K, scale, adv_std=adv_std, adv_eps=eps)
    np.testing.assert_allclose(g, [gc] + [gw] * (K - 1), rtol=1e-12, atol=1e-14)


def test_sample_std_advantages_match_trl_and_verl():
    """(r - mean) / (std(unbiased) + eps) as TRL's GRPOTrainer / verl's compute_grpo_outcome_advantage compute
    it from the reward vector; exactly 0 for a group whose rewards agree; population std on request."""
    for r in ([1, 0], [1, 1, 0, 0, 0], [0, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0, 0, 0, 0, 0]):
        r = np.array(r, dtype=float)
        n, c = r.size, int(r.sum())
        ref = (r - r.mean()) / (r.std(ddof=1) + 1e-4)
        a_c, a_w = advantages(c, n, c / n, reward_std(c / n, n, True), SCALE_GROUP, 0.0, 1e-4)
        np.testing.assert_allclose(np.where(r == 1, a_c, a_w), ref, rtol=1e-12, atol=0)
        a_c, a_w = advantages(c, n, c / n, reward_std(c / n, n, False), SCALE_GROUP, 0.0, 0.0)
        pop = (r - r.mean()) / r.std() if r.std() > 0 else np.zeros(n)
        np.testing.assert_allclose(np.where(r == 1, a_c, a_w), pop, rtol=1e-12, atol=0)
        if c in (0, n):
            assert a_c == 0.0 and a_w == 0.0


@pytest.mark.parametrize("n,K", [(2, 3), (3, 4), (6, 3)])
def test_mean_baseline_is_one_minus_one_over_n_times_true_gradient(n, K):
    """scale_rewards=none: E[update] = (1 - 1/n) * grad of pass@1 = (1 - 1/n) * p (e_c - pi), any pi."""
    rng = np.random.default_rng(n * 10 + K)
    pi = _softmax(rng.normal(size=K))
    corr = 1
    g = _enumerate(pi, n, corr, SCALE_NONE)
    true = pi[corr] * ((np.arange(K) == corr) - pi)
    np.testing.assert_allclose(g, (1 - 1 / n) * true, rtol=1e-11, atol=1e-14)


def test_simulated_expected_update_matches_enumeration():
    """Average of the kernel's gradient over many multinomial draws from the kernel sampler = exact value."""
    n, K, p = 6, 4, 0.3
    pi = np.array([0.1, p, 0.35, 0.25])
    exact = _enumerate(pi, n, 1, SCALE_GROUP)
    s = new_state(7)
    counts = np.empty(K, dtype=np.int64)
    reps = 40000
    draws = np.empty((reps, K))
    for r in range(reps):
        multinomial(s, pi, n, 1, counts)
        draws[r] = _group_grad(counts, n, 1, pi, SCALE_GROUP)
    se = draws.std(axis=0) / np.sqrt(reps)
    assert np.all(np.abs(draws.mean(axis=0) - exact) < 4 * se + 1e-12)


def test_group_normalised_correct_logit_is_sqrt_m_one_minus_m():
    """With group-normalised advantages (population std, no eps) the correct-logit gradient is
    sqrt(m (1-m)) >= 0; with the sample std it is sqrt((n-1)/n) times that."""
    pi = np.array([0.2, 0.5, 0.3])
    for counts in ([1, 2, 0], [0, 1, 2], [3, 0, 0], [1, 1, 1]):
        counts = np.array(counts)
        m = counts[1] / 3
        pop = _group_grad(counts, 3, 1, pi, SCALE_GROUP, sample=False, eps=0.0)[1]
        assert pop == pytest.approx(np.sqrt(m * (1 - m)), abs=1e-12)
        smp = _group_grad(counts, 3, 1, pi, SCALE_GROUP, eps=0.0)[1]
        assert smp == pytest.approx(np.sqrt(2 / 3) * np.sqrt(m * (1 - m)), abs=1e-12)


def _fd(f, z, h=1e-6):
    g = np.empty_like(z)
    for k in range(z.size):
        e = np.zeros_like(z)
        e[k] = h
        g[k] = (f(z + e) - f(z - e)) / (2 * h)
    return g


def _logsm(z):
    return z - z.max() - np.log(np.exp(z - z.max()).sum())


def test_softmax_pg_kl_entropy_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    K, n, corr = 5, 7, 2
    z = rng.normal(size=K)
    z0 = rng.normal(size=K)
    counts = np.array([1, 0, 3, 2, 1])
    kl, ent = 0.3, 0.05
    c = counts[corr]
    m = c / n
    a_c, a_w = (1 - m) / np.sqrt(m * (1 - m)), -m / np.sqrt(m * (1 - m))
    adv = np.where(np.arange(K) == corr, a_c, a_w)

    def objective(zz):
        lp = _logsm(zz)
        pi = np.exp(lp)
        lp0 = _logsm(z0)
        return (counts * adv * lp).sum() / n - kl * (pi * (lp - lp0)).sum() - ent * (pi * lp).sum()

    pi = _softmax(z)
    g = _group_grad(counts, n, corr, pi, SCALE_GROUP, logp=_logsm(z), kl=kl, ent=ent, logp0=_logsm(z0),
                    sample=False, eps=0.0)
    np.testing.assert_allclose(g, _fd(objective, z), rtol=1e-6, atol=1e-8)


def test_ppo_and_cispo_gradients_match_finite_differences():
    rng = np.random.default_rng(1)
    K, n, corr, clip = 4, 9, 0, 0.2
    z_old = rng.normal(size=K)
    z = z_old + np.array([0.05, 0.5, -0.4, 0.02])  # some ratios clipped, some not
    counts = np.array([3, 2, 3, 1])
    m = counts[corr] / n
    sd = np.sqrt(m * (1 - m))
    adv = np.where(np.arange(K) == corr, (1 - m) / sd, -m / sd)
    lp_old = _logsm(z_old)

    def ppo(zz):
        r = np.exp(_logsm(zz) - lp_old)
        return (counts * np.minimum(r * adv, np.clip(r, 1 - clip, 1 + clip) * adv)).sum() / n

    w = np.minimum(np.exp(_logsm(z) - lp_old), 1 + clip)

    def cispo(zz):  # stop-gradient weight w fixed at z
        return (counts * w * adv * _logsm(zz)).sum() / n

    pi = _softmax(z)
    for obj, f in ((PPO, ppo), (CISPO, cispo)):
        g = _group_grad(counts, n, corr, pi, SCALE_GROUP, objective=obj, logp_old=lp_old, logp=_logsm(z),
                        clip=clip, sample=False, eps=0.0)
        np.testing.assert_allclose(g, _fd(f, z), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("model,share", [("tabular", 1.0), ("linear", 1.0), ("linear", 0.5), ("mlp", 1.0),
                                         ("mlp", 0.3), ("interference", 1.0)])
def test_policy_backward_matches_finite_differences(model, share):
    cfg = SimConfig(model=model, share=share, d=12, d_val=5, bp=4, dim=6, hidden=5, K=4, budget=64)
    pol = build_policy(cfg, make_problems(cfg))
    rng = np.random.default_rng(3)
    params = pol.theta0 + 0.3 * rng.normal(size=pol.n_params)  # W2 != 0 so every block has a gradient
    idx = np.array([0, 3, 3, 11, 13, 16])  # duplicates and validation rows (>= d)
    dl = rng.normal(size=(idx.size, cfg.K))
    grad = pol.backward(params, idx, dl)
    fd = _fd(lambda th: float((pol.forward(th, idx) * dl).sum()), params)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    assert np.abs(grad).max() > 0


def test_initial_logits_give_the_selected_pass_rates():
    for model in ("tabular", "linear", "mlp"):
        cfg = SimConfig(model=model, d=50, d_val=20, bp=4, budget=64)
        probs = make_problems(cfg)
        pol = build_policy(cfg, probs)
        lg = pol.forward(pol.theta0, np.arange(70))
        p = np.exp(_logsm_rows(lg))[np.arange(70), probs.correct]
        np.testing.assert_allclose(p, probs.p0, rtol=1e-10)


def _logsm_rows(z):
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))
