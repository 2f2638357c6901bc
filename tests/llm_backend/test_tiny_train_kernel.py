"""The compiled training forward and backward of the tiny LM (llm_backend/tiny/train_kernel.py) against the
torch path (packed.micro_logprobs with compiled=False, LLMConfig.tiny_trainer "torch"): log-probs, entropies
and every parameter's gradient on real packed batches, the gradient against finite differences, the
fall-back where the kernel does not serve, determinism, and a whole short run against the torch path's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from llm_backend import tasks  # noqa: E402
from llm_backend.config import config_for  # noqa: E402
from llm_backend.loop import run  # noqa: E402
from llm_backend.model import load_model, load_tokenizer, resolve_model  # noqa: E402
from llm_backend.packed import make_packed_batch, micro_logprobs  # noqa: E402
from llm_backend.problems import load_problems  # noqa: E402
from llm_backend.tiny import train_kernel  # noqa: E402
from llm_backend.tiny.model import SIZES, init_model  # noqa: E402
from llm_backend.tiny.sampler import KVEngine  # noqa: E402

LOGP_ATOL = 5e-5
"""Compiled vs torch log-probs and entropies of the same tokens (float32 sums in another order, the kernel's
exp; seen on an AMD EPYC with AVX-512: log-probs <= 1.0e-5, the largest at unlikely tokens, entropies
<= 2.1e-6)."""

GRAD_RTOL = 1e-4
"""Largest gradient difference of a parameter relative to its largest gradient entry (seen <= 1.8e-5)."""

FD_RTOL = 1e-3
"""Finite difference vs the kernel's directional derivative, relative (seen 0.5e-4 to 2.5e-4 over steps
5e-4 to 2e-3, and the same for the torch path's: the float32 loss's round-off over the step)."""

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    path = resolve_model("tiny")
    model, tok = load_model(path), load_tokenizer(path)
    train, _ = load_problems(config_for("tiny", dataset="easy"))
    return model, tok, [tasks.build_prompt(tok, p.question) for p in train[:16]]


def _batch(model, tok, prompts, n, seed, **kw):
    """A packed batch of n drawn completions of each prompt (random advantages)."""
    ro = KVEngine(model, tok).generate(prompts, n, 10, 1.0, seed=seed)
    S = len(ro.token_ids)
    adv = np.random.default_rng(seed).normal(size=S)
    return make_packed_batch(ro.prompt_ids, ro.token_ids, ro.logprobs, adv, n, pad_id=tok.pad_token_id, **kw)


def _both(model, mb, T, temperature, trainer, weights):
    """(lp, ent, grads) of sum(w_lp * lp + w_ent * ent) under `trainer`."""
    model.zero_grad(set_to_none=True)
    lp, ent = micro_logprobs(model, mb, T, temperature, with_entropy=True, entropy_grad=True,
                             compiled=trainer == "compiled")
    ((lp * weights[0]).sum() + (ent * weights[1]).sum()).backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters()}
    return lp.detach(), ent.detach(), grads


@pytest.mark.llm
@pytest.mark.parametrize("n,temperature,row_tokens,micro_tokens", [(4, 1.0, 64, 2048), (8, 0.7, 64, 2048),
                                                                    (3, 1.0, 512, 2048), (16, 1.0, 64, 192)])
def test_logprobs_and_gradients_equal_the_torch_path(tiny, n, temperature, row_tokens, micro_tokens):
    model, tok, prompts = tiny
    pb = _batch(model, tok, prompts, n, seed=n, row_tokens=row_tokens, micro_tokens=micro_tokens)
    T = pb.comp_mask.shape[1]
    g = torch.Generator().manual_seed(1)
    assert (len(pb.chunks()) > 1) == (micro_tokens < 2048)
    for mb in pb.chunks():
        assert train_kernel.plan(mb) is not None
        s = mb.seqs.shape[0]
        w = (torch.randn(s, T, generator=g), torch.randn(s, T, generator=g))
        lp_c, ent_c, g_c = _both(model, mb, T, temperature, "compiled", w)
        lp_t, ent_t, g_t = _both(model, mb, T, temperature, "torch", w)
        assert (lp_c != lp_t).any()  # the kernel ran (its sums round otherwise)
        assert torch.allclose(lp_c, lp_t, rtol=0, atol=LOGP_ATOL)
        assert torch.allclose(ent_c, ent_t, rtol=0, atol=LOGP_ATOL)
        assert g_c.keys() == g_t.keys()
        for k in g_t:
            scale = float(g_t[k].abs().max())
            assert scale > 0, k
            assert float((g_c[k] - g_t[k]).abs().max()) <= GRAD_RTOL * scale, k


@pytest.mark.llm
@pytest.mark.parametrize("size", ["small", "gqa"])
def test_other_shapes_equal_the_torch_path(tiny, size):
    """The `small` size (4 heads, d 128) and grouped-query attention (2 heads, 1 kv head), fresh weights."""
    _, tok, prompts = tiny
    cfg = SIZES["small"] if size == "small" else replace(SIZES["tiny"], num_key_value_heads=1)
    model = init_model(cfg, seed=4)
    pb = _batch(model, tok, prompts, 4, seed=1)
    T = pb.comp_mask.shape[1]
    for mb in pb.chunks():
        s = mb.seqs.shape[0]
        w = (torch.ones(s, T), torch.full((s, T), 0.5))
        lp_c, ent_c, g_c = _both(model, mb, T, 1.0, "compiled", w)
        lp_t, ent_t, g_t = _both(model, mb, T, 1.0, "torch", w)
        assert torch.allclose(lp_c, lp_t, rtol=0, atol=LOGP_ATOL)
        assert torch.allclose(ent_c, ent_t, rtol=0, atol=LOGP_ATOL)
        for k in g_t:
            assert float((g_c[k] - g_t[k]).abs().max()) <= GRAD_RTOL * float(g_t[k].abs().max()), k


@pytest.mark.llm
def test_gradient_equals_finite_differences(tiny):
    """The directional derivative along a random direction of every parameter at once against the 4-point
    central difference (error O(h^4)) of the float32 loss summed in float64."""
    model, tok, prompts = tiny
    pb = _batch(model, tok, prompts[:8], 4, seed=5)
    mb = pb.chunks()[0]
    T = pb.comp_mask.shape[1]
    g = torch.Generator().manual_seed(2)
    s = mb.seqs.shape[0]
    w = (torch.randn(s, T, generator=g), torch.randn(s, T, generator=g))
    _, _, grads = _both(model, mb, T, 1.0, "compiled", w)
    params = dict(model.named_parameters())
    dirs = {k: torch.randn(p.shape, generator=g) for k, p in params.items()}
    slope = sum(float((grads[k].double() * dirs[k].double()).sum()) for k in params)
    base = {k: p.detach().clone() for k, p in params.items()}

    def loss_at(eps):
        with torch.no_grad():
            for k, p in params.items():
                p.copy_(base[k] + eps * dirs[k])
            lp, ent = model.packed_logprobs(mb, T, 1.0, True, True)
            return float((lp.double() * w[0].double()).sum() + (ent.double() * w[1].double()).sum())

    h = 1e-3
    try:
        fd = (8 * (loss_at(h) - loss_at(-h)) - (loss_at(2 * h) - loss_at(-2 * h))) / (12 * h)
    finally:
        with torch.no_grad():
            for k, p in params.items():
                p.copy_(base[k])
    assert abs(fd - slope) <= FD_RTOL * abs(slope), (fd, slope)


@pytest.mark.llm
def test_the_kernel_is_deterministic_and_leaves_the_plan_on_the_batch(tiny):
    model, tok, prompts = tiny
    pb = _batch(model, tok, prompts, 4, seed=9)
    mb = pb.chunks()[0]
    T = pb.comp_mask.shape[1]
    w = (torch.ones(mb.seqs.shape[0], T), torch.ones(mb.seqs.shape[0], T))
    a = _both(model, mb, T, 1.0, "compiled", w)
    assert mb.cache["tiny"] is train_kernel.plan(mb)
    b = _both(model, mb, T, 1.0, "compiled", w)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert all(torch.equal(a[2][k], b[2][k]) for k in a[2])


@pytest.mark.llm
def test_a_mask_outside_the_tree_layout_runs_the_torch_path(tiny):
    """A query whose keys are three runs: the plan declines and micro_logprobs computes torch's floats."""
    model, tok, prompts = tiny
    pb = _batch(model, tok, prompts, 4, seed=3)
    mb = pb.chunks()[0]
    T = pb.comp_mask.shape[1]
    attn = mb.attn.clone()
    L = attn.shape[-1]
    q = int(mb.row_lengths[0]) - 1
    attn[0, 0, q, :] = False
    attn[0, 0, q, [0, 2, 4, q]] = True
    assert q > 4
    mb.attn = attn
    mb.cache.clear()
    assert train_kernel.plan(mb) is None and L > q
    w = (torch.ones(mb.seqs.shape[0], T), torch.zeros(mb.seqs.shape[0], T))
    c = _both(model, mb, T, 1.0, "compiled", w)
    t = _both(model, mb, T, 1.0, "torch", w)
    assert torch.equal(c[0], t[0]) and all(torch.equal(c[2][k], t[2][k]) for k in t[2])


@pytest.mark.llm
def test_a_run_trains_as_the_torch_paths_run(tmp_path):
    """Six steps of bp 4 x n 4 with KL and entropy terms: the same rewards and tokens step by step (the
    rollouts of nearly equal weights draw the same tokens) and weights within Adam's step of each other."""
    kw = dict(dataset="easy", n=4, bp=4, budget=96, d=16, d_val=8, n_evals=2, k=2, seed=3, kl_coef=0.1,
              entropy_coef=0.01, lr=1e-3)
    runs = {}
    for trainer in ("compiled", "torch"):
        runs[trainer] = run(config_for("tiny", **kw, tiny_trainer=trainer))
    a, b = runs["compiled"], runs["torch"]
    assert [s["reward"] for s in a.steps] == [s["reward"] for s in b.steps]
    assert [s["tokens"] for s in a.steps] == [s["tokens"] for s in b.steps]
    for x, y in zip(a.steps, b.steps, strict=True):
        assert abs(x["loss"] - y["loss"]) <= 1e-4 * max(abs(y["loss"]), 1e-3)
    pa, pb_ = a.model.state_dict(), b.model.state_dict()
    worst = max(float((pa[k] - pb_[k]).abs().max()) for k in pb_)
    moved = max(float((pa[k] - load_model(resolve_model("tiny")).state_dict()[k]).abs().max()) for k in pb_)
    assert 0 < worst <= 0.1 * moved, (worst, moved)
