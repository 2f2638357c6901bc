"""GRPO maths on a tiny randomly initialised Llama (no download, no prepared model): seconds on a CPU."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_backend import loss, trainer  # noqa: E402
from llm_backend.batch import make_padded_batch, token_logprobs  # noqa: E402
from llm_backend.config import ConfigError, LLMConfig  # noqa: E402

VOCAB = 32


def tiny_llama(seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(cfg).float()


def toy_batch(seed: int = 1, S: int = 4, **layout):
    """Prompts of 3-5 tokens, completions of 1-4 tokens, engine log-probs near the truth, fixed advantages
    (layout: make_padded_batch's microbatch and dtype)."""
    g = np.random.default_rng(seed)
    prompts = [g.integers(1, VOCAB, size=g.integers(3, 6)).tolist() for _ in range(S)]
    comps = [g.integers(1, VOCAB, size=g.integers(1, 5)).tolist() for _ in range(S)]
    elps = [(-3.0 + 0.3 * g.standard_normal(len(c))).tolist() for c in comps]
    adv = np.array([1.0, -1.0, 0.5, -0.5][:S])
    return make_padded_batch(prompts, comps, elps, adv, pad_id=0, **layout), prompts, comps


class Cfg:
    """Duck-typed subset of LLMConfig for the trainer."""

    def __init__(self, **kw):
        self.temperature, self.kl_coef, self.entropy_coef, self.tis_cap = 0.7, 0.1, 0.01, 2.0
        self.loss_agg, self.tiny_trainer = "token_mean", "compiled"
        self.objective, self.clip_eps, self.ppo_epochs, self.minibatches = "pg", 0.2, 1, 1
        self.n, self.max_grad_norm = 2, 1.0
        self.__dict__.update(kw)


def test_advantages_sample_std_default_population_option_and_zero_groups():
    r = np.array([[1, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 1]], float)
    eps = 1e-4
    a = loss.advantages(r)  # group, sample std, eps 1e-4: TRL's GRPOTrainer default
    s0 = math.sqrt(1 / 3)  # sample std of [1, 0, 0, 1]
    np.testing.assert_allclose(a[0], np.array([0.5, -0.5, -0.5, 0.5]) / (s0 + eps))
    np.testing.assert_array_equal(a[1], 0.0)  # all agree: exactly no signal
    s2 = math.sqrt(0.25)  # sample std of [0, 0, 0, 1]
    np.testing.assert_allclose(a[2], np.array([-0.25, -0.25, -0.25, 0.75]) / (s2 + eps))
    pop = loss.advantages(r, "group", adv_std="population", adv_eps=0.0)
    np.testing.assert_allclose(pop[0], [1, -1, -1, 1])
    np.testing.assert_allclose(pop[2], np.array([-0.25, -0.25, -0.25, 0.75]) / math.sqrt(0.1875))
    # sample / population ratio is sqrt(n / (n - 1)) at eps = 0 (x1.41 at n = 2)
    two = np.array([[1.0, 0.0]])
    pop2 = loss.advantages(two, adv_std="population", adv_eps=0)
    ratio = loss.advantages(two, adv_eps=0.0)[0, 0] / pop2[0, 0]
    assert ratio == pytest.approx(1 / math.sqrt(2))
    b = loss.advantages(r, "batch")
    np.testing.assert_allclose(b, (r - r.mean(1, keepdims=True)) / (r.std(ddof=1) + eps))
    np.testing.assert_allclose(loss.advantages(r, "none"), r - r.mean(1, keepdims=True))
    np.testing.assert_array_equal(loss.advantages(np.ones((2, 3)), "batch"), 0.0)
    g = np.random.default_rng(0).random((3, 5))  # non-binary rewards: torch.std (verl) agrees
    want = (g - g.mean(1, keepdims=True)) / (torch.tensor(g).std(1, keepdim=True).numpy() + 1e-6)
    np.testing.assert_allclose(loss.advantages(g, adv_eps=1e-6), want, rtol=1e-12)
    with pytest.raises(ValueError, match="adv_std"):
        loss.advantages(r, adv_std="unbiased")


def test_ratio_corrected_k3_has_the_reverse_kl_gradient_by_enumeration():
    """Exact E_{a~pi}[grad estimator(a)] over a small categorical == grad KL(pi || ref); k3 alone gives the
    forward KL(ref || pi) gradient instead (why kl_estimate weights it by the ratio, as TRL)."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(6, generator=g, dtype=torch.float64, requires_grad=True)
    ref = torch.log_softmax(torch.randn(6, generator=g, dtype=torch.float64), 0)
    logp = torch.log_softmax(z, 0)
    pi = logp.exp().detach()  # sampling probabilities: constants of the expectation
    expected = torch.autograd.grad((pi * loss.kl_estimate(logp, ref)).sum(), z, retain_graph=True)[0]
    reverse = torch.autograd.grad((logp.exp() * (logp - ref)).sum(), z, retain_graph=True)[0]
    torch.testing.assert_close(expected, reverse, rtol=1e-12, atol=1e-14)
    plain = torch.autograd.grad((pi * loss.k3(logp, ref)).sum(), z, retain_graph=True)[0]
    forward = torch.autograd.grad((ref.exp() * (ref - logp)).sum(), z, retain_graph=True)[0]
    torch.testing.assert_close(plain, forward, rtol=1e-12, atol=1e-14)
    assert not torch.allclose(plain, reverse)
    # off-policy (ppo epochs): samples from an old policy, ratio against it; still the reverse-KL gradient
    old = torch.log_softmax(torch.randn(6, generator=g, dtype=torch.float64), 0)
    off = torch.autograd.grad((old.exp() * loss.kl_estimate(logp, ref, old)).sum(), z)[0]
    torch.testing.assert_close(off, reverse, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("objective", ["pg", "ppo", "cispo"])
def test_objective_gradient_is_weight_times_advantage_times_score(objective):
    """grad of the policy term = -w * objective_weights(r, A) * A * grad logp / norm, the simulator's w_k."""
    g = torch.Generator().manual_seed(1)
    S, T = 6, 3
    logp = (-torch.rand(S, T, generator=g, dtype=torch.float64) * 2).requires_grad_(True)
    old = logp.detach() + 0.4 * torch.randn(S, T, generator=g, dtype=torch.float64)  # ratios across the clip
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0], dtype=torch.float64)
    mask = torch.ones(S, T, dtype=torch.float64)
    mask[0, 2] = 0
    eng = old - 0.1
    value, st = loss.grpo_loss(
        logp, eng, adv, mask, tis_cap=2.0, objective=objective, clip_eps=0.2, old_logp=old
    )
    (grad,) = torch.autograd.grad(value, logp)
    ratio = torch.exp(logp.detach() - old)
    w = loss.tis_weights(old, eng, 2.0)
    c = loss.objective_weights(ratio, adv[:, None].expand(S, T), objective, 0.2)
    want = -w * c * adv[:, None] * mask / mask.sum()
    torch.testing.assert_close(grad, want, rtol=1e-12, atol=1e-15)
    if objective == "ppo":
        assert 0 < st["clip_sum"] < mask.sum()  # the test reaches both sides of the clip
        assert (c == 0).any() and (c == ratio).any()
    # on-policy (old = sg(logp)) every objective is plain pg
    on, _ = loss.grpo_loss(logp, eng, adv, mask, tis_cap=2.0, objective=objective)
    pg, _ = loss.grpo_loss(logp, eng, adv, mask, tis_cap=2.0, objective="pg")
    torch.testing.assert_close(torch.autograd.grad(on, logp)[0], torch.autograd.grad(pg, logp)[0])


def test_k3_is_unbiased_for_kl_and_nonnegative():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(7, generator=g), 0)
    q = torch.softmax(torch.randn(7, generator=g), 0)
    vals = loss.k3(p.log(), q.log())
    assert (vals >= 0).all()
    exact_kl = float((p * (p.log() - q.log())).sum())
    assert float((p * vals).sum()) == pytest.approx(exact_kl, rel=1e-5)  # E_pi[k3] = KL(pi || ref)
    d = q.log() - p.log()
    torch.testing.assert_close(vals, torch.exp(d) - d - 1)


def test_tis_weights_formula_cap_and_no_gradient():
    logp = torch.tensor([-1.0, -2.0, -0.1], requires_grad=True)
    eng = torch.tensor([-1.5, -1.0, -3.0])
    w = loss.tis_weights(logp, eng, cap=2.0)
    torch.testing.assert_close(w, torch.tensor([math.exp(0.5), math.exp(-1.0), 2.0]))
    assert not w.requires_grad
    torch.testing.assert_close(loss.tis_weights(logp, eng, cap=0.0), torch.ones(3))


def test_token_logprobs_match_unpadded_prefix_computation():
    model = tiny_llama()
    batch, prompts, comps = toy_batch()
    logp, ent = token_logprobs(model, batch.input_ids, batch.attention_mask, 0.7, with_entropy=True)
    for i, (p, c) in enumerate(zip(prompts, comps, strict=True)):
        ids = torch.tensor([p + c])
        with torch.no_grad():
            lg = torch.log_softmax(model(input_ids=ids).logits[0, :-1] / 0.7, -1)
        want = lg.gather(-1, ids[0, 1:, None]).squeeze(-1)[len(p) - 1 :]
        got = logp[i][batch.comp_mask[i].bool()]
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        want_ent = -(lg.exp() * lg).sum(-1)[len(p) - 1 :]
        torch.testing.assert_close(ent[i][batch.comp_mask[i].bool()], want_ent, atol=1e-5, rtol=1e-5)


def _hand_loss(model, batch, cfg, ref_model):
    """The objective written out directly: mean over completion tokens of -w A logp + b k3 - c H."""
    ids, att, mask = batch.input_ids, batch.attention_mask, batch.comp_mask
    lg = torch.log_softmax(model(input_ids=ids, attention_mask=att).logits[:, :-1] / cfg.temperature, -1)
    logp = lg.gather(-1, ids[:, 1:, None]).squeeze(-1)
    with torch.no_grad():
        rl = torch.log_softmax(
            ref_model(input_ids=ids, attention_mask=att).logits[:, :-1] / cfg.temperature, -1
        )
        ref = rl.gather(-1, ids[:, 1:, None]).squeeze(-1)
        w = torch.clamp(torch.exp(logp - batch.engine_logp), max=cfg.tis_cap)
    ent = -(lg.exp() * lg).sum(-1)
    kl = torch.exp(logp - logp.detach()) * (torch.exp(ref - logp) - (ref - logp) - 1)  # ratio-corrected k3
    per = -w * batch.adv[:, None] * logp + cfg.kl_coef * kl - cfg.entropy_coef * ent
    return (per * mask).sum() / mask.sum()


@pytest.mark.parametrize("microbatch", [1, 3, 16])
def test_grpo_gradient_matches_hand_computation(microbatch):
    model, ref_model = tiny_llama(0), tiny_llama(5)
    batch, _, _ = toy_batch(microbatch=microbatch)
    cfg = Cfg()
    model.zero_grad()
    agg = trainer.backward(model, batch, cfg, ref_model)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    _hand_loss(model, batch, cfg, ref_model).backward()
    for g_got, p in zip(got, model.parameters(), strict=True):
        torch.testing.assert_close(g_got, p.grad, atol=1e-6, rtol=1e-4)
    assert agg["tokens"] == float(batch.comp_mask.sum())
    assert agg["kl_sum"] >= 0 and agg["entropy_sum"] > 0


def test_policy_gradient_matches_finite_differences():
    """Directional derivative of the PG term (fixed TIS weights) against a central difference."""
    model = tiny_llama(0).double()
    batch, _, _ = toy_batch()
    cfg = Cfg(kl_coef=0.0, entropy_coef=0.0, tis_cap=0.0)
    model.zero_grad()
    trainer.backward(model, batch, cfg)
    g = torch.Generator().manual_seed(3)
    dirs = [torch.randn(p.shape, generator=g, dtype=p.dtype) for p in model.parameters()]
    analytic = sum(float((p.grad * d).sum()) for p, d in zip(model.parameters(), dirs, strict=True))

    def pg_loss() -> float:
        with torch.no_grad():
            logp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask, cfg.temperature)
            m = batch.comp_mask.double()
            return float((-batch.adv.double()[:, None] * logp * m).sum() / m.sum())

    h = 1e-4  # rotary tables stay float32 inside Llama, so smaller steps hit round-off
    with torch.no_grad():
        for p, d in zip(model.parameters(), dirs, strict=True):
            p.add_(h * d)
    up = pg_loss()
    with torch.no_grad():
        for p, d in zip(model.parameters(), dirs, strict=True):
            p.add_(-2 * h * d)
    down = pg_loss()
    assert analytic == pytest.approx((up - down) / (2 * h), rel=3e-5)


def test_loss_value_at_update_is_minus_weighted_mean_advantage():
    model = tiny_llama()
    batch, _, _ = toy_batch()
    logp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask, 0.7)
    value, st = loss.grpo_loss(logp, batch.engine_logp, batch.adv, batch.comp_mask, tis_cap=2.0)
    w = torch.clamp(torch.exp(logp.detach() - batch.engine_logp), max=2.0)
    want = float((-w * batch.adv[:, None] * batch.comp_mask).sum() / batch.comp_mask.sum())
    assert float(value.detach()) == pytest.approx(want, rel=1e-6)
    seq = loss.grpo_loss(
        logp, batch.engine_logp, batch.adv, batch.comp_mask, tis_cap=2.0, loss_agg="seq_mean"
    )[0]
    per_seq = (-w * batch.adv[:, None] * batch.comp_mask).sum(1) / batch.comp_mask.sum(1)
    assert float(seq.detach()) == pytest.approx(float(per_seq.mean()), rel=1e-6)


def _adamw_step(model, batch, cfg, opt):
    opt.zero_grad()
    trainer.backward(model, batch, cfg)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def test_step_changes_parameters_and_zero_advantage_does_not():
    model = tiny_llama()
    batch, _, _ = toy_batch()
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    _adamw_step(model, batch, Cfg(kl_coef=0.0, entropy_coef=0.0), opt)
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
    model2 = tiny_llama()
    batch.adv.zero_()
    opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-2, weight_decay=0.0)
    _adamw_step(model2, batch, Cfg(kl_coef=0.0, entropy_coef=0.0), opt2)
    assert all(torch.equal(a, p) for a, p in zip(before, model2.parameters(), strict=True))


def test_checkpoint_resume_gives_identical_parameters(tmp_path):
    from llm_backend.checkpoint import Checkpointer

    batches = [toy_batch(seed=s)[0] for s in range(4)]
    cfg = Cfg()

    def fresh():
        m = tiny_llama()
        return m, torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.01)

    m1, o1 = fresh()
    for b in batches:
        _adamw_step(m1, b, cfg, o1)
    m2, o2 = fresh()
    for b in batches[:2]:
        _adamw_step(m2, b, cfg, o2)
    ck = Checkpointer(tmp_path)
    ck.save(2, m2, o2, {"step": 2})
    del m2, o2  # "killed"
    m3, o3 = tiny_llama(seed=99), None
    o3 = torch.optim.AdamW(m3.parameters(), lr=1e-2, weight_decay=0.01)
    state = Checkpointer.load(ck.latest(), m3, o3, "cpu")
    assert state["step"] == 2
    for b in batches[2:]:
        _adamw_step(m3, b, cfg, o3)
    for a, b in zip(m1.state_dict().values(), m3.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_lr_rule_and_config_errors():
    c = LLMConfig(n=4, bp=8, lr=1e-5, lr_ref_batch=128)
    assert c.effective_lr() == pytest.approx(1e-5 * math.sqrt(32 / 128))
    assert LLMConfig(n=4, bp=8, lr_rule="linear", lr_ref_batch=64).effective_lr() == pytest.approx(0.5e-5)
    with pytest.raises(ConfigError, match="scale_rewards"):
        LLMConfig(scale_rewards="std")
    with pytest.raises(ConfigError, match="n = 1"):
        LLMConfig(n=1)
    with pytest.raises(ConfigError, match="budget"):
        LLMConfig(n=4, bp=8, budget=16)
    for field in ("engine_dtype", "train_dtype"):
        with pytest.raises(ConfigError, match=f"unknown {field} 'float16'; choose one of float32, bfloat16"):
            LLMConfig(**{field: "float16"})


def test_bf16_training_gradient_is_the_float32_gradient_rounded():
    """train_dtype="bfloat16" (autocast) changes the gradient only by bf16 rounding: same direction, and
    not bit-identical (so the autocast really took effect); weights and grads stay float32."""
    grads = {}
    for dtype in ("float32", "bfloat16"):
        model, ref_model = tiny_llama(0), tiny_llama(5)
        batch, _, _ = toy_batch(dtype=dtype)
        model.zero_grad()
        trainer.backward(model, batch, Cfg(), ref_model)
        grads[dtype] = torch.cat([p.grad.flatten() for p in model.parameters()])
    g32, g16 = grads["float32"], grads["bfloat16"]
    assert g16.dtype == torch.float32 and not torch.equal(g32, g16)
    cos = float(g32 @ g16 / (g32.norm() * g16.norm()))
    assert cos > 0.999, cos  # measured 0.999997
    assert float((g16 - g32).norm() / g32.norm()) < 0.02  # measured 0.003


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_gradient_matches_cpu():
    """The trainer is device-agnostic (cpu / cuda): the same batch gives the same gradient."""
    grads = {}
    for dev in ("cpu", "cuda"):
        model, ref_model = tiny_llama(0).to(dev), tiny_llama(5).to(dev)
        batch, _, _ = toy_batch()
        tensors = ("input_ids", "attention_mask", "comp_mask", "engine_logp", "adv")
        batch = dataclasses.replace(batch, **{f: getattr(batch, f).to(dev) for f in tensors})
        model.zero_grad()
        trainer.backward(model, batch, Cfg(), ref_model)
        grads[dev] = [p.grad.detach().cpu() for p in model.parameters()]
    for a, b in zip(grads["cpu"], grads["cuda"], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-3)


def test_pg_train_step_is_the_single_update():
    """objective pg (ppo_epochs = minibatches = 1): zero_grad, backward, clip, one AdamW step; unchanged."""
    batch, _, _ = toy_batch()
    cfg = Cfg(kl_coef=0.0)
    m1, m2 = tiny_llama(), tiny_llama()
    o1 = torch.optim.AdamW(m1.parameters(), lr=1e-2, weight_decay=0.0)
    o2 = torch.optim.AdamW(m2.parameters(), lr=1e-2, weight_decay=0.0)
    _adamw_step(m1, batch, cfg, o1)
    out = trainer.train_step(m2, o2, batch, cfg)
    assert out["finite"] and out["updates"] == 1
    for a, b in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.equal(a, b)
    # ppo / cispo with one epoch and one minibatch make the same update (old = sg(logp): ratio 1)
    for objective in ("ppo", "cispo"):
        m3 = tiny_llama()
        o3 = torch.optim.AdamW(m3.parameters(), lr=1e-2, weight_decay=0.0)
        trainer.train_step(m3, o3, batch, Cfg(kl_coef=0.0, objective=objective))
        for a, b in zip(m1.parameters(), m3.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-7)


def test_ppo_epochs_and_minibatches_make_that_many_updates_against_the_rollout_policy():
    """2 epochs x 2 minibatches = 4 AdamW steps; the first equals a pg step on the first minibatch's groups,
    and later ones see ratios != 1 (the rollout-time log-probs are held fixed)."""
    batch, _, _ = toy_batch()  # 4 sequences = bp 2 groups of n 2
    cfg = Cfg(kl_coef=0.0, entropy_coef=0.0, objective="ppo", ppo_epochs=2, minibatches=2, clip_eps=0.05)
    model = tiny_llama()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-2, weight_decay=0.0)
    out = trainer.train_step(model, opt, batch, cfg)
    assert out["finite"] and out["updates"] == 4
    assert out["approx_kl_sum"] > 0  # the policy moved away from the rollout-time one within the step
    ref = tiny_llama()
    ro = torch.optim.AdamW(ref.parameters(), lr=5e-2, weight_decay=0.0)
    ro.zero_grad()
    trainer.backward(ref, batch, Cfg(kl_coef=0.0, entropy_coef=0.0), rows=slice(0, 2))
    g_first = [p.grad.clone() for p in ref.parameters()]
    m2 = tiny_llama()
    o2 = torch.optim.AdamW(m2.parameters(), lr=5e-2, weight_decay=0.0)
    o2.zero_grad()
    old = trainer.old_logprobs(m2, batch, cfg)
    trainer.backward(m2, batch, cfg, rows=trainer.update_slices([2, 2], 2)[0], old_logp=old)
    for a, p in zip(g_first, m2.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad, rtol=1e-5, atol=1e-7)
    assert [(s.start, s.stop) for s in trainer.update_slices([3] * 5, 2)] == [(0, 6), (6, 15)]


def test_objective_defaults_and_update_checks():
    c = LLMConfig()
    assert (c.adv_std, c.adv_eps, c.objective, c.clip_eps, c.ppo_epochs, c.minibatches) == (
        "sample", 1e-4, "pg", 0.2, 1, 1
    )
    with pytest.raises(ConfigError, match="need objective ppo or cispo"):
        LLMConfig(ppo_epochs=2)
    with pytest.raises(ConfigError, match="minibatches <= bp"):
        LLMConfig(objective="ppo", bp=2, minibatches=3)
    with pytest.raises(ConfigError, match="unknown adv_std"):
        LLMConfig(adv_std="n-1")
    LLMConfig(objective="cispo", ppo_epochs=2, minibatches=2)
