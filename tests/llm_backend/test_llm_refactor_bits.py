"""The LLM loop after the house refactor against the pre-refactor code, bit for bit here.

Each case is a short run made twice: by the pre-refactor packages in a subprocess (tests/pre_refactor.py)
and by this tree in-process, both on one torch thread so every reduction runs in the same order. The
learning-curve table, the per-problem pass@1 vectors, the per-step log (timings aside) and the trained
parameters must be equal, NaN for NaN.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tests.pre_refactor import run_old  # noqa: E402

TINY = dict(dataset="easy", n=4, bp=4, budget=48, d=16, d_val=8, n_evals=2, k=2, seed=3, row_tokens=512,
            lr=3e-4)
"""3 steps of bp 4 x n 4 on the shipped tiny LM (kv engine), 8 validation and 8 train-sample problems;
packed rows of 512 tokens and base lr 3e-4, the old trees' defaults (a tiny LM's are now 64 and 1e-4)."""

CASES = {
    "fixed-packed": TINY,
    "fixed-padded-ppo-kl": {**TINY, "train_layout": "padded", "objective": "ppo", "ppo_epochs": 2,
                            "minibatches": 2, "kl_coef": 0.1, "entropy_coef": 0.01, "microbatch": 5},
    "packed-cispo-kl-seq": {**TINY, "objective": "cispo", "ppo_epochs": 2, "minibatches": 2, "kl_coef": 0.05,
                            "loss_agg": "seq_mean", "micro_tokens": 256, "row_tokens": 64},
    "packed-bf16-kl": {**TINY, "train_dtype": "bfloat16", "kl_coef": 0.1},
    "dynamic-sampling": {**TINY, "allocator": "dynamic-sampling", "budget": 64},
    "knapsack-padded": {**TINY, "allocator": "knapsack", "train_layout": "padded", "objective": "ppo",
                        "minibatches": 2},
    "schedule": {**TINY, "allocator": "schedule:double@0.3", "budget": 80},
}
"""Tiny-LM runs: fixed n and allocators, packed and padded trainers, pg / ppo / cispo with KL, float32 and
the bf16 master-weights path."""

SMOL = dict(engine="hf", dataset="easy", n=2, bp=2, budget=8, max_new_tokens=8, k=1, d_val=2, n_evals=1,
            train_eval=False, engine_dtype="float32", train_dtype="float32", kl_coef=0.1, seed=0)
"""SmolLM2-135M-Instruct, hf engine, 2 GRPO steps of bp 2 x n 2."""

_RUNS = """
import json, os
import numpy as np
import torch
torch.set_num_threads(1)
from llm_backend.config import LLMConfig, config_for
try:  # the run loop's module here; the pre-refactor tree has only llm_backend/runner.py
    from llm_backend.loop import run
except ImportError:
    from llm_backend.runner import run

def dump(res, path):
    out = {f"table.{k}": np.asarray(v) for k, v in res.table.items()}
    out.update({f"pass1.{k}": np.asarray(v) for k, v in res.pass1.items()})
    out.update({f"param.{k}": v.detach().float().numpy() for k, v in res.model.state_dict().items()})
    out["steps"] = np.array(json.dumps(res.steps))
    out["status"] = np.array(res.status)
    np.savez(path, **out)

os.chdir(FOLDER)
for name, (model, kw, stop_after) in json.loads(CASES).items():
    make = config_for if model == "tiny" else (lambda m, **k: LLMConfig(model=m, **k))
    if stop_after:  # stopped after that step, right after its checkpoint, then resumed to the end
        kw = {**kw, "checkpoint_dir": os.path.abspath("ckpt-" + name), "checkpoint_every": 1}
        run(make(model, **kw), stop_after=stop_after)
    dump(run(make(model, **kw)), name + ".npz")
"""
"""Runs each case (model, config keywords, stop_after) and writes <case>.npz into FOLDER: the same program
for the old code (a subprocess) and the new (exec'd in this process)."""


def _program(cases: dict, folder) -> str:
    folder.mkdir(parents=True)
    return f"FOLDER = {str(folder)!r}\nCASES = {json.dumps(cases)!r}\n" + _RUNS


def _run_new(program: str) -> None:
    """The new runs in this process, their kv engines attending by "sdpa", the sampler's attention in the
    pre-refactor tree ("bmm", the default since, sums in another order: tests/llm_backend/
    test_tiny_compaction.py bounds it against "sdpa" and test_tiny_attention_runs.py whole runs), and the
    tiny LM trained by its torch forward and autograd (the compiled trainer's sums round otherwise:
    tests/llm_backend/test_tiny_train_kernel.py bounds it)."""
    import os

    from llm_backend import config
    from llm_backend.tiny.sampler import KVEngine

    cwd, threads = os.getcwd(), torch.get_num_threads()
    attention, make = KVEngine.attention, config.config_for
    KVEngine.attention = "sdpa"
    config.config_for = lambda model=None, **kw: make(model, **kw, tiny_trainer="torch")
    try:
        exec(compile(program, "<new runs>", "exec"), {"__name__": "new_runs"})
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)
        KVEngine.attention, config.config_for = attention, make


def _same(a_path, b_path) -> None:
    a, b = np.load(a_path), np.load(b_path)
    assert sorted(a.files) == sorted(b.files)
    for key in a.files:
        if key == "steps":  # the per-step log but its timings
            sa, sb = ([{k: v for k, v in s.items() if not k.startswith("t_")}
                       for s in json.loads(str(x[key]))] for x in (a, b))
            assert len(sa) == len(sb) > 0
            for x, y in zip(sa, sb, strict=True):
                assert x.keys() == y.keys()
                for k in x:
                    nan = isinstance(x[k], float) and math.isnan(x[k]) and math.isnan(y[k])
                    assert x[k] == y[k] or nan, (k, x[k], y[k])
        elif key == "status":  # the one status vocabulary: the engines' "ok" is the store's "done"
            assert {"ok": "done"}.get(str(a[key]), str(a[key])) == str(b[key])
        elif a[key].dtype.kind == "f":
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)  # NaN equals NaN here
        else:
            assert a[key].tolist() == b[key].tolist(), key


def _compare(cases: dict, tmp_path) -> None:
    run_old(_program(cases, tmp_path / "old"))
    _run_new(_program(cases, tmp_path / "new"))
    for name in cases:
        _same(tmp_path / "old" / f"{name}.npz", tmp_path / "new" / f"{name}.npz")


def test_tiny_runs_equal_the_pre_refactor_runs(tmp_path):
    cases = {name: ["tiny", kw, None] for name, kw in CASES.items()}
    cases["resume-fixed"] = ["tiny", {**TINY, "kl_coef": 0.1}, 1]
    cases["resume-dynamic"] = ["tiny", {**TINY, "allocator": "dynamic-sampling", "budget": 64}, 1]
    _compare(cases, tmp_path)


@pytest.mark.llm
@pytest.mark.slow
def test_smollm2_hf_run_equals_the_pre_refactor_run(model_path, tmp_path):
    _compare({"smol": [str(model_path), SMOL, None]}, tmp_path)
