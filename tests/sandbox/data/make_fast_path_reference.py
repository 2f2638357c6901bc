"""Reference tables of the tabular runs of tests/sandbox/test_sim_speed.py, as the simulator of commit 5c37e9c
made them (before the cached evaluation, the batched softmax and the 8-wide Adam row). Made at c76ad45 on an
AMD EPYC (AVX2) machine, where its output hashed to the digests 5c37e9c's output had (checked when made), with
    python tests/sandbox/data/make_fast_path_reference.py tests/sandbox/data/fast_path_reference.npz
The test compares against these arrays within a tolerance, never bit for bit: last bits differ across CPUs."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from sandbox import SimConfig, run  # noqa: E402

SMALL = dict(d=200, d_val=120, bp=8, budget=2**13, n_evals=8)
CFGS = {
    "n2": dict(n=2, seed=2, **SMALL),
    "n8": dict(seed=8, **SMALL),
    "n64": dict(n=64, seed=64, **SMALL),
    "adamw": dict(n=2, optimizer="adamw", weight_decay=0.1, **SMALL),
    "sampled": dict(n=2, metric_mode="sampled", **SMALL),
    "long": dict(n=2, budget=2**17),
}


def save(path: str) -> None:
    out = {}
    for key, kw in CFGS.items():
        r = run(SimConfig(model="tabular", **kw))
        for c, v in r.table.items():
            out[f"{key}/table/{c}"] = v
        for c, v in r.pass1.items():
            out[f"{key}/pass1/{c}"] = v
        out[f"{key}/status"] = np.array(repr((r.status, r.diverged_step, r.reason)))
    np.savez_compressed(path, **out)


if __name__ == "__main__":
    save(sys.argv[1])
    print("ok", sys.argv[1])
