"""The compiled decoder of the kv sampler (llm_backend/tiny/kernel.py): its pieces against their definitions,
its draws against the torch path's, its determinism.

The decoder's matmuls are MKL's sgemm_, the routine torch's CPU mm calls, so they agree with torch.mm to
round-off (bit for bit where this was written); its exp is a vectorised Cephes expf, bounded here against
float64. Whole draws against the torch path: tests/llm_backend/test_tiny_compaction.py (tokens, log-probs,
avg@k at the training and evaluation sizes); whole runs: tests/llm_backend/test_tiny_attention_runs.py.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from llm_backend import tasks  # noqa: E402
from llm_backend.config import config_for  # noqa: E402
from llm_backend.model import load_model, load_tokenizer, resolve_model  # noqa: E402
from llm_backend.problems import load_problems  # noqa: E402
from llm_backend.tiny import kernel  # noqa: E402
from llm_backend.tiny.sampler import KVEngine  # noqa: E402

EXP_RTOL = 1.5e-7
"""kernel._exp against float64 exp over [-87, 88]: Cephes' expf is within ~1 ulp (seen: 1.16e-7)."""

SAME_TOKENS = 0.995
"""Least share of rows drawing the torch path's tokens (seen: all); a near-tied Gumbel draw may flip."""

LOGP_ATOL = 1e-4
"""Compiled vs torch-path log-probs of the same tokens (test_tiny_compaction.COMPILED_LOGP_ATOL's reason)."""


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    path = resolve_model("tiny")
    model, tok = load_model(path), load_tokenizer(path)
    cfg = config_for("tiny", dataset="easy")
    train, _ = load_problems(cfg)
    return model, tok, [tasks.build_prompt(tok, p.question) for p in train[:16]]


def test_exp_is_within_its_bound_of_exp():
    x = np.concatenate([np.linspace(-87, 88, 400_001), np.random.default_rng(0).normal(0, 10, 100_000)])
    x = np.clip(x, -87, 88).astype(np.float32)
    y = x.copy()
    kernel._exp(y, np.empty(len(y), np.int32))
    ref = np.exp(x.astype(np.float64))
    assert np.max(np.abs(y - ref) / ref) <= EXP_RTOL
    z = np.array([0.0, 1.0, -1.0], np.float32)
    kernel._exp(z, np.empty(3, np.int32))
    assert z[0] == 1.0 and abs(z[1] - np.e) < 3e-7


@pytest.mark.parametrize("shape", [(64, 64, 192), (96, 192, 64), (7, 64, 18)])
def test_linear_is_torch_matmul(shape):
    m, k, n = shape
    gen = torch.Generator().manual_seed(m)
    x, w = torch.randn(m, k, generator=gen), torch.randn(n, k, generator=gen)
    acc = torch.randn(m, n, generator=gen)
    work = (np.empty(6, np.int32), np.empty(2, np.float32))
    out = np.full((m, n), np.nan, np.float32)
    kernel._linear(x.numpy(), w.numpy(), out, np.float32(0.0), work)
    np.testing.assert_allclose(out, torch.mm(x, w.t()).numpy(), rtol=1e-6, atol=1e-6)
    res = acc.numpy().copy()
    kernel._linear(x.numpy(), w.numpy(), res, np.float32(1.0), work)  # into the residual, as addmm
    np.testing.assert_allclose(res, torch.addmm(acc, x, w.t()).numpy(), rtol=1e-6, atol=1e-6)


def test_matrices_handed_to_sgemm_are_aligned():
    for rows, cols in ((1, 1), (3, 5), (64, 192), (7, 18)):
        for _ in range(20):
            m = kernel._matrix(rows, cols)
            assert m.shape == (rows, cols) and m.flags.c_contiguous and m.ctypes.data % kernel.ALIGN == 0


_TRAIN = """
import hashlib
import numpy as np
from llm_backend.packed import make_packed_batch, micro_logprobs
pb = make_packed_batch(ro.prompt_ids, ro.token_ids, ro.logprobs, np.linspace(-1, 1, len(ro.token_ids)), 4,
                       pad_id=tok.pad_token_id, row_tokens=64)
for mb in pb.chunks():
    lp, ent = micro_logprobs(model, mb, pb.comp_mask.shape[1], 1.0, True, True)
    (lp.sum() + 0.5 * ent.sum()).backward()
train_bits = hashlib.sha256(b"".join(p.grad.numpy().tobytes() for p in model.parameters())).hexdigest()
"""
"""The gradient of a packed batch of the draws by the compiled trainer (llm_backend/tiny/train_kernel.py),
as one digest of its bits (`model`, `tok`, `ro` given)."""

_DRAW = """
import json, sys, torch
torch.set_num_threads(1)
from llm_backend import tasks
from llm_backend.config import config_for
from llm_backend.model import load_model, load_tokenizer, resolve_model
from llm_backend.problems import load_problems
from llm_backend.tiny.sampler import KVEngine
path = resolve_model("tiny")
model, tok = load_model(path), load_tokenizer(path)
train, _ = load_problems(config_for("tiny", dataset="easy"))
prompts = [tasks.build_prompt(tok, p.question) for p in train[:16]]
ro = KVEngine(model, tok).generate(prompts, 4, 10, 1.0, seed=5)
""" + _TRAIN + """
print(json.dumps([ro.token_ids, [[float(x).hex() for x in r] for r in ro.logprobs], train_bits]))
"""


def test_compiled_draws_are_the_same_bits_in_another_process(tiny):
    """Same seed, same machine, same bits, whatever addresses the process's buffers get (ALIGN): the draws
    of the compiled decoder and the gradient of the compiled trainer on them."""
    model, tok, prompts = tiny
    ro = KVEngine(model, tok).generate(prompts, 4, 10, 1.0, seed=5)
    ns = {"model": copy.deepcopy(model), "tok": tok, "ro": ro}
    ns["model"].zero_grad(set_to_none=True)
    exec(compile(_TRAIN, "<train>", "exec"), ns)
    here = [ro.token_ids, [[float(x).hex() for x in r] for r in ro.logprobs], ns["train_bits"]]
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", _DRAW], cwd=root, capture_output=True, text=True,
                         timeout=300, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == here


def test_compiled_draws_are_deterministic_and_seeded(tiny):
    model, tok, prompts = tiny
    engine = KVEngine(model, tok)
    a = engine.generate(prompts, 4, 10, 1.0, seed=5)
    b = engine.generate(prompts, 4, 10, 1.0, seed=5)
    assert a.token_ids == b.token_ids and a.logprobs == b.logprobs and a.texts == b.texts
    c = engine.generate(prompts, 4, 10, 1.0, seed=6)
    assert sum(x != y for x, y in zip(a.token_ids, c.token_ids, strict=True)) > 8  # the seed matters


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.3])
def test_compiled_draws_what_the_torch_path_draws_at_any_temperature(tiny, temperature):
    model, tok, prompts = tiny
    engine = KVEngine(model, tok)
    rows = same = 0
    worst = 0.0
    for seed in range(3):
        ref = engine.generate(prompts, 8, 10, temperature, seed=seed, decoder="torch")
        got = engine.generate(prompts, 8, 10, temperature, seed=seed, decoder="compiled")
        assert got.prompt_ids == ref.prompt_ids
        for a, b, la, lb in zip(ref.token_ids, got.token_ids, ref.logprobs, got.logprobs, strict=True):
            rows += 1
            if a == b:
                same += 1
                worst = max(worst, max(abs(x - y) for x, y in zip(la, lb, strict=True)))
    assert same / rows >= SAME_TOKENS
    assert worst <= LOGP_ATOL
    if temperature == 0:
        assert same == rows  # greedy: no noise to tie against


def test_top_p_draws_by_the_torch_path(tiny):
    """The compiled decoder has no nucleus: top_p < 1 runs the torch path, bit for bit."""
    model, tok, prompts = tiny
    engine = KVEngine(model, tok)
    a = engine.generate(prompts, 4, 10, 1.0, top_p=0.9, seed=2)
    b = engine.generate(prompts, 4, 10, 1.0, top_p=0.9, seed=2, decoder="torch")
    assert a.token_ids == b.token_ids and a.logprobs == b.logprobs
