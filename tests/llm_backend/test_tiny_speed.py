"""The tiny LM's fast paths compute what the plain paths compute.

- The kv sampler decodes a large call in chunks of whole prompts (`chunk_rows`), its Gumbel uniforms drawn for
  the whole batch up front in the order of one (B, V) draw per step: a chunked call draws the same tokens as
  one batch, with log-probs equal up to matmul round-off (BLAS picks kernels by the number of rows: on the
  AMD EPYC (AVX-512) where this was written, an evaluation of 634 prompts x 16 in chunks of 64 prompts was
  bit-equal to one batch, chunks of 10 prompts differed by 1.4e-6; a training step's rollouts are one chunk,
  and tests/llm_backend/test_llm_refactor_bits.py compares whole runs with the old code bit for bit).
- flat_adamw: AdamW over one flat tensor (torch's AdamW function) steps each parameter as torch.optim.AdamW
  over the parameter tensors does (its ops are elementwise; bit-equal on the machine it was written on); its
  state_dict is torch's, and a tiny-LM run never imports torch._dynamo.
- Rewards are memoised: the same completion graded twice gives the same reward, and a parse is not repeated.
- The reference's and the old log-probs' forwards run under inference_mode; a batch whose chunks the old
  log-probs met first still trains (ppo epochs over one minibatch reuse those chunks).
- A decoding step and a training step of the tiny LM issue at most a pinned number of torch ops: at n = 4 a
  step is bound by the fixed cost per op (dispatch, Python), not by arithmetic, so the op count is the speed
  that can be tested deterministically (it does not depend on the machine or its load).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from llm_backend import tasks  # noqa: E402
from llm_backend.batch import Group, build_batch  # noqa: E402
from llm_backend.config import config_for  # noqa: E402
from llm_backend.model import load_model, load_tokenizer, resolve_model  # noqa: E402
from llm_backend.problems import load_problems  # noqa: E402
from llm_backend.tiny.sampler import KVEngine  # noqa: E402
from llm_backend.trainer import Trainer, flat_adamw  # noqa: E402

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


def _adamw_steps(cfg, optimisers_of, steps=5):
    """Models stepped `steps` times on the same random gradients, one per optimiser `optimisers_of` makes."""
    path = resolve_model("tiny")
    models = [load_model(path) for _ in optimisers_of]
    opts = [make(m) for m, make in zip(models, optimisers_of, strict=True)]
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        grads = [torch.randn(p.shape, generator=gen) for p in models[0].parameters()]
        for model, opt in zip(models, opts, strict=True):
            opt.zero_grad(set_to_none=False)
            for p, g in zip(model.parameters(), grads, strict=True):
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                p.grad += g
            torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
            opt.step()
    return models, opts


def test_flat_adamw_steps_each_parameter_as_torch_adamw():
    cfg = config_for("tiny", lr=1e-2, weight_decay=0.1)
    kw = dict(lr=cfg.effective_lr(), betas=(cfg.beta1, cfg.beta2), eps=cfg.adam_eps,
              weight_decay=cfg.weight_decay)
    (plain, flat), (_, opt) = _adamw_steps(cfg, [lambda m: torch.optim.AdamW(m.parameters(), **kw),
                                                 lambda m: flat_adamw(m, cfg)])
    base = load_model(resolve_model("tiny")).state_dict()
    moved = 0.0
    for (name, a), b in zip(plain.named_parameters(), flat.parameters(), strict=True):
        # elementwise ops over one tensor or many: bit-equal where written (a vectorised loop's tail may
        # round otherwise on another CPU, hence the round-off tolerance)
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-7, msg=name)
        moved = max(moved, float((a.detach() - base[name]).abs().max()))
    assert moved > 1e-3  # the steps moved the weights
    flat_param = opt.param_groups[0]["params"][0]
    assert flat_param.numel() == sum(p.numel() for p in flat.parameters())
    assert all(p.untyped_storage().data_ptr() == flat_param.untyped_storage().data_ptr()
               for p in flat.parameters())


def test_flat_adamw_state_dict_is_torch_adamw_s():
    """A FlatAdamW checkpoint loads into torch.optim.AdamW over the flat tensor and back, and
    the next steps agree bit for bit: its state_dict is torch's layout."""
    import copy
    import sys

    cfg = config_for("tiny", lr=1e-2, weight_decay=0.1)
    (model,), (opt,) = _adamw_steps(cfg, [lambda m: flat_adamw(m, cfg)], steps=3)
    sd = copy.deepcopy(opt.state_dict())  # a state_dict holds the live tensors, as torch's does
    twin = torch.nn.Parameter(opt.param.detach().clone())
    twin.grad = torch.zeros_like(twin)
    torch_opt = torch.optim.AdamW([twin], lr=1.0)
    torch_opt.load_state_dict(sd)
    back = flat_adamw(load_model(resolve_model("tiny")), cfg)
    back.param.data.copy_(opt.param)
    back.load_state_dict(copy.deepcopy(torch_opt.state_dict()))
    g = torch.randn(twin.shape, generator=torch.Generator().manual_seed(5))
    for o, p in ((opt, opt.param), (torch_opt, twin), (back, back.param)):
        p.grad.copy_(g)
        o.step()
    assert torch.equal(opt.param, twin) and torch.equal(back.param, twin)
    assert torch_opt.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    assert "torch._dynamo" in sys.modules  # torch's optimiser imported it (FlatAdamW alone does not:
    # test_a_tiny_run_does_not_import_dynamo)


def test_a_tiny_run_does_not_import_dynamo():
    """A tiny-LM run never imports torch._dynamo (~1 s of start-up), checked in a fresh interpreter."""
    import subprocess
    import sys

    code = ("import sys\nfrom llm_backend.config import config_for\nfrom llm_backend.loop import run\n"
            "run(config_for('tiny', dataset='easy', n=4, bp=4, budget=64, n_evals=1, k=2, d_val=8))\n"
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_rewards_are_memoised_and_unchanged():
    tasks.reward.cache_clear()
    cases = [("42", "42"), ("the answer is 42", "42"), ("41", "42"), ("4/2", "2"), ("", "0"),
             ("1,000", "1000")]
    first = [tasks.reward(t, a) for t, a in cases]
    assert first == [1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert first == [1.0 if tasks.is_correct(t, a) else 0.0 for t, a in cases]
    again = [tasks.reward(t, a) for t, a in cases]
    assert again == first and tasks.reward.cache_info().hits == len(cases)


@pytest.mark.parametrize("layout", ["packed", "padded"])
def test_ppo_epochs_over_one_minibatch_train_after_the_old_logprobs(layout):
    path = resolve_model("tiny")
    cfg = config_for("tiny", dataset="easy", n=4, bp=4, objective="ppo", ppo_epochs=2, minibatches=1,
                     kl_coef=0.1, entropy_coef=0.01, train_layout=layout)
    tok = load_tokenizer(path)
    train, _ = load_problems(cfg)
    probs = train[:4]
    trainer = Trainer(cfg, path)
    ro = KVEngine(trainer.model, tok).generate([tasks.build_prompt(tok, p.question) for p in probs], 4, 10,
                                               seed=1)
    groups = [Group(ro.prompt_ids[i:i + 4], ro.token_ids[i:i + 4], ro.logprobs[i:i + 4],
                    np.array([float(j % 2) for j in range(4)])) for i in range(0, 16, 4)]
    before = [p.detach().clone() for p in trainer.model.parameters()]
    stats = trainer.step(build_batch(cfg, groups, tok.pad_token_id), 1)
    assert stats["finite"] and stats["updates"] == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True))


DECODE_STEP_OPS = 133
"""Upper bound on the torch ops of one decoding step of the kv sampler's torch path at n = 4, bp = 16 (4
layers and one draw): 127 with torch 2.13 and the default "bmm" attention (more ops than "sdpa"'s 117, each
cheaper: 0.93-0.95x a training draw's time at n = 4, 0.79x at n = 64, benchmarks/tiny_attention.py), and a
margin for other torch versions."""

TRAIN_STEP_OPS = 1090
"""Upper bound on the torch ops of one GRPO step at n = 4, bp = 16 with the KL reference and the entropy
bonus, by the torch trainer (LLMConfig.tiny_trainer "torch"): the packed batch, the reference and policy
forwards, the loss, the backward pass, clipping and AdamW: 1031 with torch 2.13, and a margin for other torch
versions."""

COMPILED_TRAIN_STEP_OPS = 440
"""The same step by the compiled trainer (the default): the model's forwards and backward are two Numba calls
per microbatch, what is left is the batch, the loss and its backward, the weights' stacking, clipping and
AdamW: 399 with torch 2.13, and a margin."""


class _Ops(TorchDispatchMode):
    """Counts the ops that reach the dispatcher: every op of an autograd forward and backward, and each
    top-level call under inference_mode (where a composite op such as SDPA is one call into C++)."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def _ops(fn) -> int:
    with _Ops() as ops:
        fn()
    return ops.n


def test_a_decoding_step_and_a_training_step_stay_within_their_op_counts():
    path = resolve_model("tiny")
    cfg = config_for("tiny", dataset="easy", n=4, bp=16, budget=2**12, kl_coef=0.01, entropy_coef=0.001)
    tok = load_tokenizer(path)
    train, _ = load_problems(cfg)
    probs = train[:16]
    prompts = [tasks.build_prompt(tok, p.question) for p in probs]
    trainer = Trainer(cfg, path)
    engine = KVEngine(trainer.model, tok)

    # one decoding step: a call of 2 new tokens less a call of 1 (both prefill and draw the first token); the
    # torch path's ops are bounded, the compiled decoder's steps issue none (the whole draw is one call)
    def generate(tokens, decoder):
        return lambda: engine.generate(prompts, cfg.n, tokens, 1.0, 1.0, seed=0, decoder=decoder)

    for decoder in ("torch", "compiled"):
        ro = engine.generate(prompts, cfg.n, 2, 1.0, 1.0, seed=0, decoder=decoder)
        assert max(map(len, ro.token_ids)) == 2  # a step ran
    decode = _ops(generate(2, "torch")) - _ops(generate(1, "torch"))
    assert 0 < decode <= DECODE_STEP_OPS
    assert _ops(generate(2, "compiled")) == _ops(generate(1, "compiled")) > 0

    ro = engine.generate(prompts, cfg.n, cfg.max_new_tokens, 1.0, 1.0, seed=0)
    groups = [Group(ro.prompt_ids[i:i + cfg.n], ro.token_ids[i:i + cfg.n], ro.logprobs[i:i + cfg.n],
                    np.array([tasks.reward(t, probs[i // cfg.n].answer) for t in ro.texts[i:i + cfg.n]]))
              for i in range(0, len(ro.texts), cfg.n)]
    trainer.step(build_batch(cfg, groups, tok.pad_token_id), 1)  # the optimiser's state is made lazily
    steps = {}
    for who in ("torch", "compiled"):
        trainer.cfg = replace(cfg, tiny_trainer=who)
        steps[who] = _ops(lambda: trainer.step(build_batch(cfg, groups, tok.pad_token_id), 2))
    assert 0 < steps["torch"] <= TRAIN_STEP_OPS
    assert 0 < steps["compiled"] <= COMPILED_TRAIN_STEP_OPS


def test_a_run_freezes_the_heap_it_starts_with_and_gives_it_back():
    """loop.run's gc.freeze: the collector skips the objects alive at the start while the run goes on and
    tracks them again after (a sweep's next run, or the caller, sees the collector as it was)."""
    import gc

    from llm_backend import loop

    assert gc.get_freeze_count() == 0
    with loop._frozen_heap():
        assert gc.get_freeze_count() > 1000  # torch's module objects, at least
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), loop._frozen_heap():
        raise RuntimeError("a failing run")
    assert gc.get_freeze_count() == 0
