"""One allocator rule book for both engines: the rules of isocompute.contract.allocrules run compiled by numba
in the simulator (sandbox.kernels.allocate) and as plain Python on lists in the LLM backend
(llm_backend.allocators). Both ways give the same answers on a grid of inputs; the spec grammar both parse is
one too (isocompute.contract.allocspec, tests/test_contract.py)."""

from __future__ import annotations

import inspect
import itertools

import numpy as np
import pytest

from isocompute.contract import allocrules as rules
from isocompute.contract.allocspec import MAX_FRACTIONS
from llm_backend import allocators as la
from sandbox import allocators as sa
from sandbox.kernels import allocate as ak


def test_the_rule_book_lists_every_rule():
    """The simulator registers RULES with numba so that compiled rules can call one another."""
    functions = {name for name, f in vars(rules).items()
                 if inspect.isfunction(f) and f.__module__ == rules.__name__}
    assert functions == {f.__name__ for f in rules.RULES}


def plain_knapsack(p, budget, nmin, nmax) -> list[int]:
    """The knapsack split as the LLM backend computes it: the rule book on Python lists."""
    out = [0] * len(p)
    rules.knapsack_alloc([float(x) for x in p], budget, nmin, nmax, out)
    return out


def test_knapsack_split_by_hand():
    # p = 0.5 gains 0.03125, 0.015625, 0.0078125, 0.00390625 for its 3rd..6th rollout; p = 0.2 gains
    # 0.02048, 0.0139264, 0.0106496, 0.008421376, 0.00671744 for its 3rd..7th: the 6 extra rollouts over
    # nmin = 2 go 2 / 4, the next two 1 / 1
    assert plain_knapsack([0.5, 0.2], 10, 2, 16) == [4, 6]
    assert plain_knapsack([0.5, 0.2], 12, 2, 16) == [5, 7]
    assert plain_knapsack([0.5, 0.2], 4, 2, 16) == [2, 2]  # the budget is nmin each
    # p = 0.5 reaches nmax = 4; the zero-value leftovers go to the lowest p (0.0 before 1.0)
    assert plain_knapsack([0.5, 0.0, 1.0], 10, 2, 4) == [4, 4, 2]
    assert plain_knapsack([0.5, 0.5], 20, 2, 4) == [4, 4]  # everything at nmax: fewer than the budget
    assert rules.knapsack_value(2, 0.5) == pytest.approx(0.0625)  # (1 - 1/4 - 1/4) * 0.5 * 0.25


def test_knapsack_compiled_equals_plain_on_random_p_and_budgets():
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
        placed = ak.knapsack_alloc(p, budget, nmin, nmax, want)
        assert plain_knapsack(p, budget, nmin, nmax) == want.tolist(), (p, budget, nmin, nmax)
        assert placed == want.sum()
        for k in range(0, 6):
            want_value = float(ak.knapsack_value(k, p[0]))
            assert rules.knapsack_value(k, p[0]) == pytest.approx(want_value, abs=1e-15)


def test_variance_compiled_equals_plain_on_random_p_and_budgets():
    rng = np.random.default_rng(3)
    for trial in range(200):
        m = int(rng.integers(1, 10))
        nmin = int(rng.integers(1, 5))
        nmax = int(rng.integers(nmin, 33))
        p = rng.random(m) if trial % 2 else rng.integers(0, 5, m) / 4
        budget = int(rng.integers(m * nmin, m * nmax + 3))
        want = np.zeros(m, dtype=np.int64)
        placed = ak.variance_alloc(p, budget, nmin, nmax, want)
        out = [0] * m
        assert rules.variance_alloc([float(x) for x in p], budget, nmin, nmax, out) == placed
        assert out == want.tolist(), (p, budget, nmin, nmax)


def test_the_llm_knapsack_allocator_splits_by_the_rule_book():
    a = la.make("knapsack", 4, 2)
    ctx = la.StepContext(1, 0, 64, 4, 2, la.ProblemStream(0, 6), la.History.empty(6),
                         np.random.default_rng(0))
    ctx.history.p[:] = [0.5, 0.2, 0.5, 0.2, 0.5, 0.2]
    draw = a.propose(ctx)
    assert draw.ns == plain_knapsack([ctx.history.p[g] for g in draw.problems], 8, 2, 16)


def test_keep_rule_compiled_equals_the_llm_groups():
    for k in range(0, 10):
        for c in range(0, k + 1):
            rewards = np.r_[np.ones(c), np.zeros(k - c)]
            assert la.has_signal(rewards) == bool(ak.has_signal(c, k)) == rules.has_signal(c, k), (c, k)


def test_history_compiled_equals_the_llm_history():
    """The simulator's update_history and the LLM backend's History.record track the same p and streak."""
    rng = np.random.default_rng(7)
    for ema in (1.0, 0.5, 0.3):
        hist = sa.new_history(4)
        llm = la.History.empty(4)
        for step in range(60):
            g = int(rng.integers(0, 4))
            k = int(rng.integers(1, 9))
            c = int(rng.integers(0, k + 1)) if step % 3 else int(rng.choice([0, k]))
            ak.update_history(hist, g, c, k, step, ema)
            llm.record(g, np.r_[np.ones(c), np.zeros(k - c)], ema=ema)
            assert hist[:4, sa.H_P].tolist() == llm.p.tolist()
            assert hist[:4, sa.H_STREAK].tolist() == llm.streak.astype(float).tolist()
            assert hist[:4, sa.H_K].tolist() == llm.k.tolist() and hist[:4, sa.H_G].tolist() == llm.g.tolist()
    back = la.History.from_state(llm.state())
    assert back.k.tolist() == llm.k.tolist() and back.out.tolist() == llm.out.tolist()
    old = la.History.from_state({"p": [0.5, -1.0], "streak": [0, 1]})  # a checkpoint from before the counts
    assert old.k.tolist() == [0.0, 0.0] and old.out.tolist() == [False, False]


def test_schedule_n_compiled_equals_plain():
    for fracs in ([0.25], [0.25, 0.5], [0.1, 0.3, 0.6, 0.9]):
        params = np.zeros(1 + MAX_FRACTIONS)
        params[0] = len(fracs)
        params[1: 1 + len(fracs)] = fracs
        for spent in np.linspace(0, 1, 41):
            want = rules.schedule_n(8, spent, fracs)
            assert ak.schedule_n(8, spent, params[1: 1 + int(params[0])]) == want
            assert ak.schedule_n(8, spent, np.array(fracs)) == want


def test_skip_probability_compiled_equals_plain():
    for streak, min_streak, p in itertools.product(range(4), (1.0, 2.0, 3.0), (0.0, 0.5, 0.9)):
        want = rules.skip_probability(streak, min_streak, p)
        assert ak.skip_probability(float(streak), min_streak, p) == want


def test_proportional_split_compiled_equals_plain():
    """GVM-RAFT's and DynaMO's water level: the simulator's compiled rule and the plain one agree."""
    rng = np.random.default_rng(5)
    for trial in range(200):
        m = int(rng.integers(1, 10))
        nmin = int(rng.integers(1, 5))
        nmax = int(rng.integers(nmin, 33))
        w = rng.random(m) if trial % 3 else rng.integers(0, 3, m).astype(float)
        budget = int(rng.integers(m * nmin, m * nmax + 3))
        want = np.zeros(m, dtype=np.int64)
        placed = ak.proportional_alloc(w, budget, nmin, nmax, want)
        out = [0] * m
        assert rules.proportional_alloc([float(x) for x in w], budget, nmin, nmax, out) == placed
        assert out == want.tolist(), (w, budget, nmin, nmax)


def test_dynamo_split_compiled_equals_plain_and_the_llm_allocator():
    rng = np.random.default_rng(11)
    for trial in range(200):
        m = int(rng.integers(1, 10))
        n = int(rng.integers(2, 17))
        nmin, nmax = max(1, n // 2), n + n // 2
        g = rng.integers(0, 40, m).astype(float)
        k = np.floor(rng.random(m) * (g + 1))
        if trial % 4 == 0:
            k = np.where(rng.random(m) < 0.5, 0.0, g)  # all-wrong and all-correct histories: floor weights
        want, w = np.zeros(m, dtype=np.int64), np.zeros(m)
        placed = ak.dynamo_alloc(k, g, 0.5, 0.01, 0.85, m * n, nmin, nmax, w, want)
        out, pw = [0] * m, [0.0] * m
        got = rules.dynamo_alloc(k.tolist(), g.tolist(), 0.5, 0.01, 0.85, m * n, nmin, nmax, pw, out)
        assert got == placed and out == want.tolist(), (k, g, n)
        assert pw == pytest.approx(w.tolist(), abs=0)
    a = la.make("dynamo", 4, 3)
    ctx = la.StepContext(1, 0, 64, 4, 3, la.ProblemStream(0, 6), la.History.empty(6),
                         np.random.default_rng(0))
    ctx.history.k[:] = [2, 0, 0, 4, 1, 3]
    ctx.history.g[:] = [4, 4, 0, 4, 2, 8]
    draw = a.propose(ctx)
    want, w = np.zeros(3, dtype=np.int64), np.zeros(3)
    hk, hg = ctx.history.k[draw.problems], ctx.history.g[draw.problems]
    ak.dynamo_alloc(hk, hg, 0.5, 0.01, 0.85, 12, 2, 6, w, want)
    assert draw.ns == want.tolist() and sum(draw.ns) == 12


def test_pilot_rules_compiled_equal_plain():
    for k in range(1, 10):
        for c in range(0, k + 1):
            for lower, upper in ((0.125, 0.25), (0.0, 0.0), (0.25, 0.25), (0.5, 0.5)):
                assert bool(ak.pilot_keep(c, k, lower, upper)) == rules.pilot_keep(c, k, lower, upper)
            for evict in (1.0, 0.75, 1.5):
                assert bool(ak.pilot_evict(c, k, evict)) == rules.pilot_evict(c, k, evict)


def test_pilot_commit_engines_plan_the_same_step():
    """One step of Pilot-Commit as each engine plans it, on the same pilot outcomes: the LLM allocator's draws
    (pilot, commit of the kept ones, next pilot skipping the evicted) and the simulator's rules on the same
    counts keep, evict and commit the same problems."""
    a = la.make("pilot-commit", 8, 3)
    ctx = la.StepContext(1, 0, 10_000, 8, 3, la.ProblemStream(0, 3), la.History.empty(3),
                         np.random.default_rng(0))
    d0 = a.propose(ctx)
    assert d0.ns == [2, 2, 2] and not d0.extends
    correct = [1, 2, 0]  # in band, all correct (evicted), too hard
    rewards = [np.r_[np.ones(c), np.zeros(2 - c)] for c in correct]
    keep = a.keep(ctx, d0, rewards)
    sim_keep = [bool(ak.pilot_keep(c, 2, 0.125, 0.25)) for c in correct]
    sim_out = [bool(ak.pilot_evict(c, 2, 1.0)) for c in correct]
    assert keep == sim_keep == [True, False, False]
    assert [bool(ctx.history.out[g]) for g in d0.problems] == sim_out == [False, True, False]
    ctx.rounds, ctx.kept, ctx.drawn = 1, 1, 6
    ctx.draws.append(d0)
    d1 = a.propose(ctx)  # the commit: n - pilot = 6 more for the kept problem, appended to its group
    assert d1.extends and d1.problems == [d0.problems[0]] and d1.ns == [6]
    ctx.rounds, ctx.drawn = 2, 12
    ctx.draws.append(d1)
    d2 = a.propose(ctx)  # one of bp = 3 committed: the next pilot round, the next epoch without the evicted
    assert not d2.extends and d2.ns == [2, 2, 2] and d0.problems[1] not in d2.problems
    ctx.kept = 3
    ctx.draws.append(d2)
    ctx.rounds = 3
    assert a.propose(ctx) is None  # bp groups committed
