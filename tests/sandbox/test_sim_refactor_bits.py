"""The one train kernel (sandbox/kernels/) gives every simulator table of the two kernels before it
bit for bit, on this machine.

The pre-refactor code (tests/pre_refactor.py) and this tree run the same configs: tabular and the shared
models (linear, mlp, interference, signed skills), fixed n and every allocator, SGD / Adam / AdamW, KL and
entropy, PPO / CISPO with epochs and minibatches, zero-variance filtering, a decoupled baseline (n_est),
sampled metrics, token lengths, through `run` (1 and 2 threads; 2 hand evaluation chunks to a thread of
their own) and `run_many` (2 threads). Tables, pass@1 snapshots and status must be equal byte for byte.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.pre_refactor import run_old

BASE = dict(d=64, d_val=32, bp=16, budget=2**12, n_evals=5, dim=16, hidden=8)
FIXED = [
    dict(model="tabular", n=8),
    dict(model="tabular", n=2, optimizer="sgd", lr=0.5),
    dict(model="tabular", n=32, sampler="chain", adv_std="population", scale_rewards="batch"),
    dict(model="tabular", n=4, zero_variance_filter=True, kl_coef=0.05, entropy_coef=0.01),
    dict(model="linear", n=4, share=0.5, optimizer="adamw", weight_decay=0.1, kl_coef=0.1),
    dict(model="mlp", n=8, share=0.5, objective="ppo", ppo_epochs=2, minibatches=2),
    dict(model="interference", n=8, objective="cispo", zero_variance_filter=True, scale_rewards="none"),
    dict(model="interference", n=4, n_est=4, response_len=40.0, metric_mode="sampled"),
    dict(model="skills", n=8, optimizer="sgd", lr=0.3, entropy_coef=0.02, response_len=20.0),
    dict(model="tabular", n=2, n_est=6, response_len=10.0, d=300, d_val=200),  # 2 evaluation chunks
]
ALLOCATORS = ("knapsack", "knapsack:oracle=1", "dynamic-sampling", "skip-zero-var:p=0.9",
              "schedule:double@0.25,0.5", "variance", "variance:oracle=1", "gvm", "gvm:oracle=1", "ada",
              "schedule:zv@0.3,window=2", "fixed")
CONFIGS = FIXED + [dict(model=m, n=8, allocator=a, response_len=5.0 if m == "tabular" else 0.0)
                   for m in ("tabular", "interference") for a in ALLOCATORS]
MANY = [0, 5, 12, 20]  # run_many over these configs (fixed, ppo, allocators) on 2 threads

PROGRAM = """
import json, sys
import numpy as np
from sandbox import SimConfig, run, run_many

def results(configs, many):
    cfgs = [SimConfig(**c) for c in configs]
    out = {}
    def put(key, r):
        out[key + "/status"] = np.array([r.status, str(r.diverged_step), str(r.reason)])
        for k, v in r.table.items():
            out[key + "/t/" + k] = np.asarray(v)
        for k, v in r.pass1.items():
            out[key + "/p/" + k] = np.asarray(v)
    for i, c in enumerate(cfgs):
        put(f"run1/{i}", run(c, threads=1))
    for i in (0, 7, 9):
        put(f"run2/{i}", run(cfgs[i], threads=2))
    for i, r in zip(many, run_many([cfgs[i] for i in many], threads=2)):
        put(f"many/{i}", r)
    return out
"""


def _bits(a: np.ndarray) -> tuple:
    a = np.ascontiguousarray(a)
    return a.dtype.str, a.shape, a.tobytes()


def _renamed(key: str, a: np.ndarray) -> np.ndarray:
    """The old status array in the one status vocabulary of isocompute.contract.status (a finished run said
    "ok", now "done")."""
    return np.array([{"ok": "done"}.get(x, x) for x in a.tolist()]) if key.endswith("/status") else a


@pytest.mark.slow
def test_tables_equal_the_pre_refactor_kernels_bit_for_bit(tmp_path):
    configs = [{**BASE, **c} for c in CONFIGS]
    path = tmp_path / "old.npz"
    run_old(PROGRAM + f"np.savez({str(path)!r}, **results(json.loads({json.dumps(json.dumps(configs))}), "
            f"{MANY!r}))\n", env={"OMP_NUM_THREADS": "1"})
    scope: dict = {}
    exec(PROGRAM, scope)
    new = scope["results"](configs, MANY)
    with np.load(path) as old:
        assert sorted(old.files) == sorted(new)
        diff = [k for k in new if _bits(_renamed(k, old[k])) != _bits(new[k])]
    assert not diff, f"{len(diff)} arrays differ from the pre-refactor code, first: {diff[:5]}"
