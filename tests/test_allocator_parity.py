"""The llm backend's allocator rules are the simulator's (issue 13): llm_backend/allocators.py re-implements
the rules of sandbox/allocators.py in pure Python (llm_backend may not import sandbox); this test holds them
together. The spec grammar both parse is one (isocompute.contract.allocspec, tests/test_contract.py)."""

from __future__ import annotations

import numpy as np
import pytest

from isocompute.contract.allocspec import MAX_FRACTIONS
from llm_backend import allocators as la
from sandbox.kernels import allocate as ak


def test_knapsack_rule_equals_the_simulators_on_random_p_and_budgets():
    rng = np.random.default_rng(13)
    for trial in range(300):
        m = int(rng.integers(1, 12))
        n = int(rng.integers(2, 9))
        nmin = int(rng.integers(1, n + 1))
        nmax = int(rng.integers(n, 4 * n + 1))
        p = rng.random(m)
        if trial % 3 == 0:  # observed rates c / n_i: zeros, ones and exact ties
            p = rng.integers(0, n + 1, m) / n
        if trial % 7 == 0:
            p[:] = 0.5  # the prior for every unseen problem
        budget = m * n
        want = np.zeros(m, dtype=np.int64)
        ak.knapsack_alloc(p, budget, nmin, nmax, want)
        got = la.knapsack_alloc(p, budget, nmin, nmax)
        assert got == want.tolist(), (p, budget, nmin, nmax)
        for k in range(0, 6):
            assert la.knapsack_value(k, p[0]) == pytest.approx(float(ak.knapsack_value(k, p[0])), abs=1e-15)


def test_dynamic_sampling_keep_rule_equals_has_signal():
    rng = np.random.default_rng(1)
    for _ in range(200):
        k = int(rng.integers(1, 10))
        r = (rng.random(k) < rng.random()).astype(float)
        assert la.has_signal(r) == bool(ak.has_signal(int(r.sum()), k))


def test_schedule_n_equals_the_simulators():
    for fracs in ([0.25], [0.25, 0.5], [0.1, 0.3, 0.6, 0.9]):
        params = np.zeros(1 + MAX_FRACTIONS)
        params[0] = len(fracs)
        params[1: 1 + len(fracs)] = fracs
        for spent in np.linspace(0, 1, 41):
            assert la.schedule_n(8, spent, fracs) == ak.schedule_n(8, spent, params)


def test_skip_probability_equals_the_simulators():
    for streak in range(4):
        for min_streak in (1.0, 2.0):
            want = ak.skip_probability(streak, min_streak, 0.5)
            assert la.skip_probability(streak, min_streak, 0.5) == want
