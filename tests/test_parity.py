"""The same GRPO math on both backends (docs/DESIGN.md "Semantics shared by both backends").

A simulated problem is a categorical policy over K answers (logits z); a real-model completion of one token
is the same object. Identical rewards and log-probabilities go through the simulator's kernels
(sandbox.grpo: reward_std, advantages, logit_gradient) and the LLM trainer's functions (llm_backend.loss:
advantages, grpo_loss); advantages and loss gradients must agree. The KL term is compared in expectation
(the LLM uses a sampled estimator, the simulator the exact KL), by enumeration over the K answers.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from llm_backend import loss as lg  # noqa: E402
from sandbox import grpo as sg  # noqa: E402

SCALE = {"group": sg.SCALE_GROUP, "batch": sg.SCALE_BATCH, "none": sg.SCALE_NONE}
OBJ = {"pg": sg.PG, "ppo": sg.PPO, "cispo": sg.CISPO}


def sim_advantages(rewards: np.ndarray, scale: str, adv_std: str, eps: float) -> np.ndarray:
    """Per-rollout advantages from the simulator's kernels (it works on counts: c correct of n)."""
    bp, n = rewards.shape
    sample = adv_std == "sample"
    bmean = rewards.mean()
    bstd = sg.reward_std(bmean, bp * n, sample)
    out = np.zeros_like(rewards, dtype=np.float64)
    for b in range(bp):
        c = int(rewards[b].sum())
        mean = c / n
        ac, aw = sg.advantages(c, n, mean, sg.reward_std(mean, n, sample), SCALE[scale], bstd, eps)
        if c in (0, n):  # the runner's rule: a group whose rewards agree carries no signal
            ac, aw = 0.0, 0.0
        out[b] = np.where(rewards[b] == 1, ac, aw)
    return out


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
@pytest.mark.parametrize("adv_std", ["sample", "population"])
@pytest.mark.parametrize("n", [2, 3, 8])
def test_advantages_agree(scale, adv_std, n):
    rng = np.random.default_rng(n)
    rewards = (rng.random((16, n)) < rng.random((16, 1))).astype(np.float64)
    rewards[0] = 1.0  # a group that agrees
    rewards[1] = 0.0
    eps = 1e-4
    llm = lg.advantages(rewards, scale, adv_std, eps)
    sim = sim_advantages(rewards, scale, adv_std, eps)
    if scale == "none":  # no std: the LLM keeps r - mean, which is 0 where a group agrees as well
        np.testing.assert_allclose(llm, sim, rtol=0, atol=1e-12)
    else:
        np.testing.assert_allclose(llm, sim, rtol=1e-12, atol=1e-12)
    assert (llm[:2] == 0).all()


def test_sample_std_is_trl_and_verl_convention():
    """(r - mean) / (std_unbiased + eps): TRL GRPOTrainer (eps 1e-4), verl compute_grpo_outcome_advantage."""
    r = np.array([[1.0, 0.0, 0.0, 1.0, 1.0]])
    t = torch.tensor(r[0])
    want = ((t - t.mean()) / (t.std(unbiased=True) + 1e-4)).numpy()
    np.testing.assert_allclose(lg.advantages(r, "group", "sample", 1e-4)[0], want, rtol=1e-12)


def _llm_logit_gradient(z, answers, adv, objective, clip, z_old, kl_coef=0.0, z_ref=None, ent_coef=0.0):
    """d(LLM loss)/dz for n one-token completions `answers` of a categorical with logits z."""
    zt = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    logp_all = torch.log_softmax(zt, -1)
    idx = torch.tensor(answers)
    logp = logp_all[idx][:, None]  # (n, 1): one token per sequence
    old = torch.log_softmax(torch.tensor(z_old, dtype=torch.float64), -1)[idx][:, None]
    ref = None
    if z_ref is not None:
        ref = torch.log_softmax(torch.tensor(z_ref, dtype=torch.float64), -1)[idx][:, None]
    entropy = -(logp_all.exp() * logp_all).sum().expand(len(answers))[:, None]
    loss, _ = lg.grpo_loss(
        logp, old.clone(), torch.tensor(adv, dtype=torch.float64), torch.ones_like(logp), ref_logp=ref,
        entropy=entropy, kl_coef=kl_coef, entropy_coef=ent_coef, tis_cap=0.0, loss_agg="seq_mean",
        objective=objective, clip_eps=clip, old_logp=None if objective == "pg" else old,
    )
    loss.backward()
    return zt.grad.numpy()


def _sim_logit_gradient(z, counts, corr, a_c, a_w, objective, clip, z_old, kl=0.0, z_ref=None, ent=0.0):
    K = z.size
    pi = np.exp(z - z.max())
    pi /= pi.sum()
    logp = np.log(pi)
    lo = z_old - z_old.max()
    logp_old = lo - np.log(np.exp(lo).sum())
    logp0 = logp if z_ref is None else (z_ref - z_ref.max()) - np.log(np.exp(z_ref - z_ref.max()).sum())
    out = np.zeros(K)
    sg.logit_gradient(counts.astype(np.float64), int(counts.sum()), corr, a_c, a_w, pi, logp, logp_old,
                      np.asarray(logp0, dtype=np.float64), OBJ[objective], clip, kl, ent, out)
    return out


@pytest.mark.parametrize("objective", ["pg", "ppo", "cispo"])
def test_policy_gradient_agrees(objective):
    rng = np.random.default_rng(1)
    K, n, corr = 6, 8, 2
    z = rng.normal(size=K)
    # ppo / cispo: a rollout-time policy away from the current one, so that clipping is active somewhere
    z_old = z + (rng.normal(scale=0.6, size=K) if objective != "pg" else 0.0)
    answers = rng.choice(K, size=n, p=np.exp(z) / np.exp(z).sum())
    answers[:3] = corr
    rewards = (answers == corr).astype(np.float64)[None]
    adv = lg.advantages(rewards, "group", "sample", 1e-4)[0]
    a_c, a_w = adv[answers == corr][0], adv[answers != corr][0]
    counts = np.bincount(answers, minlength=K)
    g_llm = _llm_logit_gradient(z, answers, adv, objective, 0.2, z_old)
    g_sim = _sim_logit_gradient(z, counts, corr, a_c, a_w, objective, 0.2, z_old)
    np.testing.assert_allclose(g_llm, -g_sim, rtol=1e-10, atol=1e-12)  # loss gradient = -ascent direction
    if objective == "ppo":
        r = np.exp(np.log(np.exp(z) / np.exp(z).sum()) - np.log(np.exp(z_old) / np.exp(z_old).sum()))
        assert ((r > 1.2) | (r < 0.8)).any()  # the clip was exercised


def test_entropy_term_agrees():
    rng = np.random.default_rng(2)
    K, n = 5, 4
    z = rng.normal(size=K)
    answers = np.array([0, 1, 1, 3])
    adv = np.zeros(n)
    g_llm = _llm_logit_gradient(z, answers, adv, "pg", 0.2, z, ent_coef=0.3)
    g_sim = _sim_logit_gradient(z, np.bincount(answers, minlength=K), 0, 0.0, 0.0, "pg", 0.2, z, ent=0.3)
    np.testing.assert_allclose(g_llm, -g_sim, rtol=1e-10, atol=1e-12)


def test_kl_term_agrees_in_expectation_by_enumeration():
    """E_{a ~ pi}[grad of the LLM's sampled KL term] = the simulator's exact grad KL(pi || pi_ref)."""
    rng = np.random.default_rng(3)
    K = 7
    z, z_ref = rng.normal(size=K), rng.normal(size=K)
    pi = np.exp(z - z.max())
    pi /= pi.sum()
    expected = sum(
        pi[k] * _llm_logit_gradient(z, np.array([k]), np.zeros(1), "pg", 0.2, z, kl_coef=0.5, z_ref=z_ref)
        for k in range(K)
    )
    one = np.eye(K, dtype=np.int64)[0]  # one rollout with zero advantage: only the KL term moves z
    g_sim = _sim_logit_gradient(z, one, 0, 0.0, 0.0, "pg", 0.2, z, kl=0.5, z_ref=z_ref)
    np.testing.assert_allclose(expected, -g_sim, rtol=1e-10, atol=1e-12)
