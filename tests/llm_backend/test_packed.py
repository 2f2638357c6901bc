"""The packed shared-prompt layout (llm_backend/packed.py) against the straightforward padded computation:
log-probs, loss, gradient and one AdamW step agree within float32 round-off (tiny random Llama, seconds)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_grpo import VOCAB, Cfg, tiny_llama  # noqa: E402  (pytest puts this folder on sys.path)
from tolerance import adam_first_step_atol, assert_close_reordered, reduction_atol  # noqa: E402

from llm_backend import trainer  # noqa: E402
from llm_backend.batch import make_padded_batch  # noqa: E402
from llm_backend.packed import make_packed_batch  # noqa: E402


def groups(seed: int = 2, bp: int = 3, n: int = 3):
    """bp prompts of 3-6 tokens, n completions each of 1-5 tokens (lengths differ within a group)."""
    g = np.random.default_rng(seed)
    prompts, comps, elps = [], [], []
    for _ in range(bp):
        p = g.integers(1, VOCAB, size=g.integers(3, 7)).tolist()
        for _ in range(n):
            c = g.integers(1, VOCAB, size=g.integers(1, 6)).tolist()
            prompts.append(p)
            comps.append(c)
            elps.append((-3.0 + 0.3 * g.standard_normal(len(c))).tolist())
    adv = g.standard_normal(bp * n)
    return prompts, comps, elps, adv


LAYOUTS = [dict(row_tokens=512, micro_tokens=4096), dict(row_tokens=9, micro_tokens=20)]
"""One row holding everything, and rows so short that groups split (prompt repeated) over microbatches."""


@pytest.mark.parametrize("layout", LAYOUTS)
def test_packed_logprobs_equal_the_padded_ones(layout):
    model = tiny_llama(0)
    prompts, comps, elps, adv = groups()
    pb = make_packed_batch(prompts, comps, elps, adv, n=3, **layout)
    if layout["row_tokens"] < 20:
        assert len(pb.chunks()) > 1
    old = trainer.old_logprobs(model, pb, Cfg())
    batch = make_padded_batch(prompts, comps, elps, adv, pad_id=0)
    ref = trainer.old_logprobs(model, batch, Cfg())
    for i, c in enumerate(comps):
        want = ref[i][batch.comp_mask[i].bool()]
        torch.testing.assert_close(old[i, : len(c)], want, atol=2e-6, rtol=1e-5)
        assert (old[i, len(c) :] == 0).all()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("loss_agg", ["token_mean", "seq_mean"])
def test_packed_gradient_and_adamw_step_equal_the_padded_ones(layout, loss_agg):
    prompts, comps, elps, adv = groups()
    cfg = Cfg(loss_agg=loss_agg, n=3, kl_coef=0.1, entropy_coef=0.01)
    out = {}
    for name in ("padded", "packed"):
        model, ref_model = tiny_llama(0), tiny_llama(5)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
        if name == "padded":
            batch = make_padded_batch(prompts, comps, elps, adv, pad_id=0)
        else:
            batch = make_packed_batch(prompts, comps, elps, adv, n=3, **layout)
        opt.zero_grad()
        agg = trainer.backward(model, batch, cfg, ref_model)
        grads = [p.grad.clone() for p in model.parameters()]
        opt.zero_grad()
        step = trainer.train_step(model, opt, batch, cfg, ref_model)
        out[name] = (agg, grads, [p.detach().clone() for p in model.parameters()], step)
    (a1, g1, p1, s1), (a2, g2, p2, s2) = out["padded"], out["packed"]
    assert a2["loss"] == pytest.approx(a1["loss"], rel=1e-5, abs=1e-7)
    for key in ("tokens", "kl_sum", "entropy_sum", "tis_sum"):
        assert a2[key] == pytest.approx(a1[key], rel=1e-5, abs=1e-6), key
    tokens = sum(len(p) + len(c) for p, c in zip(prompts, comps, strict=True))  # terms summed into a gradient
    for x, y in zip(g1, g2, strict=True):
        assert_close_reordered(y, x, terms=tokens)
    # one AdamW step (lr 1e-2) from the same start: float32 round-off of the update (atol 1e-6, rtol 1e-5)
    # plus the gradient's reordering error as Adam's per-element normalisation propagates it (tolerance.py);
    # that propagation assumes the step was not clipped (clipping would rescale both gradients)
    assert s1["grad_norm"] < cfg.max_grad_norm
    for g, x, y in zip(g1, p1, p2, strict=True):
        tol = 1e-6 + 1e-5 * x.abs() + adam_first_step_atol(g, reduction_atol(g, tokens), lr=1e-2)
        worst = float(((y - x).abs() - tol).max())
        assert worst <= 0, f"AdamW step differs beyond its tolerance by {worst:.2e}"
    assert s2["grad_norm"] == pytest.approx(s1["grad_norm"], rel=1e-5)


def test_packed_ppo_epochs_match_the_padded_ones():
    prompts, comps, elps, adv = groups()
    cfg = Cfg(n=3, kl_coef=0.0, entropy_coef=0.0, objective="ppo", ppo_epochs=2, minibatches=3)
    params = {}
    for name in ("padded", "packed"):
        model = tiny_llama(0)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
        if name == "padded":
            batch = make_padded_batch(prompts, comps, elps, adv, pad_id=0)
        else:
            batch = make_packed_batch(prompts, comps, elps, adv, n=3, row_tokens=9, micro_tokens=20)
        assert trainer.train_step(model, opt, batch, cfg)["updates"] == 6
        params[name] = [p.detach().clone() for p in model.parameters()]
    for x, y in zip(params["padded"], params["packed"], strict=True):
        torch.testing.assert_close(y, x, atol=2e-6, rtol=1e-5)


def test_packed_batch_refuses_groups_without_a_shared_prompt():
    prompts, comps, elps, adv = groups()
    prompts[1] = prompts[1] + [1]
    with pytest.raises(ValueError, match="share one prompt"):
        make_packed_batch(prompts, comps, elps, adv, n=3)


def test_bf16_master_weights_step_is_the_float32_step_rounded():
    """trainer.MasterWeights: bf16 forward/backward, float32 master weights and AdamW state. The gradient is
    the float32 one up to bf16 rounding (cosine > 0.999), one step lands near the float32 step, the master
    stays float32 and the compute copy equals the master rounded to bf16 afterwards."""
    prompts, comps, elps, adv = groups()
    cfg = Cfg(n=3, kl_coef=0.0, entropy_coef=0.0)
    pb = make_packed_batch(prompts, comps, elps, adv, n=3)
    m32 = tiny_llama(0)
    o32 = torch.optim.AdamW(m32.parameters(), lr=1e-3, weight_decay=0.0)
    trainer.backward(m32, pb, cfg)
    g32 = torch.cat([p.grad.flatten() for p in m32.parameters()])
    master = tiny_llama(0)
    mixed = trainer.MasterWeights(master)
    trainer.backward(mixed.compute, pb, cfg)
    mixed.grads_to_master()
    g16 = torch.cat([p.grad.flatten() for p in master.parameters()])
    assert g16.dtype == torch.float32 and not torch.equal(g16, g32)
    assert float(g32 @ g16 / (g32.norm() * g16.norm())) > 0.999
    m32.zero_grad()
    trainer.train_step(m32, o32, pb, cfg)
    omix = torch.optim.AdamW(master.parameters(), lr=1e-3, weight_decay=0.0)
    trainer.train_step(master, omix, pb, cfg, mixed=mixed)
    for a, b, c in zip(m32.parameters(), master.parameters(), mixed.compute.parameters(), strict=True):
        assert b.dtype == torch.float32 and c.dtype == torch.bfloat16
        torch.testing.assert_close(b, a, atol=2e-3, rtol=0)  # lr 1e-3: Adam's step is ~lr per coordinate
        assert torch.equal(c, b.to(torch.bfloat16))
    state = next(iter(omix.state.values()))
    assert state["exp_avg"].dtype == torch.float32


def test_cached_engine_starts_once_per_model_and_options(monkeypatch):
    """engines.cached_engine: one engine per (model path, dtype, options) in a process, weights synced on
    every hand-out; another key closes the old engine first (one engine at a time)."""
    from llm_backend import engines

    started, closed, synced = [], [], []

    class FakeVLLM:
        def __init__(self, path, tok, seed=0, dtype="float32", **kw):
            started.append((path, dtype, tuple(sorted(kw.items()))))

        def sync_weights(self, model):
            synced.append(model)

        def close(self):
            closed.append(self)

    monkeypatch.setattr(engines, "VLLMEngine", FakeVLLM)
    monkeypatch.setattr(engines, "vllm_available", lambda: True)
    monkeypatch.setattr(engines, "_ENGINE_CACHE", {})
    a = engines.cached_engine("m1", None, "/p", dtype="bfloat16", max_model_len=512)
    b = engines.cached_engine("m2", None, "/p", seed=7, dtype="bfloat16", max_model_len=512)
    assert a is b and len(started) == 1 and synced == ["m1", "m2"]
    c = engines.cached_engine("m3", None, "/p", dtype="float32", max_model_len=512)
    assert c is not a and len(started) == 2 and closed == [a]
    engines.close_cached_engines()
    assert closed == [a, c] and not engines._ENGINE_CACHE
