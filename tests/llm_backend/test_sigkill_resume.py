"""A run SIGKILLed (a real kill, in a child process) right after its first checkpoint, then rerun with the
same checkpoint_dir, ends at the parameters and learning curve of an uninterrupted run.

On the shipped tiny LM (`--lm tiny`, kv engine): the checkpointer, optimiser state, seeded rollouts and
resume logic are the runner's and the trainer's, the same code a SmolLM2 run goes through, in seconds instead
of minutes (a SmolLM2 checkpoint is 1.6 GB of weights and AdamW moments, written per step). SmolLM2 itself
resumes through vLLM in test_real_model.py (test_vllm_resumed_run_ends_at_the_same_parameters).
Both trainer precisions: bfloat16 checkpoints the float32 master weights behind the bf16 compute copy
(trainer.MasterWeights), the default on AMX / AVX-512 BF16 CPUs, so it is tested on every CPU."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from llm_backend.config import config_for  # noqa: E402

RUN = dict(dataset="easy", bp=2, n=4, budget=24, k=1, d_val=4, n_evals=2, lr=1e-3, checkpoint_every=1,
           entropy_coef=0.01, seed=1)
"""3 steps of bp 2 x n 4. entropy_coef > 0 keeps the gradient non-zero even when a group's rewards agree,
and it still depends on the sampled tokens, so equality checks the optimiser state *and* the seeded
rollouts."""

_KILL_AFTER_CHECKPOINT = """
import json, os, signal, sys
from llm_backend import checkpoint, loop
from llm_backend.config import config_for

save = checkpoint.Checkpointer.save
def save_then_die(self, *args, **kwargs):  # SIGKILL right after the first checkpoint is on disk
    save(self, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
checkpoint.Checkpointer.save = save_then_die
loop.run(config_for("tiny", **json.loads(sys.argv[1])))
"""


@pytest.mark.parametrize("train_dtype", ["float32", "bfloat16"])
def test_killed_run_resumes_to_the_same_parameters(train_dtype, tmp_path):
    from llm_backend.loop import run
    from llm_backend.model import load_model, resolve_model

    kw = {**RUN, "train_dtype": train_dtype}
    full = run(config_for("tiny", **kw, checkpoint_dir=str(tmp_path / "a")))
    args = json.dumps({**kw, "checkpoint_dir": str(tmp_path / "b")})
    child = subprocess.run(
        [sys.executable, "-c", _KILL_AFTER_CHECKPOINT, args],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["ckpt-1"]  # no partial checkpoint left
    resumed = run(config_for("tiny", **kw, checkpoint_dir=str(tmp_path / "b")))
    assert len(resumed.steps) == 3 and resumed.steps[0]["step"] == 1  # step 1 comes from the checkpoint
    assert [s["tokens"] for s in full.steps] == [s["tokens"] for s in resumed.steps]
    a, b = full.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    base = load_model(resolve_model("tiny")).state_dict()
    assert any(not torch.equal(base[k], a[k]) for k in a), "the run never updated: the test would be vacuous"
    for col in ("m", "val_mean", "train_mean", "tokens", "batch_reward"):
        np.testing.assert_array_equal(full.table[col], resumed.table[col])
