"""The group-std gain w_n(p) (isocompute/reports/claims/wgain.py): the binomial enumeration against
a brute force over every reward vector, the engine's own exact form, the numbers the study quotes, and a
Monte-Carlo average of the simulator's advantage and logit-gradient kernels (the code path a run takes)."""

import itertools
import math

import numpy as np
import pytest

from isocompute.reports.claims.wgain import saturation_n, w_gain, w_limit
from sandbox import grpo, theory

PS = (0.01, 0.1, 0.3, 0.5, 0.8, 0.99)


def _brute(p: float, n: int, scale: str, std: str, eps: float) -> float:
    """E over all 2^n reward vectors of (1/n) sum_j r_j A_j, divided by p (1 - p): the correct logit's
    ascent (the S p term vanishes) with A from numpy's std, independent of the binomial bookkeeping."""
    tot = 0.0
    for r in itertools.product((0.0, 1.0), repeat=n):
        r = np.array(r)
        c = int(r.sum())
        prob = p**c * (1 - p) ** (n - c)
        if scale == "none":
            a = r - r.mean()
        else:
            s = r.std(ddof=1 if std == "sample" else 0)
            a = np.zeros(n) if s <= 1e-12 else (r - r.mean()) / (s + eps)
        tot += prob * float((r * a).sum()) / n
    return tot / (p * (1 - p))


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("scale,std,eps", [("group", "sample", 0.0), ("group", "population", 0.0),
                                           ("group", "sample", 0.05), ("none", "sample", 0.0)])
def test_enumeration_matches_brute_force_over_reward_vectors(n, scale, std, eps):
    for p in PS:
        assert float(w_gain(p, n, scale, std, eps)) == pytest.approx(_brute(p, n, scale, std, eps), rel=1e-10)


@pytest.mark.parametrize("n", [2, 8, 32, 128])
@pytest.mark.parametrize("std", ["sample", "population"])
@pytest.mark.parametrize("eps", [0.0, 1e-4])
def test_enumeration_matches_the_engine_closed_form(n, std, eps):
    """sandbox.theory.expected_update (a separate loop over c, K answers) gives g_correct = w p (1 - p)."""
    for p in PS:
        for scale in ("group", "none"):
            gc, _ = theory.expected_update(p, n, 8, scale, std, eps)
            assert float(w_gain(p, n, scale, std, eps)) == pytest.approx(gc / (p * (1 - p)), rel=1e-9)


def test_the_issues_numbers_and_closed_cases():
    p = np.array(PS)
    # n = 2, sample std: only c = 1 has signal, w = 1/sqrt(2) for every p; population std: 1
    assert np.allclose(w_gain(p, 2), 1 / math.sqrt(2), rtol=1e-12)
    assert np.allclose(w_gain(p, 2, std="population"), 1.0, rtol=1e-12)
    # n = 512: about 2.0 at p = 0.5, about 9.8 at p = 0.01 and 0.99 (the numbers the study quotes)
    assert float(w_gain(0.5, 512)) == pytest.approx(2.0, abs=0.01)
    assert float(w_gain(0.01, 512)) == pytest.approx(9.755, abs=0.01)
    assert float(w_gain(0.99, 512)) == pytest.approx(float(w_gain(0.01, 512)), rel=1e-10)
    # no std normalisation: (n - 1) / n whatever p
    for n in (2, 8, 128):
        assert np.allclose(w_gain(p, n, "none"), (n - 1) / n, rtol=1e-12)
    # sample = sqrt((n - 1) / n) * population without eps
    for n in (3, 32):
        assert np.allclose(w_gain(p, n), math.sqrt((n - 1) / n) * w_gain(p, n, std="population"), rtol=1e-12)


def test_growth_toward_the_extremes_and_the_limit():
    p = np.array([0.01, 0.1, 0.5])
    ws = np.array([w_gain(p, n) for n in (2, 8, 32, 128, 512, 4096)])
    assert np.all(np.diff(ws, axis=0) > 0)  # increasing in n at every p
    assert np.all(ws[-1] < w_limit(p)) and np.allclose(ws[-1], w_limit(p), rtol=0.02)
    assert ws[-1, 0] / ws[-1, 2] > 4  # the extremes gain most: a change of objective
    # 90% of the limit near a few times 1 / min(p, 1 - p)
    assert saturation_n(0.5) == 16 and saturation_n(0.01) == 256 and saturation_n(0.99) == 256


def test_eps_lowers_w_by_at_most_eps_sqrt_n():
    for n in (8, 128, 512):
        r = w_gain(np.array(PS), n, eps=1e-4) / w_gain(np.array(PS), n)
        assert np.all(r < 1) and np.all(r > 1 - 1e-4 * math.sqrt(n))


def test_bad_input_is_refused():
    for kw in ({"p": 0.0, "n": 4}, {"p": 0.5, "n": 1}, {"p": 0.5, "n": 4, "scale": "batch"},
               {"p": 0.5, "n": 4, "eps": -1.0}):
        with pytest.raises(ValueError):
            w_gain(**kw)


CASES = [(2, 0.3, grpo.SCALE_GROUP, True), (8, 0.1, grpo.SCALE_GROUP, True),
         (32, 0.05, grpo.SCALE_GROUP, False),
         (16, 0.5, grpo.SCALE_NONE, True)]


@pytest.mark.parametrize("n,p,scale,sample", CASES)
def test_monte_carlo_of_the_simulators_kernels(n, p, scale, sample):
    """Draw n rollouts over K = 5 answers, take the advantages and the logit gradient with the kernels a run
    uses (grpo.reward_std, grpo.advantages, grpo.logit_gradient), average the correct logit's component:
    within 4 standard errors of w_n(p) p (1 - p). Fixed rng seed: the draw is the same on every machine."""
    K, corr, eps, draws = 5, 2, 1e-4, 20000
    pi = np.full(K, (1 - p) / (K - 1))
    pi[corr] = p
    logp = np.log(pi)
    rng = np.random.default_rng(7)
    out = np.empty(K)
    g = np.empty(draws)
    for i, counts in enumerate(rng.multinomial(n, pi, size=draws)):
        c = int(counts[corr])
        mean = c / n
        a_c, a_w = grpo.advantages(c, n, mean, grpo.reward_std(mean, n, sample), scale, 0.0, eps)
        grpo.logit_gradient(counts, n, corr, a_c, a_w, pi, logp, logp, logp, grpo.PG, 0.2, 0.0, 0.0, out)
        g[i] = out[corr]
    want = float(w_gain(p, n, "group" if scale == grpo.SCALE_GROUP else "none",
                        "sample" if sample else "population", eps)) * p * (1 - p)
    se = g.std(ddof=1) / math.sqrt(draws)
    assert abs(g.mean() - want) < 4 * se
    assert se < 0.05 * want  # the check has power: a 20% error in w would be > 4 SE away
