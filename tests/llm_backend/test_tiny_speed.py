"""The tiny LM's fast paths compute what the plain paths compute.

- The kv sampler decodes a large call in chunks of whole prompts (`chunk_rows`), its Gumbel uniforms drawn for
  the whole batch up front in the order of one (B, V) draw per step: a chunked call draws the same tokens as
  one batch, with log-probs equal up to matmul round-off (BLAS picks kernels by the number of rows: on the
  AMD EPYC (AVX-512) where this was written, an evaluation of 634 prompts x 16 in chunks of 64 prompts was
  bit-equal to one batch, chunks of 10 prompts differed by 1.4e-6; a training step's rollouts are one chunk,
  and tests/llm_backend/test_llm_refactor_bits.py compares whole runs with the old code bit for bit).
- flat_adamw: AdamW over one flat tensor steps each parameter as AdamW over the parameter tensors does (its
  ops are elementwise; bit-equal on that machine).
- Rewards are memoised: the same completion graded twice gives the same reward, and a parse is not repeated.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from llm_backend import tasks  # noqa: E402
from llm_backend.config import config_for  # noqa: E402
from llm_backend.model import load_model, load_tokenizer, resolve_model  # noqa: E402
from llm_backend.problems import load_problems  # noqa: E402
from llm_backend.tiny.sampler import KVEngine  # noqa: E402
from llm_backend.trainer import flat_adamw  # noqa: E402

LOGP_ATOL = 1e-5
"""Chunked vs one-batch log-probs of the same tokens: float32 round-off through 4 layers (seen: 1.4e-6)."""


@pytest.fixture(scope="module")
def tiny():
    path = resolve_model("tiny")
    return load_model(path), load_tokenizer(path)


def test_chunked_sampling_draws_what_one_batch_draws(tiny):
    model, tok = tiny
    train, _ = load_problems(config_for("tiny", dataset="easy"))
    prompts = [p.question for p in train[:40]]  # unequal lengths: left padding
    one = KVEngine(model, tok, chunk_rows=10**6).generate(prompts, 16, 10, 1.0, seed=11)
    chunked = KVEngine(model, tok, chunk_rows=160).generate(prompts, 16, 10, 1.0, seed=11)  # 4 chunks of 10
    assert chunked.token_ids == one.token_ids and chunked.texts == one.texts
    assert len(set(map(len, one.token_ids))) > 1  # rows ended at different steps
    worst = max(abs(a - b) for x, y in zip(one.logprobs, chunked.logprobs, strict=True)
                for a, b in zip(x, y, strict=True))
    assert worst <= LOGP_ATOL
    other = KVEngine(model, tok, chunk_rows=160).generate(prompts, 16, 10, 1.0, seed=12)
    assert other.token_ids != one.token_ids  # the seed matters: the comparison above is not vacuous


def test_flat_adamw_steps_each_parameter_as_plain_adamw():
    path = resolve_model("tiny")
    cfg = config_for("tiny", lr=1e-2, weight_decay=0.1)
    models = [load_model(path), load_model(path)]
    plain = torch.optim.AdamW(models[0].parameters(), lr=cfg.effective_lr(), betas=(cfg.beta1, cfg.beta2),
                              eps=cfg.adam_eps, weight_decay=cfg.weight_decay)
    flat = flat_adamw(models[1], cfg)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        grads = [torch.randn(p.shape, generator=gen) for p in models[0].parameters()]
        for model, opt in zip(models, (plain, flat), strict=True):
            opt.zero_grad(set_to_none=False)
            for p, g in zip(model.parameters(), grads, strict=True):
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                p.grad += g
            torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
            opt.step()
    moved = 0.0
    for (name, a), b in zip(models[0].named_parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-7, msg=name)
        moved = max(moved, float((a - load_model(path).state_dict()[name]).abs().max()))
    assert moved > 1e-3  # the steps moved the weights
    flat_param = flat.param_groups[0]["params"][0]
    assert flat_param.numel() == sum(p.numel() for p in models[1].parameters())
    assert all(p.data_ptr() != 0 and p.untyped_storage().data_ptr() == flat_param.untyped_storage().data_ptr()
               for p in models[1].parameters())


def test_rewards_are_memoised_and_unchanged():
    tasks.reward.cache_clear()
    cases = [("42", "42"), ("the answer is 42", "42"), ("41", "42"), ("4/2", "2"), ("", "0"),
             ("1,000", "1000")]
    first = [tasks.reward(t, a) for t, a in cases]
    assert first == [1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert first == [1.0 if tasks.is_correct(t, a) else 0.0 for t, a in cases]
    again = [tasks.reward(t, a) for t, a in cases]
    assert again == first and tasks.reward.cache_info().hits == len(cases)
