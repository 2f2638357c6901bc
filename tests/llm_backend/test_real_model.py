"""Real SmolLM2-135M-Instruct: vLLM weight sync and log-prob agreement, GRPO steps, kill and resume.

Sized for a 2-core CPU (tiny bp, n, max_new_tokens); the whole file runs in a few minutes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from llm_backend import grpo, tasks  # noqa: E402
from llm_backend.config import LLMConfig  # noqa: E402
from llm_backend.model import load_model  # noqa: E402

pytestmark = pytest.mark.llm

LOGP_TOL_MAX = 2e-3
"""Largest |trainer - engine| per-token log-prob allowed after a sync (float32 on both sides). Measured on
this CPU: mean 5e-6 over a 32-sequence GRPO step (benchmarks/llm_rollout.py, step_logp_mismatch_mean);
before the sync the same check fails by orders of magnitude (asserted below)."""
T = 0.7


def _prompts(tokenizer, count=3, seed=0):
    return [tasks.build_prompt(tokenizer, p.question) for p in tasks.generate_arithmetic(count, seed)]


def _mismatch(model, ro):
    """Per-token |trainer log-prob - engine log-prob| over all completion tokens of `ro`."""
    b = grpo.make_batch(ro.prompt_ids, ro.token_ids, ro.logprobs, np.zeros(len(ro.token_ids)), 0)
    with torch.no_grad():
        logp, _ = grpo.token_logprobs(model, b.input_ids, b.attention_mask, T)
    return ((logp - b.engine_logp).abs()[b.comp_mask.bool()]).numpy()


@pytest.mark.vllm
def test_vllm_logprobs_match_trainer_after_weight_sync(model_path, tokenizer, vllm_engine):
    model = load_model(model_path)
    vllm_engine.sync_weights(model)
    with torch.no_grad():  # a visible change of the policy: shrink every MLP output projection
        for name, p in model.named_parameters():
            if "mlp.down_proj" in name:
                p.mul_(0.8)
    prompts = _prompts(tokenizer)
    stale = _mismatch(model, vllm_engine.generate(prompts, 2, 12, T))
    secs = vllm_engine.sync_weights(model)
    fresh = _mismatch(model, vllm_engine.generate(prompts, 2, 12, T))
    assert fresh.max() < LOGP_TOL_MAX, f"max mismatch {fresh.max():.2e} after sync"
    assert stale.mean() > 20 * fresh.mean() + 1e-3, "vLLM ignored the changed weights before the sync?"
    assert secs < 10.0
    vllm_engine.sync_weights(load_model(model_path))  # leave the shared engine at the base weights


@pytest.mark.vllm
def test_engines_agree_on_shapes_and_meaning(model_path, tokenizer, vllm_engine):
    from llm_backend.engines import HFEngine

    model = load_model(model_path)
    vllm_engine.sync_weights(model)
    prompts = _prompts(tokenizer, 2, seed=3)
    outs = {
        "vllm": vllm_engine.generate(prompts, 3, 10, T),
        "hf": HFEngine(model, tokenizer).generate(prompts, 3, 10, T, seed=1),
    }
    for name, ro in outs.items():
        assert len(ro.token_ids) == len(ro.logprobs) == len(ro.texts) == len(ro.prompt_ids) == 6, name
        assert all(
            len(t) == len(lp) and 1 <= len(t) <= 10 for t, lp in zip(ro.token_ids, ro.logprobs, strict=True)
        )
        assert all(x <= 0 for lp in ro.logprobs for x in lp)
        for i, ids in enumerate(ro.token_ids):  # texts are the decoded tokens
            assert ro.texts[i].strip() == tokenizer.decode(ids, skip_special_tokens=True).strip()
        # meaning: both are log pi(token | prefix) at the sampling temperature, as the trainer computes it
        assert _mismatch(model, ro).max() < LOGP_TOL_MAX, name
    assert outs["vllm"].prompt_ids == outs["hf"].prompt_ids  # prompt-major, same tokenisation


def test_three_grpo_steps_change_weights_and_log_metrics(model_path, request):
    import importlib.util

    from llm_backend.runner import run

    engine, cfg_engine = None, "hf"
    if importlib.util.find_spec("vllm") is not None:  # the main path; HF generate where vLLM is absent
        engine, cfg_engine = request.getfixturevalue("vllm_engine"), "vllm"
    cfg = LLMConfig(
        engine=cfg_engine,
        dataset="arith",
        bp=2,
        n=4,
        budget=24,
        max_new_tokens=12,
        k=2,
        d_val=2,
        n_evals=1,
        lr=1e-5,
        seed=0,
    )
    res = run(cfg, engine=engine)
    assert res.status == "ok" and len(res.steps) == 3
    for s in res.steps:
        for key in ("reward", "entropy", "grad_norm", "response_len", "tokens", "t_rollout", "t_train"):
            assert math.isfinite(s[key]), key
        assert 0 <= s["reward"] <= 1 and s["entropy"] > 0 and 1 <= s["response_len"] <= 12
    assert [int(x) for x in res.table["compute"]] == [0, cfg.budget] and list(res.table["m"]) == [0, 3]
    assert res.table["tokens"][-1] == res.steps[-1]["tokens"]
    assert res.steps[-1]["tokens"] == round(sum(s["response_len"] * cfg.batch for s in res.steps))
    assert any(s["grad_norm"] > 0 for s in res.steps), "no group had reward variance in 3 steps"
    base = load_model(model_path).state_dict()
    changed = sum(not torch.equal(base[k], v) for k, v in res.model.state_dict().items())
    assert changed > 0
    del res, base
    if engine is not None:
        engine.sync_weights(load_model(model_path))


def test_killed_run_resumes_to_the_same_parameters(model_path, tmp_path):
    from llm_backend.runner import run

    # entropy_coef > 0 keeps the gradient non-zero even when both rewards of the group agree, and it still
    # depends on the sampled tokens, so equality checks the optimiser state *and* the seeded rollouts
    kw = dict(
        engine="hf",
        dataset="arith",
        bp=1,
        n=2,
        budget=4,
        max_new_tokens=6,
        k=1,
        d_val=1,
        n_evals=1,
        lr=1e-4,
        seed=1,
        checkpoint_every=1,
        entropy_coef=0.01,
    )
    full = run(LLMConfig(**kw, checkpoint_dir=str(tmp_path / "a")))
    killed = run(LLMConfig(**kw, checkpoint_dir=str(tmp_path / "b")), stop_after=1)
    assert len(killed.steps) == 1 and (tmp_path / "b" / "ckpt-1" / "model.safetensors").exists()
    resumed = run(LLMConfig(**kw, checkpoint_dir=str(tmp_path / "b")))
    assert len(resumed.steps) == 2
    a, b = full.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    base = load_model(model_path).state_dict()
    assert any(not torch.equal(base[k], a[k]) for k in a), "the run never updated: the test would be vacuous"
    np.testing.assert_array_equal(full.table["val_mean"], resumed.table["val_mean"])
    del full, killed, resumed, a, b, base  # three models + optimiser states: free them for the next test
