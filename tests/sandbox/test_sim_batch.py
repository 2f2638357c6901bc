"""run_many (threads over runs) equals run() bit for bit; the exact skips and samplers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sim_helpers import assert_close_across_cpus  # noqa: E402  (pytest puts this folder on sys.path)

from sandbox import SimConfig, run, run_many
from sandbox.runner import prepare

SMALL = dict(d=64, d_val=32, bp=8, budget=2**13, n_evals=8)


def _same(a, b):
    assert a.status == b.status and a.diverged_step == b.diverged_step and a.reason == b.reason
    assert a.table.keys() == b.table.keys()
    for k in a.table:
        if a.table[k].dtype.kind == "f":
            np.testing.assert_array_equal(a.table[k], b.table[k], err_msg=k)
        else:
            assert np.array_equal(a.table[k], b.table[k]), k
    for k in a.pass1:
        np.testing.assert_array_equal(a.pass1[k], b.pass1[k], err_msg=k)


def test_run_many_equals_run_alone_across_n_seeds_models_and_options():
    cfgs = [SimConfig(model=m, n=n, seed=s, problem_seed=s, **SMALL)
            for m in ("tabular", "interference") for n in (2, 4, 16, 64) for s in (0, 1)]
    cfgs += [SimConfig(model="tabular", n=8, optimizer="sgd", lr=1.0, **SMALL),
             SimConfig(model="tabular", n=8, objective="ppo", ppo_epochs=2, minibatches=2, kl_coef=0.1,
                       **SMALL),
             SimConfig(model="interference", n=8, n_est=4, response_len=30.0, metric_mode="sampled", **SMALL),
             SimConfig(model="linear", share=0.5, n=4, sampler="chain", **SMALL),
             SimConfig(model="tabular", n=4, bp=16, n_evals=5, snapshots=False,
                       **{k: v for k, v in SMALL.items() if k not in ("bp", "n_evals")})]
    batched = run_many(cfgs, threads=2)
    for c, b in zip(cfgs, batched, strict=True):
        assert b.config == c
        _same(run(c), b)
    _same(run_many(cfgs[:3], threads=1)[2], batched[2])


def test_run_many_keeps_a_diverging_run_apart(monkeypatch):
    import sandbox.runner as runner

    real = runner.build_policy

    def poisoned(config, problems):
        pol = real(config, problems)
        if config.seed == 1:
            pol.theta0[-1] = np.inf
        return pol

    monkeypatch.setattr(runner, "build_policy", poisoned)
    cfgs = [SimConfig(model="linear", share=0.5, seed=s, n=4, **SMALL) for s in (0, 1, 2)]
    out = run_many(cfgs, threads=2)
    assert [r.status for r in out] == ["done", "diverged", "done"]
    for c, r in zip(cfgs, out, strict=True):
        _same(run(c), r)


@pytest.mark.parametrize("model,extra", [("tabular", {}), ("tabular", dict(optimizer="sgd", lr=1.0)),
                                         ("tabular", dict(optimizer="adamw", weight_decay=0.1)),
                                         ("interference", {}), ("linear", dict(share=0.5))])
def test_skipping_zero_gradient_work_is_exact(model, extra):
    """Marking every block as already moved disables the skips: the parameters must not change by a bit."""
    cfg = SimConfig(model=model, n=2, dataset="hard", **SMALL, **extra)
    a, b = prepare(cfg), prepare(cfg)
    b.moved[:] = True
    assert a.train_to(cfg.steps) == b.train_to(cfg.steps) == 0
    np.testing.assert_array_equal(a.theta, b.theta)
    np.testing.assert_array_equal(a.m1, b.m1)
    assert not a.moved.all()  # some hard problems never had signal, so work was skipped


def test_chain_sampler_with_population_std_reproduces_the_earlier_simulator():
    """sampler="chain", adv_std="population", adv_eps=0: the random stream and arithmetic of the simulator
    before the sample std and the batched sampler became its defaults. data/chain_reference.npz holds its
    tabular pass@1 snapshots and train_mean curves
    (their hashes were recorded at commit bbdf947; the arrays were saved at c76ad45 on an AMD EPYC, where they
    still hashed the same), compared within the cross-CPU tolerance (sim_helpers.XCPU_RTOL)."""
    legacy = dict(sampler="chain", adv_std="population", adv_eps=0.0)
    extras = [(2, {}), (8, {"response_len": 50.0}), (32, {"n_est": 4}),
              (8, {"objective": "ppo", "ppo_epochs": 2, "minibatches": 2, "kl_coef": 0.1})]
    ref = np.load(Path(__file__).parent / "data" / "chain_reference.npz")
    for i, (n, extra) in enumerate(extras):
        r = run(SimConfig(model="tabular", n=n, **SMALL, **legacy, **extra))
        assert_close_across_cpus(r.pass1["train"], ref[f"{i}/pass1_train"], err_msg=f"{n} {extra}")
        assert_close_across_cpus(r.table["train_mean"], ref[f"{i}/train_mean"], err_msg=f"{n} {extra}")


def test_categorical_sampler_matches_the_chain_in_distribution():
    """Both samplers are exact: the mean curves of the same configs agree within their seed noise."""
    finals = {}
    for sampler in ("auto", "chain"):
        vals = [run(SimConfig(model="tabular", n=4, seed=s, problem_seed=0, sampler=sampler, snapshots=False,
                              **SMALL)).table["train_mean"][-1] for s in range(24)]
        finals[sampler] = np.array(vals)
    a, c = finals["auto"], finals["chain"]
    se = np.sqrt(a.var(ddof=1) / a.size + c.var(ddof=1) / c.size)
    assert abs(a.mean() - c.mean()) < 4 * se
    assert not np.array_equal(a, c)
