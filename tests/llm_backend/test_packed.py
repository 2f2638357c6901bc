"""The packed shared-prompt layout (llm_backend/packed.py) against the straightforward padded computation:
log-probs, loss, gradient and one AdamW step agree within float32 round-off (tiny random Llama, seconds)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_grpo import VOCAB, Cfg, tiny_llama  # noqa: E402  (pytest puts this folder on sys.path)

from llm_backend import grpo  # noqa: E402
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
        assert len(pb.plan()) > 1
    old = grpo.packed_old_logprobs(model, pb, Cfg())
    batch = grpo.make_batch(prompts, comps, elps, adv, pad_id=0)
    ref = grpo.old_logprobs(model, batch, Cfg())
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
            batch = grpo.make_batch(prompts, comps, elps, adv, pad_id=0)
        else:
            batch = make_packed_batch(prompts, comps, elps, adv, n=3, **layout)
        backward = grpo.grpo_backward if name == "padded" else grpo.packed_backward
        opt.zero_grad()
        agg = backward(model, batch, cfg, ref_model)
        grads = [p.grad.clone() for p in model.parameters()]
        opt.zero_grad()
        step = grpo.train_step(model, opt, batch, cfg, ref_model)
        out[name] = (agg, grads, [p.detach().clone() for p in model.parameters()], step)
    (a1, g1, p1, s1), (a2, g2, p2, s2) = out["padded"], out["packed"]
    assert a2["loss"] == pytest.approx(a1["loss"], rel=1e-5, abs=1e-7)
    for key in ("tokens", "kl_sum", "entropy_sum", "tis_sum"):
        assert a2[key] == pytest.approx(a1[key], rel=1e-5, abs=1e-6), key
    for x, y in zip(g1, g2, strict=True):
        torch.testing.assert_close(y, x, atol=1e-6, rtol=1e-4)
    for x, y in zip(p1, p2, strict=True):  # one AdamW step (lr 1e-2) from the same start
        torch.testing.assert_close(y, x, atol=1e-6, rtol=1e-5)
    assert s2["grad_norm"] == pytest.approx(s1["grad_norm"], rel=1e-5)


def test_packed_ppo_epochs_match_the_padded_ones():
    prompts, comps, elps, adv = groups()
    cfg = Cfg(n=3, kl_coef=0.0, entropy_coef=0.0, objective="ppo", ppo_epochs=2, minibatches=3)
    params = {}
    for name in ("padded", "packed"):
        model = tiny_llama(0)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
        if name == "padded":
            batch = grpo.make_batch(prompts, comps, elps, adv, pad_id=0)
        else:
            batch = make_packed_batch(prompts, comps, elps, adv, n=3, row_tokens=9, micro_tokens=20)
        assert grpo.train_step(model, opt, batch, cfg)["updates"] == 6
        params[name] = [p.detach().clone() for p in model.parameters()]
    for x, y in zip(params["padded"], params["packed"], strict=True):
        torch.testing.assert_close(y, x, atol=2e-6, rtol=1e-5)


def test_packed_batch_refuses_groups_without_a_shared_prompt():
    prompts, comps, elps, adv = groups()
    prompts[1] = prompts[1] + [1]
    with pytest.raises(ValueError, match="share one prompt"):
        make_packed_batch(prompts, comps, elps, adv, n=3)
