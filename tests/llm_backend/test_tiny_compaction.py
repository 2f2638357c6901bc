"""Row compaction of the kv sampler (KVEngine._decode, compact=True): evaluation drops finished rows from the
decoding batch; training rollouts keep the full batch and, attending by "sdpa", are bit for bit what the
sampler drew before compaction existed. The engine's default attention, "bmm", by the torch path and by the
compiled decoder (llm_backend/tiny/kernel.py, the default), is bounded against "sdpa" with the same
tolerances (test_bmm_attention_draws_what_sdpa_draws,
test_training_rollouts_by_bmm_draw_what_sdpa_draws; whole runs: test_tiny_attention_runs.py).

What compaction may change, and the tolerances below: each row keeps its own Gumbel uniforms (it reads its
original row of the noise), so a row's draw differs only if the round-off of a matmul over fewer rows (BLAS
picks kernels by the number of rows) moves a log-prob across a near tie of the Gumbel-perturbed scores.
Measured on the AMD EPYC (AVX-512, torch 2.13, one thread) where this was written, comparing compacted with
uncompacted evaluations of the study's size (317 validation + 317 training problems x 16 = 10,144 rows):
the shipped tiny LM, 4 seeds: all 40,576 rows' tokens and log-probs bit-equal; a perturbed policy whose
answers run to the 10-token limit (compaction down to a few rows), 2 seeds: all 20,288 rows' tokens equal,
6 rows' log-probs off by at most 2.4e-6, avg@16 equal.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from llm_backend import tasks  # noqa: E402
from llm_backend.config import config_for  # noqa: E402
from llm_backend.engines import derive_seed  # noqa: E402
from llm_backend.model import load_model, load_tokenizer, resolve_model  # noqa: E402
from llm_backend.problems import load_problems, train_eval_sample  # noqa: E402
from llm_backend.tiny.sampler import KVEngine  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

SAME_TOKENS = 0.995
"""Least share of rows whose tokens compaction must leave unchanged: 1.0 measured (60,864 rows, module
docstring); the margin is for another CPU's BLAS, whose round-off can flip a rare near-tied draw."""

LOGP_ATOL = 1e-5
"""Compacted vs full-batch log-probs of the same tokens: float32 matmul round-off through 4 layers (seen:
2.4e-6), the bound the chunked sampler meets (tests/llm_backend/test_tiny_speed.py)."""

COMPILED_LOGP_ATOL = 1e-4
"""The compiled decoder's log-probs against the torch path's "sdpa" for the same tokens: its own exp (within
1.2e-7 relative), fused multiply-adds and summation orders through 4 layers. Seen (AMD EPYC, AVX2): 4.5e-5 on
the study's evaluation of a perturbed policy, 3.0e-5 of the shipped model (the torch path's "bmm": 3.3e-5)."""

AVG_ATOL = 1 - SAME_TOKENS
"""avg@k of the validation problems, compacted vs not: a row's reward is 0 or 1, so it moves by at most the
share of rows whose tokens changed (seen: 0)."""

ROW_WORK = 0.8
"""Most rows x steps of decoding matmuls a compacted evaluation of the shipped tiny LM may compute, as a share
of the full batch's (answers of 2 to 5 tokens in a 10-token limit: about 0.7)."""

BEFORE_COMPACTION = "68b56db49623f9ca86757fef58f942655a94ada4"
"""The last commit whose sampler had no row compaction: the training path must still draw what it drew."""


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    path = resolve_model("tiny")
    return load_model(path), load_tokenizer(path)


@pytest.fixture(scope="module")
def eval_prompts(tiny):
    """The study's evaluation prompts: the 317 Easy validation problems and the 317 of the training sample."""
    _, tok = tiny
    cfg = config_for("tiny", dataset="easy", d_val=317, k=16)
    train, val = load_problems(cfg)
    probs = list(val) + list(train_eval_sample(train, cfg, len(val)))
    return [tasks.build_prompt(tok, p.question) for p in probs], probs, len(val)


def _perturbed(model, scale: float = 0.5):
    """A copy of `model` with Gaussian noise on every weight (scale x its std): answers of every length to
    the 10-token limit, so a batch is compacted many times, down to a few rows."""
    import copy

    m = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale * p.std().clamp(min=1e-3))
    return m


class _MatmulRows(TorchDispatchMode):
    """Sums the rows of every mm / addmm: the decoding work, whatever the number of ops."""

    def __init__(self):
        super().__init__()
        self.rows = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
            self.rows += args[-2].shape[0] if func is torch.ops.aten.addmm.default else args[0].shape[0]
        return func(*args, **(kwargs or {}))


def _check_contract(ro, prompts, n, T, eos):
    """The output contract, compacted or not: prompt-major rows, each its tokens through the first EOS (or
    T tokens without one), a log-prob per token, the text of its tokens."""
    assert ro.n == n and len(ro.token_ids) == len(ro.logprobs) == len(ro.texts) == len(ro.prompt_ids)
    assert len(ro.token_ids) == len(prompts) * n
    for ids, lps in zip(ro.token_ids, ro.logprobs, strict=True):
        assert 1 <= len(ids) <= T and len(lps) == len(ids)
        assert (ids[-1] == eos and eos not in ids[:-1]) or (len(ids) == T and eos not in ids)
        assert all(lp <= 0 for lp in lps)


def _compare(full, comp, probs, n_val, k):
    same = np.array([a == b for a, b in zip(full.token_ids, comp.token_ids, strict=True)])
    worst = max((abs(x - y) for a, b, ok in zip(full.logprobs, comp.logprobs, same, strict=True) if ok
                 for x, y in zip(a, b, strict=True)), default=0.0)

    def avg(ro):
        r = np.array([tasks.reward(t, probs[i // k].answer) for i, t in enumerate(ro.texts)]).reshape(-1, k)
        return r[:n_val].mean()

    return same.mean(), worst, abs(avg(full) - avg(comp))


@pytest.mark.parametrize("decoder", ["torch", "compiled"])
@pytest.mark.parametrize("policy", ["shipped", "perturbed"])
def test_compacted_evaluation_draws_what_the_full_batch_draws(tiny, eval_prompts, policy, decoder):
    model, tok = tiny
    model = model if policy == "shipped" else _perturbed(model)
    prompts, probs, n_val = eval_prompts
    k, T = 16, config_for("tiny").max_new_tokens
    seed = derive_seed(0, 3, "eval")
    engine = KVEngine(model, tok)
    engine.decoder = decoder
    full = engine.generate(prompts, k, T, 1.0, 1.0, seed=seed)
    comp = engine.generate(prompts, k, T, 1.0, 1.0, seed=seed, compact=True)
    for ro in (full, comp):
        _check_contract(ro, prompts, k, T, tok.eos_token_id)
    assert comp.prompt_ids == full.prompt_ids
    lengths = {len(ids) for ids in full.token_ids}
    assert len(lengths) >= 3  # rows end at different steps: there is something to compact
    if policy == "perturbed":
        assert T in lengths  # some rows run to the limit: the batch shrinks to a few rows
    same, worst, d_avg = _compare(full, comp, probs, n_val, k)
    assert same >= SAME_TOKENS
    assert worst <= LOGP_ATOL
    assert d_avg <= AVG_ATOL
    other = engine.generate(prompts, k, T, 1.0, 1.0, seed=seed + 1, compact=True)
    assert _compare(full, other, probs, n_val, k)[0] < 0.9  # the seed matters: the comparison is not vacuous


def test_compaction_cuts_the_decoding_work(tiny, eval_prompts):
    """The torch path's matmul rows (the compiled decoder's, compacted every step, are not torch ops)."""
    model, tok = tiny
    prompts = eval_prompts[0][:317]
    engine = KVEngine(model, tok)
    engine.decoder = "torch"

    def rows(compact):
        with _MatmulRows() as m:
            engine.generate(prompts, 16, 10, 1.0, 1.0, seed=5, compact=compact)
        return m.rows

    assert rows(True) <= ROW_WORK * rows(False)


def test_evaluation_compacts_and_training_rollouts_do_not(monkeypatch):
    from llm_backend import evaluation, loop

    seen = []
    generate = KVEngine.generate

    def spy(self, *a, **kw):
        seen.append(kw.get("compact", False))
        return generate(self, *a, **kw)

    monkeypatch.setattr(KVEngine, "generate", spy)
    cfg = config_for("tiny", dataset="easy", n=4, bp=4, budget=32, d=16, d_val=8, n_evals=2, k=2, seed=3)
    evaluate = evaluation.evaluate
    phases = []

    def spy_eval(*a, **kw):
        phases.append(len(seen))
        return evaluate(*a, **kw)

    monkeypatch.setattr(evaluation, "evaluate", spy_eval)
    loop.run(cfg)
    evals = set(phases)
    assert phases and all(seen[i] is True for i in evals)  # each evaluation's call compacts
    assert all(c is False for i, c in enumerate(seen) if i not in evals)  # every training draw does not
    assert len(seen) > len(evals)


def _sampler_before_compaction():
    """The kv sampler module as of BEFORE_COMPACTION, read from this repository's history (a clone without
    that commit fails loudly: this comparison must run, not skip)."""
    path = "llm_backend/tiny/sampler.py"
    try:
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{BEFORE_COMPACTION}:{path}"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"cannot read commit {BEFORE_COMPACTION} from this clone's history (a shallow "
                           f"clone? `git fetch --unshallow`): {getattr(e, 'stderr', '') or e}") from None
    spec = importlib.util.spec_from_loader("sampler_before_compaction", loader=None)
    mod = importlib.util.module_from_spec(spec)
    exec(compile(src, "sampler_before_compaction.py", "exec"), mod.__dict__)
    return mod


@pytest.mark.parametrize("n", [4, 16, 64])
def test_training_rollouts_are_bit_for_bit_the_sampler_before_compaction(tiny, eval_prompts, n):
    model, tok = tiny
    old = _sampler_before_compaction().KVEngine
    cases = [(model, eval_prompts[0][:16], n, 1)]  # a training draw: bp 16 prompts x n
    if n == 16:
        cases.append((model, eval_prompts[0], n, 2))  # the evaluation's size, uncompacted
        cases.append((_perturbed(model), eval_prompts[0][:16], n, 3))  # rows to the 10-token limit
    for m, prompts, k, seed in cases:
        a = old(m, tok).generate(prompts, k, 10, 1.0, 1.0, seed=seed)
        b = KVEngine(m, tok).generate(prompts, k, 10, 1.0, 1.0, seed=seed, attention="sdpa")
        assert b.token_ids == a.token_ids and b.texts == a.texts and b.prompt_ids == a.prompt_ids
        assert b.logprobs == a.logprobs  # Python floats: equal bit for bit


@pytest.mark.parametrize("decoder", ["torch", "compiled"])
@pytest.mark.parametrize("n", [4, 16, 64])
def test_training_rollouts_by_bmm_draw_what_sdpa_draws(tiny, eval_prompts, n, decoder):
    """Training draws (bp 16 prompts x n, uncompacted) attend by "bmm", the engine's default, by the torch
    path or the compiled decoder (the default): against the torch path's "sdpa", the same tokens up to the
    round-off of another summation order, as for evaluation."""
    model, tok = tiny
    engine = KVEngine(model, tok)
    assert engine.attention == "bmm" and engine.decoder == "compiled"
    prompts, probs, _ = eval_prompts
    rows, same, worst = 0, 0.0, 0.0
    for m, seed in ((model, 1), (_perturbed(model), 2), (model, 3), (_perturbed(model), 4)):
        engine = KVEngine(m, tok)
        ref = engine.generate(prompts[:16], n, 10, 1.0, 1.0, seed=seed, attention="sdpa")
        got = engine.generate(prompts[:16], n, 10, 1.0, 1.0, seed=seed, decoder=decoder)
        _check_contract(got, prompts[:16], n, 10, tok.eos_token_id)
        s, w, _ = _compare(ref, got, probs, 16, n)
        rows, same, worst = rows + 16 * n, same + s * 16 * n, max(worst, w)
    assert same / rows >= SAME_TOKENS
    assert worst <= (4 * LOGP_ATOL if decoder == "torch" else COMPILED_LOGP_ATOL)


@pytest.mark.parametrize("decoder", ["torch", "compiled"])
@pytest.mark.parametrize("policy", ["shipped", "perturbed"])
def test_bmm_attention_draws_what_sdpa_draws(tiny, eval_prompts, policy, decoder):
    """Evaluation's decoding attention (attention="bmm": batched matmuls over the whole cache, positions not
    written yet masked) against SDPA's over the keys written so far, both compacted: the same tokens up to
    the round-off of another summation order (seen: 40,576 rows of the shipped model, 4 seeds, all tokens
    equal, log-probs within 1.3e-5 on an AMD EPYC with AVX2)."""
    model, tok = tiny
    model = model if policy == "shipped" else _perturbed(model)
    prompts, probs, n_val = eval_prompts
    k, T = 16, config_for("tiny").max_new_tokens
    seed = derive_seed(0, 4, "eval")
    engine = KVEngine(model, tok)
    ref = engine.generate(prompts, k, T, 1.0, 1.0, seed=seed, compact=True, attention="sdpa")
    for _ in range(2):  # the second call reuses the engine's finite caches
        got = engine.generate(prompts, k, T, 1.0, 1.0, seed=seed, compact=True, attention="bmm",
                              decoder=decoder)
        _check_contract(got, prompts, k, T, tok.eos_token_id)
        same, worst, d_avg = _compare(ref, got, probs, n_val, k)
        assert same >= SAME_TOKENS
        # another softmax and summation order than SDPA's kernel
        assert worst <= (4 * LOGP_ATOL if decoder == "torch" else COMPILED_LOGP_ATOL)
        assert d_avg <= AVG_ATOL
    assert KVEngine.attention == "bmm" and "attention" not in KVEngine.eval_options
    with pytest.raises(ValueError, match="attention"):
        engine.generate(prompts[:1], 2, 2, attention="math")
    with pytest.raises(ValueError, match="decoder"):
        engine.generate(prompts[:1], 2, 2, decoder="numba")
