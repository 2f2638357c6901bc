"""The heavy-tailed (zipf) prior of sandbox/problems.py: its distribution."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox.config import ConfigError, SimConfig
from sandbox.policies import build_policy
from sandbox.problems import draw_ranks, make_problems, zipf_logits, zipf_masses


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("a", [0.7, 1.0, 1.5])
def test_zipf_masses_rank_frequency_slope(a):
    m = zipf_masses(4096, a)
    assert m.sum() == pytest.approx(1.0, abs=1e-12)
    r = np.arange(1, 4097)
    slope = np.polyfit(np.log(r), np.log(m), 1)[0]
    assert slope == pytest.approx(-a, abs=1e-9)
    assert m[0] == pytest.approx(1.0 / np.sum(r ** -a))


def test_fixed_rank_pass1_matches_its_placement():
    K, a, rank = 2048, 1.0, 50
    c = SimConfig(model="interference", dataset="hard", d=64, d_val=32, K=K, prior="zipf", zipf_a=a,
                  correct_rank=rank)
    ps = make_problems(c)
    want = zipf_masses(K, a)[rank - 1]
    assert np.all(ps.rank == rank)
    np.testing.assert_allclose(ps.p0, want, rtol=1e-12)
    # the initial policy (W2 = 0: logits are exactly the prior offsets) puts exactly p0 on the correct answer
    pol = build_policy(c, ps)
    pi = _softmax(pol.forward(pol.theta0, np.arange(ps.p0.size)))
    np.testing.assert_allclose(pi[np.arange(ps.p0.size), ps.correct], want, rtol=1e-10)
    # and sampling from it finds the correct answer at that rate
    rng = np.random.default_rng(0)
    draws = rng.binomial(200_000, pi[0, ps.correct[0]])
    assert abs(draws / 200_000 - want) < 4 * np.sqrt(want / 200_000)


def test_log_uniform_ranks_equal_odds_per_decade():
    rng = np.random.default_rng(1)
    r = draw_ranks(rng, 10_000, 400_000)
    assert r.min() >= 1 and r.max() <= 10_000
    dec = np.histogram(np.log10(r), bins=[0, 1, 2, 3, 4])[0] / r.size
    np.testing.assert_allclose(dec, 0.25, atol=0.01)
    # rank-frequency of the drawn ranks ~ 1/r (slope -1 in log-log over ranks 10..1000)
    cnt = np.bincount(r, minlength=10_001)
    ks = np.arange(10, 1001)
    slope = np.polyfit(np.log(ks), np.log(np.maximum(cnt[ks], 1)), 1)[0]
    assert slope == pytest.approx(-1.0, abs=0.1)


def test_drawn_ranks_pass_the_hard_filter_and_set_p0():
    K, a = 1024, 1.0
    c = SimConfig(model="interference", dataset="hard", d=256, d_val=256, K=K, prior="zipf", zipf_a=a)
    ps = make_problems(c)
    m = zipf_masses(K, a)
    np.testing.assert_allclose(ps.p0, m[ps.rank - 1], rtol=1e-12)
    assert np.all(ps.avg16 <= 0.0625 + 1e-12)
    # mostly in the tail: the median problem's correct answer sits beyond rank 30, p0 < 1e-2
    assert np.median(ps.rank) > 30 and np.median(ps.p0) < 1e-2
    # offsets reproduce p0 against K - 1 equal wrong answers
    pol = build_policy(c, ps)
    pi = _softmax(pol.forward(pol.theta0, np.arange(ps.p0.size)))
    np.testing.assert_allclose(pi[np.arange(ps.p0.size), ps.correct], ps.p0, rtol=1e-9)


def test_full_zipf_logits_reference():
    K, a = 512, 1.2
    rng = np.random.default_rng(2)
    rank = np.array([1, 7, 300])
    correct = np.array([5, 0, 511])
    lz = zipf_logits(rank, correct, K, a, rng)
    p = np.exp(lz)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(p[np.arange(3), correct], zipf_masses(K, a)[rank - 1], rtol=1e-12)
    for g in range(3):  # every problem's sorted masses are the Zipf masses
        np.testing.assert_allclose(np.sort(p[g])[::-1], zipf_masses(K, a), rtol=1e-12)


def test_uniform_prior_unchanged_and_unreachable_zipf_refused():
    c = SimConfig(model="interference", dataset="easy", d=32, d_val=32)
    assert make_problems(c).rank is None
    with pytest.raises(ConfigError, match="avg@16 floor"):
        make_problems(SimConfig(model="interference", dataset="easy", d=32, d_val=32, K=1024, prior="zipf"))
    with pytest.raises(ConfigError):
        SimConfig(prior="power")
    with pytest.raises(ConfigError):
        SimConfig(prior="zipf", correct_rank=9, K=8)
