"""Sweep grids: n-vs-m, fixed-batch, joint (docs/PAPER.md findings 1, 3, 4) and problem-seed pairing."""

import pytest

from studies.config import RunConfig, StudiesError, parse_count_list
from studies.sweeps import build_sweep, fixed_batch, joint, n_vs_m

BASE = RunConfig(model="tabular", bp=32, budget=2**16)


def test_n_vs_m_keeps_bp_and_budget_and_pairs_problems_by_seed():
    cfgs = n_vs_m(BASE, [2, 4, 8], seeds=3)
    assert len(cfgs) == 9
    assert {(c.n, c.seed) for c in cfgs} == {(n, s) for n in (2, 4, 8) for s in range(3)}
    assert all(c.bp == 32 and c.budget == 2**16 for c in cfgs)
    assert all(c.problem_seed == c.seed for c in cfgs)  # seed s: the same problems for every n
    assert len({c.run_id for c in cfgs}) == 9
    assert [c.steps for c in cfgs if c.seed == 0] == [1024, 512, 256]


def test_fixed_problem_seed_is_kept_across_seeds():
    cfgs = n_vs_m(BASE.replace(problem_seed=7), [2, 4], seeds=2)
    assert {c.problem_seed for c in cfgs} == {7} and {c.seed for c in cfgs} == {0, 1}


def test_fixed_batch_keeps_bp_times_n():
    cfgs = fixed_batch(BASE, [64, 256], [2, 4, 8, 128], seeds=1)
    got = sorted((c.bp * c.n, c.n, c.bp) for c in cfgs)
    assert got == [(64, 2, 32), (64, 4, 16), (64, 8, 8),
                   (256, 2, 128), (256, 4, 64), (256, 8, 32), (256, 128, 2)]
    assert all(c.budget == BASE.budget for c in cfgs)


def test_joint_respects_bmax():
    cfgs = joint(BASE, [32, 64], parse_count_list("2^1..2^10"), bmax=1024, seeds=2)
    pairs = {(c.bp, c.n) for c in cfgs}
    assert pairs == {(32, n) for n in (2, 4, 8, 16, 32)} | {(64, n) for n in (2, 4, 8, 16)}
    assert len(cfgs) == 2 * len(pairs)


@pytest.mark.parametrize(
    ("study", "kw", "message"),
    [
        ("n-vs-m", {"bp": [32, 64]}, "one --bp value"),
        ("n-vs-m", {"bmax": 100}, "not --batch or --bmax"),
        ("fixed-batch", {}, "needs --batch"),
        ("fixed-batch", {"batch": [3], "n": [2, 4]}, "divides batch 3"),
        ("joint", {"bp": [32]}, "needs --bmax"),
        ("joint", {"bp": [64], "n": [64], "bmax": 100}, "bp \\* n <= bmax"),
        ("bogus", {}, "unknown study"),
        ("n-vs-m", {"n": [2, 2]}, "twice"),
        ("n-vs-m", {"n": [2], "seeds": 0}, "seeds must be >= 1"),
        ("n-vs-m", {"n": [2, 4096]}, "smaller than one step"),
    ],
)
def test_build_sweep_rejects_bad_grids(study, kw, message):
    with pytest.raises(StudiesError, match=message):
        build_sweep(study, BASE, **kw)


def test_build_sweep_matches_the_direct_functions():
    assert build_sweep("n-vs-m", BASE, n=[2, 4], bp=[16], seeds=2) == n_vs_m(BASE, [2, 4], 2, bp=16)
    assert build_sweep("fixed-batch", BASE, n=[2, 4], batch=[64]) == fixed_batch(BASE, [64], [2, 4])
    assert build_sweep("joint", BASE, n=[2, 4], bp=[8, 16], bmax=32) == joint(BASE, [8, 16], [2, 4], 32)
