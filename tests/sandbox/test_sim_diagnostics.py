"""The simulator's public diagnostics (sandbox/diagnostics.py), one zero threshold, batch_reward,
and the advantage convention options (adv_std, adv_eps)."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox import (
    ZERO_PASS1,
    ConfigError,
    SimConfig,
    gradient_pieces,
    metrics_of,
    pass1_of,
    run,
    theory,
    train_snapshots,
)
from sandbox.runner import eval_steps

SMALL = dict(d=64, d_val=32, bp=8, n=8, budget=2**13, n_evals=8)


@pytest.mark.parametrize("model", ["tabular", "interference"])
def test_snapshots_reproduce_the_runner_rows_exactly(model):
    cfg = SimConfig(model=model, **SMALL)
    res = run(cfg)
    ev = eval_steps(cfg.steps, cfg.n_evals)
    snaps = train_snapshots(cfg, ev)
    assert len(snaps) == ev.size
    for e, theta in enumerate(snaps):
        met = metrics_of(cfg, theta)
        for col in ("train_mean", "val_mean", "val_best_k", "val_zero_frac", "kl"):
            assert met[col] == res.table[col][e], (e, col)
        tr, va = pass1_of(cfg, theta)
        np.testing.assert_array_equal(tr.astype(np.float32), res.pass1["train"][e])
        np.testing.assert_array_equal(va.astype(np.float32), res.pass1["val"][e])
    assert metrics_of(cfg, snaps[-1])["val_mean"] == res.table["val_mean"][-1]
    with pytest.raises(ValueError):
        train_snapshots(cfg, [4, 2])
    with pytest.raises(ValueError):
        train_snapshots(cfg, [cfg.steps + 1])


def test_gradient_pieces_average_to_the_expected_update():
    """Tabular at the initial policy: wrong answers are symmetric, so the mean piece of problem i on its own
    correct logit is theory.expected_update(p_i, n, K)[0] (sample std + eps, the config's convention)."""
    cfg = SimConfig(model="tabular", d=128, d_val=8, bp=8, n=4, K=4, budget=2**10)
    theta = train_snapshots(cfg, [0])[0]
    p0, _ = pass1_of(cfg, theta)
    from sandbox.problems import make_problems

    correct = make_problems(cfg).correct[: cfg.d]
    draws = []
    for seed in range(150):
        pcs = gradient_pieces(cfg, theta, problems=cfg.d, seed=seed)
        assert pcs.shape == (cfg.d, theta.size)
        # each row touches only its own problem's block; zero-variance groups give exact zero rows
        draws.append(pcs.reshape(cfg.d, cfg.d, cfg.K).sum(axis=0)[np.arange(cfg.d), correct].sum())
        nz = (pcs != 0).any(axis=1)
        assert 0 < nz.sum() < cfg.d
    want = sum(theory.expected_update(float(p), cfg.n, cfg.K)[0] for p in p0)
    draws = np.array(draws)
    assert abs(draws.mean() - want) < 4 * draws.std(ddof=1) / np.sqrt(draws.size)


def test_zero_frac_uses_the_one_threshold():
    r = run(SimConfig(dataset="hard", model="interference", **SMALL))
    for split in ("train", "val"):
        p = r.pass1[split].astype(np.float64)
        np.testing.assert_allclose(r.table[f"{split}_zero_frac"], (p < ZERO_PASS1).mean(axis=1), atol=1e-12)
    assert ZERO_PASS1 == 1e-3


def test_batch_reward_is_the_last_steps_mean_reward():
    """bp = d: every step trains on all problems, so E[batch_reward at step t] = train_mean at step t - 1."""
    cfg = SimConfig(model="tabular", d=64, d_val=8, bp=64, n=64, budget=64 * 64 * 12, n_evals=64, lr=0.02)
    r = run(cfg)
    br, tm, m = r.table["batch_reward"], r.table["train_mean"], r.table["m"]
    assert np.isnan(br[0]) and np.all((br[1:] >= 0) & (br[1:] <= 1))
    assert np.array_equal(m, np.arange(m.size))  # every step evaluated
    diff = br[1:] - tm[:-1]
    se = np.sqrt((tm[:-1] * (1 - tm[:-1])).sum() / (cfg.bp * cfg.n)) / diff.size
    assert abs(diff.mean()) < 4 * se + 1e-12


def test_advantage_std_options():
    base = run(SimConfig(**SMALL))
    pop = run(SimConfig(adv_std="population", **SMALL))
    assert not np.array_equal(base.pass1["train"], pop.pass1["train"])
    eps = run(SimConfig(adv_eps=0.5, **SMALL))
    assert not np.array_equal(base.pass1["train"], eps.pass1["train"])
    for extra in (dict(scale_rewards="batch"), dict(n_est=4), dict(n_est=4, adv_std="population")):
        assert run(SimConfig(**SMALL, **extra)).status == "done", extra
    for bad in (dict(adv_std="unbiased"), dict(adv_eps=-1e-4), dict(adv_eps=float("inf"))):
        with pytest.raises(ConfigError):
            SimConfig(**SMALL, **bad)
