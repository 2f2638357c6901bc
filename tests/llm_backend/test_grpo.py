"""GRPO maths on a tiny randomly initialised Llama (no download, no prepared model): seconds on a CPU."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_backend import grpo  # noqa: E402
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


def toy_batch(seed: int = 1, S: int = 4):
    """Prompts of 3-5 tokens, completions of 1-4 tokens, engine log-probs near the truth, fixed advantages."""
    g = np.random.default_rng(seed)
    prompts = [g.integers(1, VOCAB, size=g.integers(3, 6)).tolist() for _ in range(S)]
    comps = [g.integers(1, VOCAB, size=g.integers(1, 5)).tolist() for _ in range(S)]
    elps = [(-3.0 + 0.3 * g.standard_normal(len(c))).tolist() for c in comps]
    adv = np.array([1.0, -1.0, 0.5, -0.5][:S])
    return grpo.make_batch(prompts, comps, elps, adv, pad_id=0), prompts, comps


class Cfg:
    """Duck-typed subset of LLMConfig for grpo_backward."""

    def __init__(self, **kw):
        self.temperature, self.kl_coef, self.entropy_coef, self.tis_cap = 0.7, 0.1, 0.01, 2.0
        self.loss_agg, self.microbatch = "token_mean", 16
        self.__dict__.update(kw)


def test_advantages_group_batch_none():
    r = np.array([[1, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 1]], float)
    a = grpo.advantages(r, "group")
    np.testing.assert_allclose(a[0], [1, -1, -1, 1])  # mean 0.5, population std 0.5
    np.testing.assert_array_equal(a[1], 0.0)  # all agree: no signal
    np.testing.assert_allclose(a[2], np.array([-0.25, -0.25, -0.25, 0.75]) / math.sqrt(0.1875))
    b = grpo.advantages(r, "batch")
    np.testing.assert_allclose(b, (r - r.mean(1, keepdims=True)) / r.std())
    np.testing.assert_allclose(grpo.advantages(r, "none"), r - r.mean(1, keepdims=True))
    np.testing.assert_array_equal(grpo.advantages(np.ones((2, 3)), "batch"), 0.0)


def test_k3_is_unbiased_for_kl_and_nonnegative():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(7, generator=g), 0)
    q = torch.softmax(torch.randn(7, generator=g), 0)
    vals = grpo.k3(p.log(), q.log())
    assert (vals >= 0).all()
    exact_kl = float((p * (p.log() - q.log())).sum())
    assert float((p * vals).sum()) == pytest.approx(exact_kl, rel=1e-5)  # E_pi[k3] = KL(pi || ref)
    d = q.log() - p.log()
    torch.testing.assert_close(vals, torch.exp(d) - d - 1)


def test_tis_weights_formula_cap_and_no_gradient():
    logp = torch.tensor([-1.0, -2.0, -0.1], requires_grad=True)
    eng = torch.tensor([-1.5, -1.0, -3.0])
    w = grpo.tis_weights(logp, eng, cap=2.0)
    torch.testing.assert_close(w, torch.tensor([math.exp(0.5), math.exp(-1.0), 2.0]))
    assert not w.requires_grad
    torch.testing.assert_close(grpo.tis_weights(logp, eng, cap=0.0), torch.ones(3))


def test_token_logprobs_match_unpadded_prefix_computation():
    model = tiny_llama()
    batch, prompts, comps = toy_batch()
    logp, ent = grpo.token_logprobs(model, batch.input_ids, batch.attention_mask, 0.7, with_entropy=True)
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
    kl = torch.exp(ref - logp) - (ref - logp) - 1
    per = -w * batch.adv[:, None] * logp + cfg.kl_coef * kl - cfg.entropy_coef * ent
    return (per * mask).sum() / mask.sum()


@pytest.mark.parametrize("microbatch", [1, 3, 16])
def test_grpo_gradient_matches_hand_computation(microbatch):
    model, ref_model = tiny_llama(0), tiny_llama(5)
    batch, _, _ = toy_batch()
    cfg = Cfg(microbatch=microbatch)
    model.zero_grad()
    agg = grpo.grpo_backward(model, batch, cfg, ref_model)
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
    grpo.grpo_backward(model, batch, cfg)
    g = torch.Generator().manual_seed(3)
    dirs = [torch.randn(p.shape, generator=g, dtype=p.dtype) for p in model.parameters()]
    analytic = sum(float((p.grad * d).sum()) for p, d in zip(model.parameters(), dirs, strict=True))

    def pg_loss() -> float:
        with torch.no_grad():
            logp, _ = grpo.token_logprobs(model, batch.input_ids, batch.attention_mask, cfg.temperature)
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
    logp, _ = grpo.token_logprobs(model, batch.input_ids, batch.attention_mask, 0.7)
    loss, st = grpo.grpo_loss(logp, batch.engine_logp, batch.adv, batch.comp_mask, tis_cap=2.0)
    w = torch.clamp(torch.exp(logp.detach() - batch.engine_logp), max=2.0)
    want = float((-w * batch.adv[:, None] * batch.comp_mask).sum() / batch.comp_mask.sum())
    assert float(loss.detach()) == pytest.approx(want, rel=1e-6)
    seq = grpo.grpo_loss(
        logp, batch.engine_logp, batch.adv, batch.comp_mask, tis_cap=2.0, loss_agg="seq_mean"
    )[0]
    per_seq = (-w * batch.adv[:, None] * batch.comp_mask).sum(1) / batch.comp_mask.sum(1)
    assert float(seq.detach()) == pytest.approx(float(per_seq.mean()), rel=1e-6)


def _adamw_step(model, batch, cfg, opt):
    opt.zero_grad()
    grpo.grpo_backward(model, batch, cfg)
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
    from llm_backend.runner import _Checkpointer

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
    ck = _Checkpointer(tmp_path)
    ck.save(2, m2, o2, {"step": 2})
    del m2, o2  # "killed"
    m3, o3 = tiny_llama(seed=99), None
    o3 = torch.optim.AdamW(m3.parameters(), lr=1e-2, weight_decay=0.01)
    state = _Checkpointer.load(ck.latest(), m3, o3, "cpu")
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
        batch, _, _ = toy_batch()
        model.zero_grad()
        grpo.grpo_backward(model, batch, Cfg(train_dtype=dtype), ref_model)
        grads[dtype] = torch.cat([p.grad.flatten() for p in model.parameters()])
    g32, g16 = grads["float32"], grads["bfloat16"]
    assert g16.dtype == torch.float32 and not torch.equal(g32, g16)
    cos = float(g32 @ g16 / (g32.norm() * g16.norm()))
    assert cos > 0.999, cos  # measured 0.999997
    assert float((g16 - g32).norm() / g32.norm()) < 0.02  # measured 0.003


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_gradient_matches_cpu():
    """The trainer is device-agnostic (issue 6: cpu / cuda): the same batch gives the same gradient."""
    grads = {}
    for dev in ("cpu", "cuda"):
        model, ref_model = tiny_llama(0).to(dev), tiny_llama(5).to(dev)
        batch, _, _ = toy_batch()
        batch = grpo.Batch(*(getattr(batch, f).to(dev) for f in batch.__dataclass_fields__))
        model.zero_grad()
        grpo.grpo_backward(model, batch, Cfg(), ref_model)
        grads[dev] = [p.grad.detach().cpu() for p in model.parameters()]
    for a, b in zip(grads["cpu"], grads["cuda"], strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-3)
