"""Rollout allocators (sandbox/allocators.py): `fixed` is the original step bit for bit, each rule
on hand-computed cases, and compute = rollouts actually drawn for every allocator."""

from __future__ import annotations

import itertools
import runpy
from pathlib import Path

import numpy as np
import pytest
from sim_helpers import assert_close_across_cpus  # noqa: E402  (pytest puts this folder on sys.path)

from isocompute.contract.allocspec import AllocatorError
from sandbox import SimConfig, run
from sandbox import allocators as al
from sandbox.config import ConfigError
from sandbox.kernels import allocate as ak

DATA = Path(__file__).parent / "data"
SMALL = dict(model="tabular", dataset="easy", n=8, bp=16, budget=2**13, d=64, d_val=32, n_evals=6)


# ------------------------------------------------------------------ fixed: bit for bit

def test_fixed_matches_reference_tables_of_head():
    """tests/sandbox/data/fixed_reference.npz: tables of four configs made by make_fixed_reference.py at
    commit a0b8ea3 (before the allocator interface) on another machine, so compared within the cross-CPU
    tolerance (sim_helpers.XCPU_RTOL); the `fixed` allocator against no allocator in this process, bit for
    bit."""
    cfgs = runpy.run_path(str(DATA / "make_fixed_reference.py"))["CFGS"]
    ref = np.load(DATA / "fixed_reference.npz")
    for key, kw in cfgs.items():
        plain, fixed = run(SimConfig(**kw)), run(SimConfig(**kw, allocator="fixed"))
        for col, v in plain.table.items():
            if col != "allocator":
                np.testing.assert_array_equal(fixed.table[col], v, err_msg=f"{key}/{col}")
            assert_close_across_cpus(v, ref[f"{key}/{col}"], err_msg=f"{key}/{col}")
        np.testing.assert_array_equal(fixed.pass1["train"], plain.pass1["train"])
        assert_close_across_cpus(plain.pass1["train"], ref[f"{key}/pass1_train"], err_msg=f"{key}/pass1")


# ------------------------------------------------------------------ the rules

def test_knapsack_value_hand_cases():
    assert ak.knapsack_value(0, 0.5) == 0.0
    assert ak.knapsack_value(1, 0.5) == 0.0  # one rollout never has both rewards
    assert ak.knapsack_value(2, 0.5) == pytest.approx(0.5 * 0.5 * 0.25)  # (1 - .25 - .25) * .5 * .25
    assert ak.knapsack_value(3, 0.2) == pytest.approx((1 - 0.008 - 0.512) * 0.2 * 0.64)
    assert ak.knapsack_value(8, 0.0) == 0.0 and ak.knapsack_value(8, 1.0) == 0.0


def test_knapsack_alloc_hand_case_and_dp():
    # p = 0.5 and p = 1: every rollout beyond nmin goes to the task with value; budget 8, nmin 2, nmax 6
    out = np.zeros(2, dtype=np.int64)
    assert ak.knapsack_alloc(np.array([0.5, 1.0]), 8, 2, 6, out) == 8
    assert out.tolist() == [6, 2]
    # zero-value leftovers go to the hardest task (p = 0), as the paper sends them to unsolved tasks
    out = np.zeros(3, dtype=np.int64)
    ak.knapsack_alloc(np.array([1.0, 0.0, 1.0]), 9, 2, 8, out)
    assert out.tolist() == [2, 5, 2]
    # equals the paper's dynamic programme on random cases
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.uniform(0, 1, size=5)
        out = np.zeros(5, dtype=np.int64)
        ak.knapsack_alloc(p, 20, 2, 9, out)
        best, _ = ak.knapsack_dp(p, 20, 2, 9)
        got = sum(ak.knapsack_value(k, q) for k, q in zip(out, p, strict=True))
        assert out.sum() == 20 and got == pytest.approx(best, abs=1e-12)


def test_knapsack_dp_brute_force():
    p = np.array([0.1, 0.5, 0.9])
    best = max(sum(ak.knapsack_value(k, q) for k, q in zip(ks, p, strict=True))
               for ks in itertools.product(range(2, 8), repeat=3) if sum(ks) == 12)
    assert ak.knapsack_dp(p, 12, 2, 7)[0] == pytest.approx(best)


def test_dapo_keep_rule():
    assert not ak.has_signal(0, 8) and not ak.has_signal(8, 8)
    assert ak.has_signal(1, 8) and ak.has_signal(7, 8)


def test_greso_skip_probability():
    assert ak.skip_probability(0.0, 1.0, 0.5) == 0.0
    assert ak.skip_probability(1.0, 1.0, 0.5) == 0.5
    assert ak.skip_probability(1.0, 2.0, 0.9) == 0.0
    assert ak.skip_probability(3.0, 2.0, 0.9) == 0.9


def test_schedule_doubling():
    _, par = al.encode("schedule:double@0.5,0.25", 8)
    assert par[:3].tolist() == [2.0, 0.25, 0.5]
    fractions = par[1:1 + int(par[0])]
    assert ak.schedule_n(8, 0.0, fractions) == 8
    assert ak.schedule_n(8, 0.25, fractions) == 16
    assert ak.schedule_n(8, 0.6, fractions) == 32


def test_history_update():
    h = al.new_history(3)
    ak.update_history(h, 1, 0, 8, 5, 1.0)
    assert h[1].tolist() == [0.0, 1.0, 0.0, 5.0, 0.0, 8.0, 0.0]  # p, streak, var, seen, k, g, evicted
    ak.update_history(h, 1, 4, 8, 6, 1.0)
    assert h[1].tolist() == [0.5, 0.0, 0.25, 6.0, 4.0, 16.0, 0.0]
    ak.update_history(h, 1, 8, 8, 7, 0.5)  # EMA
    assert h[1, al.H_P] == 0.75 and h[1, al.H_STREAK] == 1.0
    assert h[1, al.H_K] == 12.0 and h[1, al.H_G] == 24.0  # counts over every group, not an average


def test_encode_errors():
    for bad in ("nope", "fixed:1", "knapsack:nmin=9", "knapsack:x=1", "schedule:triple@0.5",
                "schedule:double@1.5", "dynamic-sampling:rounds=0"):
        with pytest.raises(AllocatorError):
            al.encode(bad, 8)
    with pytest.raises(ConfigError):
        SimConfig(**SMALL, allocator="knapsack", objective="ppo")


# ------------------------------------------------------------------ runs: compute = rollouts drawn

ALLOCS = ("knapsack", "knapsack:oracle=1", "dynamic-sampling", "skip-zero-var:p=0.9",
          "schedule:double@0.25,0.5")


@pytest.mark.parametrize("spec", ALLOCS)
@pytest.mark.parametrize("model", ["tabular", "interference"])
def test_allocator_runs_and_compute_is_rollouts_drawn(spec, model):
    cfg = SimConfig(**{**SMALL, "model": model}, allocator=spec)
    r = run(cfg)
    assert r.status == "done"
    t = r.table
    assert t["compute"][0] == 0 and np.all(np.diff(t["compute"]) > 0)
    assert t["compute"][-1] <= cfg.budget
    # recount the rollouts by replaying the kernel step by step: the drawn counter equals the table
    from sandbox.grpo import AC_ROLL
    from sandbox.runner import prepare

    st = prepare(cfg)
    assert st.train_to(cfg.steps) == 0
    assert st.acc[AC_ROLL] == t["compute"][-1]
    if spec in ("knapsack", "knapsack:oracle=1", "skip-zero-var:p=0.9"):
        # one candidate batch per step at bp * n: exactly the fixed path's compute
        assert t["compute"][-1] == cfg.steps * cfg.bp * cfg.n
        assert np.array_equal(t["m"] * cfg.bp * cfg.n, t["compute"])


def test_dynamic_sampling_counts_discarded_rollouts():
    """veasy: most groups all-correct, so DAPO draws extra batches; the table's compute counts all of them
    and the run takes fewer steps than fixed at the same budget."""
    cfg = SimConfig(**{**SMALL, "dataset": "veasy"}, allocator="dynamic-sampling")
    t = run(cfg).table
    assert t["compute"][-1] <= cfg.budget
    assert t["m"][-1] < cfg.steps
    assert t["compute"][-1] > t["m"][-1] * cfg.bp * cfg.n  # more than one batch on some steps


def test_schedule_spends_larger_groups_later():
    cfg = SimConfig(**SMALL, allocator="schedule:double@0.5")
    t = run(cfg).table
    fixed_steps = cfg.steps
    # first half at n = 8 (steps/2 of them), second half at n = 16 (steps/4): 3/4 of the steps in all
    assert t["m"][-1] == fixed_steps // 2 + fixed_steps // 4
    assert t["compute"][-1] == cfg.budget


def test_run_many_equals_run_for_allocators():
    from sandbox import run_many

    cfgs = [SimConfig(**SMALL, allocator=a, seed=s) for a in ("fixed", "knapsack", "dynamic-sampling")
            for s in (0, 1)]
    for c, r in zip(cfgs, run_many(cfgs, threads=2), strict=True):
        one = run(c)
        for col in ("compute", "m", "val_mean", "train_mean"):
            np.testing.assert_array_equal(r.table[col], one.table[col])


def test_dynamic_sampling_gradient_matches_a_fixed_step_on_the_kept_groups():
    """DAPO keeps groups from several candidate batches; its update must use the kept problems' own forward
    pass (regression: the backward once reused the last candidate batch's activations). With rounds=1 and an
    easy shared model, one DAPO step equals the fixed step with zero_variance_filter on the same draws."""
    kw = dict(model="interference", dataset="easy", n=8, bp=16, budget=2**12, d=64, d_val=32, n_evals=4,
              sampler="chain")
    from sandbox.runner import prepare

    a = prepare(SimConfig(**kw, allocator="dynamic-sampling:rounds=1"))
    b = prepare(SimConfig(**kw, zero_variance_filter=True))
    assert a.train_to(1) == 0 and b.train_to(1) == 0
    np.testing.assert_allclose(a.theta, b.theta, rtol=0, atol=1e-12)


# ------------------------------------------------ variance (VIP), gvm (GVM-RAFT), ada, schedule:zv

def test_variance_alloc_hand_cases_and_brute_force():
    # s = p (1 - p) = 0.25 vs 0: every rollout beyond nmin goes to the p = 0.5 problem
    out = np.zeros(2, dtype=np.int64)
    assert ak.variance_alloc(np.array([0.5, 1.0]), 8, 2, 6, out) == 8
    assert out.tolist() == [6, 2]
    # s = [0.25, 0.0625 * ...]: p = 0.5 and p = (1 - sqrt(0.75)) / 2 give s = 0.25 and 0.0625 (ratio 4: 1),
    # so Neyman n ~ sqrt(s) = 2 : 1, budget 6 -> [4, 2] (greedy: [1,1] -> [2,1] -> [3,1] -> [3,2] -> [4,2])
    q = (1 - np.sqrt(0.75)) / 2
    out = np.zeros(2, dtype=np.int64)
    ak.variance_alloc(np.array([0.5, q]), 6, 1, 10, out)
    assert out.tolist() == [4, 2]
    # zero-gain leftovers are spread evenly once the useful problem is at nmax
    out = np.zeros(3, dtype=np.int64)
    ak.variance_alloc(np.array([0.5, 0.0, 1.0]), 12, 2, 6, out)
    assert out.tolist() == [6, 3, 3]
    # exact minimum of sum s_i / n_i on random cases
    rng = np.random.default_rng(1)
    for _ in range(10):
        p = rng.uniform(0, 1, size=3)
        s = p * (1 - p)
        out = np.zeros(3, dtype=np.int64)
        ak.variance_alloc(p, 15, 2, 9, out)
        best = min(sum(s / np.array(ks)) for ks in itertools.product(range(2, 10), repeat=3) if sum(ks) == 15)
        assert out.sum() == 15 and float(np.sum(s / out)) == pytest.approx(best, abs=1e-12)


def test_variance_defaults_follow_vip_range():
    _, par = al.encode("variance", 8)
    assert par[:5].tolist() == [4.0, 32.0, 0.5, 0.0, 1.0]
    _, par = al.encode("variance", 2)  # n below VIP's range: nmin drops to n
    assert par[:2].tolist() == [2.0, 32.0]


def test_gvm_weight_and_proportional_alloc_hand_cases():
    # w = G / sqrt(p + alpha / p^(beta - 1)); beta = 2: p + alpha / p
    assert ak.gvm_weight(0.0, 1.0, 1e-3, 2.0) == 0.0 and ak.gvm_weight(0.5, 0.0, 1e-3, 2.0) == 0.0
    assert ak.gvm_weight(0.25, 1.0, 0.0, 2.0) == pytest.approx(2.0)  # 1 / sqrt(0.25)
    assert ak.gvm_weight(0.1, 2.0, 1e-3, 2.0) == pytest.approx(2.0 / np.sqrt(0.1 + 0.01))
    assert ak.gvm_weight(0.1, 1.0, 1e-3, 3.0) == pytest.approx(1.0 / np.sqrt(0.1 + 0.1))  # 1e-3 / 0.1^2
    assert ak.gvm_gradient_norm(0.5, 8) == pytest.approx(0.5 * np.sqrt(8 / 7))
    out = np.zeros(2, dtype=np.int64)
    assert ak.proportional_alloc(np.array([1.0, 3.0]), 8, 1, 8, out) == 8
    assert out.tolist() == [2, 6]  # lam = 2
    ak.proportional_alloc(np.array([1.0, 3.0]), 8, 3, 8, out)
    assert out.tolist() == [3, 5]  # lam = 5/3: 1.67 clipped up to 3
    out = np.zeros(3, dtype=np.int64)
    ak.proportional_alloc(np.array([1.0, 1.0, 1.0]), 10, 2, 8, out)
    assert out.tolist() == [4, 3, 3]  # 10/3 each: the leftover rollout to the lowest index
    ak.proportional_alloc(np.zeros(3), 9, 2, 8, out)
    assert out.tolist() == [3, 3, 3]  # all-zero weights split evenly
    ak.proportional_alloc(np.array([0.0, 1.0, 0.0]), 12, 2, 6, out)
    assert out.tolist() == [3, 6, 3]  # nmax caps the one weighted problem, the rest share the leftover
    rng = np.random.default_rng(2)
    for _ in range(20):
        w = rng.uniform(0, 1, size=6)
        out = np.zeros(6, dtype=np.int64)
        assert ak.proportional_alloc(w, 48, 2, 32, out) == 48
        assert out.min() >= 2 and out.max() <= 32


def test_ada_stopping_rule():
    assert ak.ada_continue(0, 8, 1, 4) and ak.ada_continue(8, 8, 3, 4)  # no signal yet, rounds left
    assert not ak.ada_continue(3, 8, 1, 4)  # signal: stop
    assert not ak.ada_continue(0, 32, 4, 4)  # cap


def test_zv_schedule_update_hand_case():
    h = al.new_history(4)
    st = h[4]
    assert st[:4].tolist() == [1.0, 0.0, 0.0, 0.0]  # multiplier, zero-variance groups, groups, steps
    # window 2, T = 0.5: steps with 10/16 and 6/16 zero-variance groups -> share 0.5, not > 0.5: no change
    assert ak.zv_schedule_update(st, 10.0, 16.0, 0.5, 2.0, 64.0, 8.0) == 1.0
    assert ak.zv_schedule_update(st, 6.0, 16.0, 0.5, 2.0, 64.0, 8.0) == 1.0
    assert st[al.Z_STEPS] == 0.0  # the window restarts
    assert ak.zv_schedule_update(st, 12.0, 16.0, 0.5, 2.0, 64.0, 8.0) == 1.0  # mid-window
    assert ak.zv_schedule_update(st, 10.0, 16.0, 0.5, 2.0, 64.0, 8.0) == 2.0  # 22/32 > 0.5: n 8 -> 16
    for _ in range(6):
        ak.zv_schedule_update(st, 16.0, 16.0, 0.5, 2.0, 64.0, 8.0)
    assert st[al.Z_MULT] == 8.0  # 16 -> 32 -> 64, then nmax = 64 stops it


def test_encode_new_allocators():
    code, par = al.encode("schedule:zv@0.6,window=4,nmax=128", 8)
    assert code == al.A_SCHED_ZV and par[:3].tolist() == [0.6, 4.0, 128.0]
    code, par = al.encode("gvm", 8)
    assert code == al.A_GVM and par[:7].tolist() == [2.0, 32.0, 0.5, 0.0, 1.0, 1e-3, 2.0]
    code, par = al.encode("ada", 8)
    assert code == al.A_ADA and par[:2].tolist() == [4.0, 8.0]
    for bad in ("schedule:zv@1.5", "schedule:zv@x", "ada:chunk=16", "ada:rounds=0", "variance:nmin=9",
                "gvm:beta=0.5", "variance:nmax=4.5"):
        with pytest.raises(AllocatorError):
            al.encode(bad, 8)


NEW = ("variance", "variance:oracle=1", "gvm", "gvm:oracle=1", "ada", "schedule:zv@0.3,window=2")


@pytest.mark.parametrize("spec", NEW)
@pytest.mark.parametrize("model", ["tabular", "interference"])
def test_new_allocators_compute_is_rollouts_drawn(spec, model):
    from sandbox.grpo import AC_ROLL
    from sandbox.runner import prepare

    cfg = SimConfig(**{**SMALL, "model": model}, allocator=spec)
    r = run(cfg)
    assert r.status == "done"
    t = r.table
    assert t["compute"][0] == 0 and np.all(np.diff(t["compute"]) > 0) and t["compute"][-1] <= cfg.budget
    st = prepare(cfg)
    assert st.train_to(cfg.steps) == 0
    assert st.acc[AC_ROLL] == t["compute"][-1]
    if spec.startswith(("variance", "gvm")):  # one split of bp * n per step: the fixed path's compute
        assert np.array_equal(t["m"] * cfg.bp * cfg.n, t["compute"])


def test_ada_counts_every_round():
    """veasy: most groups of 8 are all correct, so ada samples extra rounds; the table's compute counts them
    and equals the kernel's counter; rounds=1 is one group of n per problem (the fixed compute)."""
    cfg = SimConfig(**{**SMALL, "dataset": "veasy"}, allocator="ada")
    t = run(cfg).table
    assert t["compute"][-1] > t["m"][-1] * cfg.bp * cfg.n and t["m"][-1] < cfg.steps
    one = run(SimConfig(**{**SMALL, "dataset": "veasy"}, allocator="ada:rounds=1")).table
    assert np.array_equal(one["m"] * cfg.bp * cfg.n, one["compute"]) and one["m"][-1] == cfg.steps


def test_zv_schedule_doubles_on_saturated_problems():
    """veasy at T = 0.3: the zero-variance share is high from the start, so n doubles every window of 2 steps
    up to nmax and the run takes fewer, larger steps than fixed n."""
    cfg = SimConfig(**{**SMALL, "dataset": "veasy"}, allocator="schedule:zv@0.3,window=2,nmax=32")
    from sandbox.runner import prepare

    st = prepare(cfg)
    st.train_to(cfg.steps)
    assert st.hist[cfg.d, al.Z_MULT] == 4.0  # 8 -> 16 -> 32 = nmax
    t = run(cfg).table
    assert t["compute"][-1] <= cfg.budget and t["m"][-1] < cfg.steps


# ------------------------------------------------ pilot-commit (Pilot-Commit), dynamo (DynaMO)

def test_pilot_commit_rules_by_hand():
    # band [0.125, 0.75] (the repository's scripts): 1 of 2, 3 of 4 (the upper edge) and 1 of 8 (the lower)
    assert ak.pilot_keep(1, 2, 0.125, 0.25) and ak.pilot_keep(3, 4, 0.125, 0.25)
    assert ak.pilot_keep(1, 8, 0.125, 0.25)
    assert not ak.pilot_keep(0, 2, 0.125, 0.25) and not ak.pilot_keep(2, 2, 0.125, 0.25)
    assert not ak.pilot_keep(7, 8, 0.125, 0.25) and not ak.pilot_keep(0, 8, 0.125, 0.25)
    assert ak.pilot_keep(0, 2, 0.0, 0.0) and ak.pilot_keep(2, 2, 0.0, 0.0)  # the whole range: all kept
    # evict at 1: only an all-correct pilot; above 1: never
    assert ak.pilot_evict(2, 2, 1.0) and not ak.pilot_evict(1, 2, 1.0) and not ak.pilot_evict(2, 2, 1.5)
    assert ak.pilot_evict(3, 4, 0.75) and not ak.pilot_evict(2, 4, 0.75)


def test_dynamo_weights_and_split_by_hand():
    # P = k (g - k) / (g (g - 1)): 2 of 4 -> 4 / 12 = 1/3; 3 of 4 -> 3 / 12; 0 of 4 -> 0; below 2 rollouts
    # the prior's p (1 - p)
    assert ak.bernoulli_variance(2.0, 4.0, 0.5) == pytest.approx(1 / 3)
    assert ak.bernoulli_variance(3.0, 4.0, 0.5) == pytest.approx(0.25)
    assert ak.bernoulli_variance(0.0, 4.0, 0.5) == 0.0
    assert ak.bernoulli_variance(1.0, 1.0, 0.2) == pytest.approx(0.16)
    # weight 4 P, at least floor, floor once the rate reaches master
    assert ak.dynamo_priority(0.5, 1 / 3, 0.01, 0.85) == pytest.approx(4 / 3)
    assert ak.dynamo_priority(0.0, 0.0, 0.01, 0.85) == 0.01
    assert ak.dynamo_priority(0.9, 0.1, 0.01, 0.85) == 0.01
    # A: 2 of 4 (w 4/3), B: 0 of 4 (w floor), C: unseen (w 1), D: 4 of 4 (mastered, floor); budget 16 in
    # [2, 8]: B and D at nmin, A and C share 12 as 4/3 : 1, lam = 36/7: 6.86 and 5.14, floored 6 and 5, the
    # last rollout to the larger remainder (A)
    out, w = np.zeros(4, dtype=np.int64), np.zeros(4)
    k, g = np.array([2.0, 0.0, 0.0, 4.0]), np.array([4.0, 4.0, 0.0, 4.0])
    assert ak.dynamo_alloc(k, g, 0.5, 0.01, 0.85, 16, 2, 8, w, out) == 16
    assert out.tolist() == [7, 2, 5, 2]
    assert w.tolist() == pytest.approx([4 / 3, 0.01, 1.0, 0.01])
    # n_i ~ P_i (the variance), not sqrt(P_i) as VIP's variance allocator: 3 of 4 (P = 1/4) and 1 of 16
    # (P = 15 / 240 = 1/16) weigh 1 : 1/4 and split 10 as 8 : 2 (sqrt would give 2 : 1)
    ak.dynamo_alloc(np.array([3.0, 1.0]), np.array([4.0, 16.0]), 0.5, 1e-9, 1.0, 10, 1, 10, w[:2], out[:2])
    assert w[:2].tolist() == pytest.approx([1.0, 0.25]) and out[:2].tolist() == [8, 2]


def test_encode_pilot_commit_and_dynamo():
    code, par = al.encode("pilot-commit", 8)
    assert code == al.A_PILOT and par[:5].tolist() == [30.0, 2.0, 0.125, 0.25, 1.0]
    assert al.encode("pilot-commit", 16)[1][1] == 4.0  # a quarter of n for the pilot (32 + 96, 16 + 48)
    code, par = al.encode("dynamo", 16)
    assert code == al.A_DYNAMO and par[:6].tolist() == [8.0, 24.0, 0.5, 0.0, 0.01, 0.85]  # n_low 8, n_high 24
    assert al.encode("dynamo", 8)[1][:2].tolist() == [4.0, 12.0]
    for bad, n in (("pilot-commit", 2), ("pilot-commit:pilot=8", 8), ("pilot-commit:pilot=1", 8),
                   ("pilot-commit:lower=0.8", 8), ("pilot-commit:rounds=0", 8), ("pilot-commit:evict=0", 8),
                   ("dynamo:nmin=9", 8), ("dynamo:floor=0", 8), ("dynamo:master=2", 8)):
        with pytest.raises(AllocatorError):
            al.encode(bad, n)


@pytest.mark.parametrize("spec", ["pilot-commit", "dynamo", "dynamo:oracle=1"])
def test_pilot_commit_and_dynamo_compute_is_rollouts_drawn(spec):
    from sandbox.grpo import AC_ROLL
    from sandbox.runner import prepare

    cfg = SimConfig(**{**SMALL, "dataset": "veasy"}, allocator=spec)
    t = run(cfg).table
    assert t["compute"][0] == 0 and np.all(np.diff(t["compute"]) > 0) and t["compute"][-1] <= cfg.budget
    st = prepare(cfg)
    assert st.train_to(cfg.steps) == 0
    assert st.acc[AC_ROLL] == t["compute"][-1]
    if spec.startswith("dynamo"):  # one split of bp * n per step: the fixed path's compute
        assert np.array_equal(t["m"] * cfg.bp * cfg.n, t["compute"])
        assert st.hist[: cfg.d, al.H_G].sum() == t["compute"][-1]  # every rollout counted in the history
    else:  # veasy: many pilots all correct, so problems are evicted and steps pilot more than one round
        assert st.hist[: cfg.d, al.H_OUT].sum() > 0
        assert st.hist[: cfg.d, al.H_G].sum() == t["compute"][-1]


def test_pilot_commit_that_keeps_every_pilot_spends_the_fixed_compute():
    """band [0, 1] and no eviction: every pilot is committed, one round a step of bp (pilot + commit) = bp n,
    so the steps and their compute are the fixed path's."""
    cfg = SimConfig(**SMALL, allocator="pilot-commit:lower=0,upper=0,evict=2")
    t = run(cfg).table
    assert np.array_equal(t["m"] * cfg.bp * cfg.n, t["compute"]) and t["m"][-1] == cfg.steps
